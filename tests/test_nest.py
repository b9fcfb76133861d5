"""The NEST teacher: its DP against brute force, valid and memory-feasible placements on
the presets, the assignment-level NEST cost, speed and determinism."""

import itertools

import numpy as np
import pytest

from placegym.envs import Cluster, Device, Graph, Level, Placement, load_cluster, simulate
from placegym.envs.analysis.memory import overflow_penalty
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import ffnn
from placegym.teachers import get_teacher
from placegym.teachers._nest_cost import ZERO, NestTables, StageRun, stage_index
from placegym.teachers.nest import (
    ALL_RELIEFS,
    NestTeacher,
    evaluate_plan,
    nest_cost,
    plan_devices,
    solve_dp,
)

LEVELS = (Level("node", 4.0, 0.1), Level("rack", 1.0, 0.3), Level("spine", 2.0, 0.5))


def small_cluster(count: int, memory: float) -> Cluster:
    """``count`` unit-speed devices, 2 per node, 2 nodes per rack."""
    dev = Device("d", flops=1.0, memory=memory)
    return Cluster.homogeneous(dev, count, LEVELS, per_node=2, nodes_per_rack=2, name="small")


def random_layered(rng: np.random.Generator, m: int, width: int = 3) -> Graph:
    """Layers of 1..width nodes; edges from the previous layer (every node has one),
    some skip edges and some layer-internal edges; sometimes no layer field."""
    layers = [list(range(s, s + w)) for s, w in _spans(rng.integers(1, width + 1, m))]
    edges = set()
    for lv in range(1, m):
        for v in layers[lv]:
            for u in rng.choice(layers[lv - 1], size=rng.integers(1, 3)):
                edges.add((int(u), v))
            if lv >= 2 and rng.random() < 0.3:
                edges.add((int(rng.choice(layers[lv - 2])), v))
        if len(layers[lv]) > 1 and rng.random() < 0.3:
            edges.add((layers[lv][0], layers[lv][1]))
    n = layers[-1][-1] + 1
    layer = [lv for lv, nodes in enumerate(layers) for _ in nodes]
    return Graph(
        flops=rng.uniform(1, 10, n),
        out_bytes=rng.uniform(0, 8, n),
        param_bytes=rng.uniform(0, 4, n) * (rng.random(n) < 0.7),
        edges=sorted(edges) or np.zeros((0, 2), dtype=np.int64),
        layer=layer if rng.random() < 0.7 else None,
    )


def _spans(widths):
    start = 0
    for w in widths:
        yield start, int(w)
        start += int(w)


def all_plans(t: NestTables, reliefs):
    """Every plan of the search space: splits into runs, each with any block size,
    address after the previous block, and relief option."""
    blocks = [(k, int(a)) for b, k in enumerate(t.sizes) for a in np.flatnonzero(t.hier.valid[b])]

    def rec(i, first_free, runs):
        if i == t.m:
            yield list(runs)
            return
        for j in range(i + 1, t.m + 1):
            for k, a in blocks:
                if a < first_free:
                    continue
                for o in reliefs:
                    yield from rec(j, a + k, [*runs, StageRun(i, j, k, a, o)])

    yield from rec(0, 0, [])


def brute_force(t: NestTables, reliefs, penalty: float) -> tuple[float, float]:
    """Minimum over the whole space: ``(hard, soft)``, the cost of the best plan that fits
    (inf if none does) and the best cost + penalty × overflow."""
    hard = soft = np.inf
    for runs in all_plans(t, reliefs):
        cost, over = evaluate_plan(t, runs)
        if over == 0:
            hard = min(hard, cost)
        soft = min(soft, cost + penalty * over)
    return hard, soft


def check_dp_against_brute_force(seed: int, max_stages: int) -> None:
    rng = np.random.default_rng(seed)
    g = random_layered(rng, int(rng.integers(1, max_stages + 1)))
    count = int(rng.choice([2, 4, 8]))
    # from "only the largest node fits" to "a good share of all parameters fit"
    need = g.param_bytes + g.out_bytes + g.in_bytes
    memory = need.max() + g.param_bytes.sum() * rng.uniform(0.0, 0.6)
    t = NestTables.build(g, small_cluster(count, memory=float(memory)))
    cost, over = t.run_tables()
    reliefs = ALL_RELIEFS if seed % 2 else (0,)
    expected = dict(zip((None, 10.0), brute_force(t, reliefs, 10.0)))
    for penalty, best in expected.items():
        found = solve_dp(t, cost, over, reliefs, penalty)
        if not np.isfinite(best):
            assert found is None
            continue
        value, runs = found
        assert value == pytest.approx(best, rel=1e-9, abs=1e-12)
        plan_cost, plan_over = evaluate_plan(t, runs)
        direct = plan_cost if penalty is None else plan_cost + penalty * plan_over
        assert direct == pytest.approx(value, rel=1e-9, abs=1e-12)
        assert penalty is not None or plan_over == 0


