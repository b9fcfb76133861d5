"""The optimal teacher: hand-solved optima, brute force over every placement, proofs.

The brute force enumerates ALL device assignments x ALL priority permutations with
``simulate_batch`` (``D**n * n!`` placements), so it shares nothing with the search but
the simulator.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from simcases import clusters, graph, problems, unit_cluster

from placegym.envs import Cluster, Device, Graph, Level, load_cluster, simulate, simulate_batch
from placegym.envs.mdp.state import PlacementState
from placegym.teachers import get_teacher
from placegym.teachers._optimal_instance import device_automorphisms, make_instance
from placegym.teachers._optimal_search import ROUNDING_TOLERANCE
from placegym.teachers.optimal import OptimalResult, OptimalTeacher, solve
from placegym.train.harness.bench import DEFAULT_TEACHERS

#: Most placements one brute-force example may simulate (about 1 µs each).
BUDGET = 50_000


def brute_force(g: Graph, c: Cluster) -> float:
    """Minimum makespan over every device assignment and every priority order."""
    n, nd = g.num_nodes, c.num_devices
    orders = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    orders = orders.reshape(math.factorial(n), n)
    devices = np.array(list(itertools.product(range(nd), repeat=n)), dtype=np.int64)
    devices = devices.reshape(nd**n, n)
    batch_dev = np.repeat(devices, len(orders), axis=0)
    batch_ord = np.tile(orders, (len(devices), 1))
    return float(simulate_batch(g, c, batch_dev, batch_ord, memory=False).makespan.min())


def size(g: Graph, c: Cluster) -> int:
    return c.num_devices**g.num_nodes * math.factorial(g.num_nodes)


def check_result(g: Graph, c: Cluster, res: OptimalResult) -> None:
    """The returned placement simulates exactly to the reported makespan."""
    assert res.proven
    assert simulate(g, c, res.placement).makespan == res.makespan


def layered(n: int, seed: int, comm: float = 1.0) -> Graph:
    """A random layered DAG with DOPPLER-like block costs (as the speed benchmarks)."""
    rng = np.random.default_rng(seed)
    width = max(2, int(np.sqrt(n)))
    layer = np.arange(n) // width
    edges = {(int(rng.integers(0, width)) + (layer[v] - 1) * width, v) for v in range(width, n)}
    for _ in range(n):
        u, v = sorted(rng.integers(0, n, 2).tolist())
        if layer[u] < layer[v]:
            edges.add((u, v))
    return Graph(
        flops=rng.uniform(1e9, 5e10, n),
        out_bytes=rng.uniform(1e6, 4e7, n) * comm,
        edges=sorted(edges),
        name=f"layered-{n}",
    )


def p100(num_devices: int) -> Cluster:
    c = load_cluster("p100x4")
    return Cluster(devices=c.devices[:num_devices], levels=c.levels, name="p100")


# ---------------------------------------------------------------------- hand-solved


def test_chain_is_serial_sum():
    # 0 -> 1 -> 2: splitting a chain never helps, so the optimum is 1 + 2 + 3
    g = graph([1, 2, 3], [(0, 1), (1, 2)], out_bytes=[1, 1, 1])
    res = solve(g, unit_cluster(3))
    check_result(g, unit_cluster(3), res)
    assert res.makespan == 6.0
    assert len(set(res.placement.device.tolist())) == 1


def test_fork_join_splits_one_branch():
    # 0 -> {1, 2} -> 3, compute 1, 2, 2, 1, transfers 0.5: node 2 on the other device
    # gets its input at 1.5, runs to 3.5; the join next to it gets node 1's output at
    # 3 + 0.5 and starts at 3.5: makespan 4.5 (6 on one device; any other split >= 5)
    g = graph([1, 2, 2, 1], [(0, 1), (0, 2), (1, 3), (2, 3)], out_bytes=[0.5] * 4)
    c = unit_cluster(2)
    res = solve(g, c)
    check_result(g, c, res)
    assert res.makespan == 4.5
    dev = res.placement.device
    assert dev[0] != dev[3] and len({dev[1], dev[2]}) == 2


@pytest.mark.parametrize(("nbytes", "expected"), [(10.0, 4.0), (0.0, 3.0)])
def test_diamond_communication(nbytes, expected):
    # 0 -> {1, 2} -> 3, unit compute: a transfer of 10 is never worth it (serial: 4),
    # free transfers let the middle nodes run in parallel (critical path: 3)
    g = graph([1, 1, 1, 1], [(0, 1), (0, 2), (1, 3), (2, 3)], out_bytes=[nbytes] * 4)
    c = unit_cluster(2)
    res = solve(g, c)
    check_result(g, c, res)
    assert res.makespan == expected


def test_independent_nodes_partition():
    # {3, 3} | {2, 2, 2} on two devices: 6 (greedy largest-first gives 7)
    g = graph([3, 3, 2, 2, 2], [])
    res = solve(g, unit_cluster(2))
    assert res.makespan == 6.0


def test_heterogeneous_chain_runs_on_fastest_device():
    devs = (Device("slow", flops=1.0, memory=1e9), Device("fast", flops=4.0, memory=1e9))
    c = Cluster(devices=devs, levels=(Level("net", 1.0),))
    g = graph([4, 8, 4], [(0, 1), (1, 2)], out_bytes=[1, 1, 1])
    res = solve(g, c)
    assert res.makespan == 4.0
    assert res.placement.device.tolist() == [1, 1, 1]


def test_empty_graph():
    g = Graph(flops=[], out_bytes=[], edges=np.zeros((0, 2), dtype=np.int64))
    res = solve(g, unit_cluster(2))
    assert res.proven and res.makespan == 0.0 and res.placement.num_nodes == 0


# ---------------------------------------------------------------------- brute force


@st.composite
def brute_instances(draw, homogeneous: bool):
    """Small instances whose D**n * n! placements fit the brute-force budget."""
    if homogeneous:
        c = unit_cluster(
            draw(st.sampled_from([2, 3])),
            bandwidth=draw(st.sampled_from([0.5, 1.0, 2.0])),
            latency=draw(st.sampled_from([0.0, 0.5])),
            launch=draw(st.sampled_from([0.0, 0.25])),
        )
    else:
        c = draw(clusters(max_devices=3))
        assume(c.num_devices > 1)
    g = draw(dag(draw(st.sampled_from({2: [4, 5, 6], 3: [3, 4, 5]}[c.num_devices]))))
    assume(size(g, c) <= BUDGET)
    event(f"n={g.num_nodes} D={c.num_devices}")
    return g, c


@st.composite
def dag(draw, n: int) -> Graph:
    """Random DAGs of ``n`` nodes with small dyadic costs (many exact ties, zeros)."""
    perm = draw(st.permutations(range(n)))
    pairs = [(perm[i], perm[j]) for i in range(n) for j in range(i + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n))
    small = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])
    return Graph(
        flops=draw(st.lists(small, min_size=n, max_size=n)),
        out_bytes=draw(st.lists(small, min_size=n, max_size=n)),
        param_bytes=draw(st.lists(st.sampled_from([0.0, 1.0, 4.0]), min_size=n, max_size=n)),
        edges=edges,
    )


@settings(max_examples=50)
@given(brute_instances(homogeneous=False))
def test_matches_brute_force(instance):
    g, c = instance
    res = solve(g, c)
    check_result(g, c, res)
    assert res.tolerance == 0.0  # small dyadic costs: every addition is exact
    assert res.makespan == brute_force(g, c)


@settings(max_examples=40)
@given(brute_instances(homogeneous=True))
def test_matches_brute_force_symmetric_devices(instance):
    g, c = instance
    res = solve(g, c)
    check_result(g, c, res)
    assert res.makespan == brute_force(g, c)


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force_real_costs(seed):
    # DOPPLER-like float costs (rounding possible): optimal within the stated tolerance
    n, nd = (6, 2) if seed % 2 else (5, 3)
    g = layered(n, seed)
    c = Cluster(
        devices=tuple(
            Device(f"g{i}", flops=f, memory=1e10, mem_bandwidth=7e11, launch_overhead=5e-6)
            for i, f in enumerate([9.3e12, 14e12, 9.3e12][:nd])
        ),
        levels=(Level("pcie", 1.2e10, 5e-6),),
    )
    res = solve(g, c)
    check_result(g, c, res)
    assert res.tolerance == ROUNDING_TOLERANCE  # inexact arithmetic: proof up to rounding
    best = brute_force(g, c)
    assert best <= res.makespan <= best * (1 + res.tolerance)


@settings(max_examples=30)
@given(problems(max_nodes=9, max_devices=3), st.integers(0, 2**32 - 1))
def test_not_worse_than_any_sampled_placement(problem, seed):
    g, c, p = problem
    res = solve(g, c)
    check_result(g, c, res)
    assert res.makespan <= simulate(g, c, p).makespan
    rng = np.random.default_rng(seed)
    n = g.num_nodes
    devices = rng.integers(0, c.num_devices, (200, n))
    orders = np.argsort(rng.random((200, n)), axis=1)
    assert res.makespan <= simulate_batch(g, c, devices, orders).makespan.min()


# ---------------------------------------------------------------------- larger proofs


def test_ten_nodes_four_devices():
    g = layered(10, seed=1)
    res = solve(g, p100(4))
    check_result(g, p100(4), res)
    assert (
        res.makespan
        <= simulate(g, p100(4), get_teacher("critical_path").place(g, p100(4))).makespan
    )


def test_twelve_nodes_four_devices():
    g = layered(12, seed=2)
    res = solve(g, p100(4))
    check_result(g, p100(4), res)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_twelve_nodes_four_devices_many(seed):
    # random layered DAGs (homogeneous and heterogeneous) and a wide fork-join
    hetero = Cluster(
        devices=tuple(
            Device(f"g{i}", flops=f, memory=1.6e10, launch_overhead=5e-6, path=(i // 2, 0))
            for i, f in enumerate([9.3e12, 14e12, 9.3e12, 30e12])
        ),
        levels=(Level("a", 1.2e10, 5e-6), Level("b", 1.2e10, 1e-5), Level("c", 6e9, 2e-5)),
    )
    rng = np.random.default_rng(seed)
    mid = range(1, 11)
    fork_join = Graph(
        flops=rng.uniform(1e9, 5e10, 12),
        out_bytes=rng.uniform(1e6, 4e7, 12),
        edges=[(0, i) for i in mid] + [(i, 11) for i in mid],
    )
    for g, c in [(layered(12, seed), p100(4)), (layered(12, seed), hetero), (fork_join, p100(4))]:
        check_result(g, c, solve(g, c))


# ---------------------------------------------------------------------- API


def test_size_limits():
    chain = graph([1.0] * 13, [(i, i + 1) for i in range(12)])
    with pytest.raises(ValueError, match=r"at most 12 nodes .*max_nodes=.*got 13"):
        solve(chain, unit_cluster(2))
    with pytest.raises(ValueError, match=r"at most 4 devices .*max_devices=.*got 5"):
        solve(graph([1.0], []), unit_cluster(5))
    with pytest.raises(ValueError, match="at most 12 nodes"):
        OptimalTeacher().place(chain, unit_cluster(2))
    res = solve(chain, unit_cluster(5), max_nodes=13, max_devices=5)
    assert res.proven and res.makespan == 13.0


def test_time_limit_returns_incumbent():
    rng = np.random.default_rng(2)
    mid = range(1, 11)
    g = Graph(
        flops=rng.uniform(1e9, 5e10, 12),
        out_bytes=rng.uniform(1e6, 4e7, 12),
        edges=[(0, i) for i in mid] + [(i, 11) for i in mid],
    )
    res = solve(g, p100(4), time_limit=0.0)
    assert not res.proven
    assert simulate(g, p100(4), res.placement).makespan == res.makespan


def test_registry_and_plan_teacher_answers():
    g = graph([1, 2, 2, 1], [(0, 1), (0, 2), (1, 3), (2, 3)], out_bytes=[0.5] * 4)
    c = unit_cluster(2)
    teacher = get_teacher("optimal", time_limit=10.0)
    assert isinstance(teacher, OptimalTeacher) and teacher.name == "optimal"
    plan = teacher.place(g, c)
    assert teacher.solve(g, c).makespan == simulate(g, c, plan).makespan == 4.5
    state = PlacementState(g, c)  # following the answers state by state rebuilds the plan
    while not state.done:
        state.select(int(teacher.select_actions(state)[0]))
        state.place(int(teacher.place_actions(state)[0]))
    assert simulate(g, c, state.to_placement()).makespan == 4.5


def two_by_two() -> Cluster:
    """Two nodes of two identical GPUs; links within a node faster than across."""
    levels = [Level(f"l{k}", 1.0 + k) for k in range(3)]
    return Cluster.homogeneous(Device("g", 1.0, 1e9), 4, levels, per_node=2)


@pytest.mark.parametrize(
    ("cluster", "count", "new_after_0"),
    [
        (unit_cluster(4), 24, (0, 1)),  # fully symmetric: first-occurrence labelling
        (two_by_two(), 8, (0, 1, 2)),  # a partner in the node, a representative across
        (
            Cluster(
                devices=(Device("a", 1.0, 1e9), Device("b", 2.0, 1e9), Device("c", 1.0, 1e9)),
                levels=(Level("net", 1.0),),
            ),
            2,  # a <-> c
            (0, 1, 2),
        ),
    ],
)
def test_device_symmetry(cluster, count, new_after_0):
    g = graph([1, 2], [(0, 1)], out_bytes=[1, 1])
    inst = make_instance(g, cluster)
    nd = cluster.num_devices
    dur, comm = np.array(inst.dur), np.array(inst.comm).reshape(2, nd, nd)
    assert len(device_automorphisms(dur, comm)) == count
    assert inst.new_devices[0b1] == new_after_0  # device 0 used: where may a node go?


def test_node_twins_and_speed_weights():
    # 0 -> {1, 2, 3} -> 4 with 1 and 2 identical, 3 heavier: only 2 waits for a twin
    g = graph([1, 2, 2, 3, 1], [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)], [1] * 5)
    inst = make_instance(g, unit_cluster(2))
    assert inst.twins_before == [0, 0, 0b10, 0, 0]
    assert inst.weight is None  # identical devices: the plain average is the bound
    devs = (Device("slow", 1.0, 1e9), Device("fast", 4.0, 1e9))
    fast = make_instance(g, Cluster(devices=devs, levels=(Level("net", 1.0),)))
    assert fast.weight == [0.25, 1.0]
    assert fast.weighted_min == [0.25, 0.5, 0.5, 0.75, 0.25]


@pytest.mark.parametrize("seed", range(6))
def test_no_teacher_beats_the_optimum_on_small_random_graphs(seed):
    from placegym.envs.workloads import make_graph
    from placegym.teachers import get_teacher

    g = make_graph("random_dag", nodes=9, width=3, seed=seed)
    c = load_cluster("p100x4" if seed % 2 else "doppler-unit-4")
    best = get_teacher("optimal").solve(g, c)
    assert best.proven
    assert simulate(g, c, best.placement).makespan == best.makespan
    for name in DEFAULT_TEACHERS:  # every placer but optimal itself
        other = simulate(g, c, get_teacher(name).place(g, c)).makespan
        assert best.makespan <= other * (1 + 1e-12), name
