"""``to_training_step``: hand-checked chain and diamond (nodes, edges, groups, times,
bytes), data inputs, a PipeDream profile, generator and torch.fx graphs, bad arguments."""

import math
from pathlib import Path

import numpy as np
import pytest

from placegym.envs import Cluster, Device, Graph, Level, Placement, simulate
from placegym.envs.importers import from_pipedream
from placegym.envs.workloads import OPTIMIZER_STATES, make_graph, to_training_step

GNMT = Path(__file__).resolve().parent / "data" / "pipedream" / "gnmt_tiny" / "graph.txt"


def chain() -> Graph:
    """0 -> 1 -> 2, unmeasured (roofline)."""
    return Graph(
        flops=[1e9, 2e9, 3e9],
        out_bytes=[10.0, 20.0, 30.0],
        param_bytes=[100.0, 0.0, 300.0],
        edges=[[0, 1], [1, 2]],
        layer=[0, 1, 2],
        op=["a", "b", "c"],
        name="chain",
    )


def test_chain_by_hand():
    t = to_training_step(chain())
    assert t.name == "chain-train" and t.num_nodes == 6
    assert t.edges.tolist() == [
        [0, 1],
        [1, 2],  # forward
        [0, 3],
        [1, 4],
        [2, 5],  # stash (2 -> 5 is the loss: 2 is the sink)
        [4, 3],
        [5, 4],  # gradients, reversed
    ]
    assert {g: v.tolist() for g, v in t.groups.items()} == {0: [0, 3], 1: [1, 4], 2: [2, 5]}
    assert t.flops.tolist() == [1e9, 2e9, 3e9, 2e9, 4e9, 6e9]  # backward: 2 x forward
    assert np.isnan(t.time).all()  # unmeasured: the roofline everywhere
    # a backward node outputs the gradients of its inputs: 1' -> 0' carries 0's size
    assert t.out_bytes.tolist() == [10, 20, 30, 0, 10, 20]
    assert t.param_bytes.tolist() == [400, 0, 1200, 0, 0, 0]  # Adam: params x (1 + 1 + 2)
    assert t.op == ("a", "b", "c", "bw:a", "bw:b", "bw:c")
    assert t.layer.tolist() == [0, 1, 2, 0, 1, 2]
    assert t.spec == ({}, {}, {}, *({"kind": "backward", "forward": v} for v in range(3)))
    assert t.topological_order.tolist() == [0, 1, 2, 5, 4, 3]
    assert t.in_bytes.tolist() == [0, 10, 20, 10 + 10, 20 + 20, 30]


@pytest.mark.parametrize(("optimizer", "k"), [("sgd", 0), ("momentum", 1), ("adam", 2), (5, 5)])
def test_optimizer_state_multiplier(optimizer, k):
    t = to_training_step(chain(), optimizer=optimizer)
    assert t.param_bytes.tolist() == [100 * (2 + k), 0, 300 * (2 + k), 0, 0, 0]
    assert OPTIMIZER_STATES["adamw"] == 2


def diamond() -> Graph:
    """0 -> {1, 2} -> 3, measured times; 1 and 2 already co-located (group 4); node 2
    carries a profiled backward time."""
    return Graph(
        flops=[0, 0, 0, 0],
        out_bytes=[1e6, 2e6, 3e6, 4e6],
        param_bytes=[0, 8e6, 0, 1e6],
        edges=[[0, 1], [0, 2], [1, 3], [2, 3]],
        time=[0.001, 0.002, 0.003, 0.004],
        group=[-1, 4, 4, -1],
        spec=[{}, {}, {"kind": "opaque", "backward_time": 0.0005, "source_id": "x"}, {}],
        name="diamond",
    )