@pytest.mark.parametrize("seed", range(60))
def test_dp_equals_brute_force(seed):
    check_dp_against_brute_force(seed, max_stages=3)


@pytest.mark.slow
def test_dp_equals_brute_force_four_stages():
    for seed in range(1000, 1060):
        check_dp_against_brute_force(seed, max_stages=4)


def test_brute_force_sees_several_runs_and_levels():
    # guard against a vacuous comparison: the small instances do exercise links
    rng = np.random.default_rng(3)
    t = NestTables.build(random_layered(rng, 3), small_cluster(8, memory=1e9))
    plans = list(all_plans(t, (0,)))
    assert max(len(p) for p in plans) == 3
    levels = {t.hier.level(p[0].address, p[1].address) for p in plans if len(p) > 1}
    assert levels == {0, 1, 2}


# ---------------------------------------------------------------------- placements


def round_robin(g: Graph, c: Cluster) -> Placement:
    order = g.topological_order
    dev = np.empty(g.num_nodes, dtype=np.int64)
    dev[order] = np.arange(g.num_nodes) % c.num_devices
    return Placement(device=dev, order=order)


def is_topological(g: Graph, order: np.ndarray) -> bool:
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return bool((rank[g.edges[:, 0]] < rank[g.edges[:, 1]]).all())


@pytest.mark.parametrize("preset", ["p100x4", "v100x8", "h100-2x8", "tpuv4-fattree-64"])
def test_valid_placement_on_presets(preset):
    g, c = ffnn(), load_cluster(preset)
    teacher = NestTeacher()
    p = teacher.place(g, c)
    p.check(g, c)
    assert sorted(p.order.tolist()) == list(range(g.num_nodes))
    assert is_topological(g, p.order)
    stage = stage_index(g)
    assert (np.diff(stage[p.order]) >= 0).all()  # the order respects the stage chain
    s = simulate(g, c, p)
    assert not s.oom
    assert teacher.last_result.mode == "fits"
    # ffnn is a model of its own kind here: NEST must beat a naive round robin
    assert s.makespan < simulate(g, c, round_robin(g, c)).makespan


def test_registry_and_plan_teacher_answers():
    g, c = ffnn(), load_cluster("p100x4")
    teacher = get_teacher("nest")
    assert isinstance(teacher, NestTeacher)
    plan = teacher.place(g, c)
    state = PlacementState(g, c)
    while not state.done:
        state.select(int(teacher.select_actions(state)[0]))
        state.place(int(teacher.place_actions(state)[0]))
    rolled = state.to_placement()
    assert rolled.device.tolist() == plan.device.tolist()
    assert rolled.order.tolist() == plan.order.tolist()


def test_deterministic():
    g, c = ffnn(), load_cluster("h100-spineleaf-64")
    a, b = NestTeacher().plan(g, c), NestTeacher().plan(g, c)
    assert a.device.tolist() == b.device.tolist()
    assert a.order.tolist() == b.order.tolist()


def test_empty_and_single_node_graphs():
    c = load_cluster("p100x4")
    empty = Graph(flops=[], out_bytes=[], edges=np.zeros((0, 2)))
    assert NestTeacher().plan(empty, c).num_nodes == 0
    one = Graph(flops=[1e9], out_bytes=[4.0], edges=np.zeros((0, 2)))
    p = NestTeacher().plan(one, c)
    assert p.order.tolist() == [0] and 0 <= p.device[0] < 4


def test_deep_graphs_are_merged_to_max_stages():
    n = 300
    g = Graph(flops=[1e9] * n, out_bytes=[1e6] * n, edges=[[i, i + 1] for i in range(n - 1)])
    c = load_cluster("p100x4")
    assert NestTables.build(g, c, max_stages=16).m == 16
    teacher = NestTeacher(max_stages=16)
    p = teacher.place(g, c)
    assert is_topological(g, p.order)
    assert teacher.last_result.runs[-1].stop == 16
    with pytest.raises(ValueError, match="max_stages"):
        NestTeacher(max_stages=0)


