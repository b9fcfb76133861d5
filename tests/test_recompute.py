"""Recomputation (``Placement.recompute``, :mod:`placegym.envs.core.recompute`): hand-solved
schedules, the rewrite's claims (no cycle, no transfer, triggers cost no memory, exact
durations), the compiled simulator against the reference on random training graphs, the
file format and the CLI, a memory-tight instance that only recomputation fits, and
NEST's plans with recomputation."""

import dataclasses
import itertools
import json
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simcases import clusters, unit_cluster

from placegym.envs import Cluster, Device, Graph, Level, Placement, simulate, simulate_batch
from placegym.envs.analysis.memory import memory_infeasibility
from placegym.envs.core.costs import node_durations
from placegym.envs.core.recompute import expand, recomputable
from placegym.envs.sim.oracle import _peak_memory, simulate_oracle
from placegym.envs.sim.simulator import simulate_makespan
from placegym.envs.workloads.training import to_training_step
from placegym.teachers._nest_cost import RECOMPUTE, NestTables
from placegym.teachers.nest import (
    ALL_RELIEFS,
    NestTeacher,
    StageRun,
    evaluate_plan,
    plan_devices,
    solve_dp,
)
from placegym.train.cli import main


def chain3(data_input: bool = False) -> Graph:
    """The training step of the chain 0 -> 1 -> 2 (flops 1, 2, 3 unless node 0 is a data
    input; outputs 10, 20, 30 bytes; resident 1 byte each but the input, x4 under adam)."""
    spec = [{"kind": "input"}, {}, {}] if data_input else None
    g = Graph(
        flops=[0.0 if data_input else 1.0, 2.0, 3.0],
        out_bytes=[10.0, 20.0, 30.0],
        param_bytes=[0.0 if data_input else 1.0, 1.0, 1.0],
        edges=[[0, 1], [1, 2]],
        spec=spec,
    )
    return to_training_step(g)


def transfer_keys(s) -> list[tuple[int, int, int]]:
    """The schedule's transfers as sorted (producer, source, destination)."""
    tr = s.transfers
    return sorted(zip(tr.node.tolist(), tr.src.tolist(), tr.dst.tolist()))


def with_recompute(p: Placement, nodes) -> Placement:
    return Placement(device=p.device, order=p.order, recompute=nodes)


# ---------------------------------------------------------------------- by hand


def test_one_device_chain_by_hand():
    # nodes 0 1 2 forward (1, 2, 3 s), 3 4 5 backward (2, 4, 6 s); outputs 10 20 30 and
    # gradients 0 10 20 bytes; resident 3 x 4 = 12 bytes
    t, c = chain3(), unit_cluster(1)
    p = Placement.from_devices([0] * 6, t)
    s = simulate(t, c, p)
    # 0 [0,1] 1 [1,3] 2 [3,6] 2' [6,12] 1' [12,16] 0' [16,18]; during 2' every stash
    # (10 + 20 + 30) and 2''s output (20) are live
    assert s.makespan == 18.0 and s.peak_memory.tolist() == [12.0 + 80.0]
    r = simulate(t, c, with_recompute(p, [1]))
    # 1's output is freed when 2 finishes (6); 1^r (node 6) waits for 2' (its trigger),
    # runs [12,14] from 0's stash, then 1' [14,18], 0' [18,20]
    assert r.makespan == 20.0
    assert r.start.tolist() == [0, 1, 3, 18, 14, 6, 12]
    assert r.finish.tolist() == [1, 3, 6, 20, 18, 12, 14]
    assert r.placement.order.tolist() == [0, 1, 2, 5, 6, 4, 3]  # 1^r right before 1'
    assert r.recomputation.triggers.tolist() == [[5, 6]]
    assert r.recomputation.nodes.tolist() == [1] and r.recomputation.forward_of(6) == 1
    # peak 60 live: [3,6) 0 1 2 = 60; [6,12) 0 2 2' = 60; [14,18) 0 2' 1^r 1' = 60
    assert r.peak_memory.tolist() == [12.0 + 60.0]
    assert r.graph.num_nodes == 7 and r.graph.op[6] == "rc:op" and r.graph.param_bytes[6] == 0
    ref = simulate_oracle(t, c, with_recompute(p, [1]))
    assert ref.makespan == 20.0 and ref.peak_memory.tolist() == [72.0]


