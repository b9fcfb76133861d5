"""The generated blocks of README.md and docs/ match what the stored results give.

:mod:`placegym.train.experiments.pages` renders every block from the result files in
``docs/results`` (nothing recomputed); here: the checkout's pages are up to date, a changed
block is found and rewritten, bad markers and missing sidecars are refused with one clear
error, every stored result file records its command and machine, and the renderers give
hand-computed values on tiny inputs.
"""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from placegym.train.cli.report import seed_baselines
from placegym.train.experiments import pages
from placegym.train.experiments.pages import (
    BLOCKS,
    anytime_table,
    machine,
    render_block,
    split_page,
    stale_blocks,
    suite_breakdown,
    update_pages,
    write_sidecar,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
BENCH = "bench/p100x4/results.json"


def test_every_generated_block_matches_the_stored_results():
    assert stale_blocks(ROOT) == []


def test_every_block_is_on_a_page_and_every_stored_file_records_its_machine():
    used = set()
    for page in pages.pages(ROOT):
        used |= {name for name, _ in split_page(page.read_text(), page) if name}
    assert used == set(BLOCKS)
    for block in BLOCKS.values():
        for name in block.files:
            meta = json.loads((RESULTS / f"{name}.meta.json").read_text())
            assert meta["command"] and meta["date"][:4] == "2026", name
            assert set(meta["machine"]) >= {"platform", "cpu", "nproc", "load_average"}, name


def test_the_readme_shows_a_generated_table_and_no_figure():
    text = (ROOT / "README.md").read_text()
    assert "<!-- generated: bench-p100x4 -->" in text and "![" not in text


def _tree(tmp_path: Path) -> Path:
    """A checkout with one stored result and a page holding its block twice."""
    (tmp_path / "docs" / "results" / "bench" / "p100x4").mkdir(parents=True)
    for name in (BENCH, BENCH + ".meta.json"):
        shutil.copy(RESULTS / name, tmp_path / "docs" / "results" / name)
    block = "<!-- generated: bench-p100x4 -->\n<!-- end generated -->\n"
    (tmp_path / "docs" / "page.md").write_text(f"# Page\n\n{block}\ntext\n\n{block}")
    return tmp_path


def test_a_changed_block_is_found_and_a_rewrite_restores_it(tmp_path, capsys):
    root = _tree(tmp_path)
    page = root / "docs" / "page.md"
    assert stale_blocks(root) == ["docs/page.md: block bench-p100x4"] * 2
    assert update_pages(root) == ["docs/page.md"]
    assert stale_blocks(root) == [] and update_pages(root) == []
    good = page.read_text()
    assert good.startswith("# Page\n\n<!-- generated: bench-p100x4 -->\n")
    assert "\ntext\n" in good and good.count("| chainmm | p100x4 | 28.815 ms (1.00x) |") == 2
    page.write_text(good.replace("28.815 ms", "27.000 ms", 1))
    assert pages.main(["--root", str(root), "--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: docs/page.md: block bench-p100x4\n" in out
    assert pages.main(["--root", str(root)]) == 0
    assert page.read_text() == good


def test_the_report_command_checks_the_pages(tmp_path):
    root = _tree(tmp_path)
    cmd = [sys.executable, "-m", "placegym.train.cli", "report", "--pages", "--root", str(root)]
    check = subprocess.run([*cmd, "--check"], capture_output=True, text=True)
    assert check.returncode == 1 and "stale: docs/page.md: block bench-p100x4" in check.stdout
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0
    assert stale_blocks(root) == []


@pytest.mark.parametrize(
    "text, error",
    [
        ("a\n<!-- generated: bench-p100x4 -->\nb\n", r"p.md:2: block 'bench-p100x4' is not"),
        ("<!-- end generated -->\n", r"p.md:1: <!-- end generated --> without a block opened"),
        (
            "<!-- generated: x -->\n<!-- generated: y -->\n<!-- end generated -->\n",
            r"p.md:2: block 'y' opened inside 'x'",
        ),
    ],
)
def test_bad_markers_are_refused_naming_page_and_line(text, error):
    with pytest.raises(ValueError, match=error):
        split_page(text, Path("p.md"))


def test_an_unknown_block_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"p.md: unknown generated block 'nope' \(known: "):
        render_block("nope", tmp_path, tmp_path / "p.md")


def test_a_result_without_a_sidecar_is_refused(tmp_path):
    root = _tree(tmp_path)
    (root / "docs" / "results" / f"{BENCH}.meta.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"results.json: no sidecar results.json.meta"):
        stale_blocks(root)
    assert pages.main(["--root", str(root), "--check"]) == 2


def test_the_sidecar_records_the_command_machine_and_load(tmp_path):
    m = machine()
    assert m["nproc"] >= 1 and len(m["load_average"]) == 3 and m["platform"]
    f = tmp_path / "r.json"
    f.write_text("{}")
    side = write_sidecar(f, "placegym bench --out DIR", load=[1.5, 1.0, 0.5], wall_seconds=4.2)
    meta = json.loads(side.read_text())
    assert side.name == "r.json.meta.json" and meta["command"] == "placegym bench --out DIR"
    assert meta["machine"]["load_average"] == [1.5, 1.0, 0.5] and meta["wall_seconds"] == 4.2
    meta["machine"] = dict.fromkeys(meta["machine"])  # nothing recorded
    side.write_text(json.dumps({**meta, "note": "rows from an older run"}))
    table = pages.provenance(tmp_path, ["r.json"])
    assert "| not recorded | not recorded | 4.2 s wall |" in table
    assert table.endswith("- `r.json`: rows from an older run")
    with pytest.raises(FileNotFoundError, match=r"nope\.json: no such result file"):
        write_sidecar(tmp_path / "nope.json", "x")


def _rec(instance, cluster, placer, gap, feasible=True):
    return SimpleNamespace(
        instance=instance, cluster=cluster, placer=placer, seed=0, feasible=feasible,
        gap_to_best=gap if feasible else None,
    )  # fmt: skip


def test_the_suite_breakdown_takes_geometric_means_over_solved_instances():
    records = [
        _rec("a-ccr1@c1", "c1", "p", 0.0),
        _rec("a-ccr1@c1", "c1", "q", 1.0),
        _rec("b-ccr4@c2", "c2", "p", 3.0),
        _rec("b-ccr4@c2", "c2", "q", 0.0),
        _rec("c-ccr4@c2", "c2", "p", 0.5),
        _rec("c-ccr4@c2", "c2", "q", 0.5, feasible=False),
    ]
    lines = suite_breakdown(records).splitlines()
    assert lines[0] == "| instances | p | q |"
    # p: sqrt(1 * 4) = 2 over a and b; q: sqrt(2 * 1); c is left out (q infeasible there)
    assert lines[2] == f"| all 2 | 2.000 | {math.sqrt(2):.3f} |"
    assert lines[3:7] == [
        "| CCR 1 | 1.000 | 2.000 |",
        "| CCR 4 | 4.000 | 1.000 |",
        "| `c1` | 1.000 | 2.000 |",
        "| `c2` | 4.000 | 1.000 |",
    ]
    assert "over the 2 of 3 (instance, seed) pairs every placer solved" in lines[-1]


def test_the_anytime_table_reads_the_curve_at_each_budget(tmp_path):
    csv = tmp_path / "anytime_curve.csv"
    csv.write_text(
        "placer,calls,mean_ratio,std_ratio,normalizer,instances,of\n"
        "anneal,1,2.0,0.0,best known,3,4\nanneal,50,1.5,0.1,best known,3,4\n"
        "anneal,3000,1.25,0.05,best known,3,4\nrandom_search,5,1.9,0.0,best known,3,4\n"
    )
    lines = anytime_table(csv).splitlines()
    assert lines[0] == "| placer | 10 calls | 100 calls | 1,000 calls | 3,000 calls |"
    assert lines[2] == "| anneal | 2.000 ± 0.000 | 1.500 ± 0.100 | 1.500 ± 0.100 | 1.250 ± 0.050 |"
    assert (
        lines[3]
        == "| random_search | 1.900 ± 0.000 | 1.900 ± 0.000 | 1.900 ± 0.000 | 1.900 ± 0.000 |"
    )
    assert "geometric mean over 3 of 4 instances" in lines[-1]


def test_stored_baselines_seed_the_report_cache_and_keep_its_entries(tmp_path):
    rows = tmp_path / "per_graph.jsonl"
    rows.write_text("")
    (tmp_path / "per_graph.baselines.json").write_text(json.dumps({"a": 1, "b": 2}))
    cache = tmp_path / "out" / "per_graph"
    seed_baselines(rows, cache)
    assert json.loads((cache / "baselines.json").read_text()) == {"a": 1, "b": 2}
    (cache / "baselines.json").write_text(json.dumps({"b": 3}))
    seed_baselines(rows, cache)
    assert json.loads((cache / "baselines.json").read_text()) == {"a": 1, "b": 3}
    seed_baselines(tmp_path / "other.jsonl", tmp_path / "none")  # nothing stored: no-op
    assert not (tmp_path / "none").exists()


def test_the_sb3_recipe_table_cuts_runs_at_common_steps_beside_the_teachers():
    from placegym.train.experiments.sb3_recipe import RecipeRun, recipe_table

    ups = [{"timesteps": 10}, {"timesteps": 20}]
    a = RecipeRun(0, [-1, 0, 10, 20], [3.0, 1.0, 0.9, 0.8], [0.1] * 4, [1.0, 2.0, 3.0], [], ups)
    b = RecipeRun(1, [-1, 0, 10], [2.0, 1.0, 0.7], [0.1] * 3, [1.0, 4.0], [], ups[:1])
    lines = recipe_table([a, b], {"critical_path": 1.0, "nest": 0.795}).splitlines()
    assert lines[:3] == [  # a cut at 10 steps, where b stopped
        "| after | untrained | BC | 10 |",
        "|---|---|---|---|",
        "| ratio to the teacher | 2.500 ± 0.500 | 1.000 ± 0.000 | 0.800 ± 0.100 |",
    ]
    assert lines[3:5] == [
        "| seed 0 | 3.000 | 1.000 | 0.900 |",
        "| seed 1 | 2.000 | 1.000 | 0.700 |",
    ]
    assert lines[6] == "Wall time per seed (BC + PPO): 4 ± 1 s."  # 1 + 2 and 1 + 4
    assert lines[-4:] == [
        "|---|---|",
        "| nest | 0.795 |",
        "| SB3 recipe, greedy after 10 PPO steps (seeds 0, 1) | 0.800 ± 0.100 |",
        "| critical_path | 1.000 |",
    ]
    with pytest.raises(ValueError, match="runs: none to tabulate"):
        recipe_table([], {})
