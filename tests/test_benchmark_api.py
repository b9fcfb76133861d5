"""``placegym.benchmark``: the Placer and SearchPlacer protocols, the budgeted simulator
handle, counted simulator calls, ``evaluate`` and its results."""

import contextlib
import re
import sys

import numpy as np
import pytest
from tiny_suite import GOOD, ZEROS, Fixed, hand_graph, memory_suite, tiny  # noqa: F401

import placegym.envs
import placegym.envs.sim.simulator as simulator_module
from placegym.benchmark import (
    BestOf,
    BudgetExceeded,
    Placer,
    SearchPlacer,
    Simulator,
    as_placer,
    counting,
    evaluate,
    with_budget,
)
from placegym.envs import Placement, simulate
from placegym.envs import simulate_batch as batch_alias
from placegym.teachers import get_teacher
from placegym.train.harness.bench import BenchConfig, bench_markdown, run_benchmark
from placegym.train.harness.calls import uncounted
from placegym.train.harness.feasibility import mark


def cells(line):
    return [c.strip() for c in line.strip()[1:-1].split("|")] if line.startswith("|") else []


def summary(table):
    """The summary table's rows by placer."""
    head = table.split("\n\n")[0]
    return {c[0]: c for c in map(cells, head.splitlines()) if c}


def one_device(graph):
    return Placement(device=np.zeros(graph.num_nodes, dtype=int), order=graph.topological_order)


class NineCalls:
    """Exactly 9 simulator calls per placement, through every entry point and import
    style: 2 ``simulate`` (package name, module attribute), 1 ``simulate_makespan``, one
    ``simulate_batch`` of 4 (an alias) and one of 2."""

    name = "nine"

    def place(self, graph, cluster, seed):
        p = one_device(graph)
        simulate(graph, cluster, p)
        placegym.envs.sim.simulator.simulate(graph, cluster, p)
        placegym.envs.simulate_makespan(graph, cluster, p)
        devs, ords = np.tile(p.device, (4, 1)), np.tile(p.order, (4, 1))
        batch_alias(graph, cluster, devs, ords)
        simulator_module.simulate_batch(graph, cluster, devices=devs[:2], orders=ords[:2])
        return p


class Exhaustive:
    """Simulates random placements one by one until stopped (catches nothing)."""

    def search(self, graph, cluster, sim, seed):
        rng = np.random.default_rng(seed)
        while True:
            devices = rng.integers(cluster.num_devices, size=graph.num_nodes)
            sim.simulate(Placement(devices, graph.topological_order))


class Polite:
    """Spends exactly its budget in batches of at most 8, returns the best seen."""

    def search(self, graph, cluster, sim, seed):
        rng = np.random.default_rng(seed)
        n, d = graph.num_nodes, cluster.num_devices
        while sim.remaining:
            k = min(8, sim.remaining)
            sim.batch(rng.integers(d, size=(k, n)), np.tile(graph.topological_order, (k, 1)))
        return sim.best


class Swallows:
    """Catches the budget's refusal and returns a placement anyway."""

    def search(self, graph, cluster, sim, seed):
        with contextlib.suppress(BudgetExceeded):
            Exhaustive().search(graph, cluster, sim, seed)
        return sim.best


def test_protocols_and_adapters():
    heft = get_teacher("heft")
    assert isinstance(heft, Placer) and isinstance(NineCalls(), Placer)
    assert isinstance(Polite(), SearchPlacer) and not isinstance(Polite(), Placer)
    adapted = as_placer(heft)  # place(graph, cluster): the seed is not passed
    g, c = hand_graph("a")
    assert adapted.name == "heft"
    np.testing.assert_array_equal(adapted.place(g, c, 7).device, heft.place(g, c).device)
    fn = as_placer(lambda graph, cluster, seed: one_device(graph))
    assert list(fn.place(g, c, 0).device) == [0] * 8
    assert as_placer(NineCalls()).name == "nine"
    with pytest.raises(ValueError, match=r"placer 'Polite': a SearchPlacer needs a budget"):
        as_placer(Polite())
    with pytest.raises(ValueError, match=r"placer 'NineCalls': a class, not a placer"):
        as_placer(NineCalls)
    with pytest.raises(ValueError, match=r"placer 'int': not a Placer \(no place\(graph"):
        as_placer(3)
    with pytest.raises(ValueError, match=r"budget: must be an integer >= 1 .*, got 0"):
        with_budget(Polite(), 0)