def test_two_device_chain_with_a_data_input_by_hand():
    # 0 is a data input (0 s, 10 B), 1 (2 s, 20 B) and 2 (3 s, 30 B); 0 0' 1 1' on d0,
    # 2 2' on d1; a transfer takes 1 + bytes / 10 s; resident 4 B on each device
    t, c = chain3(data_input=True), unit_cluster(2, bandwidth=10.0, latency=1.0)
    p = Placement.from_devices([0, 0, 1, 0, 0, 1], t)
    assert p.order.tolist() == [0, 1, 2, 3, 5, 4]
    s = simulate(t, c, p)
    # 1 [0,2] -> d1 [2,5]; 2 [5,8]; 2' [8,14] -> d0 [14,17]; 1' [17,21]
    assert s.makespan == 21.0
    # d0: 1's stash 20 + the received gradient 20 on [14,21); d1: 1's copy and 2's
    # output on [5,8), 2's stash and 2''s output on [8,14)
    assert s.peak_memory.tolist() == [4.0 + 40.0, 4.0 + 50.0]
    r = simulate(t, c, with_recompute(p, [1]))
    # 1^r [17,19] on d0 once the gradient has arrived; 1' [19,23]. 1's output is freed
    # when its transfer arrives (5), but the data input 0 is now kept until 1^r reads it:
    # on [17,19) d0 holds 0 (10), the gradient (20) and 1^r's output (20)
    assert r.makespan == 23.0
    assert (r.start[6], r.finish[6], r.start[4]) == (17.0, 19.0, 19.0)
    assert r.peak_memory.tolist() == [4.0 + 50.0, 4.0 + 50.0]
    # the same transfers, none from the recompute node
    assert transfer_keys(r) == transfer_keys(s) == [(1, 0, 1), (5, 1, 0)]


# ---------------------------------------------------------------------- the rewrite


def forward(n, edges, inputs=()) -> Graph:
    spec = [{"kind": "input"} if v in inputs else {} for v in range(n)]
    return Graph(flops=[1.0] * n, out_bytes=[1.0] * n, edges=edges, spec=spec)


def triggers(t: Graph, device, nodes) -> list[tuple[int, int]]:
    p = Placement(device=np.asarray(device), order=t.topological_order.copy(), recompute=nodes)
    p.check(t)
    rc = expand(t, unit_cluster(2), p)
    return sorted(map(tuple, rc.triggers.tolist()))


def test_a_recomputed_chain_waits_for_the_gradient_after_it():
    # 0 (input) -> 1 -> 2 -> 3 -> 4; recompute 2 and 3: both wait for 4' (node 9); the
    # gradient 3' -> 2' would close the cycle 2^r -> 3^r -> 3' -> 2^r
    t = to_training_step(forward(5, [[0, 1], [1, 2], [2, 3], [3, 4]], inputs={0}))
    assert triggers(t, [0] * 10, [2, 3]) == [(9, 10), (9, 11)]
    # alone, each waits for every gradient into its backward node
    assert triggers(t, [0] * 10, [2]) == [(8, 10)]


def test_a_diamond_where_every_gradient_would_close_a_cycle():
    # 1 -> 2 -> 3 and 1 -> 3, then 3 -> 4; recompute 1 and 3: 3^r reads 1^r, so 2'
    # (which waits for 3' and so for 3^r) cannot trigger 1^r; 4' triggers both
    t = to_training_step(forward(5, [[0, 1], [1, 2], [2, 3], [1, 3], [3, 4]], inputs={0}))
    n = 5
    assert triggers(t, [0] * 10, [1, 3]) == [(n + 4, 10), (n + 4, 11)]
    rc = expand(t, unit_cluster(1), Placement.from_devices([0] * 10, t))
    assert rc.graph is t  # nothing to rewrite without recompute