def test_diamond_by_hand():
    t = to_training_step(diamond(), backward_factor=3.0, optimizer="momentum", name="d")
    assert t.name == "d" and t.num_nodes == 8 and t.num_edges == 4 + 4 + 4
    assert t.edges.tolist() == [
        *([0, 1], [0, 2], [1, 3], [2, 3]),
        *([0, 4], [1, 5], [2, 6], [3, 7]),
        *([5, 4], [6, 4], [7, 5], [7, 6]),
    ]
    # group 4 is kept and gains 1' and 2'; 0 and 3 get new groups 5 and 6
    assert {g: v.tolist() for g, v in t.groups.items()} == {
        4: [1, 2, 5, 6],
        5: [0, 4],
        6: [3, 7],
    }
    # backward: 3 x the measured time, or the profiled backward time of node 2
    assert t.time.tolist() == [0.001, 0.002, 0.003, 0.004, 0.003, 0.006, 0.0005, 0.012]
    assert t.flops.tolist() == [0.0] * 8
    assert t.out_bytes.tolist() == [1e6, 2e6, 3e6, 4e6, 0, 1e6, 1e6, 2e6 + 3e6]
    assert t.param_bytes.tolist() == [0, 24e6, 0, 3e6, 0, 0, 0, 0]  # momentum: x 3
    assert t.spec[6] == {"kind": "backward", "forward": 2, "source_id": "x"}
    assert t.spec[2] == diamond().spec[2]
    # one device, no overheads: the step takes the summed times
    one = Cluster(devices=(Device("d0", 1e12, 1e12),), levels=(Level("l", 1e9, 0.0),))
    s = simulate(t, one, Placement(device=[0] * 8, order=list(range(8))))
    assert s.makespan == pytest.approx(0.010 + 0.0215)


def test_every_transfer_a_placement_makes_follows_the_rules():
    # 0 and 3 on device 0, the group {1, 2, 1', 2'} on device 1: six transfers
    t = to_training_step(diamond(), backward_factor=3.0)
    two = Cluster(
        devices=(Device("d0", 1e12, 1e12), Device("d1", 1e12, 1e12)),
        levels=(Level("l", 1e9, 0.0),),
    )
    place = Placement(device=[0, 1, 1, 0, 0, 1, 1, 0], order=list(range(8)))
    s = simulate(t, two, place)
    tr = s.transfers
    moved = sorted(zip(tr.node.tolist(), tr.nbytes.tolist(), strict=True))
    # 0's output to device 1; 1 and 2 to 3; 3' (5e6: the gradients of 1 and 2) back;
    # 1' and 2' (1e6 each: the gradient of 0) to 0'
    assert moved == [(0, 1e6), (1, 2e6), (2, 3e6), (5, 1e6), (6, 1e6), (7, 5e6)]


def test_data_inputs_get_no_gradient():
    g = Graph(
        flops=[0, 4e9, 2e9],
        out_bytes=[64.0, 32.0, 16.0],
        param_bytes=[0, 512, 0],
        edges=[[0, 1], [1, 2]],
        spec=[{"kind": "input", "shape": [4, 4]}, {"kind": "einsum"}, {"kind": "sum"}],
    )
    t = to_training_step(g)
    assert t.edges.tolist() == [[0, 1], [1, 2], [0, 3], [1, 4], [2, 5], [5, 4]]  # no 4 -> 3
    assert t.out_bytes.tolist() == [64, 32, 16, 0, 0, 32]  # 1' has no gradient to send
    assert t.flops.tolist() == [0, 4e9, 2e9, 0, 8e9, 4e9]
    assert t.time[3] == 0.0 and np.isnan(t.time[[0, 1, 2, 4, 5]]).all()


def test_pipedream_profile_training_step():
    g = from_pipedream(GNMT)
    t = to_training_step(g)
    n = 8
    assert (t.num_nodes, t.num_edges) == (16, 8 + 8 + 6)  # no gradient into the 2 inputs
    assert len(t.groups) == 8 and all(len(v) == 2 for v in t.groups.values())
    backward = [0.0, 6.949, 5.348, 0.0, 0.0, 1.227, 0.0, 6.141]
    assert t.time[n:].tolist() == [ms / 1000 for ms in backward]
    assert t.time[:n].tolist() == g.time.tolist()
    total_ms = (0.073 + 3.190 + 5.609 + 4.546) + (6.949 + 5.348 + 1.227 + 6.141)
    assert t.time.sum() == pytest.approx(total_ms / 1000, abs=1e-15)
    assert t.param_bytes.sum() == 4 * g.param_bytes.sum()  # Adam
    assert t.param_bytes[n:].tolist() == [0.0] * n
    # node12 (index 7) has producers node9, node8 and the input node3: its gradient is
    # the sizes of node9's and node8's outputs only
    assert t.out_bytes[n + 7] == 6291456.0 + 131072.0
    assert t.out_bytes[n + 1] == 0.0  # Embedding: its one producer is the input
    assert [s.get("source_id") for s in t.spec[n:]] == [s["source_id"] for s in g.spec]
    with pytest.raises(ValueError, match=r"nodes\[8\]: is a backward node already"):
        to_training_step(t)


