"""``placegym bench``: records, reproducibility, output files, the CLI."""

import json

import pytest

from placegym.train.cli import main
from placegym.train.harness.bench import BenchConfig, bench_markdown, run_benchmark


def test_records_ratios_and_reproducibility(tmp_path):
    cfg = BenchConfig(
        teachers=["critical_path", "random", "anneal"],
        workloads=["ffnn", "random_dag"],
        clusters=["p100x4", "v100x8"],
        seeds=[0, 1],
        out=tmp_path,
    )
    records = run_benchmark(cfg, progress=False)
    assert len(records) == 3 * 2 * 2 * 2
    for r in records:
        if r.placer == "critical_path":
            assert r.ratio_to_critical_path == 1.0
        assert r.makespan > 0 and r.gap_to_optimal is None
    # random and anneal take the seed: seeds differ, reruns agree
    again = run_benchmark(BenchConfig(**{**cfg.__dict__, "out": None}), progress=False)
    assert [r.makespan for r in again] == [r.makespan for r in records]
    rnd = [
        r.makespan
        for r in records
        if r.placer == "random" and r.workload == "ffnn" and r.cluster == "p100x4"
    ]
    assert rnd[0] != rnd[1]
    for name in ("results.csv", "results.json", "table.md", "ratios.png"):
        assert (tmp_path / name).stat().st_size > 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["reference"] == "critical_path" and len(data["records"]) == 24
    table = bench_markdown(records)
    assert table.splitlines()[0] == "| workload | cluster | critical_path | random | anneal |"
    assert "| ffnn | v100x8 |" in table and "time taken" in table


def test_gap_to_optimal_on_small_graphs(tmp_path):
    pytest.importorskip("placegym.teachers.optimal")
    g = tmp_path / "small.json"
    assert (
        main(
            [
                "graphs",
                "export",
                "random_dag",
                "--param",
                "nodes=8",
                "--param",
                "seed=3",
                "--out",
                str(g),
            ]
        )
        == 0
    )
    cfg = BenchConfig(
        teachers=["critical_path", "optimal"],
        workloads=[str(g)],
        clusters=["p100x4"],
        with_optimal=True,
    )
    records = run_benchmark(cfg, progress=False)
    gaps = {r.placer: r.gap_to_optimal for r in records}
    assert gaps["optimal"] == pytest.approx(0.0, abs=1e-12)
    assert gaps["critical_path"] >= -1e-12


def test_cli_prints_the_table(tmp_path, capsys):
    assert (
        main(
            [
                "bench",
                "--teachers",
                "critical_path,heft",
                "--workloads",
                "chainmm",
                "--cluster",
                "p100x4",
                "--out",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| chainmm | p100x4 |" in out and "results.csv" in out
    assert main(["bench", "--teachers", "nope", "--out", str(tmp_path)]) == 2
    assert "teacher: unknown name 'nope'" in capsys.readouterr().err
    assert (
        main(
            [
                "bench",
                "--workloads",
                "nope",
                "--teachers",
                "random",
                "--out",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "unknown workload or file 'nope'" in capsys.readouterr().err


def test_the_default_teachers_are_every_placer_but_the_exact_and_phase_i_ones():
    from placegym.teachers import list_teachers
    from placegym.train.harness.bench import DEFAULT_TEACHERS

    others = {
        "optimal",
        "device_anneal",
        "best_list",
        "heft_rule",
        "heft_lookahead",
        "lookahead",
        "fortified_lookahead",
    }
    assert sorted(DEFAULT_TEACHERS) == sorted(set(list_teachers()) - others)


def test_best_of_k_includes_the_greedy_placement(tmp_path, capsys):
    from test_train_run import tiny_config

    from placegym.train.trainer import Trainer

    Trainer(tiny_config(tmp_path, phases=["phase1"])).run()
    capsys.readouterr()  # the training's own report
    ckpt = str(tmp_path / "run" / "checkpoints" / "final.pt")
    out = tmp_path / "out"
    args = ["bench", "--teachers", "critical_path", "--workloads", "random_dag,chainmm"]
    args += ["--seeds", "0,1,2", "--agents", ckpt, "--no-progress", "--out", str(out)]
    assert main([*args, "--agent-k", "3"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == "| workload | cluster | critical_path | tiny | tiny-best3 |"
    rows = json.loads((out / "results.json").read_text())["records"]
    by = {(r["workload"], r["seed"], r["placer"]): r for r in rows}
    for w, s, p in by:
        if p == "tiny":
            best, greedy = by[(w, s, "tiny-best3")], by[(w, s, "tiny")]
            assert best["feasible"] and best["makespan"] <= greedy["makespan"]
            assert best["calls"] > greedy["calls"]  # the samples' episodes and the comparison
    assert main([*args, "--agent-k", "1"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0] == "| workload | cluster | critical_path | tiny |"
    )
