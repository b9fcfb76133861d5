"""The leaderboard: a complete, replaying suite run is entered and ranked; a tampered,
incomplete or undeclared one is refused with the reason; every shipped entry re-verifies.

The attacks of issue #43 each have a test here: a row's best known multiplied by 10, a
run relabelled as another suite, an entry path leaving ``--dir``, a run with noise or
picked seeds, costs claimed as nothing, negative costs, markdown in names, a
``javascript:`` URL. Fuzzed files: ``test_leaderboard_fuzz.py``."""

import json
import re
from pathlib import Path

import pytest

from placegym.train.cli import main
from placegym.train.leaderboard import (
    entry_paths,
    leaderboard_table,
    submit_entry,
    verify_entries,
    verify_entry,
)

ROOT = Path(__file__).resolve().parents[1]
PLACER = """
from placegym.teachers import make_teacher

class Heftish:
    def place(self, graph, cluster, seed):
        return make_teacher("heft").place(graph, cluster)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``placegym bench --suite published-v0 --split test`` of a placer in a user's file."""
    d = tmp_path_factory.mktemp("lb")
    (d / "userplacer.py").write_text(PLACER)
    args = ["bench", "--suite", "published-v0", "--split", "test", "--teachers",
            "critical_path", "--placer", "userplacer:Heftish", "--out", str(d / "run"),
            "--no-progress"]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        mp.syspath_prepend(str(d))
        assert main(args) == 0
    return d / "run" / "results.json"


def rows_of(path: Path) -> tuple[dict, list[dict]]:
    data = json.loads(path.read_text())
    return data, data["records"]


def rewrite(path: Path, data: dict, out: Path) -> Path:
    out.write_text(json.dumps(data))
    return out


def line_of(table: str, name: str) -> list[str]:
    """The cells of entry ``name``'s row of a leaderboard table."""
    (line,) = [ln for ln in table.splitlines() if re.match(rf"\| \d+ \| {name} \|", ln)]
    return [c.strip() for c in line.strip("|").split("|")]


def test_submit_show_verify(run, tmp_path, capsys):
    board = tmp_path / "board"
    e = submit_entry(run, name="heftish", url="https://example.org/h", folder=board)
    assert e.path == board / "published-v0" / "test" / "heftish.json"
    assert e.placer == "Heftish" and e.rows == 8 and e.feasible == 6  # 2 certified OOM
    assert e.gap_instances == 6 and 1.0 <= e.geomean_best < 1.01
    assert e.costs == "claimed" and e.spec is None
    assert verify_entry(e.path).to_dict() == e.to_dict()
    # critical_path as a second entry ranks below (same feasible count, farther from best)
    cp = submit_entry(run, name="cp", placer="critical_path", folder=board)
    table = leaderboard_table("published-v0", "test", board)
    assert table.index("| 1 | heftish |") < table.index("| 2 | cp |")
    assert f"{cp.geomean_best:.3f}x" in table and "6/8" in table
    assert line_of(table, "cp")[9] == "claimed"
    # each entry's reproduction: critical_path is a teacher, Heftish only replays
    assert "- cp: `placegym leaderboard run --placer critical_path --suite published-v0 " in table
    assert f"- heftish: `placegym bench --replay {e.path}`" in table
    assert [p.name for p in entry_paths(board)] == ["cp.json", "heftish.json"]
    with pytest.raises(ValueError, match="an entry named 'cp' exists"):
        submit_entry(run, name="cp", placer="critical_path", folder=board)
    assert main(["leaderboard", "--dir", str(board), "verify"]) == 0
    assert "ok published-v0/test/heftish: Heftish, 6/8 feasible, costs claimed" in (
        capsys.readouterr().out
    )


def test_a_tampered_row_is_refused_naming_it(run, tmp_path):
    data, rows = rows_of(run)
    i = next(k for k, r in enumerate(rows) if r["placer"] == "Heftish" and r["feasible"])
    rows[i]["makespan"] *= 0.9
    bad = rewrite(run, data, tmp_path / "bad.json")
    with pytest.raises(ValueError, match=rf"refused: row {i} \(published-v0/.*Heftish.*makespan"):
        submit_entry(bad, name="x", folder=tmp_path / "b")
    assert not (tmp_path / "b").exists()
    # a stored entry edited afterwards fails verification
    entry = submit_entry(run, name="ok", folder=tmp_path / "b")
    doc = json.loads(entry.path.read_text())
    doc["entry"]["geomean_best"] = 0.5
    entry.path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"entry\.geomean_best: stored 0\.5, rows give 1\.0"):
        verify_entries(tmp_path / "b")
    doc["records"][1]["seconds"] += 1.0
    doc["entry"] = json.loads(entry.path.read_text())["entry"] | {"geomean_best": None}
    doc["records"][1]["makespan"] *= 1.5
    entry.path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"refused: row 1 \(.*makespan recorded"):
        verify_entry(entry.path)


