"""The leaderboard: a complete, replaying suite run is entered and ranked; a tampered,
incomplete or undeclared one is refused with the reason; every shipped entry re-verifies."""

import json
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


def test_submit_show_verify(run, tmp_path, capsys):
    board = tmp_path / "board"
    e = submit_entry(run, name="heftish", url="https://example.org/h", folder=board)
    assert e.path == board / "published-v0" / "test" / "heftish.json"
    assert e.placer == "Heftish" and e.rows == 8 and e.feasible == 6  # 2 certified OOM
    assert e.gap_instances == 6 and 1.0 <= e.geomean_best < 1.01
    assert verify_entry(e.path).to_dict() == e.to_dict()
    # critical_path as a second entry ranks below (same feasible count, farther from best)
    cp = submit_entry(run, name="cp", placer="critical_path", folder=board)
    table = leaderboard_table("published-v0", "test", board)
    assert table.index("| 1 | heftish |") < table.index("| 2 | cp |")
    assert f"{cp.geomean_best:.3f}x" in table and "6/8" in table
    assert [p.name for p in entry_paths(board)] == ["cp.json", "heftish.json"]
    with pytest.raises(ValueError, match="an entry named 'cp' exists"):
        submit_entry(run, name="cp", placer="critical_path", folder=board)
    assert main(["leaderboard", "--dir", str(board), "verify"]) == 0
    assert "ok published-v0/test/heftish" in capsys.readouterr().out


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
    with pytest.raises(ValueError, match=r"config\.seeds: expected the declared list of seeds"):
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


def test_every_shipped_entry_verifies():
    entries = verify_entries(ROOT / "leaderboard")
    assert len(entries) == len(entry_paths(ROOT / "leaderboard"))
