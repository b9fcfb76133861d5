"""Anytime curves: the Trace contract, the built-in searches (same start, within budget,
honest final placement), a registered search placer, outputs and the CLI."""

import numpy as np
import pytest
from simcases import unit_cluster
from tiny_suite import TINY, tiny  # noqa: F401 (fixture)

from placegym.envs import Graph, Placement, simulate
from placegym.envs.workloads.training import to_training_step
from placegym.train.cli import main
from placegym.train.harness.anytime import (
    SEARCH_PLACERS,
    Trace,
    anneal_search,
    call_grid,
    random_search,
    register_search_placer,
    run_anytime,
    score_starts,
    write_anytime,
)
from placegym.train.harness.anytime_report import versus


def test_trace_contract():
    t = Trace(budget=10)
    t.report(2, 5.0)
    t.report(3, 5.0)  # no change: not recorded
    t.report(7, 4.0)
    assert (t.calls, t.best) == ([2, 7], [5.0, 4.0])
    np.testing.assert_array_equal(t.best_at(np.array([1, 2, 6, 7, 10])), [np.nan, 5, 5, 4, 4])
    assert len(t.seconds) == 2 and 0 <= t.seconds[0] <= t.seconds[1]
    t.seconds = [0.5, 2.0]  # read at wall seconds: the best reported by then
    np.testing.assert_array_equal(
        t.best_at_seconds(np.array([0.1, 0.5, 1.9, 2.5])), [np.nan, 5, 5, 4]
    )
    with pytest.raises(ValueError, match=r"trace: 11 calls reported, over the budget of 10"):
        t.report(11, 3.0)
    with pytest.raises(ValueError, match=r"trace: calls went back from 7 to 6"):
        t.report(6, 3.0)
    assert call_grid(3000)[0] == 1 and call_grid(3000)[-1] == 3000


@pytest.mark.parametrize("search", [anneal_search, random_search])
def test_builtin_searches_share_the_start_and_respect_the_budget(search):
    inst = TINY.instance("dag-ccr4@doppler-unit-4")
    traces = []
    for seed in (0, 1):
        t = Trace(budget=200)
        p = search(inst.graph, inst.cluster, 200, seed, t)
        assert t.calls[-1] <= 200 and t.calls == sorted(t.calls)
        assert simulate(inst.graph, inst.cluster, p).makespan == t.best[-1]
        traces.append(t)
    assert traces[0].best_at(np.array([5]))[0] == traces[1].best_at(np.array([5]))[0]
    again = Trace(budget=200)
    search(inst.graph, inst.cluster, 200, 1, again)
    assert (again.calls, again.best) == (traces[1].calls, traces[1].best)


@pytest.mark.parametrize("search", [anneal_search, random_search])
def test_builtin_searches_keep_groups_whole_where_memory_binds(search):
    from placegym.envs.core.placement import split_group
    from placegym.envs.suites import get_suite

    inst = get_suite("memory-tight-v0").instance("random_dag-128-s101@v100x8-mem0.7-r1-2")
    g, c = inst.graph, inst.cluster
    assert g.groups
    t = Trace(budget=300)
    p = search(g, c, 300, 0, t)  # random draws cover every group: none is split
    assert split_group(g, p.device[None]) is None and not simulate(g, c, p).oom


def test_registered_search_placer_and_honesty_check(tiny):  # noqa: F811
    def first_start(graph, cluster, budget, seed, trace):
        p = Placement(device=np.zeros(graph.num_nodes, dtype=int), order=graph.topological_order)
        trace.report(1, simulate(graph, cluster, p).makespan)
        return p

    def liar(graph, cluster, budget, seed, trace):
        p = first_start(graph, cluster, budget, seed, Trace(budget))
        trace.report(1, 1e-9)
        return p

    register_search_placer("one_device", first_start)
    register_search_placer("liar", liar)
    try:
        runs, norm = run_anytime(
            tiny, None, ["one_device", "random_search"], budget=40, seeds=[0, 1], progress=False
        )
        assert norm == "lower bound" and len(runs) == 2 * 2 * 2
        assert all(r.trace.best[-1] >= r.reference for r in runs)
        with pytest.raises(ValueError, match=r"liar on dag@p100x4: reported best 1e-09 but"):
            run_anytime(tiny, "train", ["liar"], budget=40, seeds=[0], progress=False)
    finally:
        SEARCH_PLACERS.pop("one_device")
        SEARCH_PLACERS.pop("liar")
    with pytest.raises(ValueError, match=r"placers: unknown search placer 'nope'"):
        run_anytime(tiny, "train", ["nope"], budget=40, seeds=[0], progress=False)
    with pytest.raises(ValueError, match=r"budget: must be >= 5 \(the heuristic starts\), got 3"):
        run_anytime(tiny, "train", ["anneal"], budget=3, seeds=[0], progress=False)


