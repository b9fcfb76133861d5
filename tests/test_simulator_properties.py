"""Invariants of the simulator on random DAGs, clusters and placements (hypothesis), the
compiled simulator against the plain-Python oracle, noise, and the batched call."""

import dataclasses
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from simcases import placement, problems, unit_cluster

from placegym.envs import Graph, Schedule, TransferTrace, simulate, simulate_batch
from placegym.envs.sim.oracle import simulate_oracle
from placegym.envs.sim.simulator import MAX_NOISE, simulate_makespan

dispatches = st.sampled_from(["priority", "fifo"])


def expected_durations(s: Schedule) -> np.ndarray:
    g, c, dev = s.graph, s.cluster, s.device
    io = (
        g.out_bytes
        + g.param_bytes
        + np.array([g.out_bytes[g.predecessors(v)].sum() for v in range(g.num_nodes)])
    )
    return np.maximum(g.flops / c.flops[dev], io / c.mem_bandwidth[dev]) + c.launch_overhead[dev]


def ready_times(s: Schedule) -> np.ndarray:
    """When each node had all its inputs on its device, from the trace alone."""
    g, dev = s.graph, s.device
    arrival = {
        (int(v), int(b)): float(a)
        for v, b, a in zip(s.transfers.node, s.transfers.dst, s.transfers.arrival)
    }
    ready = np.zeros(g.num_nodes)
    for u, v in g.edges.tolist():
        have = s.finish[u] if dev[u] == dev[v] else arrival[u, int(dev[v])]
        ready[v] = max(ready[v], have)
    return ready


def check_invariants(s: Schedule) -> None:
    g, c, dev = s.graph, s.cluster, s.device
    n = g.num_nodes
    # every node runs once, for its rule-1 duration
    assert np.isfinite(s.start).all() and np.isfinite(s.finish).all()
    np.testing.assert_allclose(s.finish - s.start, expected_durations(s), rtol=1e-12, atol=1e-15)
    assert s.makespan == (s.finish.max() if n else 0.0)
    # precedence, arrivals included; one transfer per (producer, remote device)
    tr = s.transfers
    pairs = list(zip(tr.node.tolist(), tr.dst.tolist()))
    assert len(pairs) == len(set(pairs))
    needed = {(u, int(dev[v])) for u, v in g.edges.tolist() if dev[u] != dev[v]}
    assert set(pairs) == needed
    assert (tr.src == dev[tr.node]).all()
    assert (tr.start >= s.finish[tr.node]).all()
    lat = c.pair_latency[tr.src, tr.dst]
    bw = c.pair_bandwidth[tr.src, tr.dst]
    np.testing.assert_allclose(tr.arrival - tr.start, lat + tr.nbytes / bw, rtol=1e-12, atol=1e-15)
    ready = ready_times(s)
    assert (s.start >= ready).all()
    # FIFO per channel: in enqueue order, each transfer starts after the previous arrives
    for a, b in set(zip(tr.src.tolist(), tr.dst.tolist())):
        k = np.flatnonzero((tr.src == a) & (tr.dst == b))
        assert (tr.start[k][1:] >= tr.arrival[k][:-1]).all()
    # one node at a time per device, and work conservation: no idle gap while a node waits
    for d in range(c.num_devices):
        on = np.flatnonzero(dev == d)
        on = on[np.lexsort((s.finish[on], s.start[on]))]
        assert (s.start[on][1:] >= s.finish[on][:-1]).all()
        gaps = list(zip([0.0, *s.finish[on].tolist()], [*s.start[on].tolist(), np.inf]))
        for v in on:
            for g0, g1 in gaps:
                assert not max(ready[v], g0) < min(s.start[v], g1), (
                    f"device {d} idle on [{g0}, {g1}) while node {v} waited"
                )
    # lower bounds
    dur = s.finish - s.start
    if n:
        load = np.bincount(dev, weights=dur, minlength=c.num_devices)
        assert s.makespan >= load.max() * (1 - 1e-12)
        nxg = nx.DiGraph(g.edges.tolist())
        nxg.add_nodes_from(range(n))
        longest: dict[int, float] = {}
        for v in nx.topological_sort(nxg):
            longest[v] = max((longest[u] for u in nxg.predecessors(v)), default=0.0) + dur[v]
        assert s.makespan >= max(longest.values()) * (1 - 1e-12)
    # memory: params are always resident; peak never below them
    params = np.bincount(dev, weights=g.param_bytes, minlength=c.num_devices)
    assert (s.peak_memory >= params - 1e-9).all()
    assert s.oom == bool((s.peak_memory > c.memory).any())