def test_stage_index_falls_back_to_depth():
    # layer field against an edge direction -> topological depth
    g = Graph(flops=[1, 1, 1], out_bytes=[1, 1, 1], edges=[[0, 1], [1, 2]], layer=[1, 0, 2])
    assert stage_index(g).tolist() == [0, 1, 2]
    g = Graph(flops=[1, 1, 1], out_bytes=[1, 1, 1], edges=[[0, 2], [1, 2]], layer=[4, 4, 9])
    assert stage_index(g).tolist() == [0, 0, 1]


@pytest.mark.parametrize("relief", ["fallback", "always", "never"])
def test_makespan_model_reported(relief):
    g, c = ffnn(), load_cluster("h100-2x8")
    teacher = NestTeacher(relief=relief)
    teacher.place(g, c)
    r = teacher.last_result
    assert r.cost > 0 and r.overflow == 0 and r.runtime_s > 0
    assert "stages 0.." in r.describe()


def test_bad_arguments():
    with pytest.raises(ValueError, match="relief: expected"):
        NestTeacher(relief="sometimes")
    with pytest.raises(ValueError, match="recompute_factor"):
        NestTeacher(recompute_factor=-1.0)


def random_plan(t: NestTables, rng: np.random.Generator) -> list[StageRun] | None:
    """A random plan of the search space (random split, block sizes and addresses)."""
    cuts = rng.choice(np.arange(1, t.m), size=rng.integers(0, t.m), replace=False)
    bounds = [0, *sorted(cuts.tolist()), t.m]
    runs, first_free = [], 0
    for i, j in itertools.pairwise(bounds):
        blocks = [
            (k, int(a))
            for b, k in enumerate(t.sizes)
            for a in np.flatnonzero(t.hier.valid[b])
            if a >= first_free
        ]
        if not blocks:
            return None
        k, a = blocks[rng.integers(len(blocks))]
        runs.append(StageRun(i, j, k, a))
        first_free = a + k
    return runs


def spearman(x, y) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


@pytest.mark.parametrize(("preset", "floor"), [("p100x4", 0.9), ("tpuv4-fattree-64", 0.9)])
def test_model_ranks_plans_like_the_simulator(preset, floor):
    # the DP's objective must order its own plans roughly as the simulator does
    g, c = ffnn(dims=(2048, 4096, 4096, 4096, 2048)), load_cluster(preset)
    t = NestTables.build(g, c)
    order = NestTeacher().place(g, c).order
    rng = np.random.default_rng(0)
    model, sim = [], []
    while len(model) < 80:
        runs = random_plan(t, rng)
        if runs is not None:
            model.append(evaluate_plan(t, runs)[0])
            sim.append(
                simulate(g, c, Placement(device=plan_devices(t, runs), order=order)).makespan
            )
    assert spearman(model, sim) >= floor


@pytest.mark.parametrize(
    ("count", "per_node", "per_rack"), [(12, 3, 2), (10, 4, 2), (6, 2, 3), (5, 5, 1)]
)
def test_odd_clusters(count, per_node, per_rack):
    # non-power-of-two units, an irregular tree (flat view), a single node
    dev = Device("d", flops=1.0, memory=1e9)
    c = Cluster.homogeneous(dev, count, LEVELS, per_node=per_node, nodes_per_rack=per_rack)
    rng = np.random.default_rng(count)
    g = random_layered(rng, 3, width=4)
    t = NestTables.build(g, c)
    assert t.hier.regular == (count % per_node == 0)
    assert max(t.sizes) == count
    for b, k in enumerate(t.sizes):  # every block lies inside the cluster
        assert (np.flatnonzero(t.hier.valid[b]) + k <= count).all()
    cost, over = t.run_tables()
    value, _ = solve_dp(t, cost, over, (0,), None)
    assert value == pytest.approx(brute_force(t, (0,), 1.0)[0], rel=1e-9)
    p = NestTeacher().place(g, c)
    p.check(g, c)
    simulate(g, c, p)


# ---------------------------------------------------------------------- memory

GB = 1e9


