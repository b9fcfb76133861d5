"""``placegym bench --suite``: records with placements and gaps, tables, the CLI; replay
passes on real output and fails, naming the row, on tampered copies."""

import json

import pytest
from tiny_suite import tiny  # noqa: F401 (fixture)

from placegym.envs.suites import get_suite
from placegym.envs.suites.reference import load_references
from placegym.train.cli import main
from placegym.train.harness.bench import BenchConfig, run_benchmark
from placegym.train.harness.replay import replay
from placegym.train.harness.suite_bench import run_suite, suite_markdown


def test_records_gaps_and_placements(tiny, tmp_path):  # noqa: F811
    recs = run_suite(tiny, None, ["heft", "random"], seeds=[0, 1], out=tmp_path, progress=False)
    assert len(recs) == 2 * 2 * 3  # instances x seeds x (heft, random + critical_path)
    assert {r.placer for r in recs} == {"heft", "random", "critical_path"}
    for r in recs:
        assert r.gap_to_bound >= 0 and r.best_known is None and r.gap_to_best is None
        assert r.gap_to_bound == pytest.approx(r.makespan / r.lower_bound - 1)
        assert len(r.device) == len(r.order) == r.nodes
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["format"] == "placegym.suite-results/v1" and len(doc["records"]) == 12
    assert "device" not in (tmp_path / "results.csv").read_text().splitlines()[0]
    assert replay(tmp_path / "results.json") == (12, [])


def test_real_suite_with_best_known(tmp_path):
    suite = get_suite("workloads-v0")
    refs = load_references(suite.name)
    recs = run_suite(suite, "test", ["heft"], out=tmp_path, progress=False)
    assert len(recs) == 24
    for r in recs:
        assert r.best_known == refs[r.instance].best_makespan
        assert r.gap_to_best == pytest.approx(r.makespan / r.best_known - 1)
        assert r.lower_bound <= r.best_known <= r.makespan * (1 + 1e-9)
    table = suite_markdown(recs)
    assert table.splitlines()[0].startswith("| placer | ratio to critical_path (geo. mean)")
    assert table.splitlines()[0].endswith("| feasible | compared |")
    assert table.splitlines()[2].endswith("| 12/12 | 12/12 |")  # critical_path
    assert "Ratios, gaps and counts over the 12 of 12 instances every placer solved;" in table
    assert "| ffnn-2x4x4@v100x8 | 176 |" in table


def tamper(src, dst, edit):
    doc = json.loads(src.read_text())
    edit(doc["records"])
    dst.write_text(json.dumps(doc))
    return dst


def test_replay_fails_on_tampered_copies(tiny, tmp_path):  # noqa: F811
    run_suite(tiny, "test", ["heft", "random"], out=tmp_path, progress=False)
    src = tmp_path / "results.json"
    rows = json.loads(src.read_text())["records"]
    i = next(k for k, r in enumerate(rows) if r["placer"] == "random")

    def faster(recs):
        recs[i]["makespan"] *= 0.8

    n, bad = replay(tamper(src, tmp_path / "a.json", faster))
    assert n == 3 and [m.row for m in bad] == [i]
    assert str(bad[0]).startswith(f"row {i} (tiny-v0/dag-ccr4@doppler-unit-4, random, seed 0): ")
    assert "makespan recorded" in bad[0].problem

    def moved(recs):
        recs[i]["device"][0] = (recs[i]["device"][0] + 1) % 4
        recs[i]["device"][5] = (recs[i]["device"][5] + 2) % 4

    assert {m.row for m in replay(tamper(src, tmp_path / "b.json", moved))[1]} == {i}

    def looser(recs):
        recs[i]["lower_bound"] *= 1.5
        recs[i]["gap_to_bound"] = recs[i]["makespan"] / recs[i]["lower_bound"] - 1

    (m,) = replay(tamper(src, tmp_path / "c.json", looser))[1]
    assert "lower_bound recorded" in m.problem and "certified" in m.problem

    def other_graph(recs):
        recs[i]["digest"] = "0" * 16

    (m,) = replay(tamper(src, tmp_path / "d.json", other_graph))[1]
    assert "digest" in m.problem

    def no_placement(recs):
        del recs[i]["order"]

    (m,) = replay(tamper(src, tmp_path / "e.json", no_placement))[1]
    assert m.problem == "no placement stored (device, order)"


def test_replay_of_a_workloads_run(tmp_path):
    cfg = BenchConfig(
        teachers=["critical_path", "random"],
        workloads=["ffnn", "random_dag"],
        clusters=["p100x4"],
        seeds=[0, 1],
        noise=0.1,
        out=tmp_path,
    )
    run_benchmark(cfg, progress=False)
    src = tmp_path / "results.json"
    assert replay(src) == (8, [])

    def edit(recs):
        recs[3]["order"] = recs[3]["order"][::-1]

    n, bad = replay(tamper(src, tmp_path / "t.json", edit))
    assert {m.row for m in bad} == {3} and "ffnn on p100x4, random, seed 1" in str(bad[0])


def test_cli_suite_bench_and_replay(tiny, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    args = ["bench", "--suite", "tiny-v0", "--split", "train", "--teachers", "heft"]
    assert main([*args, "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| heft |" in printed and "| dag@p100x4 | 24 |" in printed
    assert main(["bench", "--replay", str(out / "results.json"), "--no-progress"]) == 0
    assert "replay: 2 rows re-simulated, 0 differ" in capsys.readouterr().out

    def edit(recs):
        recs[1]["makespan"] += 1e-6

    bad = tamper(out / "results.json", tmp_path / "bad.json", edit)
    assert main(["bench", "--replay", str(bad), "--no-progress"]) == 1
    printed = capsys.readouterr().out
    assert "replay: row 1 (tiny-v0/dag@p100x4, critical_path, seed 0): makespan" in printed
    assert "2 rows re-simulated, 1 differ" in printed
    assert main(["bench", "--suite", "nope", "--out", str(out)]) == 2
    assert "suite: unknown suite 'nope'" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("{}")
    assert main(["bench", "--replay", str(tmp_path / "x.json")]) == 2
    assert "not a placegym bench results file" in capsys.readouterr().err