@pytest.mark.parametrize("name", ["ffnn", "moe", "random_dag"])
def test_generator_graphs(name):
    g = make_graph(name)
    t = to_training_step(g, backward_factor=2.5)
    n = g.num_nodes
    inputs = np.array([s["kind"] == "input" for s in g.spec])
    no_grad = inputs[g.edges[:, 0]].sum()
    assert t.num_nodes == 2 * n and t.num_edges == 2 * g.num_edges + n - no_grad
    assert t.flops[n:].tolist() == np.where(inputs, 0.0, 2.5 * g.flops).tolist()
    assert np.isnan(t.time[n:][~inputs]).all() and (t.time[n:][inputs] == 0).all()
    assert t.param_bytes[:n].tolist() == (4 * g.param_bytes).tolist()
    for v in range(n):
        assert t.predecessors(n + v).tolist()[0] == v  # the stash edge
        assert sorted(t.successors(n + v).tolist()) == sorted(
            n + u for u in g.predecessors(v).tolist() if not inputs[u]
        )


def test_fx_trace():
    torch = pytest.importorskip("torch")
    from torch import nn

    from placegym.envs.importers import from_fx

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    g = from_fx(model, torch.randn(4, 16))
    t = to_training_step(g, optimizer="sgd")
    assert t.num_nodes == 8 and t.op[4:] == ("bw:input", "bw:linear", "bw:relu", "bw:linear")
    assert t.edges.tolist()[-2:] == [[6, 5], [7, 6]]  # no gradient into the input
    assert t.param_bytes.sum() == 2 * g.param_bytes.sum()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backward_factor": -1}, "backward_factor: must be a finite number >= 0, got -1"),
        ({"backward_factor": math.inf}, "backward_factor: must be a finite number >= 0"),
        ({"backward_factor": True}, "backward_factor: must be a finite number >= 0"),
        ({"optimizer": "lamb"}, "optimizer: unknown optimizer (known: sgd, momentum, adam"),
        ({"optimizer": -1}, "optimizer: must be >= 0, got -1"),
        ({"optimizer": True}, "optimizer: expected a name or an integer >= 0, got True"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError) as err:
        to_training_step(chain(), **kwargs)
    assert str(err.value).startswith(message)


def test_bad_backward_time_and_training_graphs_are_refused():
    g = diamond()
    specs = [dict(s) for s in g.spec]
    specs[2]["backward_time"] = -1
    bad = Graph(g.flops, g.out_bytes, g.edges, spec=specs, time=g.time)
    with pytest.raises(ValueError, match=r"nodes\[2\].spec.backward_time: must be >= 0"):
        to_training_step(bad)
    bw = Graph([0, 0], [1, 1], [[0, 1]], op=["fw", "bw:fw"])
    with pytest.raises(ValueError, match=r"nodes\[1\]: is a backward node already"):
        to_training_step(bw)


def test_empty_graph():
    t = to_training_step(Graph(np.zeros(0), np.zeros(0), np.zeros((0, 2))))
    assert t.num_nodes == 0 and t.num_edges == 0


def test_per_kind_times_carry_over_to_the_backward_nodes():
    g = Graph(
        flops=[0.0, 1e9],
        out_bytes=[8.0, 8.0],
        edges=[(0, 1)],
        spec=[{"kind": "input"}, {}],
        time=[0.1, float("nan")],
        kind_time={"cpu": [0.5, 2.0], "gpu": [float("nan"), 0.25]},
    )
    t = to_training_step(g, backward_factor=3.0)
    assert t.kind_time["cpu"].tolist() == [0.5, 2.0, 0.0, 6.0]
    assert t.kind_time["gpu"][1] == 0.25 and t.kind_time["gpu"][3] == 0.75
    assert t.time[2] == 0.0 and t.time[0] == 0.1  # the data input's backward, the default