def memory_cluster(count: int, per_node: int = 2) -> Cluster:
    dev = Device("gpu", flops=1e12, memory=1 * GB)
    levels = (Level("node", 1e11, 1e-6), Level("rack", 1e10, 1e-5), Level("spine", 1e10, 1e-5))
    return Cluster.homogeneous(dev, count, levels, per_node=per_node, nodes_per_rack=2)


def test_layer_too_big_for_one_device_gets_a_group():
    # one layer of 4 nodes with 0.4 GB of params each: no single device holds it
    g = Graph(
        flops=[1e9] * 5,
        out_bytes=[1e6] * 5,
        param_bytes=[0.0] + [0.4 * GB] * 4,
        edges=[[0, 1], [0, 2], [0, 3], [0, 4]],
        layer=[0, 1, 1, 1, 1],
    )
    c = memory_cluster(4)
    teacher = NestTeacher()
    p = teacher.place(g, c)
    assert teacher.last_result.mode == "fits"
    run = next(r for r in teacher.last_result.runs if r.start <= 1 < r.stop)
    assert run.size >= 2
    assert not simulate(g, c, p).oom


def test_chain_too_big_for_one_device_is_pipelined():
    # 4 single-node layers of 0.45 GB params each: at most 2 fit on a device
    g = Graph(
        flops=[1e9] * 4,
        out_bytes=[1e6] * 4,
        param_bytes=[0.45 * GB] * 4,
        edges=[[0, 1], [1, 2], [2, 3]],
        layer=[0, 1, 2, 3],
    )
    c = memory_cluster(4)
    teacher = NestTeacher()
    p = teacher.place(g, c)
    assert teacher.last_result.mode == "fits"
    assert len(teacher.last_result.runs) >= 2
    assert len(np.unique(p.device)) >= 2
    s = simulate(g, c, p)
    assert not s.oom and (s.peak_memory <= c.memory).all()


def unbalanced_params_graph() -> Graph:
    # one compute-heavy node without params and 8 light nodes of 0.18 GB each: the
    # compute-balanced spread over 2 devices puts all 1.44 GB on one of them; ZeRO holds
    # 1.44 / 2 + 0.18 (gather buffer) = 0.9 GB per device
    return Graph(
        flops=[0.0, 1e12] + [1e6] * 8,
        out_bytes=[1e3] * 10,
        param_bytes=[0.0, 0.0] + [0.18 * GB] * 8,
        edges=[[0, v] for v in range(1, 10)],
        layer=[0] + [1] * 9,
    )


def test_zero_is_the_relief_when_nothing_else_fits():
    g, c = unbalanced_params_graph(), memory_cluster(2)
    teacher = NestTeacher()
    teacher.place(g, c)
    r = teacher.last_result
    assert r.mode == "fits-with-relief" and r.overflow == 0
    assert any(run.relief & ZERO and run.size == 2 for run in r.runs)


def test_least_overflow_fallback_when_nothing_fits():
    g, c = unbalanced_params_graph(), memory_cluster(2)
    teacher = NestTeacher(relief="never")
    p = teacher.place(g, c)
    r = teacher.last_result
    assert r.mode == "overflow" and r.overflow > 0
    # the least overflow uses both devices rather than stacking everything on one
    assert len(np.unique(p.device)) == 2
    p.check(g, c)


# ---------------------------------------------------------------------- nest_cost


def test_nest_cost_chain_by_hand():
    # 2 unit-speed devices on one node; transfer = 0.5 + bytes; memory 10 B
    dev = Device("d", flops=1.0, memory=10.0)
    c = Cluster.homogeneous(dev, 2, (Level("l", 1.0, 0.5),) * 3, name="unit")
    g = Graph(flops=[1, 2, 3], out_bytes=[4, 4, 4], param_bytes=[6, 0, 6], edges=[[0, 1], [1, 2]])
    steps = [[-1, -1, -1], [0, -1, -1], [0, 1, -1], [0, 1, 0]]
    costs = [nest_cost(g, c, d) for d in steps]
    # a: load 1; b on 1: loads (1, 2), a->1 costs 0.5 + 4; c on 0: loads (4, 2), b->0
    # costs 4.5 too, params 12 B on device 0 overflow by 2 B over the slowest 1 B/s
    assert costs == [0.0, 1.0, 2.0 + 4.5, 4.0 + 9.0 + 2.0]
    assert (np.diff(costs) >= 0).all()
    # an edge counts only when both ends are assigned; weight scales the memory term
    assert nest_cost(g, c, [-1, 1, 0]) == 3.0 + 4.5
    assert nest_cost(g, c, [0, 1, 0], overflow_weight=0.0) == 13.0


