"""Tables that never rank a failure: a placer over memory, one that splits a co-location
group and one that raises are recorded as infeasible rows (never a crash), marked in every
table, left out of ratios, geometric means and bests, counted per placer, and replay
checks the feasibility flag and the placement."""

import json
import re

import numpy as np
import pytest
from tiny_suite import GOOD, MEMORY, SPLIT, ZEROS, Fixed, hand_graph, memory_suite  # noqa: F401

from placegym.envs import Placement, simulate
from placegym.envs.analysis.bounds import lower_bound
from placegym.envs.suites import Instance
from placegym.envs.suites.reference import Reference, load_references, save_references
from placegym.train.cli import main
from placegym.train.harness import suite_bench
from placegym.train.harness.anytime import (
    SEARCH_PLACERS,
    Trace,
    feasible_runs,
    register_search_placer,
    run_anytime,
    solved_instances,
    write_anytime,
)
from placegym.train.harness.bench import BenchConfig, bench_markdown, ratios_figure, run_benchmark
from placegym.train.harness.feasibility import mark
from placegym.train.harness.replay import replay
from placegym.train.harness.suite_bench import run_suite, suite_markdown
from placegym.train.harness.suite_reference import best_known


def cells(line):
    """The cells of a markdown table row ([] for another line)."""
    return [c.strip() for c in line.strip()[1:-1].split("|")] if line.startswith("|") else []


def placement(graph, device):
    return Placement(device=np.array(device), order=graph.topological_order.copy())


def test_the_hand_instance_binds_as_designed():
    g, c = hand_graph("a")
    fast = simulate(g, c, placement(g, ZEROS))
    assert fast.oom and fast.infeasibility.startswith("out of memory on device 0")
    good = simulate(g, c, placement(g, GOOD))
    assert not good.oom and fast.makespan < good.makespan  # the failure is the fastest
    with pytest.raises(ValueError, match="splits co-location group 0"):
        simulate(g, c, placement(g, SPLIT))


class FlakyOnSeed1:
    """Over memory on seed 1, feasible on the others."""

    def __call__(self, graph, cluster, seed):
        return placement(graph, ZEROS if seed == 1 else GOOD)


class RaisesOnB:
    def __call__(self, graph, cluster, seed):
        if graph.name == "b":
            raise RuntimeError("no placement for b")
        return placement(graph, GOOD)


def tamper(src, dst, edit):
    doc = json.loads(src.read_text())
    edit(doc["records"])
    dst.write_text(json.dumps(doc))
    return dst


# ---------------------------------------------------------------------- workloads x clusters
@pytest.fixture
def bench_run(tmp_path):
    for name, scale in (("a", 1.0), ("b", 2.0)):
        g, c = hand_graph(name, scale)
        g.save(tmp_path / f"{name}.json")
    c.save(tmp_path / "unit.json")
    cfg = BenchConfig(
        teachers=["critical_path"],
        workloads=[str(tmp_path / "a.json"), str(tmp_path / "b.json")],
        clusters=[str(tmp_path / "unit.json")],
        seeds=[0, 1],
        out=tmp_path / "out",
        extra_placers={
            "oom": Fixed(GOOD, b=ZEROS),
            "split": Fixed(GOOD, b=SPLIT),
            "flaky": FlakyOnSeed1(),
            "raises": RaisesOnB(),
        },
    )
    return run_benchmark(cfg, progress=False), tmp_path / "out"


def test_bench_records_infeasible_rows_without_ratios(bench_run):
    records, _ = bench_run
    by = {(r.workload, r.seed, r.placer): r for r in records}
    oom = by[("b", 0, "oom")]
    assert not oom.feasible and oom.oom and oom.infeasible.startswith("out of memory")
    assert oom.makespan == pytest.approx(16.0) and oom.ratio_to_critical_path is None
    split = by[("b", 1, "split")]
    assert not split.feasible and split.makespan is None and split.device == SPLIT
    assert "splits co-location group 0" in split.infeasible and mark(split.infeasible) == "split"
    raised = by[("b", 0, "raises")]
    assert raised.infeasible == "placer raised RuntimeError: no placement for b"
    assert raised.device is None and mark(raised.infeasible) == "failed"
    ok = by[("a", 1, "oom")]
    assert ok.feasible and ok.infeasible is None and ok.ratio_to_critical_path > 0
    assert [by[("a", s, "flaky")].feasible for s in (0, 1)] == [True, False]


