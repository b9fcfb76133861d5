"""Per-device-kind node times (HEFT's cost matrix, ``placegym.graph/v2``): the format and
its errors, the resolution profile > time[kind] > default > roofline in one (n, C) cost
table, hand-solved makespans on a CPU + accelerator cluster in every simulator, the
teachers reading the per-kind times, and a profile baked into a graph."""

import json
import math
import pickle

import numpy as np
import pytest
from test_costs import chain

from placegym.envs import Cluster, Device, Graph, Level, Placement, load_graph, simulate
from placegym.envs.analysis.levels import b_level, durations_on
from placegym.envs.core.costs import (
    cost_table,
    kind_times,
    node_durations,
    signatures,
    with_kind_times,
)
from placegym.envs.sim.oracle import simulate_oracle
from placegym.envs.sim.simulator import simulate_batch, simulate_makespan
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher

NAN = float("nan")


def doc(*times, fmt="placegym.graph/v2", edges=()):
    """A graph document of one node per ``time`` field (None: no time)."""
    nodes = []
    for t in times:
        nd = {"flops": 100, "out_bytes": 1024}
        if t is not None:
            nd["time"] = t
        nodes.append(nd)
    return {"format": fmt, "name": "k", "nodes": nodes, "edges": [list(e) for e in edges]}


def cpu_acc(launch=0.0, flops=(1e3, 1e3), extra=()):
    """``cpu`` (kind "cpu") and ``acc`` (kind "acc"), then ``extra`` devices as (name,
    flops, kind); one level: latency 0.5 s, 1024 B/s."""
    devs = [
        Device("cpu", flops[0], 1e12, launch_overhead=launch, kind="cpu"),
        Device("acc", flops[1], 1e12, launch_overhead=launch, kind="acc"),
        *(Device(n, f, 1e12, launch_overhead=launch, kind=k) for n, f, k in extra),
    ]
    return Cluster(tuple(devs), (Level("l0", 1024.0, 0.5),), name="cpu-acc")


