"""The annealing teacher: never worse than its starts, budgeted, seeded."""

import numpy as np
import pytest
from simcases import graph, placement, unit_cluster

import placegym.teachers.anneal as anneal_mod
from placegym.envs import get_preset, simulate
from placegym.envs.workloads import ffnn, llama_block
from placegym.teachers import get_teacher
from placegym.teachers.anneal import AnnealTeacher, anneal
from placegym.teachers.anneal_moves import critical_chain


def makespan(g, c, name, **kw):
    return simulate(g, c, get_teacher(name, **kw).place(g, c)).makespan


@pytest.mark.parametrize("cname", ["p100x4", "v100x8"])
def test_never_worse_than_critical_path_and_heft(cname):
    g, c = ffnn(), get_preset(cname)
    t = AnnealTeacher()
    best = simulate(g, c, t.place(g, c)).makespan
    assert best == t.last_result.makespan
    assert best <= t.last_result.start_makespan
    assert best <= makespan(g, c, "critical_path")
    assert best <= makespan(g, c, "heft")


def test_clearly_better_than_critical_path_on_ffnn():
    # Lower bound on p100x4: total work / 4 = 2.08 ms; critical path takes 2.62 ms.
    g, c = ffnn(), get_preset("p100x4")
    assert makespan(g, c, "anneal") < 0.9 * makespan(g, c, "critical_path")


def test_budget_counts_every_simulation(monkeypatch):
    calls = {"batch_rows": 0, "single": 0}
    batch, single = anneal_mod.simulate_batch, anneal_mod.simulate

    def counting_batch(graph, cluster, devices, orders, **kw):
        calls["batch_rows"] += len(devices)
        return batch(graph, cluster, devices, orders, **kw)

    def counting_single(*args, **kw):
        calls["single"] += 1
        return single(*args, **kw)

    monkeypatch.setattr(anneal_mod, "simulate_batch", counting_batch)
    monkeypatch.setattr(anneal_mod, "simulate", counting_single)
    g, c = ffnn(), get_preset("p100x4")
    for budget in (5, 6, 37, 500):
        calls.update(batch_rows=0, single=0)
        t = AnnealTeacher(budget=budget)
        t.place(g, c)
        used = calls["batch_rows"] + calls["single"]
        assert used == t.last_result.simulations == budget
        assert calls["single"] > 0 or budget < 7  # the critical chain was looked up


def test_same_seed_same_result_other_seed_explores():
    g, c = llama_block(), get_preset("v100x8")
    a = AnnealTeacher(budget=600, seed=7).place(g, c)
    b = AnnealTeacher(budget=600, seed=7).place(g, c)
    d = AnnealTeacher(budget=600, seed=8).place(g, c)
    assert a.device.tolist() == b.device.tolist() and a.order.tolist() == b.order.tolist()
    assert a.device.tolist() != d.device.tolist() or a.order.tolist() != d.order.tolist()


def test_start_is_kept_when_nothing_improves():
    # One device and one node: no move changes anything; the start comes back.
    g, c = graph([2.0], []), unit_cluster(1)
    r = anneal(g, c, get_teacher("critical_path").place(g, c), budget=10)
    assert r.makespan == r.start_makespan == 2.0
    # A chain on one device: only priorities can move, and they cannot help.
    g = graph([1.0, 2.0, 3.0], [[0, 1], [1, 2]])
    r = anneal(g, c, get_teacher("critical_path").place(g, c), budget=50)
    assert r.makespan == 6.0 and r.simulations == 50


def test_finds_the_optimum_of_a_small_fork_join():
    # 0 -> {1, 2} -> 3 with flops 1, 4, 4, 1 and 1-byte outputs: optimum 7 (see
    # test_teachers.fork_join). Starting from everything on one device (10), it finds 7.
    g = graph([1, 4, 4, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[1, 1, 1, 1])
    c = unit_cluster(2)
    start = get_teacher("single_device").place(g, c)
    r = anneal(g, c, start, budget=400, seed=0)
    assert r.start_makespan == 10.0 and r.makespan == 7.0


def test_avoids_oom_when_the_start_fits():
    # Four 5-byte params on two 10-byte devices: any move that stacks three OOMs.
    g = graph([1, 1, 1, 1], [[0, 1], [1, 2], [2, 3]], param_bytes=[5] * 4)
    c = unit_cluster(2, memory=10.0)
    p = AnnealTeacher(budget=300).place(g, c)
    assert not simulate(g, c, p).oom


def test_critical_chain_follows_waits():
    # d0 runs 0 [0, 1] then 2 [1, 3]; 1 on d1 waits for 0's byte: [2, 3]; 3 on d1 waits
    # for 2's byte: [4, 5]. Back from 3: 2's arrival at 4, then 0's local output at 1.
    g = graph([1, 1, 2, 1], [[0, 1], [0, 2], [2, 3]], out_bytes=[1, 1, 1, 1])
    s = simulate(g, unit_cluster(2), placement([0, 1, 0, 1], [0, 1, 2, 3]))
    assert s.makespan == 5.0
    assert critical_chain(s).tolist() == [3, 2, 0]


def test_argument_errors():
    with pytest.raises(ValueError, match="budget: must be >= 5"):
        AnnealTeacher(budget=4)
    with pytest.raises(ValueError, match="seed: must be an integer >= 0, got -2"):
        AnnealTeacher(seed=-2)
    with pytest.raises(ValueError, match="starts: need teacher names"):
        AnnealTeacher(starts=("anneal",))
    g, c = ffnn(), get_preset("p100x4")
    p = get_teacher("round_robin").place(g, c)
    with pytest.raises(ValueError, match="batch: must be >= 1, got 0"):
        anneal(g, c, p, batch=0)
    with pytest.raises(ValueError, match="t_end: must satisfy"):
        anneal(g, c, p, t_start=0.01, t_end=0.1)
    with pytest.raises(ValueError, match="move_weights: need 5 weights"):
        anneal(g, c, p, move_weights=(1.0, 2.0))
    with pytest.raises(ValueError, match="guide: must be in"):
        anneal(g, c, p, guide=1.5)
    with pytest.raises(ValueError, match="start: need at least one placement"):
        anneal(g, c, [])


def test_single_move_kinds_keep_placements_valid():
    g, c = ffnn(), get_preset("h100-2x8")
    for k in range(5):
        w = tuple(float(i == k) for i in range(5))
        r = anneal(g, c, get_teacher("round_robin").place(g, c), budget=120, move_weights=w)
        r.placement.check(g, c)
        assert sorted(r.placement.order.tolist()) == list(range(g.num_nodes))
        assert np.isfinite(r.makespan) and r.makespan <= r.start_makespan


def test_leaves_an_oom_start():
    # Everything on device 0 holds 20 param bytes on a 10-byte device; two per device fits.
    g = graph([1, 1, 1, 1], [[0, 1], [1, 2], [2, 3]], param_bytes=[5] * 4)
    c = unit_cluster(2, memory=10.0)
    start = placement([0, 0, 0, 0], [0, 1, 2, 3])
    assert simulate(g, c, start).oom
    r = anneal(g, c, start, budget=200)
    assert not simulate(g, c, r.placement).oom
    # No placement fits: the search still runs and returns a valid one.
    g3 = graph([1, 1, 1], [], param_bytes=[6] * 3)
    r = anneal(g3, c, placement([0, 1, 0], [0, 1, 2]), budget=50)
    r.placement.check(g3, c)
    assert r.makespan <= r.start_makespan