def test_two_segments_that_read_each_other():
    # v1 -> y1 <- w2 <- v2 -> y2 <- w1 <- v1 (y1, y2 sinks): with R = {v1, y1, v2, y2}
    # the gradients w1' -> v1' and w2' -> v2' each close a cycle through the other
    # segment, so neither is a trigger; the rewrite stays acyclic
    v1, v2, w1, w2, y1, y2 = range(6)
    edges = [[v1, y1], [w2, y1], [v2, w2], [v2, y2], [w1, y2], [v1, w1]]
    t = to_training_step(forward(6, edges))
    assert triggers(t, [0] * 12, [v1, v2, y1, y2]) == []
    s = simulate(t, unit_cluster(1), Placement(np.zeros(12, int), np.arange(12), [v1, v2, y1, y2]))
    assert s.graph.num_nodes == 16 and np.isfinite(s.finish).all()


def test_recomputation_does_not_cross_devices():
    # 1 on d0 and 2 on d1, both recomputed: 2^r reads the copy of 1's output received on
    # d1 for 2 (kept until 2^r), never 1^r
    t = to_training_step(forward(4, [[0, 1], [1, 2], [2, 3]], inputs={0}))
    dev = np.array([0, 0, 1, 1] * 2)
    p = Placement(device=dev, order=t.topological_order.copy(), recompute=[1, 2])
    rc = expand(t, unit_cluster(2), p)
    edges = set(map(tuple, rc.graph.edges.tolist()))
    assert (1, 9) in edges and (8, 9) not in edges and (0, 8) in edges
    assert (8, 5) in edges and (9, 6) in edges  # v^r -> v' replaces the stash edges
    assert (1, 5) not in edges and (2, 6) not in edges
    assert rc.placement.device.tolist() == [*dev.tolist(), 0, 1]


def test_recompute_durations_equal_the_forward_exactly():
    # roofline with memory bandwidth and launch overhead, measured times, per-kind times
    base = Graph(
        flops=[0.3, 1.7, 2.9, 0.1],
        out_bytes=[3.0, 5.0, 7.0, 1.0],
        param_bytes=[0.0, 1.3, 0.0, 2.2],
        edges=[[0, 1], [1, 2], [2, 3], [0, 2]],
        time=[np.nan, 0.37, np.nan, np.nan],
    )
    t = to_training_step(base)
    fast = np.full(8, np.nan)
    fast[[2, 7]] = [0.11, 0.05]
    t = dataclasses.replace(t, kind_time={"fast": fast})
    devs = tuple(
        Device(f"d{i}", flops=3.1, memory=1e9, mem_bandwidth=2.3, launch_overhead=0.013, kind=k)
        for i, k in enumerate(["fast", "slow"])
    )
    c = Cluster(devices=devs, levels=(Level("l", 1.0, 0.5),), name="kinds")
    v = np.arange(4)
    for dev in ([0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]):
        d = np.array(dev)
        p = Placement(np.concatenate([d, d]), t.topological_order.copy(), recompute=v)
        s = simulate(t, c, p)
        want = node_durations(t, c, v, d)
        assert node_durations(s.graph, c, v + 8, d).tolist() == want.tolist()
        np.testing.assert_allclose(s.duration[8:], s.duration[:4], rtol=1e-12, atol=1e-12)
    assert len(set(node_durations(t, c, [2, 2], [0, 1]).tolist())) == 2  # kinds differ


# ---------------------------------------------------------------------- random training graphs