def test_bench_table_marks_failures_and_counts_feasible(bench_run):
    records, out = bench_run
    table = bench_markdown(records)
    rows = {c[0]: c for c in map(cells, table.splitlines()) if c}
    assert rows["workload"][2:] == ["critical_path", "oom", "split", "flaky", "raises"]
    # a: seed 0 every placer solved (aggregated, labelled), seed 1 on its own row
    a0 = rows["a (1 of 2 seeds every placer solved)"]
    assert a0[2].endswith("ms (1.00x)") and all(" ms (" in x for x in a0[3:])
    a1 = rows["a, seed 1"]
    assert a1[5] == "OOM" and all(" ms (" in a1[k] for k in (2, 3, 4, 6))
    # b: no seed every placer solved: one row per seed, each failure marked
    b0 = rows["b, seed 0"]
    assert [b0[3], b0[4], b0[6]] == ["OOM", "split", "failed"] and " ms (" in b0[5]
    assert rows["feasible"][2:] == ["4/4", "2/4", "2/4", "2/4", "2/4"]
    assert (out / "table.md").read_text().strip() == table
    csv_head = (out / "results.csv").read_text().splitlines()[0]
    assert csv_head.endswith("oom,seconds,calls,feasible,infeasible")
    fig = ratios_figure(records)  # marks, no bars, for the failures
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("OOM") == 4 and texts.count("split") == 2 and texts.count("failed") == 2


def test_bench_replay_checks_feasibility(bench_run):
    records, out = bench_run
    src = out / "results.json"
    assert replay(src) == (len(records), [])
    rows = json.loads(src.read_text())["records"]
    i = next(k for k, r in enumerate(rows) if (r["workload"], r["placer"]) == ("b", "oom"))

    def claims_feasible(recs):
        recs[i]["feasible"], recs[i]["infeasible"] = True, None

    n, bad = replay(tamper(src, out / "t1.json", claims_feasible))
    assert [m.row for m in bad] == [i]
    assert "recorded feasible, replays infeasible: out of memory" in bad[0].problem
    assert str(bad[0]).startswith(f"row {i} (b on unit, oom, seed 0): ")
    j = next(k for k, r in enumerate(rows) if (r["workload"], r["placer"]) == ("a", "oom"))

    def splits(recs):
        recs[j]["device"] = SPLIT

    (m,) = replay(tamper(src, out / "t2.json", splits))[1]
    assert m.row == j and "recorded feasible, replays infeasible" in m.problem
    assert "splits co-location group 0" in m.problem


# ---------------------------------------------------------------------- suites
def good_references(suite, placements=None):
    refs = {}
    for inst in suite.instances():
        dev = (placements or {}).get(inst.id, GOOD)
        p = placement(inst.graph, dev)
        s = simulate(inst.graph, inst.cluster, p)
        lb = lower_bound(inst.graph, inst.cluster)
        refs[inst.id] = Reference(
            "test", inst.digest, 8, 8, lb.value, lb.kind, s.makespan, "hand", False, False, p
        )
    return refs


@pytest.fixture
def suite_run(request, monkeypatch, tmp_path):
    request.getfixturevalue("memory_suite")
    refs = good_references(MEMORY)
    monkeypatch.setattr(suite_bench, "load_references", lambda name: refs)
    placers = {"oom": Fixed(GOOD, i0=ZEROS), "split": Fixed(GOOD, i1=SPLIT), "good": Fixed(GOOD)}
    recs = run_suite(
        MEMORY, "test", ["critical_path"], extra_placers=placers, out=tmp_path, progress=False
    )
    return recs, tmp_path


def test_suite_records_and_tables_never_rank_a_failure(suite_run):
    recs, _ = suite_run
    by = {(r.instance, r.placer): r for r in recs}
    oom = by[("i0@unit", "oom")]
    assert not oom.feasible and oom.makespan < oom.best_known  # faster than the best known,
    assert oom.gap_to_best is None and oom.gap_to_bound is None  # but never a new best
    assert oom.ratio_to_critical_path is None
    split = by[("i1@unit", "split")]
    assert (
        not split.feasible and split.makespan is None and "splits co-location" in split.infeasible
    )
    text = suite_markdown(recs)
    lines = {c[0]: c for c in map(cells, text.splitlines()) if c}
    # each placer over the instances it and critical_path solved: good over all three,
    # oom and split over their two (another placer's failure never empties a row)
    assert "Ratios, gaps and counts per placer over the instances that it and critical_path" in (
        " ".join(text.split())
    )
    good = [by[(i, "good")].ratio_to_critical_path for i in ("i0@unit", "i1@unit", "i2@unit")]
    assert lines["good"][1] == f"{np.exp(np.mean(np.log(good))):.3f}"
    assert lines["good"][7:] == ["3/3", "3/3"]
    oom = [by[(i, "oom")].ratio_to_critical_path for i in ("i1@unit", "i2@unit")]
    assert lines["oom"][1] == f"{np.exp(np.mean(np.log(oom))):.3f}"
    assert lines["oom"][7:] == ["2/3", "2/3"] and lines["split"][7:] == ["2/3", "2/3"]
    assert lines["oom"][4] == "2/2"  # within 1% of the best: over its own two instances
    # per instance: the failures are marks, never "new best"
    assert lines["i0@unit"][5] == "OOM" and "new best" not in text
    assert lines["i1@unit"][6] == "split"
    assert lines["feasible"][4:] == ["3/3", "2/3", "2/3", "3/3"]