# ------------------------------------------------------------------ the format
def test_per_kind_times_round_trip_and_plain_times_stay_numbers(tmp_path):
    d = doc({"cpu": 1.5, "acc": 0.25}, {"cpu": 2.0, "*": 3.0}, 4.0, None, {"*": 5.0})
    g = load_graph(d)
    assert list(g.kind_time) == ["acc", "cpu"]
    np.testing.assert_array_equal(g.kind_time["cpu"], [1.5, 2.0, NAN, NAN, NAN])
    np.testing.assert_array_equal(g.kind_time["acc"], [0.25, NAN, NAN, NAN, NAN])
    np.testing.assert_array_equal(g.time, [NAN, 3.0, 4.0, NAN, 5.0])
    np.testing.assert_array_equal(g.time_on("cpu"), [1.5, 2.0, 4.0, NAN, 5.0])
    np.testing.assert_array_equal(g.time_on("acc"), [0.25, 3.0, 4.0, NAN, 5.0])
    np.testing.assert_array_equal(g.time_on("gpu"), g.time)  # a kind the graph lacks
    np.testing.assert_array_equal(g.time_on(None), g.time)
    assert g.measured and g.format == "placegym.graph/v2"
    out = [nd.get("time") for nd in g.to_dict()["nodes"]]
    # kinds sorted, then the default; a lone default is a plain number
    assert out == [{"acc": 0.25, "cpu": 1.5}, {"cpu": 2.0, "*": 3.0}, 4.0, None, 5.0]
    assert list(out[1]) == ["cpu", "*"]
    g.save(tmp_path / "g.json")
    back = load_graph(tmp_path / "g.json")
    assert back.to_dict() == g.to_dict()
    assert Graph.from_networkx(g.to_networkx()).to_dict() == g.to_dict()
    clone = pickle.loads(pickle.dumps(g))
    assert clone.to_dict() == g.to_dict()
    # a v2 file with plain times re-saves byte for byte
    plain = load_graph(doc(0.5, None, 1e-7, edges=[(0, 1)]))
    plain.save(tmp_path / "a.json")
    load_graph(tmp_path / "a.json").save(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert plain.kind_time == {} and '"time": 0.5' in (tmp_path / "a.json").read_text()


def test_constructor_kind_time_is_validated_and_sorted():
    g = Graph(flops=[1, 1], out_bytes=[0, 0], edges=[], kind_time={"b": [1, NAN], "a": [NAN, 2]})
    assert list(g.kind_time) == ["a", "b"] and not g.kind_time["a"].flags.writeable
    empty = Graph(flops=[1], out_bytes=[0], edges=[], kind_time={"cpu": [NAN]})
    assert empty.kind_time == {} and not empty.measured  # a kind timing no node is dropped
    with pytest.raises(ValueError, match=r'nodes\[1\]\.time\["cpu"\]: must be a finite .* -1\.0'):
        Graph(flops=[1, 1], out_bytes=[0, 0], edges=[], kind_time={"cpu": [1, -1]})
    with pytest.raises(ValueError, match=r'nodes\[0\]\.time\["acc"\]: .* got inf'):
        Graph(flops=[1], out_bytes=[0], edges=[], kind_time={"acc": [math.inf]})
    with pytest.raises(ValueError, match=r"kind_time: kinds must be .* other than '\*', got '\*'"):
        Graph(flops=[1], out_bytes=[0], edges=[], kind_time={"*": [1.0]})
    with pytest.raises(ValueError, match=r"kind_time\['cpu'\]: expected 2 entries .* got 3"):
        Graph(flops=[1, 1], out_bytes=[0, 0], edges=[], kind_time={"cpu": [1, 2, 3]})


@pytest.mark.parametrize(
    ("time", "message"),
    [
        ({}, r"nodes\[0\]\.time: an object .* needs at least one kind, got \{\}"),
        ({"cpu": -1}, r'nodes\[0\]\.time\["cpu"\]: must be >= 0, got -1'),
        ({"cuda:H200": math.inf}, r'nodes\[0\]\.time\["cuda:H200"\]: must be finite, got inf'),
        ({"cpu": math.nan}, r'nodes\[0\]\.time\["cpu"\]: must be finite, got nan'),
        ({"cpu": "1"}, r'nodes\[0\]\.time\["cpu"\]: expected a number, got \'1\''),
        ({"cpu": None}, r'nodes\[0\]\.time\["cpu"\]: expected a number, got None'),
        ({"*": True}, r'nodes\[0\]\.time\["\*"\]: expected a number, got True'),
        ({"": 1.0}, r"nodes\[0\]\.time: device kinds must be non-empty strings, got ''"),
        ({3: 1.0}, r"nodes\[0\]\.time: device kinds must be non-empty strings, got 3"),
        ([1.0], r"nodes\[0\]\.time: expected a number of seconds or an object .*, got \[1\.0\]"),
        (-2.0, r"nodes\[0\]\.time: must be >= 0, got -2\.0"),
    ],
)
def test_bad_time_fields_give_one_error_naming_node_and_kind(time, message):
    with pytest.raises(ValueError, match=message):
        load_graph(doc(time))


def test_devices_of_equal_speed_and_another_kind_keep_their_own_durations():
    """Durations are computed once per distinct device (speeds, launch, cost class) and
    spread: cpu, acc and a kind-less device of the same speed, twice each, keep their
    own profiled or roofline durations."""
    c = cpu_acc(
        launch=0.25,
        extra=[("cpu2", 1e3, "cpu"), ("acc2", 1e3, "acc"), ("p1", 1e3, None), ("p2", 1e3, None)],
    )
    g = load_graph(doc({"cpu": 1.0, "*": 2.0}, {"cpu": 1.0}, 3.0, None))
    # 100 FLOP at 1000 FLOP/s: roofline 0.1 s
    want = np.array([[1.0, 2.0] * 2 + [2.0] * 2, [1.0, 0.1] * 2 + [0.1] * 2, [3.0] * 6, [0.1] * 6])
    np.testing.assert_array_equal(durations_on(g, c), want + 0.25)
    grid = node_durations(g, c, np.arange(4)[:, None], np.arange(6))
    np.testing.assert_array_equal(durations_on(g, c), grid)


def test_a_v1_document_refuses_per_kind_times():
    with pytest.raises(ValueError, match=r"nodes\[0\]\.time: needs the format tag"):
        load_graph(doc({"cpu": 1.0}, fmt="placegym.graph/v1"))


# ------------------------------------------------------------------ resolution
def test_resolution_per_kind_then_default_then_roofline_in_one_small_table():
    """Devices cpu (1000 FLOP/s), acc (500), plain (no kind, 250) and gpu (a kind no node
    names, 100); launch 0.25. 100 FLOP per node: roofline 0.1, 0.2, 0.4, 1.0 s."""
    c = cpu_acc(
        launch=0.25, flops=(1e3, 500.0), extra=[("plain", 250.0, None), ("gpu", 100.0, "gpu")]
    )
    g = load_graph(doc({"cpu": 1.0, "*": 2.0}, {"cpu": 1.0}, 3.0, None))
    roof = [0.1, 0.2, 0.4, 1.0]
    expected = np.array([[1.0, 2.0, 2.0, 2.0], [1.0, *roof[1:]], [3.0] * 4, roof]) + 0.25
    np.testing.assert_allclose(durations_on(g, c), expected, rtol=1e-15)
    np.testing.assert_allclose(node_durations(g, c, [1, 1], [1, 0]), [0.45, 1.25], rtol=1e-15)
    table, dclass = cost_table(g, c)
    # one column for "cpu" (the graph times it), one for the default: (n, 2), not n x D
    np.testing.assert_array_equal(table, [[1.0, 2.0], [1.0, NAN], [3.0, 3.0], [NAN, NAN]])
    assert dclass.tolist() == [0, 1, 1, 1]
    times = kind_times(g, c)
    assert list(times) == ["cpu", "acc", "gpu"]  # device kinds, in device order
    np.testing.assert_array_equal(times["cpu"], [1.0, 1.0, 3.0, NAN])
    np.testing.assert_array_equal(times["acc"], [2.0, NAN, 3.0, NAN])


def test_a_profile_wins_over_the_per_kind_time():
    g0 = chain(2)
    d = g0.to_dict()
    d["format"] = "placegym.graph/v2"
    for nd in d["nodes"]:
        nd["time"] = {"cpu": 7.0, "acc": 9.0}
    g = load_graph(d)
    mm = signatures(g)[1]
    c = cpu_acc()
    profiled = Cluster(c.devices, c.levels, profile={"acc": {mm: 0.5}})
    np.testing.assert_array_equal(durations_on(g, profiled), [[7.0, 9.0], [7.0, 0.5], [7.0, 0.5]])
    table, dclass = cost_table(g, profiled)
    assert table.shape == (3, 2) and dclass.tolist() == [1, 0]  # profiled kinds first


# ------------------------------------------------------------------ hand-solved makespans
#: A -> B, A sends 1024 B (0.5 s latency + 1 s). A: cpu 1 s, acc 4 s; B: cpu 5, acc 2.
AB = doc({"cpu": 1.0, "acc": 4.0}, {"cpu": 5.0, "acc": 2.0}, edges=[(0, 1)])


@pytest.mark.parametrize(
    ("device", "makespan"),
    [([0, 1], 1.0 + 1.5 + 2.0), ([0, 0], 6.0), ([1, 1], 6.0), ([1, 0], 4.0 + 1.5 + 5.0)],
)
def test_two_kind_makespans_are_exact_in_every_simulator(device, makespan):
    g, c = load_graph(AB), cpu_acc()
    p = Placement(device=np.array(device), order=np.array([0, 1]))
    s = simulate(g, c, p)
    assert s.makespan == makespan
    assert simulate_oracle(g, c, p).makespan == makespan
    assert simulate_makespan(g, c, p) == makespan
    assert simulate_batch(g, c, p.device[None], p.order[None]).makespan.tolist() == [makespan]


def test_heft_picks_the_faster_kind_and_critical_path_ranks_by_kind_means():
    g, c = load_graph(AB), cpu_acc()
    # HEFT: mean durations 2.5 and 3.5, mean transfer 1.5 -> b-levels 7.5 and 3.5
    np.testing.assert_array_equal(b_level(g, c), [7.5, 3.5])
    heft = get_teacher("heft").place(g, c)
    assert heft.device.tolist() == [0, 1]  # A on the cpu (1 < 4), B on acc (4.5 < 6)
    assert simulate(g, c, heft).makespan == 4.5
    assert simulate(g, c, get_teacher("optimal").place(g, c)).makespan == 4.5
    cp = get_teacher("critical_path")
    np.testing.assert_array_equal(cp.b_level(g, c), [7.5, 3.5])
    # earliest start: A on the cpu (tie at 0, lowest id); B can start at 1 there, 2.5 on acc
    p = cp.place(g, c)
    assert p.device.tolist() == [0, 0] and simulate(g, c, p).makespan == 1.0 + 5.0
    # two independent nodes, each fast on one kind: the second starts at once on acc
    g2 = load_graph(doc({"cpu": 1.0, "acc": 3.0}, {"cpu": 3.0, "acc": 1.0}))
    p2 = cp.place(g2, c)
    assert p2.device.tolist() == [0, 1] and simulate(g2, c, p2).makespan == 1.0
    h2 = get_teacher("heft").place(g2, c)
    assert h2.device.tolist() == [0, 1] and simulate(g2, c, h2).makespan == 1.0


# ------------------------------------------------------------------ baking a profile
def test_a_profile_baked_into_the_graph_simulates_identically_without_it():
    g = make_graph("ffnn")
    sig = signatures(g)
    rng = np.random.default_rng(0)
    kernels = sorted({s for s in sig if s is not None})
    profile = {
        "cpu": {s: float(rng.uniform(1e-4, 1e-3)) for s in kernels[::2]},
        "acc": {s: float(rng.uniform(1e-5, 1e-4)) for s in kernels},
    }
    devs = tuple(
        Device(f"d{i}", 1e12, 1e12, mem_bandwidth=1e11, launch_overhead=2e-6, kind=k)
        for i, k in enumerate(["cpu", "acc", "cpu", "acc", None])
    )
    levels = (Level("l0", 1e10, 1e-5),)
    profiled = Cluster(devs, levels, profile=profile)
    bare = Cluster(devs, levels)
    baked = load_graph(json.loads(json.dumps(with_kind_times(g, profiled).to_dict())))
    assert set(baked.kind_time) == {"cpu", "acc"}
    np.testing.assert_array_equal(durations_on(baked, bare), durations_on(g, profiled))
    assert not np.array_equal(durations_on(g, bare), durations_on(g, profiled))
    devices = rng.integers(0, len(devs), (4, g.num_nodes))
    orders = np.tile(g.topological_order, (4, 1))
    for i in range(4):
        p = Placement(device=devices[i], order=orders[i])
        assert simulate(baked, bare, p).makespan == simulate(g, profiled, p).makespan
        assert simulate(baked, profiled, p).makespan == simulate(g, profiled, p).makespan
        noisy = [
            simulate(x, c, p, noise=0.3, rng=np.random.default_rng(5)).makespan
            for x, c in ((g, profiled), (baked, bare))
        ]
        assert noisy[0] == noisy[1]
    a = simulate_batch(g, profiled, devices, orders).makespan
    b = simulate_batch(baked, bare, devices, orders).makespan
    assert a.tolist() == b.tolist()


def test_devices_of_two_kinds_are_told_apart_even_when_their_speeds_agree():
    c = cpu_acc()  # equal FLOP/s, kinds cpu and acc
    traits = c.device_traits
    assert (traits[0, :4] == traits[1, :4]).all() and traits[0, 4] != traits[1, 4]
    # one node, 4 s on cpu and 1 s on acc: the single-device baseline picks the acc
    g = Graph.from_dict(doc({"cpu": 4.0, "acc": 1.0}))
    p = get_teacher("single_device").place(g, c)
    assert simulate(g, c, p).makespan == 1.0
