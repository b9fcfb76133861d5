"""``--placer SPEC`` of ``placegym bench`` and ``placegym anytime``: a placer in a file of
the current directory, keyword arguments as JSON, installed plug-ins (entry points of
``placegym.placers``), and one clear line for every bad spec."""

import json
import re
import sys
import textwrap

import pytest
from tiny_suite import tiny  # noqa: F401 (fixture)

from placegym.benchmark import evaluate, installed_placers, load_placer
from placegym.train.cli import main

PLACERS = textwrap.dedent(
    """
    import numpy as np
    from placegym.envs import Placement, simulate


    class OnOne:
        '''Every node on one device (``device``), topological order; ``sims`` simulator
        calls per placement.'''

        def __init__(self, device=0, sims=0):
            self.device, self.sims = device, sims

        def place(self, graph, cluster, seed):
            p = Placement(
                device=np.full(graph.num_nodes, self.device), order=graph.topological_order
            )
            for _ in range(self.sims):
                simulate(graph, cluster, p)
            return p


    class Sampler:
        '''Random device maps in batches of 4 until the budget is spent.'''

        name = "sampler"

        def search(self, graph, cluster, sim, seed):
            rng = np.random.default_rng(seed)
            n, d = graph.num_nodes, cluster.num_devices
            while sim.remaining:
                k = min(4, sim.remaining)
                sim.batch(rng.integers(d, size=(k, n)), np.tile(graph.topological_order, (k, 1)))
            return sim.best


    class Greedy:
        '''Never stops simulating.'''

        def search(self, graph, cluster, sim, seed):
            while True:
                sim.simulate(OnOne().place(graph, cluster, seed))


    def on_zero(graph, cluster, seed, device=0):
        return OnOne(device).place(graph, cluster, seed)


    def returns_none(graph, cluster, seed):
        return None


    NOT_A_PLACER = 3
    """
)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """``tmp_path`` as the current directory, holding ``file_module.py``; ``sys.path``
    and ``sys.modules`` are restored afterwards."""
    (tmp_path / "file_module.py").write_text(PLACERS)
    (tmp_path / "broken_module.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    yield tmp_path
    for name in ("file_module", "broken_module", "theirpkg", "theirpkg.placers"):
        sys.modules.pop(name, None)


def cells(line):
    return [c.strip() for c in line.strip()[1:-1].split("|")] if line.startswith("|") else []


def records(path):
    return json.loads(path.read_text())["records"]


def without_time(text):
    return re.sub(r"\| [\d.]+ s \|", "| T |", text)


def test_a_file_placer_via_the_cli_and_via_evaluate(workdir, capsys):
    out = workdir / "out"
    args = ["bench", "--suite", "generalize-v0", "--split", "test", "--teachers", ""]
    args += ["--placer", 'file_module:OnOne={"sims": 2}', "--out", str(out), "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert re.search(r"\| OnOne \| [\d.]+ \| .* \| [\d.]+ s \| 56 \| 28/28 \|", printed)
    cli = records(out / "results.json")
    assert {r["placer"] for r in cli} == {"critical_path", "OnOne"} and len(cli) == 56

    from file_module import OnOne

    res = evaluate(OnOne(sims=2), suite="generalize-v0", split="test", teachers=())
    mine = [{k: v for k, v in r.items() if k != "seconds"} for r in map(vars, res)]
    assert mine == [{k: v for k, v in r.items() if k != "seconds"} for r in cli]
    assert without_time(res.table()) == without_time((out / "table.md").read_text().strip())
    saved = json.loads(res.save(workdir / "api.json").read_text())
    assert saved["config"] == json.loads((out / "results.json").read_text())["config"]
    assert main(["bench", "--replay", str(workdir / "api.json"), "--no-progress"]) == 0


def test_keyword_arguments_functions_and_names(workdir, tiny, capsys):  # noqa: F811
    out = workdir / "out"
    args = ["bench", "--suite", "tiny-v0", "--teachers", "critical_path,heft", "--no-progress"]
    args += ["--placer", 'file_module:OnOne={"device": 1}', "--placer", "file_module:OnOne"]
    args += ["--placer", 'file_module:on_zero={"device": 2}', "--out", str(out)]
    args += ["--placer", "placegym.teachers.heft:HeftTeacher"]  # a teacher class: a placer too
    assert main(args) == 0
    rows = records(out / "results.json")
    placers = list(dict.fromkeys(r["placer"] for r in rows))
    assert placers == ["critical_path", "heft", "OnOne", "OnOne#2", "on_zero", "heft#2"]
    devices = {r["placer"]: set(r["device"]) for r in rows if r["instance"] == "dag@p100x4"}
    assert devices["OnOne"] == {1} and devices["OnOne#2"] == {0} and devices["on_zero"] == {2}
    by = {(r["placer"], r["instance"]): r["makespan"] for r in rows}
    assert all(by[("heft#2", i)] == by[("heft", i)] for _, i in by)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nope_module:X", "no module named 'nope_module' (not installed, and no nope_module.py"),
        ("broken_module:X", "importing 'broken_module' raised RuntimeError: no GPU here"),
        ("file_module:Missing", "module 'file_module' has no attribute 'Missing'"),
        ("file_module:NOT_A_PLACER", "not a Placer (no place(graph, cluster, seed) method)"),
        ("file_module:OnOne={k: 1}", "keyword arguments are not valid JSON"),
        ("file_module:OnOne=[1]", "keyword arguments must be a JSON object, got list"),
        ('file_module:OnOne={"k": 1}', "OnOne(**{'k': 1}) raised TypeError"),
        ("no_such_plugin", "not MODULE:ATTRIBUTE, and no 'placegym.placers' plug-in"),
    ],
)
def test_a_bad_spec_is_one_line(workdir, tiny, capsys, spec, message):  # noqa: F811
    args = ["bench", "--suite", "tiny-v0", "--placer", spec, "--out", str(workdir / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"placegym bench: error: placer {spec!r}: ")
    assert message in err


def test_budget_errors(workdir, tiny, capsys):  # noqa: F811
    base = ["bench", "--suite", "tiny-v0", "--out", str(workdir / "o"), "--no-progress"]
    assert main([*base, "--placer", "file_module:Sampler"]) == 2
    assert "--budget: sampler is a search placer: give it a budget" in capsys.readouterr().err
    assert main([*base, "--budget", "10"]) == 2
    assert "--budget: applies to --placer placers, and none is given" in capsys.readouterr().err
    assert main([*base, "--placer", "file_module:Sampler", "--budget", "0"]) == 2
    assert "--budget: must be >= 1 simulator calls, got 0" in capsys.readouterr().err


def test_search_placers_in_bench_and_anytime(workdir, tiny, capsys):  # noqa: F811
    out = workdir / "out"
    args = ["bench", "--suite", "tiny-v0", "--teachers", "critical_path", "--no-progress"]
    args += ["--placer", "file_module:Sampler", "--placer", "file_module:Greedy"]
    assert main([*args, "--budget", "10", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"\| sampler \| .* \| 20 \| 2/2 \|", printed)
    assert re.search(r"\| Greedy \| .* \| 20 \| 0/2 \|", printed)
    assert "infeasible: dag@p100x4, Greedy, seed 0: over budget: stopped at 10 of 10" in printed
    assert main(["bench", "--replay", str(out / "results.json")]) == 0

    args = ["anytime", "--suite", "tiny-v0", "--placers", "random_search", "--budget", "12"]
    args += ["--placer", "file_module:Sampler", "--placer", "file_module:OnOne"]
    args += ["--seeds", "0,1", "--out", str(workdir / "any"), "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    lines = {c[0]: c for c in map(cells, printed.splitlines()) if c}
    assert lines["placer"][-3:] == ["time", "calls", "feasible"]
    assert lines["sampler"][-2:] == ["48", "4/4"]  # 12 calls x 2 instances x 2 seeds
    assert lines["OnOne"][-2:] == ["0", "4/4"]
    csv = (workdir / "any" / "anytime.csv").read_text().splitlines()
    assert csv[0].endswith(",infeasible,seconds,run_calls,at_seconds")
    sampler = [x.split(",") for x in csv if ",sampler," in x]
    assert {int(x[3]) for x in sampler} <= set(range(4, 13, 4))  # bests at batch ends
    from placegym.train.harness.anytime import SEARCH_PLACERS

    assert "sampler" not in SEARCH_PLACERS  # registered for the command's run only


def test_an_installed_plug_in(workdir, tiny, monkeypatch, capsys):  # noqa: F811
    site = workdir / "site"
    (site / "theirpkg").mkdir(parents=True)
    (site / "theirpkg" / "__init__.py").write_text("")
    (site / "theirpkg" / "placers.py").write_text(PLACERS)
    info = site / "theirpkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: theirpkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[placegym.placers]\ntheirname = theirpkg.placers:OnOne\n"
    )
    assert "theirname" not in installed_placers()
    monkeypatch.syspath_prepend(str(site))
    assert installed_placers()["theirname"] == "theirpkg.placers:OnOne"
    name, placer = load_placer('theirname={"device": 3}')
    assert name == "theirname" and placer.device == 3
    out = workdir / "out"
    args = ["bench", "--suite", "tiny-v0", "--teachers", "critical_path", "--no-progress"]
    assert main([*args, "--placer", "theirname", "--out", str(out)]) == 0
    assert "| theirname |" in capsys.readouterr().out
    assert {r["placer"] for r in records(out / "results.json")} == {"critical_path", "theirname"}


def test_a_placer_returning_none_is_a_failed_row_and_bench_goes_on(workdir, capsys):
    out = workdir / "out"
    args = ["bench", "--workloads", "ffnn,chainmm", "--teachers", "critical_path,heft"]
    args += ["--placer", "file_module:returns_none", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    why = "placer returned NoneType, not a Placement"
    assert f"infeasible: ffnn on p100x4, returns_none, seed 0: {why}" in printed
    assert f"infeasible: chainmm on p100x4, returns_none, seed 0: {why}" in printed
    rows = [r for r in records(out / "results.json") if r["placer"] == "returns_none"]
    assert [(r["feasible"], r["makespan"], r["infeasible"]) for r in rows] == [
        (False, None, why)
    ] * 2
    assert all(
        r["feasible"] for r in records(out / "results.json") if r["placer"] != "returns_none"
    )


def test_torch_threads_option_is_checked(workdir, capsys):
    args = ["bench", "--workloads", "ffnn", "--teachers", "critical_path", "--no-progress"]
    assert main([*args, "--torch-threads", "-1", "--out", str(workdir / "o")]) == 2
    assert capsys.readouterr().err == (
        "placegym bench: error: --torch-threads: must be >= 0, got -1\n"
    )