def test_suite_replay_catches_tampered_feasibility_and_placements(suite_run):
    recs, out = suite_run
    src = out / "results.json"
    assert replay(src) == (len(recs), [])
    rows = json.loads(src.read_text())["records"]
    i = next(k for k, r in enumerate(rows) if (r["instance"], r["placer"]) == ("i0@unit", "oom"))
    j = next(k for k, r in enumerate(rows) if (r["instance"], r["placer"]) == ("i1@unit", "split"))
    g = next(k for k, r in enumerate(rows) if (r["instance"], r["placer"]) == ("i0@unit", "good"))

    def flag(recs):  # an over-memory row claims feasible
        recs[i]["feasible"] = True

    (m,) = replay(tamper(src, out / "a.json", flag))[1]
    assert m.row == i and "tiny-memory-v0/i0@unit, oom, seed 0" in str(m)
    assert "recorded feasible, replays infeasible: out of memory" in m.problem

    def unflag(recs):  # a feasible row claims it failed
        recs[g]["feasible"], recs[g]["infeasible"] = False, "out of memory (made up)"
        recs[g]["ratio_to_critical_path"] = recs[g]["gap_to_bound"] = None
        recs[g]["gap_to_best"] = None

    (m,) = replay(tamper(src, out / "b.json", unflag))[1]
    assert (
        m.row == g
        and "recorded infeasible (out of memory (made up)), replays feasible" in m.problem
    )

    def rejoined(recs):  # the split row's placement swapped for a feasible one
        recs[j]["device"] = GOOD

    (m,) = replay(tamper(src, out / "c.json", rejoined))[1]
    assert m.row == j and "replays feasible" in m.problem

    def moved(recs):  # a feasible row's placement now splits the group
        recs[g]["device"] = SPLIT

    (m,) = replay(tamper(src, out / "d.json", moved))[1]
    assert m.row == g and "splits co-location group 0" in m.problem

    def ranked(recs):  # an infeasible row given a ratio
        recs[i]["ratio_to_critical_path"] = 0.5

    (m,) = replay(tamper(src, out / "e.json", ranked))[1]
    assert m.row == i and "ratio_to_critical_path 0.5 recorded for an infeasible row" in m.problem


def test_cli_suite_bench_marks_and_replays(suite_run, capsys):
    _, out = suite_run
    assert main(["bench", "--replay", str(out / "results.json"), "--no-progress"]) == 0
    assert "12 rows re-simulated, 0 differ" in capsys.readouterr().out