def assert_same(a: Schedule, b: Schedule) -> None:
    assert a.makespan == pytest.approx(b.makespan, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(a.start, b.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12, atol=1e-15)
    for key in ("node", "src", "dst"):
        assert getattr(a.transfers, key).tolist() == getattr(b.transfers, key).tolist()
    np.testing.assert_allclose(a.transfers.arrival, b.transfers.arrival, rtol=1e-12)
    np.testing.assert_allclose(a.peak_memory, b.peak_memory, rtol=1e-9, atol=1e-9)
    assert a.oom == b.oom


@given(problems(), dispatches)
def test_compiled_matches_the_oracle(problem, dispatch):
    g, c, p = problem
    assert_same(simulate(g, c, p, dispatch=dispatch), simulate_oracle(g, c, p, dispatch=dispatch))


@given(problems(), dispatches)
def test_makespan_only_path_matches(problem, dispatch):
    g, c, p = problem
    full = simulate(g, c, p, dispatch=dispatch)
    assert simulate_makespan(g, c, p, dispatch=dispatch) == full.makespan
    a = simulate_makespan(g, c, p, noise=0.3, rng=5, dispatch=dispatch)
    assert a == simulate(g, c, p, noise=0.3, rng=5, dispatch=dispatch).makespan


def test_schedule_has_every_field():
    g = Graph(flops=[1.0, 2.0], out_bytes=[1.0, 1.0], edges=[[0, 1]])
    s = simulate(g, unit_cluster(2), placement([0, 1], [0, 1]))
    for obj, cls in ((s, Schedule), (s.transfers, TransferTrace)):
        assert {f.name for f in dataclasses.fields(cls)} <= set(vars(obj))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.makespan = 0.0
    assert s.makespan == 4.0 and s.transfers.nbytes.tolist() == [1.0]


@given(problems(), dispatches)
def test_invariants(problem, dispatch):
    check_invariants(simulate(*problem, dispatch=dispatch))


@given(problems(max_nodes=30, max_devices=6), dispatches)
def test_invariants_larger(problem, dispatch):
    check_invariants(simulate(*problem, dispatch=dispatch))


@given(problems(), st.integers(0, 2**32 - 1))
def test_noise_is_deterministic_per_seed_and_matches_the_oracle(problem, seed):
    g, c, p = problem
    a = simulate(g, c, p, noise=0.3, rng=np.random.default_rng(seed))
    b = simulate(g, c, p, noise=0.3, rng=seed)
    r = simulate_oracle(g, c, p, noise=0.3, rng=np.random.default_rng(seed))
    assert_same(a, b)
    assert_same(a, r)


def test_noise_factor_is_the_documented_draw():
    g = Graph(flops=[2.0, 4.0, 8.0], out_bytes=[0, 0, 0], edges=[])
    c = unit_cluster(1, launch=0.5)
    s = simulate(g, c, placement([0, 0, 0], [0, 1, 2]), noise=0.2, rng=np.random.default_rng(7))
    z = np.random.default_rng(7).standard_normal(3)
    np.testing.assert_allclose(
        s.finish - s.start, g.flops * np.exp(0.2 * z - 0.02) + 0.5, rtol=1e-14
    )


def test_noise_preserves_the_mean_and_differs_by_seed():
    g = Graph(flops=np.full(20, 1.0), out_bytes=np.zeros(20), edges=[])
    c = unit_cluster(1)
    b = 4000
    dev = np.zeros((b, 20), dtype=np.int64)
    order = np.tile(np.arange(20), (b, 1))
    res = simulate_batch(g, c, dev, order, noise=0.5, rng=np.random.default_rng(1))
    # serial sum of 20 factors of mean 1 and variance e^0.25 - 1: sd of the mean ~ 0.0027
    assert res.makespan.mean() / 20 == pytest.approx(1.0, abs=0.012)
    assert res.makespan.std() > 0.5
    p = placement(np.zeros(20), np.arange(20))
    assert (
        simulate(g, c, p, noise=0.5, rng=1).makespan
        != simulate(g, c, p, noise=0.5, rng=2).makespan
    )
    assert simulate(g, c, p).makespan == 20.0


def test_noise_needs_a_generator_and_a_valid_sigma():
    g = Graph(flops=[1.0], out_bytes=[0], edges=[])
    p = placement([0], [0])
    with pytest.raises(ValueError, match=r"rng: noise > 0 needs a seeded generator"):
        simulate(g, unit_cluster(1), p, noise=0.1)
    with pytest.raises(ValueError, match=r"noise: must be a number in \[0, 1\].*, got -0.1"):
        simulate(g, unit_cluster(1), p, noise=-0.1)
    for bad in (40.0, 1e308, math.inf, math.nan, True, "0.1"):
        with pytest.raises(ValueError, match=r"^noise: must be a number in \[0, 1\]"):
            simulate(g, unit_cluster(1), p, noise=bad, rng=0)
        with pytest.raises(ValueError, match=r"^noise: must be a number in \[0, 1\]"):
            simulate_batch(
                g, unit_cluster(1), np.zeros((2, 1), int), np.zeros((2, 1), int), noise=bad, rng=0
            )
    assert simulate(g, unit_cluster(1), p, noise=MAX_NOISE, rng=0).makespan > 0
    with pytest.raises(ValueError, match=r"dispatch: expected 'priority' or 'fifo', got 'lifo'"):
        simulate(g, unit_cluster(1), p, dispatch="lifo")


def random_rows(n: int, d: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """``b`` random device rows over ``d`` devices and ``b`` random orders of ``n`` nodes."""
    rng = np.random.default_rng(b)
    devs = rng.integers(0, d, (b, n))
    return devs, np.array([rng.permutation(n) for _ in range(b)]).reshape(b, n)


@given(problems(), dispatches, st.integers(1, 5), st.booleans())
def test_batch_equals_one_by_one(problem, dispatch, b, noisy):
    g, c, _ = problem
    devs, orders = random_rows(g.num_nodes, c.num_devices, b)
    noise = 0.25 if noisy else 0.0
    res = simulate_batch(g, c, devs, orders, dispatch=dispatch, noise=noise, rng=11)
    gen = np.random.default_rng(11)
    for i in range(b):
        s = simulate(g, c, placement(devs[i], orders[i]), dispatch=dispatch, noise=noise, rng=gen)
        assert res.makespan[i] == s.makespan
        np.testing.assert_allclose(res.peak_memory[i], s.peak_memory, rtol=1e-12)
        assert res.oom[i] == s.oom


@given(problems(max_nodes=14), dispatches, st.integers(1, 12), st.integers(2, 4))
def test_batch_is_bit_identical_over_threads(problem, dispatch, b, threads):
    g, c, _ = problem
    devs, orders = random_rows(g.num_nodes, c.num_devices, b)
    one = simulate_batch(g, c, devs, orders, dispatch=dispatch, threads=1, noise=0.2, rng=3)
    many = simulate_batch(g, c, devs, orders, dispatch=dispatch, threads=threads, noise=0.2, rng=3)
    assert one.makespan.tobytes() == many.makespan.tobytes()
    assert one.peak_memory.tobytes() == many.peak_memory.tobytes()


def test_batch_validates_its_arrays():
    g = Graph(flops=[1.0, 1.0], out_bytes=[0, 0], edges=[[0, 1]])
    c = unit_cluster(2)
    ok = np.array([[0, 1]])
    with pytest.raises(ValueError, match=r"devices: expected shape \(B, 2\), got \(2,\)"):
        simulate_batch(g, c, np.array([0, 1]), ok)
    with pytest.raises(ValueError, match=r"orders: expected shape \(1, 2\) like devices"):
        simulate_batch(g, c, ok, np.array([[0, 1, 2]]))
    with pytest.raises(
        ValueError,
        match=r"devices\[0\]\[1\]: device index out of range for "
        r"cluster 'unit' with 2 devices, got 5",
    ):
        simulate_batch(g, c, np.array([[0, 5]]), ok)
    with pytest.raises(ValueError, match=r"orders\[1\]: not a permutation of 0..1"):
        simulate_batch(g, c, np.array([[0, 1], [0, 1]]), np.array([[0, 1], [1, 1]]))
    assert simulate_batch(g, c, ok, ok, memory=False).peak_memory.tolist() == [[0.0, 0.0]]
    with pytest.raises(ValueError, match=r"threads: must be an integer >= 1, got 0"):
        simulate_batch(g, c, ok, ok, threads=0)
    with pytest.raises(ValueError, match=r"orders\[0\]: not a permutation of 0..1"):
        simulate_batch(g, c, ok, np.array([[0, -1]]))


@pytest.mark.parametrize("threads", [1, 3])
def test_batch_names_the_first_bad_row_of_any_thread(threads):
    g = Graph(flops=[1.0, 2.0, 1.0], out_bytes=[1.0, 1.0, 0], edges=[[0, 1], [1, 2]])
    c = unit_cluster(2)
    devs, orders = np.zeros((40, 3), dtype=np.int64), np.tile([0, 1, 2], (40, 1))
    devs[31, 2], orders[17] = 2, [0, 2, 2]
    with pytest.raises(ValueError, match=r"devices\[31\]\[2\]: device index out of range"):
        simulate_batch(g, c, devs, orders, threads=threads)
    devs[31, 2] = 1
    with pytest.raises(ValueError, match=r"orders\[17\]: not a permutation of 0..2"):
        simulate_batch(g, c, devs, orders, threads=threads)
    orders[17] = [0, 1, 2]
    assert (simulate_batch(g, c, devs, orders, threads=threads).makespan > 0).all()


def test_batch_is_safe_from_threads_asking_for_different_thread_counts():
    """Two threads calling simulate_batch with growing ``threads=`` (each growth replaced
    the shared pool while the other thread was submitting to it: 'cannot schedule new
    futures after shutdown'); every result equals the one-thread one."""
    import threading

    g = Graph(flops=[1.0, 2.0, 1.0], out_bytes=[1.0, 1.0, 0], edges=[[0, 1], [1, 2]])
    c = unit_cluster(3)
    rng = np.random.default_rng(0)
    devs = rng.integers(0, 3, size=(96, 3))
    orders = np.tile([0, 1, 2], (96, 1))
    want = simulate_batch(g, c, devs, orders, threads=1).makespan
    errors: list[BaseException] = []

    def worker(offset: int) -> None:
        try:
            for k in range(2, 26):
                got = simulate_batch(g, c, devs, orders, threads=k + offset).makespan
                assert np.array_equal(got, want)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_semantic_cases_match(sim_cases):
    import json

    ks = sorted(int(p.name.split(".")[0]) for p in sim_cases.glob("*.expect.json"))
    assert ks == list(range(40))
    for k in ks:
        files = [sim_cases / f"{k}.{kind}.json" for kind in ("graph", "cluster", "placement")]
        expected = json.loads((sim_cases / f"{k}.expect.json").read_text())["makespan"]
        s = simulate(*files)
        assert s.makespan == pytest.approx(expected, rel=1e-9), f"case {k}"
        assert_same(s, simulate_oracle(*files))
        check_invariants(s)