def test_outputs_and_cli(tiny, tmp_path, capsys):  # noqa: F811
    runs, norm = run_anytime(
        tiny, "test", ["anneal", "random_search"], budget=120, seeds=[0, 1, 2], progress=False
    )
    cv = write_anytime(runs, tmp_path, budget=120, normalizer=norm, title="t")
    mean_a, _ = cv["anneal"]
    mean_r, std_r = cv["random_search"]
    assert mean_a[-1] <= mean_a[np.isfinite(mean_a)][0] and mean_a[-1] >= 1.0
    for name in ("anytime.csv", "anytime_curve.csv", "anytime.png"):
        assert (tmp_path / name).stat().st_size > 0
    header = (tmp_path / "anytime_curve.csv").read_text().splitlines()[0]
    assert header == "placer,calls,mean_ratio,std_ratio,normalizer,instances,of"
    out = tmp_path / "cli"
    args = ["anytime", "--suite", "tiny-v0", "--budget", "60", "--seeds", "0,1"]
    assert main([*args, "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| anneal |" in printed and "| random_search |" in printed and "60 calls" in printed
    assert (out / "anytime.png").exists()


def _run(placer, instance, seed, calls, best, seconds, final_seconds):
    from placegym.train.harness.anytime import AnytimeRun

    t = Trace(budget=calls[-1])
    t.calls, t.best, t.feasible, t.seconds = calls, best, [True] * len(best), seconds
    return AnytimeRun(instance, placer, seed, t, 1.0, None, final_seconds, calls[-1])


def test_versus_reads_each_run_at_the_baselines_calls_and_seconds():
    runs = [
        _run("anneal", "a", 0, [5, 100], [2.0, 1.5], [0.1, 1.0], 1.0),
        _run("anneal", "b", 0, [5, 100], [2.0, 1.0], [0.1, 1.0], 1.0),
        # ends faster than anneal on a, but only after anneal's second: at equal calls, not
        # equal seconds
        _run("warm", "a", 0, [5, 80], [2.0, 1.4], [0.1, 1.5], 1.6),
        # never reaches anneal's 1.0 on b
        _run("warm", "b", 0, [5, 50], [2.0, 1.2], [0.5, 0.6], 0.7),
        _run("fast", "a", 0, [5, 200], [1.5, 1.4], [0.05, 3.0], 3.0),  # at once as good
    ]
    table = versus(runs, "anneal")
    assert list(table) == ["warm", "fast"]
    warm, fast = table["warm"], table["fast"]
    assert (warm.at_calls, warm.at_seconds, warm.pairs) == (1, 0, 2)
    assert warm.instances == {"a": (1, 0, 1), "b": (0, 0, 1)}
    assert (fast.at_calls, fast.at_seconds, fast.pairs) == (1, 1, 1)
    assert fast.share("seconds") == 1.0 and warm.share("calls") == 0.5
    with pytest.raises(ValueError, match=r"baseline: no run of 'heft' to compare with"):
        versus(runs, "heft")


def test_anneal_warm_started_by_a_proposal_starts_from_it():
    inst = TINY.instance("dag-ccr4@doppler-unit-4")
    g, c = inst.graph, inst.cluster
    cold = Trace(budget=60)
    anneal_search(g, c, 60, 0, cold)
    good = anneal_search(g, c, 2000, 0, Trace(2000))
    best = simulate(g, c, good).makespan
    assert best < cold.best[0]
    seen = []

    def proposals(graph, cluster, starts):  # made inside the run: its calls would count
        seen.append(sorted(starts))
        return [good]

    warm = Trace(budget=60)
    anneal_search(g, c, 60, 0, warm, proposals=proposals)
    assert seen == [sorted(["critical_path", "heft", "nest", "metis", "round_robin"])]
    assert warm.best[0] == pytest.approx(best) and warm.best[-1] <= best


def test_an_agents_policy_search_is_a_search_placer(tiny, tmp_path):  # noqa: F811
    from test_train_run import tiny_config

    from placegym.train.harness.agent_search import agent_anneal_placer, agent_search_placer
    from placegym.train.trainer import Trainer

    Trainer(tiny_config(tmp_path, phases=["phase1"])).run()
    name, placer = agent_search_placer(tmp_path / "run" / "checkpoints" / "final.pt")
    assert name == "tiny-search"
    register_search_placer(name, placer)
    try:
        runs, _ = run_anytime(tiny, "test", [name], budget=40, seeds=[0, 1], progress=False)
    finally:
        SEARCH_PLACERS.pop(name)
    assert all(r.trace.calls[-1] <= 40 and r.trace.best[-1] >= r.reference for r in runs)
    name, placer = agent_anneal_placer(tmp_path / "run" / "checkpoints" / "final.pt")
    assert name == "tiny-anneal"
    register_search_placer(name, placer)
    try:
        runs, _ = run_anytime(tiny, "test", ["anneal", name], budget=40, seeds=[0], progress=False)
    finally:
        SEARCH_PLACERS.pop(name)
    table = versus(runs, "anneal")[name]
    assert table.pairs == len(runs) // 2 and table.at_calls <= table.pairs
    assert all(r.trace.calls[-1] <= 40 for r in runs)


def test_a_placer_with_a_check_refuses_before_any_run(tiny):  # noqa: F811
    ran = []

    def picky(graph, cluster, budget, seed, trace):
        ran.append(graph.name)
        raise AssertionError("ran")

    def check(graph, cluster, budget):
        if budget < 100:
            raise ValueError(f"budget: expected >= 100 on {graph.name!r}, got {budget}")

    picky.check = check
    register_search_placer("picky", picky)
    try:
        with pytest.raises(ValueError, match=r"budget: expected >= 100 on '.+', got 40"):
            run_anytime(tiny, None, ["anneal", "picky"], budget=40, seeds=[0], progress=False)
    finally:
        SEARCH_PLACERS.pop("picky")
    assert ran == []


class HandleSearch:
    """Random device maps, one batch of 5 then one at a time: the handle draws the curve."""

    name = "handle_search"

    def __init__(self, worse=False, greedy=False):
        self.worse, self.greedy = worse, greedy

    def search(self, graph, cluster, sim, seed):
        rng = np.random.default_rng(seed)
        n, d = graph.num_nodes, cluster.num_devices
        order = graph.topological_order
        sim.batch(rng.integers(d, size=(5, n)), np.tile(order, (5, 1)))
        worst = (0.0, None)
        while sim.remaining or self.greedy:
            p = Placement(device=rng.integers(d, size=n), order=order)
            worst = max(worst, (sim.simulate(p).makespan, p), key=lambda x: x[0])
        return worst[1] if self.worse else sim.best


def test_a_search_placer_object_gets_its_curve_from_the_handle(tiny):  # noqa: F811
    register_search_placer("handle", HandleSearch())
    register_search_placer("one_pass", _OnOne())
    register_search_placer("greedy", HandleSearch(greedy=True))
    try:
        runs, _ = run_anytime(
            tiny, None, ["handle", "one_pass", "greedy"], budget=20, seeds=[0], progress=False
        )
    finally:
        for name in ("handle", "one_pass", "greedy"):
            SEARCH_PLACERS.pop(name)
    by = {(r.placer, r.instance): r for r in runs}
    for inst in ("dag@p100x4", "dag-ccr4@doppler-unit-4"):
        run = by[("handle", inst)]
        assert run.feasible and run.calls == 20 and run.trace.calls[0] == 5
        assert run.trace.calls == sorted(run.trace.calls) and run.trace.calls[-1] <= 20
        assert run.trace.best == sorted(run.trace.best, reverse=True)
        one = by[("one_pass", inst)]
        assert one.trace.calls == [0] and one.calls == 0 and one.feasible
        stopped = by[("greedy", inst)]
        assert not stopped.feasible and stopped.calls == 20
        assert (
            stopped.infeasible == "over budget: stopped at 20 of 20 simulator calls (1 more asked)"
        )
    register_search_placer("worse", HandleSearch(worse=True))
    try:
        with pytest.raises(ValueError, match=r"worse on dag@p100x4: returned a placement taking"):
            run_anytime(tiny, "train", ["worse"], budget=20, seeds=[0], progress=False)
    finally:
        SEARCH_PLACERS.pop("worse")
    with pytest.raises(ValueError, match=r"placer 'int': not a Placer"):
        register_search_placer("bad", 3)


class _OnOne:
    def place(self, graph, cluster, seed):
        return Placement(
            device=np.zeros(graph.num_nodes, dtype=int), order=graph.topological_order
        )


def test_the_budget_is_a_hard_cap_on_every_search(tiny):  # noqa: F811
    def spender(graph, cluster, budget, seed, trace):  # ignores its budget
        p = _OnOne().place(graph, cluster, seed)
        for calls in range(1, 10 * budget):
            trace.report(min(calls, budget), simulate(graph, cluster, p).makespan)
        return p

    def hider(graph, cluster, budget, seed, trace):  # spends inside a teacher, reports 1
        from placegym.teachers import get_teacher

        p = get_teacher("anneal", budget=budget).place(graph, cluster)
        trace.report(1, simulate(graph, cluster, p).makespan)
        return p

    def returns_none(graph, cluster, budget, seed, trace):
        return None

    for name, fn in (("spender", spender), ("hider", hider), ("none", returns_none)):
        register_search_placer(name, fn)
    try:
        runs, _ = run_anytime(
            tiny, "test", ["spender", "hider", "none"], budget=30, seeds=[0], progress=False
        )
    finally:
        for name in ("spender", "hider", "none"):
            SEARCH_PLACERS.pop(name)
    by = {r.placer: r for r in runs}
    for name in ("spender", "hider"):
        assert not by[name].feasible and by[name].calls == 30
        assert by[name].infeasible.startswith("over budget: stopped at ")
    assert by["none"].infeasible == "placer returned NoneType, not a Placement"


def test_the_builtin_searches_count_every_call_within_the_budget():
    from placegym.envs.suites import get_suite

    # memory binds: the memory-aware starts simulate inside (counted), some start is
    # over memory (the check whether any fits is counted too)
    runs, _ = run_anytime(
        get_suite("memory-tight-v0"),
        "test",
        ["anneal", "random_search"],
        budget=300,
        seeds=[0],
        progress=False,
    )
    assert len(runs) == 24 and all(r.feasible for r in runs)
    assert max(r.calls for r in runs) == 300  # was 305 to 319 before
    assert all(r.trace.calls[-1] <= r.calls <= 300 for r in runs)
    first = {r.trace.calls[0] for r in runs if r.placer == "random_search"}
    assert min(first) > 1  # the starts' own simulations come first


def test_starts_are_scored_with_their_own_recompute_sets():
    # the training step of a 3-layer chain on two devices of 75 B: only recomputing
    # layer 0 fits (test_recompute), and a start that does must not be scored as over

    g = Graph(flops=[1.0] * 3, out_bytes=[10, 20, 30], param_bytes=[5] * 3, edges=[[0, 1], [1, 2]])
    t = to_training_step(g, optimizer="sgd")
    c = unit_cluster(2, bandwidth=100.0, memory=75.0)
    plain = Placement(np.array([0, 0, 1, 0, 0, 1]), t.topological_order.copy())
    relieved = Placement(plain.device, plain.order, recompute=[0])
    makespan, oom = score_starts(t, c, [plain, relieved, plain])
    assert oom.tolist() == [True, False, True]
    assert makespan.tolist() == [simulate(t, c, p).makespan for p in (plain, relieved, plain)]