def test_counting_every_entry_point_nested_and_restored():
    g, c = hand_graph("a")
    with counting() as outer:
        with counting(budget=20) as inner:
            NineCalls().place(g, c, 0)
            with uncounted():
                simulate(g, c, one_device(g))
        NineCalls().place(g, c, 0)
    assert (inner.calls, outer.calls) == (9, 18)
    with counting(budget=10) as tight:
        simulate(g, c, one_device(g))
        with pytest.raises(BudgetExceeded, match=r"stopped at 1 of 10 simulator calls \(16"):
            batch_alias(g, c, np.zeros((16, 8), dtype=int), np.tile(g.topological_order, (16, 1)))
    assert tight.calls == 1 and tight.exceeded  # the refused batch simulated nothing
    from placegym.envs.analysis.memory import checkpoints
    from placegym.envs.suites import get_suite

    step = get_suite("training-v0").instance("moe-8x2x4-s0-train@v100x8-mem0.6-r1-2")
    sg, sc = step.graph, step.cluster
    with counting() as rows:  # with a recompute set the batch simulates row by row inside
        devs = np.zeros((3, sg.num_nodes), dtype=int)
        ords = np.tile(sg.topological_order, (3, 1))
        batch_alias(sg, sc, devs, ords, recompute=checkpoints(sg, 2))
    assert rows.calls == 3
    # the originals are back everywhere, in modules that imported them by name too
    import placegym.teachers.anneal as anneal

    assert not hasattr(simulator_module.simulate, "__wrapped__")
    assert anneal.simulate_batch is simulator_module.simulate_batch
    assert placegym.envs.simulate is simulator_module.simulate


def test_the_calls_column_counts_a_placers_simulations_only(tiny):  # noqa: F811
    res = evaluate(NineCalls(), suite=tiny, split=None, seeds=[0, 1], teachers=["heft"])
    calls = {(r.placer, r.instance, r.seed): r.calls for r in res}
    assert len(calls) == 3 * 2 * 2
    assert {v for (p, _, _), v in calls.items() if p == "nine"} == {9}
    assert {v for (p, _, _), v in calls.items() if p != "nine"} == {0}  # evaluation: free
    rows = summary(res.table())
    assert rows["placer"][5:7] == ["time", "calls"]
    assert rows["nine"][6] == "36" and rows["heft"][6] == "0"
    cfg = BenchConfig(["critical_path"], ["chainmm"], extra_placers={"n": NineCalls()})
    bench = run_benchmark(cfg, progress=False)
    assert [r.calls for r in bench] == [0, 9]
    line = next(x for x in bench_markdown(bench).splitlines() if x.startswith("| simulator calls"))
    assert cells(line)[2:] == ["0", "9"]


def test_a_teacher_counts_its_internal_simulations():
    from placegym.teachers.anneal import STARTS

    g, c = hand_graph("a")
    inside = 0
    for name in STARTS:  # what the starts simulate inside (memory binds here)
        with counting() as k:
            get_teacher(name).place(g, c)
        inside += k.calls
    assert inside > len(STARTS)
    with counting() as n:
        get_teacher("anneal", budget=60).place(g, c)
    assert n.calls == 60 + inside  # its own budget (starts scored included) and theirs