def test_incomplete_or_undeclared_runs_are_refused(run, tmp_path):
    data, rows = rows_of(run)
    data["records"] = [
        r for r in rows if not (r["placer"] == "Heftish" and "gnmt" in r["instance"])
    ]
    short = rewrite(run, data, tmp_path / "short.json")
    with pytest.raises(
        ValueError, match=r"1 of 8 \(instance, seed\) pairs missing, e\.g\. 'latency-layer-gnmt"
    ):
        submit_entry(short, name="x", folder=tmp_path)
    data, rows = rows_of(run)
    del data["config"]["seeds"]
    with pytest.raises(ValueError, match=r"config\.seeds: expected the declared seeds 0, 1, "):
        submit_entry(rewrite(run, data, tmp_path / "s.json"), name="x", folder=tmp_path)
    data, rows = rows_of(run)
    with pytest.raises(
        ValueError, match=r"--placer: no rows of 'nope' \(placers: critical_path, Heftish\)"
    ):
        submit_entry(
            rewrite(run, data, tmp_path / "p.json"), name="x", folder=tmp_path, placer="nope"
        )
    with pytest.raises(ValueError, match="--name: expected"):
        submit_entry(run, name="../x", folder=tmp_path)


# ---------------------------------------------------------------------- attack 1
def test_a_best_known_of_the_files_own_is_refused(run, tmp_path):
    """best_known x10 (and gap_to_best made to agree) was ranked 0.192x the best known."""
    data, rows = rows_of(run)
    i = next(k for k, r in enumerate(rows) if r["placer"] == "Heftish" and r["best_known"])
    for r in rows:
        if r["best_known"] is not None:
            r["best_known"] *= 10
            if r["gap_to_best"] is not None:
                r["gap_to_best"] = r["makespan"] / r["best_known"] - 1
    bad = rewrite(run, data, tmp_path / "x10.json")
    with pytest.raises(
        ValueError, match=r"refused: row \d+ \(published-v0/.*: best_known recorded"
    ):
        submit_entry(bad, name="x10", folder=tmp_path / "b")
    from placegym.benchmark import replay

    n, mismatches = replay(bad)
    assert i in {m.row for m in mismatches}
    assert all("best_known recorded" in m.problem and "the suite's is" in m.problem
               for m in mismatches)  # fmt: skip
    # a stored entry edited the same way: verify refuses it, show ranks it on the suite's
    entry = submit_entry(run, name="honest", folder=tmp_path / "b")
    doc = json.loads(entry.path.read_text())
    doc["records"], doc["entry"]["geomean_best"] = rows, entry.geomean_best / 10
    keep = {"Heftish", "critical_path"}
    doc["records"] = [r for r in rows if r["placer"] in keep]
    entry.path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"honest\.json: refused: row \d+ .*best_known recorded"):
        verify_entry(entry.path)
    table = leaderboard_table("published-v0", "test", tmp_path / "b")
    assert line_of(table, "honest")[4] == f"{entry.geomean_best:.3f}x"  # not a tenth of it


# ---------------------------------------------------------------------- attack 2
def test_the_suite_named_is_the_rows_suite(run, tmp_path):
    """published-v0 rows filed as memory-tight-v0 were accepted and ranked there."""
    data, _ = rows_of(run)
    data["config"]["suite"] = "memory-tight-v0"
    with pytest.raises(
        ValueError, match=r"row 0: 'published-v0'/'test' is not the declared config\.suite/"
    ):
        submit_entry(rewrite(run, data, tmp_path / "r.json"), name="x", folder=tmp_path / "b")
    for r in data["records"]:  # the rows relabelled too: their instances are not the suite's
        r["suite"] = "memory-tight-v0"
    with pytest.raises(ValueError, match=r"instance 'latency-.*' seed 0 is not in the split"):
        submit_entry(rewrite(run, data, tmp_path / "r.json"), name="x", folder=tmp_path / "b")
    data, _ = rows_of(run)
    data["config"]["split"] = "train"
    with pytest.raises(ValueError, match=r"is not the declared config\.suite/config\.split"):
        submit_entry(rewrite(run, data, tmp_path / "t.json"), name="x", folder=tmp_path / "b")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("suite", ["../../../escaped", "{tmp}/escaped", "a/../.."])
def test_an_entry_path_stays_inside_the_folder(run, tmp_path, suite):
    """A suite of "../../../escaped" or an absolute path wrote outside --dir."""
    data, _ = rows_of(run)
    data["config"]["suite"] = suite.format(tmp=tmp_path)
    board = tmp_path / "deep" / "er" / "board"
    with pytest.raises(ValueError, match=r"config\.suite: expected an installed suite's name"):
        submit_entry(rewrite(run, data, tmp_path / "e.json"), name="x", folder=board)
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == ["e.json"]  # nothing written


