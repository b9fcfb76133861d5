"""A verified leaderboard per suite split: ``placegym leaderboard submit | show | verify``
(:func:`submit_entry`, :func:`leaderboard_table`, :func:`verify_entries`; public as
:mod:`placegym.benchmark`).

An *entry* is one placer's complete run of one suite split, checked before it is kept:

- the file is a suite results file of ``placegym bench --suite`` (or
  :meth:`placegym.benchmark.Results.save`): ``config`` names the suite, split and the
  seeds it declares (at least one);
- the entry's placer (``--placer``; by default the only placer of the file that is no
  registered teacher) has a row for **every** instance of the split and every declared
  seed, and no other rows;
- every row replays (:func:`placegym.train.harness.replay.replay`): the instance digest
  matches the suite as installed, the stored placement re-simulates to the recorded
  makespan, a row recorded feasible is feasible (no split group, within memory) and an
  infeasible one is not, and the derived columns (gaps to the bound and the best known)
  are what the instance gives. A tampered row is refused, naming the row.

The entry is written to ``<dir>/<suite>/<split>/<name>.json``: a results file itself
(the same ``format``, ``config`` and the placer's rows, with the critical_path rows its
ratios need when the placer is not critical_path) plus an ``entry`` object (name, url,
placer, seeds, and the summary below). ``verify`` (:func:`verify_entries`) replays every
stored entry again (CI runs it); ``show`` (:func:`leaderboard_table`) ranks a split's
entries:

1. most (instance, seed) pairs feasible first (an infeasible placement is a failure,
   never a fast result);
2. then the smallest geometric-mean gap to the best known, ``geomean(makespan /
   best_known)`` over the feasible rows of instances that have a best known (the count
   is shown);
3. then name.

Simulator calls and wall seconds are summed over the entry's rows and shown beside it
(wall time is the submitter's machine's: informative, not ranked).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placegym.envs.core.validate import read_json
from placegym.envs.suites import get_suite
from placegym.train.harness.bench import REFERENCE
from placegym.train.harness.replay import read_results, replay
from placegym.train.harness.suite_bench import results_text
from placegym.train.stats import geomean

__all__ = [
    "LEADERBOARD_DIR",
    "LeaderboardEntry",
    "entry_paths",
    "leaderboard_table",
    "submit_entry",
    "verify_entries",
    "verify_entry",
]

#: Where entries live by default: ``leaderboard/`` in the working directory.
LEADERBOARD_DIR = Path("leaderboard")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class LeaderboardEntry:
    """One leaderboard entry's summary (the ``entry`` object of its file)."""

    name: str
    url: str
    placer: str
    suite: str
    split: str
    seeds: tuple[int, ...]
    rows: int
    feasible: int
    gap_instances: int
    geomean_best: float | None
    calls: int
    seconds: float
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``entry`` object written to the file (no path)."""
        return {
            "name": self.name,
            "url": self.url,
            "placer": self.placer,
            "suite": self.suite,
            "split": self.split,
            "seeds": list(self.seeds),
            "rows": self.rows,
            "feasible": self.feasible,
            "gap_instances": self.gap_instances,
            "geomean_best": self.geomean_best,
            "calls": self.calls,
            "seconds": self.seconds,
        }


def _fail(path: Path | str, problem: str) -> ValueError:
    return ValueError(f"{path}: {problem}")


def _load(path: Path | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data, rows = read_results(path)
    if not rows or "suite" not in rows[0]:
        raise _fail(path, "not a suite run: a leaderboard takes `placegym bench --suite` results")
    return data, rows


def _declared(path: Path | str, config: dict[str, Any]) -> tuple[str, str, tuple[int, ...]]:
    suite, split, seeds = config.get("suite"), config.get("split"), config.get("seeds")
    if not isinstance(suite, str) or not isinstance(split, str):
        raise _fail(path, f"config: expected the suite and one split, got {suite!r}/{split!r}")
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise _fail(path, f"config.seeds: expected the declared list of seeds, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise _fail(path, f"config.seeds: a seed is declared twice: {seeds}")
    return suite, split, tuple(seeds)


def _pick_placer(path: Path | str, rows: list[dict[str, Any]], placer: str | None) -> str:
    from placegym.teachers import list_teachers

    names = list(dict.fromkeys(str(r.get("placer")) for r in rows))
    if placer is not None:
        if placer not in names:
            raise _fail(path, f"--placer: no rows of {placer!r} (placers: {', '.join(names)})")
        return placer
    own = [n for n in names if n not in set(list_teachers())]
    if len(own) != 1:
        raise _fail(
            path,
            f"--placer: expected one of {', '.join(names)} (the file has "
            f"{len(own)} placers that are not teachers)",
        )
    return own[0]


def _check_complete(
    path: Path | str, rows: list[dict[str, Any]], placer: str, split: str, seeds: tuple[int, ...]
) -> None:
    suite = get_suite(str(rows[0]["suite"]))
    want = {(spec.id, s) for _, spec in suite.specs(split) for s in seeds}
    have: dict[tuple[str, int], int] = {}
    for i, r in enumerate(rows):
        if r.get("placer") != placer:
            continue
        if r.get("suite") != suite.name or r.get("split") != split:
            raise _fail(
                path, f"row {i}: {r.get('suite')}/{r.get('split')} is not {suite.name}/{split}"
            )
        key = (str(r.get("instance")), int(r.get("seed", -1)))
        if key not in want:
            raise _fail(
                path,
                f"row {i}: instance {key[0]!r} seed {key[1]} is not in the split's "
                f"instances and declared seeds",
            )
        if key in have:
            raise _fail(
                path,
                f"row {i}: a second row of instance {key[0]!r} seed {key[1]} "
                f"(first: row {have[key]})",
            )
        have[key] = i
    missing = sorted(want - set(have))
    if missing:
        inst, seed = missing[0]
        raise _fail(
            path,
            f"{placer}: {len(missing)} of {len(want)} (instance, seed) pairs missing, e.g. "
            f"{inst!r} seed {seed}: an entry runs every instance of the split",
        )


def _summary(
    name: str, url: str, placer: str, suite: str, split: str, seeds: tuple[int, ...], rows
) -> LeaderboardEntry:
    mine = [r for r in rows if r.get("placer") == placer]
    feasible = [r for r in mine if r.get("feasible", not r.get("oom"))]
    ratios = [
        r["makespan"] / r["best_known"]
        for r in feasible
        if r.get("best_known") and r.get("makespan") is not None
    ]
    return LeaderboardEntry(
        name=name,
        url=url,
        placer=placer,
        suite=suite,
        split=split,
        seeds=seeds,
        rows=len(mine),
        feasible=len(feasible),
        gap_instances=len(ratios),
        geomean_best=geomean(ratios) if ratios else None,
        calls=int(sum(int(r.get("calls", 0) or 0) for r in mine)),
        seconds=float(sum(float(r.get("seconds", 0.0) or 0.0) for r in mine)),
    )


def _replay_rows(path: Path | str) -> None:
    _, bad = replay(path)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise _fail(path, f"refused: {bad[0]}{more}")


def submit_entry(
    results: str | Path,
    *,
    name: str,
    url: str = "",
    placer: str | None = None,
    folder: str | Path = LEADERBOARD_DIR,
    overwrite: bool = False,
) -> LeaderboardEntry:
    """Verify ``results`` (module docstring) and add it as entry ``name``.

    Raises:
        ValueError: naming the file and what fails: a bad name, an incomplete or
            undeclared run, a row that does not replay (its index), an existing entry.
    """
    if not _NAME.match(name):
        raise ValueError(
            f"--name: expected 1-64 letters, digits, '.', '_' or '-' (first a letter or "
            f"digit), got {name!r}"
        )
    data, rows = _load(results)
    suite, split, seeds = _declared(results, data["config"])
    placer = _pick_placer(results, rows, placer)
    _check_complete(results, rows, placer, split, seeds)
    _replay_rows(results)
    out = Path(folder) / suite / split / f"{name}.json"
    if out.exists() and not overwrite:
        raise ValueError(f"{out}: an entry named {name!r} exists (choose another --name)")
    keep = [r for r in rows if r.get("placer") in (placer, REFERENCE)]
    entry = _summary(name, url, placer, suite, split, seeds, keep)
    config = {**data["config"], "placers": list(dict.fromkeys(r["placer"] for r in keep))}
    doc = {"format": data.get("format"), "entry": entry.to_dict(), "config": config}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(results_text(doc, keep))  # the layout of a results file
    return LeaderboardEntry(**{**entry.__dict__, "path": out})


def verify_entry(path: str | Path) -> LeaderboardEntry:
    """Re-verify one stored entry: complete, every row replays, summary as recomputed.

    Raises:
        ValueError: naming the file and the first failure.
    """
    data, rows = _load(path)
    info = data.get("entry")
    if not isinstance(info, dict):
        raise _fail(path, "not a leaderboard entry (no entry object)")
    suite, split, seeds = _declared(path, data["config"])
    placer = str(info.get("placer"))
    _check_complete(path, rows, placer, split, seeds)
    _replay_rows(path)
    entry = _summary(
        str(info.get("name")), str(info.get("url", "")), placer, suite, split, seeds, rows
    )
    stored: dict[str, Any] = {k: info.get(k) for k in entry.to_dict()}
    stored["seeds"] = list(stored["seeds"] or [])
    for key, value in entry.to_dict().items():
        if key in ("seconds",):
            if not math.isclose(float(stored[key] or 0.0), value, rel_tol=1e-9, abs_tol=1e-9):
                raise _fail(path, f"entry.{key}: stored {stored[key]!r}, rows give {value!r}")
        elif stored[key] != value and not (
            isinstance(value, float)
            and isinstance(stored[key], (int, float))
            and math.isclose(float(stored[key]), value, rel_tol=1e-12)
        ):
            raise _fail(path, f"entry.{key}: stored {stored[key]!r}, rows give {value!r}")
    if Path(path).parent.parts[-2:] != (suite, split):
        raise _fail(path, f"an entry of {suite}/{split} must live in <dir>/{suite}/{split}/")
    return LeaderboardEntry(**{**entry.__dict__, "path": Path(path)})


def entry_paths(folder: str | Path = LEADERBOARD_DIR, suite: str | None = None) -> list[Path]:
    """The entry files under ``folder`` (of ``suite`` only, when given), sorted."""
    root = Path(folder)
    if suite is not None:
        root = root / suite
    return sorted(root.glob("**/*.json")) if root.exists() else []


def verify_entries(folder: str | Path = LEADERBOARD_DIR) -> list[LeaderboardEntry]:
    """:func:`verify_entry` every entry under ``folder`` (the first failure raises)."""
    return [verify_entry(p) for p in entry_paths(folder)]


def _rank_key(e: LeaderboardEntry) -> tuple:
    return (-e.feasible, math.inf if e.geomean_best is None else e.geomean_best, e.name)


def leaderboard_table(
    suite: str, split: str = "test", folder: str | Path = LEADERBOARD_DIR
) -> str:
    """The ranked markdown table of ``suite``'s ``split`` (module docstring). Entries are
    read as stored; :func:`verify_entries` re-checks them."""
    get_suite(suite)  # an unknown suite is an error naming the known ones
    entries = []
    for p in entry_paths(folder, suite):
        data = read_json(p, "leaderboard entry")
        info = data.get("entry") or {}
        if info.get("split") != split:
            continue
        fields: dict[str, Any] = {k: info.get(k) for k in LeaderboardEntry.__dataclass_fields__}
        fields["seeds"] = tuple(fields["seeds"] or ())
        entries.append(LeaderboardEntry(**{**fields, "path": p}))
    if not entries:
        return f"(no entries for {suite}/{split} under {folder})"
    entries.sort(key=_rank_key)
    lines = [
        f"Leaderboard {suite}/{split}: ranked by feasible (instance, seed) pairs, then the "
        f"geometric-mean ratio to the best known over the feasible rows with a best known.",
        "",
        "| rank | entry | placer | feasible | vs best known (geomean) | over | calls | "
        "wall s | seeds | url |",
        "|---:|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for i, e in enumerate(entries, 1):
        gm = "—" if e.geomean_best is None else f"{e.geomean_best:.3f}x"
        url = f"[link]({e.url})" if e.url else ""
        lines.append(
            f"| {i} | {e.name} | {e.placer} | {e.feasible}/{e.rows} | {gm} | "
            f"{e.gap_instances} | {e.calls:,} | {e.seconds:.1f} | "
            f"{','.join(map(str, e.seeds))} | {url} |"
        )
    return "\n".join(lines)


def entries_table(entries: Sequence[LeaderboardEntry]) -> str:
    """One line per verified entry (``placegym leaderboard verify`` prints it)."""
    return "\n".join(
        f"ok {e.suite}/{e.split}/{e.name}: {e.placer}, {e.feasible}/{e.rows} feasible"
        for e in entries
    )