def test_nest_cost_counts_every_cut_edge():
    dev = Device("d", flops=1.0, memory=1e9)
    c = Cluster.homogeneous(dev, 2, (Level("l", 1.0, 0.0),) * 3)
    g = Graph(flops=[1, 1, 1], out_bytes=[5, 0, 0], edges=[[0, 1], [0, 2]])
    assert nest_cost(g, c, [0, 1, 1]) == 2.0 + 5.0 + 5.0  # DESIGN §4: each cut edge


def test_overflow_penalty_is_the_memory_term():
    g, c = ffnn(), load_cluster("p100x4")
    used = np.array([20e9, 0.0, 17e9, 1e9])  # 4 GB and 1 GB over 16 GB
    slowest = 6.25e9
    assert overflow_penalty(used, c) == pytest.approx(5e9 / slowest)
    assert overflow_penalty(used, c, overflow_weight=2.0) == pytest.approx(10e9 / slowest)
    heavy = Graph(
        flops=g.flops,
        out_bytes=g.out_bytes,
        param_bytes=np.where(np.arange(g.num_nodes) == 0, 20e9, 0.0),
        edges=g.edges,
    )
    dev = np.full(g.num_nodes, -1)
    dev[0] = 0
    without = nest_cost(heavy, c, dev, overflow_weight=0.0)
    assert nest_cost(heavy, c, dev) == pytest.approx(
        without + overflow_penalty(np.array([20e9, 0, 0, 0]), c)
    )


def test_nest_cost_monotone_along_a_plan():
    g, c = ffnn(), load_cluster("h100-2x8")
    p = NestTeacher().place(g, c)
    dev = np.full(g.num_nodes, -1)
    last = nest_cost(g, c, dev)
    assert last == 0.0
    for v in p.order:
        dev[v] = p.device[v]
        now = nest_cost(g, c, dev)
        assert now >= last
        last = now


def test_nest_cost_rejects_bad_devices():
    g, c = ffnn(), load_cluster("p100x4")
    with pytest.raises(ValueError, match="device: expected 128 entries"):
        nest_cost(g, c, [0])
    with pytest.raises(ValueError, match=r"device\[0\]: expected -1 or a device index < 4"):
        nest_cost(g, c, [7] + [0] * 127)


# ---------------------------------------------------------------------- large presets


def test_plans_on_a_64_device_preset_are_valid():
    # how fast: tests/benchmarks/test_generator_speed.py (make bench)
    g, c = ffnn(), load_cluster("tpuv4-fattree-64")
    p = NestTeacher().plan(g, c)
    p.check(g, c)
    assert np.isfinite(simulate(g, c, p).makespan)


def test_the_compiled_channel_maximum_equals_its_numpy_statement_bit_for_bit():
    from placegym.envs.suites import get_suite
    from placegym.teachers._nest_cost import _channel_max, channel_max_numpy

    rng = np.random.default_rng(0)
    inst = get_suite("training-v0").instance("gpt_block-train@h100-2x8-mem0.5-port")
    g, c = inst.graph, inst.cluster
    d = c.num_devices
    for size in (1, 5, 60, 300):
        for same in (False, True):
            e = g.edges[rng.choice(len(g.edges), size=size, replace=False)]
            src = rng.integers(0, d, size)
            dst = src.copy() if same else rng.integers(0, d, size)
            want = channel_max_numpy(e[:, 0], src, dst, g.out_bytes, c)
            assert _channel_max(e[:, 0], src, dst, g.out_bytes, c) == want
            assert (want == 0.0) == same
    # one channel, two producers: 0's output (2 B) twice to device 1 counts once
    two = Graph(flops=[1.0] * 4, out_bytes=[2.0, 3.0, 0.0, 0.0], edges=[(0, 2), (0, 3), (1, 3)])
    unit = small_cluster(2, memory=1e9)
    u, src, dst = np.array([0, 0, 1]), np.array([0, 0, 0]), np.array([1, 1, 1])
    expect = 2 * unit.pair_latency[0, 1] + 5.0 / unit.pair_bandwidth[0, 1]
    assert _channel_max(u, src, dst, two.out_bytes, unit) == pytest.approx(expect)