# ---------------------------------------------------------------------- best known
@pytest.mark.usefixtures("memory_suite")
def test_an_infeasible_best_known_is_refused_naming_the_instance(monkeypatch, tmp_path):
    refs = good_references(MEMORY, {"i1@unit": ZEROS})
    monkeypatch.setattr(suite_bench, "load_references", lambda name: refs)
    with pytest.raises(ValueError, match=r"reference of instance 'i1@unit': the best-known "):
        run_suite(MEMORY, "test", ["critical_path"], progress=False)
    bad = {k: r for k, r in refs.items()}
    save_references(MEMORY.name, bad, tmp_path)
    doc = json.loads((tmp_path / "tiny-memory-v0.json").read_text())
    doc["instances"]["i1@unit"]["best_oom"] = True
    (tmp_path / "tiny-memory-v0.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"instances\['i1@unit'\]\.best_oom: the best-known"):
        load_references(MEMORY.name, tmp_path)


def test_computing_a_reference_keeps_only_feasible_placements():
    inst = MEMORY.instance("i0@unit")
    ref = best_known(inst, budget=40, seeds=(1,), optimal_time_limit=5.0)
    s = simulate(inst.graph, inst.cluster, ref.best_placement)
    assert not s.oom and not ref.best_oom and ref.best_makespan == s.makespan
    assert (
        ref.best_makespan
        > simulate(inst.graph, inst.cluster, placement(inst.graph, ZEROS)).makespan
    )
    graph, cluster = hand_graph("i0@unit", memory=1.0)  # nothing fits
    tight = Instance(MEMORY.name, "test", inst.spec, graph, cluster)
    with pytest.raises(ValueError, match=r"instance 'i0@unit': no feasible placement found"):
        best_known(tight, budget=40, seeds=(1,), optimal_time_limit=5.0)


# ---------------------------------------------------------------------- anytime
def fixed_search(maps):
    def search(graph, cluster, budget, seed, trace):
        p = Fixed(GOOD, **maps).place(graph, cluster)
        s = simulate(graph, cluster, p)
        trace.report(1, s.makespan, feasible=not s.oom)
        return p

    return search


def test_trace_counts_a_point_only_once_its_best_is_feasible():
    t = Trace(budget=10)
    t.report(1, 2.0, feasible=False)
    t.report(3, 2.0, feasible=False)
    t.report(5, 3.0)
    assert (t.calls, t.feasible) == ([1, 5], [False, True])
    np.testing.assert_array_equal(t.best_at(np.array([1, 4, 5])), [np.nan, np.nan, 3.0])


@pytest.mark.usefixtures("memory_suite")
def test_anytime_curves_over_instances_every_run_solved(tmp_path, capsys):
    def raises(graph, cluster, budget, seed, trace):
        if graph.name.startswith("i2"):
            raise RuntimeError("gave up")
        return fixed_search({})(graph, cluster, budget, seed, trace)

    register_search_placer("fixed_good", fixed_search({}))
    register_search_placer("fixed_oom", fixed_search({"i0": ZEROS}))
    register_search_placer("fixed_raises", raises)
    try:
        runs, _ = run_anytime(
            MEMORY, None, ["fixed_good", "fixed_oom"], budget=10, seeds=[0, 1], progress=False
        )
        assert solved_instances(runs) == (
            ["i1@unit", "i2@unit"],
            ["i0@unit", "i1@unit", "i2@unit"],
        )
        assert feasible_runs(runs) == {"fixed_good": "6/6", "fixed_oom": "4/6"}
        failed = [r for r in runs if not r.feasible]
        assert {r.instance for r in failed} == {"i0@unit"}
        assert failed[0].infeasible.startswith("out of memory")
        cv = write_anytime(runs, tmp_path, budget=10, normalizer="lower bound", title="t")
        rows = (tmp_path / "anytime_curve.csv").read_text().splitlines()
        assert rows[0].endswith(",instances,of") and rows[1].endswith(",2,3")
        # the curve of fixed_good: over i1 and i2 only (its i0 run is left out)
        want = np.exp(
            np.mean(
                [
                    np.log(r.trace.best[-1] / r.reference)
                    for r in runs
                    if r.placer == "fixed_good"
                    and r.seed == 0
                    and r.feasible
                    and r.instance != "i0@unit"
                ]
            )
        )
        assert cv["fixed_good"][0][-1] == pytest.approx(want)
        args = ["anytime", "--suite", "tiny-memory-v0", "--budget", "10", "--seeds", "0"]
        args += ["--placers", "fixed_good,fixed_raises", "--out", str(tmp_path / "cli")]
        assert main([*args, "--no-progress"]) == 0
        printed = capsys.readouterr().out
        assert "geometric mean over 2 of 3 instances every placer solved" in printed
        assert "| fixed_raises |" in printed and "| 2/3 |" in printed
        assert "infeasible: i2@unit, fixed_raises, seed 0: placer raised RuntimeError" in printed
    finally:
        for name in ("fixed_good", "fixed_oom", "fixed_raises"):
            SEARCH_PLACERS.pop(name)


def test_cli_bench_marks_and_lists_the_failures(tmp_path, capsys):
    g, c = hand_graph("a")
    g.save(tmp_path / "a.json")
    c.save(tmp_path / "unit.json")
    args = ["bench", "--teachers", "critical_path,single_device", "--no-progress"]
    args += ["--workloads", str(tmp_path / "a.json"), "--cluster", str(tmp_path / "unit.json")]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"\| a \| unit \| [\d.]+ ms \(1\.00x\) \| OOM \|", printed)  # unranked
    assert "| feasible | | 1/1 | 0/1 |" in printed
    assert "infeasible: a on unit, single_device, seed 0: out of memory on device 0" in printed
    assert main(["bench", "--replay", str(tmp_path / "out" / "results.json")]) == 0