def test_a_search_over_its_budget_is_stopped_and_reported(tiny):  # noqa: F811
    placers = {"exhaustive": Exhaustive(), "polite": Polite(), "swallows": Swallows()}
    res = evaluate(placers, suite=tiny, split="train", seeds=[0, 1], budget=30)
    by = {(r.placer, r.seed): r for r in res}
    for name in ("exhaustive", "swallows"):
        for seed in (0, 1):
            r = by[(name, seed)]
            assert not r.feasible and r.infeasible.startswith("over budget")
            assert mark(r.infeasible) == "budget" and r.calls == 30
            assert r.makespan is None and r.device is None and r.ratio_to_critical_path is None
    assert "(1 more asked)" in by[("exhaustive", 0)].infeasible
    assert "went on after its 30 simulator calls were spent" in by[("swallows", 0)].infeasible
    polite = by[("polite", 0)]
    assert polite.feasible and polite.calls == 30 and polite.makespan > 0
    rows = summary(res.table())
    assert rows["exhaustive"][7:] == ["0/2", "0/2"] and rows["polite"][7:] == ["2/2", "2/2"]
    per_instance = res.table().split("\n\n")[-1]
    assert "| budget | 0/2" not in per_instance and "budget" in per_instance


def test_a_one_pass_placer_under_a_budget_is_stopped_at_it(tiny):  # noqa: F811
    res = evaluate(get_teacher("anneal"), suite=tiny, split="train", budget=100, teachers=())
    (r,) = [r for r in res if r.placer == "anneal"]
    m = re.fullmatch(
        r"over budget: stopped at (\d+) of 100 simulator calls \((\d+) more asked\)", r.infeasible
    )
    assert int(m[1]) == r.calls <= 100 < r.calls + int(m[2])  # anneal asks in batches
    with pytest.raises(ValueError, match=r"placer 'Polite': a SearchPlacer needs a budget"):
        evaluate(Polite(), suite=tiny, split="train")


def test_the_simulator_handle_keeps_the_best_and_refuses_a_batch_whole():
    g, c = hand_graph("a")
    reports = []
    with counting(budget=5) as counter:
        sim = Simulator(g, c, counter, on_best=lambda *a: reports.append(a))
        fast_oom = sim.simulate(Placement(ZEROS, g.topological_order))
        good = Placement(GOOD, g.topological_order)
        devs = np.array([GOOD, ZEROS, GOOD])
        res = sim.batch(devs, np.tile(g.topological_order, (3, 1)))
        assert sim.calls == 4 and sim.remaining == 1
        with pytest.raises(BudgetExceeded):
            sim.batch(devs[:2], np.tile(g.topological_order, (2, 1)))
        assert sim.calls == 4
    assert fast_oom.oom and not res.oom[0]
    assert list(sim.best.device) == GOOD and sim.best_feasible
    assert sim.best_makespan == simulate(g, c, good).makespan
    assert reports == [(1, fast_oom.makespan, False), (4, sim.best_makespan, True)]


def test_best_of_keeps_groups_then_memory_then_speed():
    g, c = hand_graph("a")
    split = Fixed([0, 0, 0, 0, 1, 1, 1, 1])
    pick = BestOf([split, Fixed(ZEROS), Fixed(GOOD)], name="best")
    assert list(pick.place(g, c, 0).device) == GOOD  # the fastest, ZEROS, is over memory
    assert list(BestOf([Fixed(ZEROS), split], name="b").place(g, c, 0).device) == ZEROS
    first = BestOf([Fixed(GOOD), Fixed(list(GOOD))], name="tie").place(g, c, 0)
    assert list(first.device) == GOOD
    with counting() as n:
        pick.place(g, c, 0)
    assert n.calls == 3  # comparing the candidates is the placer's cost