@st.composite
def training_problems(draw):
    """(training graph, cluster, placement with a random recompute set)."""
    n = draw(st.integers(2, 8))
    perm = draw(st.permutations(range(n)))
    pairs = [(perm[i], perm[j]) for i in range(n) for j in range(i + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, min_size=n - 1, max_size=2 * n))
    small = st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5])
    g = Graph(
        flops=draw(st.lists(small, min_size=n, max_size=n)),
        out_bytes=draw(st.lists(small, min_size=n, max_size=n)),
        param_bytes=draw(st.lists(st.sampled_from([0.0, 1.0, 4.0]), min_size=n, max_size=n)),
        edges=edges,
    )
    sources = sorted(set(range(n)) - set(g.edges[:, 1].tolist()))
    inputs = set(draw(st.lists(st.sampled_from(sources), unique=True))) if sources else set()
    g = Graph(
        flops=g.flops,
        out_bytes=g.out_bytes,
        param_bytes=g.param_bytes,
        edges=g.edges,
        spec=[{"kind": "input"} if v in inputs else {} for v in range(n)],
    )
    t = to_training_step(g)
    c = draw(clusters(3))
    links = draw(st.sampled_from(["pair", "port"]))
    c = Cluster(c.devices, c.levels, c.level_matrix, name=c.name, links=links)
    dev = draw(st.lists(st.integers(0, c.num_devices - 1), min_size=n, max_size=n))
    order = draw(st.permutations(range(2 * n))) if n else []
    ok = np.flatnonzero(recomputable(t)).tolist()
    some = draw(st.integers(0, 4)) > 0  # mostly a non-empty set
    rc = draw(st.lists(st.sampled_from(ok), unique=True, min_size=int(some))) if ok else []
    return t, c, Placement(np.array(dev * 2, dtype=np.int64), np.array(order, dtype=np.int64), rc)