def test_an_entry_path_through_a_link_is_refused(run, tmp_path):
    board, outside = tmp_path / "board", tmp_path / "outside"
    board.mkdir()
    outside.mkdir()
    (board / "published-v0").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match=r"resolves outside the leaderboard folder"):
        submit_entry(run, name="x", folder=board)
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------------- attack 3
class HeftPlacer:
    name = "heft_like"

    def place(self, graph, cluster, seed):
        from placegym.teachers import make_teacher

        return make_teacher("heft").place(graph, cluster)


def test_simulator_settings_other_than_the_suites_are_refused(run, tmp_path):
    """A run with noise 0.3 (or noise 10 and seed 6) was accepted, faster than exact."""
    from placegym.benchmark import evaluate

    noisy = evaluate(HeftPlacer(), suite="published-v0", split="test", noise=0.3)
    path = noisy.save(tmp_path / "noisy.json")
    with pytest.raises(ValueError, match=r"config\.noise: expected 0 .*, got 0\.3$"):
        submit_entry(path, name="noisy", folder=tmp_path / "b")
    data, rows = rows_of(run)
    data["config"]["seeds"] = [6]
    for r in rows:
        r["seed"] = 6
    with pytest.raises(ValueError, match=r"config\.seeds: expected the declared seeds 0, 1, .*6"):
        submit_entry(rewrite(run, data, tmp_path / "s.json"), name="x", folder=tmp_path / "b")
    data, rows = rows_of(run)
    rows[0]["seed"] = 1  # a row of a seed the run did not declare
    with pytest.raises(ValueError, match=r"row 0: seed 1 is not one of the declared seeds"):
        submit_entry(rewrite(run, data, tmp_path / "s.json"), name="x", folder=tmp_path / "b")
    data, _ = rows_of(run)
    data["config"]["links"] = "port"
    with pytest.raises(ValueError, match=r"config\.links: expected nothing \(the simulator"):
        submit_entry(rewrite(run, data, tmp_path / "l.json"), name="x", folder=tmp_path / "b")
    assert not (tmp_path / "b").exists()


# ---------------------------------------------------------------------- attack 4
def test_claimed_costs_are_shown_as_claimed_beside_measured_ones(run, tmp_path):
    """Copied placements claiming 0 calls and 0.0 s sat beside a measured run, unmarked."""
    data, rows = rows_of(run)
    data["records"] = [r for r in rows if r["placer"] == "critical_path"]
    for r in rows:
        if r["placer"] == "Heftish":
            data["records"].append({**r, "placer": "copycat", "calls": 0, "seconds": 0.0})
    board = tmp_path / "b"
    copy = submit_entry(rewrite(run, data, tmp_path / "c.json"), name="copycat", folder=board)
    table = leaderboard_table("published-v0", "test", board)
    assert line_of(table, "copycat")[7:10] == ["0", "0.0", "claimed"]
    from placegym.benchmark import run_entry

    heft = run_entry("heft", suite="published-v0", split="test", folder=board)
    assert heft.costs == "measured" and heft.calls > 0 and heft.spec == "heft"
    table = leaderboard_table("published-v0", "test", board)
    assert line_of(table, "heft")[9] == "measured"
    assert line_of(table, "copycat")[9] == "claimed"
    assert copy.geomean_best == heft.geomean_best  # the same placements: the same rank keys
    assert verify_entry(heft.path).to_dict() == heft.to_dict()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("calls", -5, r"calls: must be >= 0"),
        ("calls", 2**70, r"calls: out of range"),
        ("calls", 1.5, r"calls: expected an integer"),
        ("seconds", -0.1, r"seconds: must be >= 0"),
        ("seconds", float("inf"), r"seconds: must be finite"),
        ("seconds", float("nan"), r"seconds: must be finite"),
    ],
)
def test_costs_are_non_negative_finite_numbers(run, tmp_path, field, value, problem):
    data, rows = rows_of(run)
    i = next(k for k, r in enumerate(rows) if r["placer"] == "Heftish")
    rows[i][field] = value
    with pytest.raises(ValueError, match=rf"records\[{i}\]\.{problem}"):
        submit_entry(rewrite(run, data, tmp_path / "c.json"), name="x", folder=tmp_path / "b")