def test_results_table_save_and_pandas(tiny, tmp_path, monkeypatch):  # noqa: F811
    from placegym.train.harness.replay import replay

    def fixed(graph, cluster, seed):
        return one_device(graph)

    res = evaluate(fixed, suite=tiny)
    assert res.placers() == ["critical_path", "fixed"] and len(res) == 2
    assert re.search(r"\| fixed \| [\d.]+ \|", res.table())
    assert replay(res.save(tmp_path / "r.json")) == (2, [])
    folder = res.save(tmp_path / "run")
    assert folder == tmp_path / "run" / "results.json"
    assert {p.name for p in (tmp_path / "run").iterdir()} == {
        "results.json",
        "results.csv",
        "table.md",
    }
    df = res.to_pandas()
    assert list(df["placer"]) == ["critical_path", "fixed"] and "calls" in df.columns
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"to_pandas: pandas is not installed"):
        res.to_pandas()


def test_the_guides_example_placer_runs(tiny):  # noqa: F811
    import placegym.benchmark

    doc = placegym.benchmark.__doc__
    block = doc[doc.index("    import numpy as np") : doc.index("A search with a budget")]
    scope: dict = {}
    exec(compile("\n".join(x[4:] for x in block.splitlines()), "guide", "exec"), scope)
    res = evaluate(scope["LeastLoaded"](), suite=tiny, split=None)
    assert [r.feasible for r in res if r.placer == "least_loaded"] == [True, True]


# ---------------------------------------------------------------------- no placement
@pytest.mark.parametrize(
    ("returned", "kind"),
    [(None, "NoneType"), (np.zeros(30, dtype=int), "ndarray"), ({"device": [0]}, "dict")],
    ids=["none", "array", "dict"],
)
def test_a_placer_returning_no_placement_fails_its_rows_and_the_run_goes_on(
    tiny,  # noqa: F811
    returned,
    kind,
):
    def bad(graph, cluster, seed):
        return returned

    def fixed(graph, cluster, seed):
        return one_device(graph)

    res = evaluate({"bad": bad, "fixed": fixed}, suite=tiny, split=None)
    why = f"placer returned {kind}, not a Placement"
    rows = [r for r in res if r.placer == "bad"]
    assert len(rows) == 2 and all(
        not r.feasible and r.infeasible == why and r.makespan is None and r.device is None
        for r in rows
    )
    assert all(r.feasible for r in res if r.placer != "bad")
    table = summary(res.table())
    assert table["bad"][1] == "n/a" and table["bad"][7:] == ["0/2", "0/2"]
    assert table["fixed"][1] != "n/a" and table["fixed"][7:] == ["2/2", "2/2"]
    cfg = BenchConfig(["critical_path"], ["chainmm"], extra_placers={"bad": bad})
    (_, rec) = run_benchmark(cfg, progress=False)
    assert (rec.feasible, rec.infeasible, rec.makespan) == (False, why, None)
    assert cells(bench_markdown([rec]).splitlines()[2])[2] == "failed"


def test_best_of_never_picks_a_candidate_that_is_no_placement():
    g, c = hand_graph("a")
    best = BestOf([lambda g, c, s: None, lambda g, c, s: one_device(g)], name="b")
    assert best.place(g, c, 0).device.tolist() == [0] * 8


def test_the_harness_places_on_one_torch_thread_and_restores_the_callers(tiny):  # noqa: F811
    torch = pytest.importorskip("torch")
    seen = []

    def probe(graph, cluster, seed):
        seen.append(torch.get_num_threads())
        return one_device(graph)

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        evaluate(probe, suite=tiny, split="test")
        evaluate(probe, suite=tiny, split="test", torch_threads=2)
        evaluate(probe, suite=tiny, split="test", torch_threads=None)
        assert seen == [1, 2, 3] and torch.get_num_threads() == 3
        with pytest.raises(ValueError, match=r"torch_threads: must be an integer >= 1 or None"):
            evaluate(probe, suite=tiny, split="test", torch_threads=0)
    finally:
        torch.set_num_threads(before)