def assert_same(a, b) -> None:
    assert a.makespan == pytest.approx(b.makespan, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(a.start, b.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12, atol=1e-15)
    for key in ("node", "src", "dst"):
        assert getattr(a.transfers, key).tolist() == getattr(b.transfers, key).tolist()
    np.testing.assert_allclose(a.peak_memory, b.peak_memory, rtol=1e-9, atol=1e-9)
    assert a.oom == b.oom


def peak_from_trace(s, drop=frozenset()) -> np.ndarray:
    """The peak of DESIGN §3's memory rule recomputed from the schedule's times, with the
    edges in ``drop`` left out of the graph."""
    g, dev = s.graph, s.device.tolist()
    consumers = defaultdict(list)
    for u, v in g.edges.tolist():
        if (u, v) not in drop:
            consumers[u].append(v)
    cons = [consumers[v] for v in range(g.num_nodes)]
    tr = s.transfers
    transfers = [
        (v, a, b, st_, arr, [w for w in cons[v] if dev[w] == b])
        for v, a, b, st_, arr in zip(
            tr.node.tolist(), tr.src.tolist(), tr.dst.tolist(), tr.start, tr.arrival
        )
    ]
    start, finish = s.start.tolist(), s.finish.tolist()
    out_b, par_b = g.out_bytes.tolist(), g.param_bytes.tolist()
    args = (g.num_nodes, dev, start, finish, out_b, par_b, cons, transfers)
    return np.array(_peak_memory(*args, s.cluster.num_devices))


@settings(max_examples=150, deadline=None)
@given(training_problems(), st.sampled_from(["priority", "fifo"]))
def test_compiled_matches_reference_with_recompute(problem, dispatch):
    t, c, p = problem
    s = simulate(t, c, p, dispatch=dispatch)
    assert_same(s, simulate_oracle(t, c, p, dispatch=dispatch))
    assert simulate_makespan(t, c, p, dispatch=dispatch) == s.makespan
    noisy = simulate(t, c, p, noise=0.3, rng=3, dispatch=dispatch)
    assert_same(noisy, simulate_oracle(t, c, p, noise=0.3, rng=3, dispatch=dispatch))


@settings(max_examples=150, deadline=None)
@given(training_problems())
def test_what_recomputation_adds(problem):
    t, c, p = problem
    big = t.num_nodes
    s = simulate(t, c, p)
    plain = simulate(t, c, Placement(p.device, p.order))
    k = p.recompute.size
    assert s.graph.num_nodes == big + k and (s.recomputation is None) == (k == 0)
    # no transfer added: the same (producer, source, destination), none from a recompute
    assert transfer_keys(s) == transfer_keys(plain)
    # every node and recompute node runs once; v^r on v's device, as long as v
    assert np.isfinite(s.finish).all()
    if k:
        rc = s.recomputation
        v = rc.nodes
        assert (s.device[big:] == p.device[v]).all()
        np.testing.assert_allclose(s.duration[big:], s.duration[v], rtol=1e-12, atol=1e-12)
        # v^r starts after its triggers finish and before v' starts
        for x, r in rc.triggers.tolist():
            assert s.start[r] >= s.finish[x]
        assert (s.finish[big:] <= s.start[big // 2 + v]).all()
        # triggers add no memory: the same schedule without them has the same peak
        drop = frozenset(map(tuple, rc.triggers.tolist()))
        np.testing.assert_allclose(peak_from_trace(s), s.peak_memory, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(peak_from_trace(s, drop), s.peak_memory, rtol=1e-12, atol=1e-12)


def test_batch_with_a_shared_recompute_set_equals_simulate():
    rng = np.random.default_rng(0)
    t = to_training_step(forward(5, [[0, 1], [1, 2], [2, 3], [1, 4], [3, 4]], inputs={0}))
    c = unit_cluster(3, bandwidth=2.0, latency=0.5, memory=12.0)
    groups = rng.integers(0, 3, (6, 5))
    devs = np.concatenate([groups, groups], axis=1)
    orders = np.array([rng.permutation(10) for _ in range(6)])
    rc = [1, 3]
    b = simulate_batch(t, c, devs, orders, recompute=rc, noise=0.2, rng=9)
    gen = np.random.default_rng(9)
    for i in range(6):
        s = simulate(t, c, Placement(devs[i], orders[i], rc), noise=0.2, rng=gen)
        assert b.makespan[i] == s.makespan and (b.peak_memory[i] == s.peak_memory).all()
        assert b.oom[i] == s.oom
    lean = simulate_batch(t, c, devs, orders, recompute=rc, memory=False)
    one = [simulate(t, c, Placement(devs[i], orders[i], rc)).makespan for i in range(6)]
    assert lean.makespan.tolist() == one and not lean.oom.any()
    # no recompute: the batched kernel, bit for bit as before
    assert (
        simulate_batch(t, c, devs, orders, recompute=[]).makespan
        == simulate_batch(t, c, devs, orders).makespan
    ).all()
    with pytest.raises(ValueError, match=r"row 0: recompute\[0\]: node 0 \(op\) is a data input"):
        simulate_batch(t, c, devs, orders, recompute=[0])


# ---------------------------------------------------------------------- memory-tight


def test_only_recomputation_fits():
    # the training step of a 3-layer chain (outputs 10 20 30 B, resident 5 B per layer,
    # x2 under sgd) on two devices of 75 B
    g = Graph(flops=[1.0] * 3, out_bytes=[10, 20, 30], param_bytes=[5] * 3, edges=[[0, 1], [1, 2]])
    t = to_training_step(g, optimizer="sgd")
    c = unit_cluster(2, bandwidth=100.0, memory=75.0)
    assert memory_infeasibility(t, c) is None  # the certificate cannot tell: search all
    orders = np.array(list(itertools.permutations(range(6))))
    least = np.inf
    for layers in itertools.product([0, 1], repeat=3):
        devs = np.repeat(np.array([layers * 2]), len(orders), axis=0)
        result = simulate_batch(t, c, devs, orders)
        assert result.oom.all()
        least = min(least, result.peak_memory.max(axis=1).min())
    assert least == 80.0  # every placement holds 80 B somewhere, over the 75 B
    # recompute layer 0 (its forward needs nothing kept) with layers 0, 1 on d0
    p = Placement(np.array([0, 0, 1, 0, 0, 1]), t.topological_order.copy(), recompute=[0])
    s = simulate(t, c, p)
    assert not s.oom and s.peak_memory.tolist() == [70.0, 60.0]
    assert s.makespan > simulate(t, c, Placement(p.device, p.order)).makespan


# ---------------------------------------------------------------------- placements and files


def test_placement_recompute_field_and_file(tmp_path):
    t = chain3(data_input=True)
    p = Placement(np.zeros(6, int), t.topological_order.copy(), recompute=[2, 1])
    assert p.recompute.tolist() == [1, 2] and not p.recompute.flags.writeable
    assert "recompute=2" in repr(p)
    doc = p.to_dict()
    assert doc["recompute"] == [1, 2]
    back = Placement.from_dict(json.loads(json.dumps(doc)))
    assert back.recompute.tolist() == [1, 2] and (back.order == p.order).all()
    plain = Placement(np.zeros(6, int), t.topological_order.copy())
    assert plain.recompute.size == 0 and "recompute" not in plain.to_dict()
    path = tmp_path / "p.json"
    plain.save(path)
    expected = {"format": "placegym.placement/v1", "device": [0] * 6, "order": p.order.tolist()}
    assert path.read_text() == json.dumps(expected) + "\n"


@pytest.mark.parametrize(
    ("recompute", "message"),
    [
        ([1, 1], r"recompute: node 1 is repeated, got \[1, 1\]"),
        ([6], r"recompute\[0\]: not a node id: out of range 0..5, got 6"),
        ([-1], r"recompute\[0\]: not a node id: out of range 0..5, got -1"),
        ([[1]], r"recompute: expected a 1-D list of integers"),
        (["a"], r"recompute: expected a 1-D list of integers"),
    ],
)
def test_bad_recompute_ids(recompute, message):
    with pytest.raises(ValueError, match=message):
        Placement(np.zeros(6, int), np.arange(6), recompute=recompute)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (3, r"recompute: expected a list, got 3"),
        ([True], r"recompute\[0\]: expected an integer, got True"),
        ([1.5], r"recompute\[0\]: expected an integer, got 1.5"),
        ([-2], r"recompute\[0\]: must be >= 0, got -2"),
        ([2, 2], r"recompute: node 2 is repeated"),
    ],
)
def test_bad_recompute_in_a_placement_file(value, message):
    doc = {"format": "placegym.placement/v1", "device": [0] * 6, "order": list(range(6))}
    with pytest.raises(ValueError, match=message):
        Placement.from_dict({**doc, "recompute": value})


def test_noise_draws_one_factor_per_recompute_node_after_the_others():
    t, c = chain3(), unit_cluster(1, launch=0.5)
    p = Placement.from_devices([0] * 6, t)
    s = simulate(t, c, with_recompute(p, [1]), noise=0.2, rng=np.random.default_rng(4))
    z = np.random.default_rng(4).standard_normal(7)
    base = np.array([1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 2.0])  # 1^r takes 1's 2 s
    want = base * np.exp(0.2 * z - 0.02) + 0.5
    np.testing.assert_allclose(s.duration, want, rtol=1e-12)
    plain = simulate(t, c, p, noise=0.2, rng=np.random.default_rng(4))
    np.testing.assert_allclose(plain.duration, want[:6], rtol=1e-12)


@pytest.mark.parametrize(
    ("graph", "node", "message"),
    [
        ("train", 0, r"recompute\[0\]: node 0 \(op\) is a data input"),
        ("train", 4, r"recompute\[0\]: node 4 \(bw:op\) is not a forward node"),
        ("forward", 1, r"node 1 \(op\) has no backward node: node 4 is not one"),
        ("odd", 0, r"node 0 \(op\) is not a forward node of a training-step graph"),
    ],
)
def test_nodes_that_may_not_be_recomputed(graph, node, message):
    t = chain3(data_input=True)
    g = {
        "train": t,
        "forward": forward(6, [[0, 1], [1, 2]]),
        "odd": forward(5, [[0, 1], [1, 2]]),
    }[graph]
    p = Placement(np.zeros(g.num_nodes, int), np.arange(g.num_nodes), recompute=[node])
    with pytest.raises(ValueError, match=message):
        simulate(g, unit_cluster(1), p)
    with pytest.raises(ValueError, match=message):
        simulate_oracle(g, unit_cluster(1), p)
    assert not recomputable(g)[node]


def test_recomputable_nodes_of_a_training_step():
    t = to_training_step(forward(4, [[0, 1], [1, 2], [2, 3]], inputs={0}))
    assert np.flatnonzero(recomputable(t)).tolist() == [1, 2, 3]
    plain = Graph(flops=[1.0] * 4, out_bytes=[1.0] * 4, edges=[[0, 1], [2, 3]])
    stripped = Graph(flops=t.flops, out_bytes=t.out_bytes, edges=t.edges, spec=t.spec)
    assert not recomputable(plain).any()
    with pytest.raises(ValueError, match="does not share a co-location group"):
        Placement(np.zeros(8, int), np.arange(8), recompute=[2]).check(stripped)


def test_validate_and_simulate_commands(tmp_path, capsys):
    t = chain3()
    c = unit_cluster(1)
    (tmp_path / "g.json").write_text(json.dumps(t.to_dict()))
    (tmp_path / "c.json").write_text(json.dumps(c.to_dict()))
    p = Placement.from_devices([0] * 6, t)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    with_recompute(p, [1]).save(good)
    with_recompute(p, [3]).save(bad)
    files = ["--graph", str(tmp_path / "g.json"), "--cluster", str(tmp_path / "c.json")]
    assert main(["validate", str(good), *files]) == 0
    assert "fits" in capsys.readouterr().out
    assert main(["validate", str(bad), *files]) == 2
    err = capsys.readouterr().err
    assert "bad.json: recompute[0]: node 3 (bw:op) is not a forward node" in err
    assert main(["simulate", *files, "--placement", str(good), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["makespan"] == 20.0


# ---------------------------------------------------------------------- NEST


def nest_problem(memory: float):
    """The training step of a 9-layer chain (100 MB activations, 1 MB weights) on one
    device of ``memory`` bytes."""
    g = Graph(
        flops=[1e9] * 9,
        out_bytes=[1e8] * 9,
        param_bytes=[1e6] * 9,
        edges=[[i, i + 1] for i in range(8)],
        layer=list(range(9)),
    )
    dev = Device("gpu", flops=1e12, memory=memory)
    c = Cluster.homogeneous(dev, 1, (Level("n", 1e10, 1e-5),) * 3, per_node=1, nodes_per_rack=1)
    return to_training_step(g), c


def test_nest_plan_with_recomputation_fits_where_it_says_it_fits():
    t, c = nest_problem(0.8e9)
    plain = NestTeacher(relief="never")
    over = plain.solve(t, c)  # the DP's own plan, without relief: over memory
    assert over.mode == "overflow" and simulate(t, c, Placement(over.device, over.order)).oom
    over = Placement(over.device, over.order)
    repaired = plain.place(t, c)  # the repair recomputes (nothing else fits one device)
    assert plain.last_result.repaired and repaired.recompute.size
    assert not simulate(t, c, repaired).oom
    teacher = NestTeacher()
    p = teacher.place(t, c)
    r = teacher.last_result
    assert r.mode == "fits-with-relief" and not r.repaired and r.overflow == 0
    assert [run.relief for run in r.runs] == [RECOMPUTE]
    # √n checkpoints over 9 layers: every 3rd is kept, and the loss layer
    assert p.recompute.tolist() == r.recompute.tolist() == [0, 1, 3, 4, 6, 7]
    s = simulate(t, c, p)
    assert not s.oom and s.recomputation is not None
    # NEST's memory of the plan is the simulator's peak
    tables = NestTables.build(t, c)
    tables.run_tables()
    [(devs, peak, resident)] = tables.whole_run.memory(True)[0]
    assert devs.tolist() == [0] and peak.tolist() == s.peak_memory.tolist()
    assert resident.tolist() == [float(t.param_bytes.sum())]
    assert tables.whole_run.overflow(0, True) == 0.0
    assert tables.whole_run.overflow(0, False) == simulate(t, c, over).peak_memory[0] - 0.8e9
    assert s.makespan > simulate(t, c, Placement(p.device, p.order)).makespan


def test_nest_recomputes_only_where_the_simulated_plan_needs_it():
    # 1.2 GB: NEST's static bound does not fit the plan without relief, its simulated
    # peak (1.036 GB) does: NEST keeps every stash
    t, c = nest_problem(1.2e9)
    teacher = NestTeacher()
    p = teacher.place(t, c)
    assert teacher.last_result.mode == "fits" and p.recompute.size == 0
    assert simulate(t, c, p).peak_memory.tolist() == [1.036e9]


def test_nest_dp_is_the_best_single_run_with_recomputation():
    # a training step leaves one run: the DP's optimum is the best block and relief
    t, _ = nest_problem(1.0)
    dev = Device("gpu", flops=1e12, memory=0.8e9)
    c = Cluster.homogeneous(dev, 4, (Level("n", 1e10, 1e-5),) * 3, per_node=2, nodes_per_rack=2)
    tables = NestTables.build(t, c)
    cost, over = tables.run_tables()
    found = solve_dp(tables, cost, over, ALL_RELIEFS, None)
    best = np.inf
    for b, k in enumerate(tables.sizes):
        for a in np.flatnonzero(tables.hier.valid[b]).tolist():
            for o in ALL_RELIEFS:
                plan_cost, plan_over = evaluate_plan(tables, [StageRun(0, tables.m, k, a, o)])
                if plan_over == 0:
                    best = min(best, plan_cost)
    assert found is not None and found[0] == pytest.approx(best, rel=1e-12)
    [run] = found[1]
    assert run.relief & RECOMPUTE  # nothing fits without it here
    p = Placement(plan_devices(tables, [run]), NestTeacher().solve(t, c).order, tables.recompute)
    s = simulate(t, c, p)
    assert not s.oom and simulate(t, c, Placement(p.device, p.order)).oom


def test_nest_uses_no_recomputation_on_forward_graphs():
    g = forward(4, [[0, 1], [1, 2], [2, 3]])
    tables = NestTables.build(g, nest_problem(1e9)[1])
    assert tables.recompute.size == 0
    cost, over = tables.run_tables()
    assert np.isinf(over[..., RECOMPUTE]).all()


def test_a_suite_run_stores_and_replays_the_recompute_set(tmp_path):
    import json

    from placegym.train.cli import main

    out = tmp_path / "run"
    args = ["bench", "--suite", "training-v0", "--split", "test", "--teachers", "nest",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    rows = json.loads((out / "results.json").read_text())["records"]
    assert any(r["placer"] == "nest" and r["recompute"] for r in rows)  # NEST recomputes
    assert main(["bench", "--replay", str(out / "results.json")]) == 0
    for r in rows:
        r["recompute"] = None  # without the set the recorded makespans do not replay
    (out / "stripped.json").write_text(
        json.dumps({**json.loads((out / "results.json").read_text()), "records": rows})
    )
    assert main(["bench", "--replay", str(out / "stripped.json")]) == 1