@pytest.mark.parametrize(
    "placer", ["**bold**", "[x](javascript:alert(1))", "<b>x</b>", "a|b", "_x_", "a" * 65]
)
def test_markdown_in_a_placer_name_is_refused(run, tmp_path, placer):
    data, rows = rows_of(run)
    for r in rows:
        if r["placer"] == "Heftish":
            r["placer"] = placer
    bad = rewrite(run, data, tmp_path / "m.json")
    with pytest.raises(ValueError, match=r"placer: expected a plain name"):
        submit_entry(bad, name="x", placer=placer, folder=tmp_path / "b")


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(1)", "data:text/html,x", "https://x.org/a) [y](z", "//x.org", "ftp://x"],
)
def test_only_http_urls_are_accepted(run, tmp_path, url):
    with pytest.raises(ValueError, match=r"--url: expected an http:// or https:// URL"):
        submit_entry(run, name="x", url=url, folder=tmp_path / "b")


def test_a_stored_entry_edited_afterwards_is_refused_by_show_and_verify(run, tmp_path):
    board = tmp_path / "b"
    entry = submit_entry(run, name="fine", url="http://example.org/ok", folder=board)
    good = json.loads(entry.path.read_text())
    for edit, problem in [
        ({"name": "**fine**"}, r"entry\.name: expected 1-64 letters"),
        ({"url": "javascript:alert(1)"}, r"entry\.url: expected an http"),
        ({"placer": "<script>"}, r"entry\.placer: expected a plain name"),
        ({"costs": "measured"}, r"entry\.spec: a measured entry names the placer it ran"),
        ({"costs": "measured", "spec": "heft"}, r"entry\.spec: 'heft' runs heft, not Heftish"),
        ({"costs": "free"}, r"entry\.costs: expected 'claimed' or 'measured'"),
    ]:
        entry.path.write_text(json.dumps({**good, "entry": {**good["entry"], **edit}}))
        with pytest.raises(ValueError, match=problem):
            leaderboard_table("published-v0", "test", board)
        with pytest.raises(ValueError, match=problem):
            verify_entry(entry.path)


# ---------------------------------------------------------------------- run, score
def test_run_measures_costs_and_show_prints_the_command(run, tmp_path, capsys):
    board = tmp_path / "board"
    args = ["leaderboard", "--dir", str(board), "run", "--placer", "userplacer:Heftish",
            "--suite", "published-v0", "--name", "h", "--url", "https://example.org/h",
            "--no-progress"]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(run.parents[1])  # userplacer.py is there
        assert main(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"added .*h\.json: Heftish, 6/8 feasible, .* calls and .* s measured", out)
    entry = verify_entry(board / "published-v0" / "test" / "h.json")
    assert entry.costs == "measured" and entry.spec == "userplacer:Heftish"
    assert main(["leaderboard", "--dir", str(board), "show", "published-v0"]) == 0
    table = capsys.readouterr().out
    assert line_of(table, "h")[9:12] == ["measured", "0", "[link](https://example.org/h)"]
    command = ("placegym leaderboard run --placer userplacer:Heftish --suite published-v0 "
               "--split test --seeds 0 --name h")  # fmt: skip
    assert f"- h: `{command}`" in table
    bad = ["leaderboard", "--dir", str(board), "run", "--placer", "heft", "--suite",
           "published-v0", "--seeds", "3"]  # fmt: skip
    assert main(bad) == 2
    assert "--seeds: expected the declared seeds 0, 1, ..., k-1" in capsys.readouterr().err


class BestKnown:
    """The suite's best-known placement of every instance that has one (else heft's)."""

    name = "best_known"

    def place(self, graph, cluster, seed):
        from placegym.envs.suites.reference import load_references
        from placegym.teachers import make_teacher

        ref = load_references("published-v0").get(graph.name)
        return ref.best_placement if ref else make_teacher("heft").place(graph, cluster)


def test_the_score_is_0_for_random_and_100_for_the_best_known(tmp_path):
    from placegym.benchmark import evaluate, run_entry

    board = tmp_path / "b"
    rand = run_entry("random", suite="published-v0", split="test", folder=board)
    assert rand.score == 0.0 and rand.score_instances == 6  # 6 instances with a best known
    best = evaluate(BestKnown(), suite="published-v0", split="test").save(tmp_path / "r.json")
    e = submit_entry(best, name="best", folder=board)
    assert e.score == pytest.approx(100.0) and e.geomean_best == pytest.approx(1.0)
    table = leaderboard_table("published-v0", "test", board)
    assert line_of(table, "best")[6] == "100.0" and line_of(table, "random")[6] == "0.0"


def test_every_shipped_entry_verifies():
    entries = verify_entries(ROOT / "leaderboard")
    assert len(entries) == len(entry_paths(ROOT / "leaderboard"))
    teachers = {"critical_path", "heft", "metis", "nest", "random", "anneal"}
    assert {e.costs for e in entries if e.placer in teachers} == {"measured"}
