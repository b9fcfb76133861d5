"""A verified leaderboard per suite split: ``placegym leaderboard run | submit | show |
verify`` (:func:`run_entry`, :func:`submit_entry`, :func:`leaderboard_table`,
:func:`verify_entries`; public as :mod:`placegym.benchmark`).

An *entry* is one placer's complete run of one suite split, checked before it is kept:

- the run is declared and is the suite's (:func:`~placegym.train.leaderboard_rules.
  check_config`): ``config`` names an installed suite and one of its splits, the seeds
  ``0 .. k-1``, noise 0 and no simulator or cluster setting of its own; every row is of
  that suite and split (a file cannot be filed under another suite);
- the entry's placer (``--placer``; by default the only placer of the file that is no
  registered teacher) has a row for **every** instance of the split and every declared
  seed, and no other rows; its name, the entry's name and URL are plain
  (:mod:`~placegym.train.leaderboard_rules`);
- every row replays (:func:`placegym.train.harness.replay.replay`): the instance digest
  matches the suite as installed, the row's lower bound and best known are the suite's
  reference values (never the file's own), the stored placement re-simulates to the
  recorded makespan, a row recorded feasible is feasible (no split group, within memory)
  and an infeasible one is not, and the derived columns are what the suite gives. A
  tampered row is refused, naming the row and the field; every row's ``calls`` and
  ``seconds`` are non-negative finite numbers.

Costs: an entry's simulator calls and wall seconds are either **measured**
(:func:`run_entry`, ``placegym leaderboard run --placer SPEC``: the placer ran here, under
the harness's counting simulator, with the entry's budget if any) or **claimed**
(:func:`submit_entry`, ``placegym leaderboard submit FILE``: the file's numbers, which no
replay can check). Entries written before this distinction read as claimed. ``show``
says which, and prints for every entry the command that reproduces it
(:func:`~placegym.train.leaderboard_rules.reproduce_command`).

The entry is written to ``<dir>/<suite>/<split>/<name>.json`` (the path checked to stay
inside ``<dir>``): a results file itself (the same ``format``, ``config`` and the placer's
rows, with the critical_path rows its ratios need when the placer is not critical_path)
plus an ``entry`` object (name, url, placer, seeds, costs, the placer spec of a measured
run, and the summary below). ``verify`` (:func:`verify_entries`) replays every stored
entry again (CI runs it); ``show`` (:func:`leaderboard_table`) checks each entry's
declarations and rows (no re-simulation) and ranks a split's entries by numbers it
computes from the rows and the installed suite (never from the stored summary):

1. most (instance, seed) pairs feasible first (an infeasible placement is a failure,
   never a fast result);
2. then the smallest geometric-mean gap to the best known, ``geomean(makespan /
   best_known)`` over the feasible rows of instances that have a best known (the count
   is shown);
3. then name.

Beside: the normalized score, 0 = the random placement, 100 = the best known
(:func:`~placegym.train.leaderboard_rules.summarize`: per instance ``100 * (T_random -
T) / (T_random - T_best)`` averaged over the seeds, an infeasible row scoring 0, then
over the instances; ``T_random`` is the ``random`` teacher's seed-0 placement simulated
exactly, computed from the installed package), the calls and wall seconds (the
submitter's machine's, or this one's when measured: informative, not ranked) and whether
they are measured or claimed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from placegym.train.harness.bench import REFERENCE
from placegym.train.harness.replay import check_row, read_results, replay_rows
from placegym.train.harness.suite_bench import RESULTS_FORMAT, results_text
from placegym.train.leaderboard_rules import (
    check_config,
    check_name,
    check_placer_name,
    check_seeds,
    check_spec,
    check_url,
    entry_path,
    reproduce_command,
    suite_values,
    summarize,
)

__all__ = [
    "LEADERBOARD_DIR",
    "LeaderboardEntry",
    "entry_paths",
    "leaderboard_table",
    "run_entry",
    "submit_entry",
    "verify_entries",
    "verify_entry",
]

#: Where entries live by default: ``leaderboard/`` in the working directory.
LEADERBOARD_DIR = Path("leaderboard")
#: How an entry's calls and seconds were obtained (module docstring).
COSTS = ("claimed", "measured")
#: The ``config`` keys an entry keeps (the run's declarations; anything else is dropped).
_CONFIG_KEYS = ("suite", "split", "seeds", "noise", "placers", "budget")


@dataclass(frozen=True)
class LeaderboardEntry:
    """One leaderboard entry's summary (the ``entry`` object of its file).

    ``costs`` is ``"measured"`` (``calls`` and ``seconds`` counted here by
    :func:`run_entry`) or ``"claimed"`` (taken from a submitted file); ``spec`` is the
    ``--placer`` of a measured run (None when claimed); ``budget`` its budget of
    simulator calls per placement (None: none). ``score`` is the normalized score over
    ``score_instances`` instances (module docstring)."""

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
    score: float | None = None
    score_instances: int = 0
    costs: str = "claimed"
    spec: str | None = None
    budget: int | None = None
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``entry`` object written to the file (no path)."""
        out = asdict(self)
        out["seeds"] = list(self.seeds)
        del out["path"]
        return out

    @property
    def command(self) -> str:
        """The command that reproduces this entry (module docstring)."""
        return reproduce_command(
            name=self.name,
            placer=self.placer,
            suite=self.suite,
            split=self.split,
            seeds=self.seeds,
            spec=self.spec,
            budget=self.budget,
            path=self.path,
        )


def _fail(path: Path | str, problem: str) -> ValueError:
    return ValueError(f"{path}: {problem}")


def _check_format(path: Path | str, data: dict[str, Any]) -> None:
    if data.get("format") != RESULTS_FORMAT:
        shown = repr(data.get("format"))[:100]
        raise _fail(path, f"format: expected {RESULTS_FORMAT!r} (a suite run), got {shown}")


def _pick_placer(path: Path | str, rows: list[dict[str, Any]], placer: str | None) -> str:
    from placegym.teachers import list_teachers

    names = list(dict.fromkeys(str(r["placer"]) for r in rows))
    if placer is not None:
        if placer not in names:
            shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
            raise _fail(path, f"--placer: no rows of {placer!r} (placers: {shown})")
        return placer
    own = [n for n in names if n not in set(list_teachers())]
    if len(own) != 1:
        raise _fail(
            path,
            f"--placer: expected one of {', '.join(names[:10])} (the file has "
            f"{len(own)} placers that are not teachers)",
        )
    return own[0]


def _check_rows(
    path: Path | str, rows: list[dict[str, Any]], placer: str, config: dict[str, Any]
) -> tuple[Any, str, tuple[int, ...]]:
    """The declared run (:func:`check_config`), every row of it, and the placer's rows
    complete: one per instance of the split and declared seed."""
    try:
        suite, split, seeds = check_config(config)
        check_placer_name(placer)
    except ValueError as e:
        raise _fail(path, str(e)) from None
    want = {(spec.id, s) for _, spec in suite.specs(split) for s in seeds}
    have: dict[tuple[str, int], int] = {}
    for i, r in enumerate(rows):
        if r.get("suite") != suite.name or r.get("split") != split:
            raise _fail(
                path,
                f"row {i}: {r.get('suite')!r}/{r.get('split')!r} is not the declared "
                f"config.suite/config.split {suite.name}/{split}",
            )
        if r["seed"] not in seeds:
            raise _fail(path, f"row {i}: seed {r['seed']} is not one of the declared seeds")
        if r["placer"] != placer:
            continue
        key = (r["instance"], r["seed"])
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
    return suite, split, seeds


def _replay_rows(path: Path | str, config: dict[str, Any], rows: list, index: list[int]):
    """Replay ``rows`` (the file's rows ``index``), refusing the first mismatch."""
    bad = replay_rows({**config, "noise": 0.0}, rows)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        first = bad[0]
        raise _fail(
            path, f"refused: row {index[first.row]} ({first.label}): {first.problem}{more}"
        )


def _enter(
    path: Path | str,
    data: dict[str, Any],
    rows: list[dict[str, Any]],
    *,
    name: str,
    url: str,
    placer: str | None,
    folder: str | Path,
    overwrite: bool,
    costs: str,
    spec: str | None = None,
) -> LeaderboardEntry:
    """Check a run (module docstring) and write it as entry ``name``."""
    check_name(name)
    check_url(url)
    _check_format(path, data)
    placer = _pick_placer(path, rows, placer)
    suite, split, seeds = _check_rows(path, rows, placer, data["config"])
    out = entry_path(folder, suite.name, split, name)
    if out.exists() and not overwrite:
        raise ValueError(f"{out}: an entry named {name!r} exists (choose another --name)")
    index = [i for i, r in enumerate(rows) if r["placer"] in (placer, REFERENCE)]
    keep = [rows[i] for i in index]
    _replay_rows(path, data["config"], keep, index)
    budget = data["config"].get("budget")
    summary = summarize([r for r in keep if r["placer"] == placer], suite_values(suite, split))
    entry = LeaderboardEntry(
        name=name, url=url, placer=placer, suite=suite.name, split=split, seeds=seeds,
        costs=costs, spec=spec, budget=budget, **summary,
    )  # fmt: skip
    config = {k: data["config"][k] for k in _CONFIG_KEYS if k in data["config"]}
    config["placers"] = list(dict.fromkeys(r["placer"] for r in keep))
    doc = {"format": RESULTS_FORMAT, "entry": entry.to_dict(), "config": config}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(results_text(doc, keep))  # the layout of a results file
    return LeaderboardEntry(**{**entry.__dict__, "path": out})


def submit_entry(
    results: str | Path,
    *,
    name: str,
    url: str = "",
    placer: str | None = None,
    folder: str | Path = LEADERBOARD_DIR,
    overwrite: bool = False,
) -> LeaderboardEntry:
    """Verify ``results`` (module docstring) and add it as entry ``name``, its costs
    *claimed* (the file's calls and seconds).

    Raises:
        ValueError: naming the file and what fails: a bad name or URL, an incomplete,
            undeclared or mislabelled run, simulator settings other than the suite's, a
            row that does not replay (its index and field), an existing entry.
        FileNotFoundError: no such file.
    """
    check_name(name)
    check_url(url)
    data, rows = read_results(results)
    if not rows or "suite" not in rows[0]:
        raise _fail(
            results, "not a suite run: a leaderboard takes `placegym bench --suite` results"
        )
    return _enter(
        results, data, rows, name=name, url=url, placer=placer, folder=folder,
        overwrite=overwrite, costs="claimed",
    )  # fmt: skip


def run_entry(
    spec: str,
    *,
    suite: str,
    split: str = "test",
    seeds: Sequence[int] = (0,),
    name: str | None = None,
    url: str = "",
    budget: int | None = None,
    folder: str | Path = LEADERBOARD_DIR,
    overwrite: bool = False,
    progress: bool = False,
) -> LeaderboardEntry:
    """Run the placer ``spec`` on ``suite``'s ``split`` here, under the harness's counting
    simulator (:func:`~placegym.train.harness.suite_bench.run_suite`, critical_path
    beside it as the reference), and add it as an entry whose costs are *measured*.

    Args:
        spec: a registered teacher (``heft``), a shipped agent (``pretrained:NAME``), an
            installed plug-in or ``MODULE:ATTRIBUTE[=JSON]``
            (:func:`~placegym.train.harness.plugins.load_placer`).
        suite: the suite.
        split: one of its splits.
        seeds: ``0 .. k-1``.
        name: the entry's name (default: the placer's column name).
        url: where to read about the placer (http or https).
        budget: simulator calls per placement (a search placer needs one; a run past it
            is a failure).
        folder: the leaderboard folder.
        overwrite: replace an entry of that name.
        progress: show a progress bar.

    Raises:
        ValueError: a bad spec, suite, split, seeds, budget, name or URL; a run whose
            rows do not replay.
    """
    from placegym.envs.suites import get_suite
    from placegym.teachers import list_teachers
    from placegym.train.harness.bench import teacher_placer
    from placegym.train.harness.placers import with_budget
    from placegym.train.harness.suite_bench import SuiteRecord, run_suite, suite_config

    check_spec(spec)
    check_url(url)
    seeds = check_seeds(list(seeds))
    if name is not None:
        check_name(name)
    if budget is not None and (type(budget) is not int or budget < 1):
        raise ValueError(
            f"--budget: expected a positive number of simulator calls, got {budget!r}"
        )
    the_suite = get_suite(suite)
    config = suite_config(the_suite, split, list(seeds), 0.0, [], {"budget": budget})
    check_config(config)  # split and seeds before anything runs
    placer: Any
    if spec in list_teachers():
        column, placer = spec, teacher_placer(spec)
    elif spec.startswith("pretrained:"):
        from placegym.train.evaluate import load_agent

        placer = load_agent(spec, mode="greedy")
        column = placer.name
    else:
        from placegym.train.harness.plugins import load_placer

        column, placer = load_placer(spec)
    check_placer_name(column, f"placer {spec!r}: column name")
    placer = placer if budget is None else with_budget(placer, budget)
    records: list[SuiteRecord] = run_suite(
        the_suite, split, [], extra_placers={column: placer}, seeds=list(seeds),
        progress=progress,
    )  # fmt: skip
    rows = [asdict(r) for r in records]
    data = {"format": RESULTS_FORMAT, "config": {**config, "placers": [column]}}
    for i, row in enumerate(rows):
        check_row(row, f"records[{i}]", True)
    return _enter(
        f"placegym leaderboard run --placer {spec}", data, rows, name=name or column, url=url,
        placer=column, folder=folder, overwrite=overwrite, costs="measured", spec=spec,
    )  # fmt: skip


def _spec_column(spec: str) -> str | None:
    """The column name a teacher's or shipped agent's spec runs as (None: a user's)."""
    from placegym.teachers import list_teachers

    if spec in list_teachers():
        return spec
    return spec.removeprefix("pretrained:") if spec.startswith("pretrained:") else None


def _stored(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], LeaderboardEntry]:
    """A stored entry's file, its rows, and its entry with the summary recomputed from
    the rows and the installed suite; every declaration checked (no re-simulation)."""
    data, rows = read_results(path)
    info = data.get("entry")
    if not isinstance(info, dict):
        raise _fail(path, "not a leaderboard entry (no entry object)")
    _check_format(path, data)
    try:
        name = check_name(info.get("name"), "entry.name")
        url = check_url(info.get("url", ""), "entry.url")
        placer = check_placer_name(info.get("placer"), "entry.placer")
        costs = info.get("costs", "claimed")
        if costs not in COSTS:
            raise ValueError(f"entry.costs: expected 'claimed' or 'measured', got {costs!r}")
        spec = info.get("spec")
        if spec is not None:
            check_spec(spec, "entry.spec")
        if costs == "measured" and spec is None:
            raise ValueError("entry.spec: a measured entry names the placer it ran")
        if spec is not None and _spec_column(spec) not in (None, placer):
            raise ValueError(f"entry.spec: {spec!r} runs {_spec_column(spec)}, not {placer}")
    except ValueError as e:
        raise _fail(path, str(e)) from None
    if not rows or "suite" not in rows[0]:
        raise _fail(path, "not a suite run")
    suite, split, seeds = _check_rows(path, rows, placer, data["config"])
    if any(r["placer"] not in (placer, REFERENCE) for r in rows):
        raise _fail(path, f"rows of placers other than {placer} and {REFERENCE}")
    if path.parent.parts[-2:] != (suite.name, split) or path.stem != name:
        raise _fail(path, f"entry {name!r} of {suite.name}/{split} must be <dir>/"
                    f"{suite.name}/{split}/{name}.json")  # fmt: skip
    summary = summarize([r for r in rows if r["placer"] == placer], suite_values(suite, split))
    entry = LeaderboardEntry(
        name=name, url=url, placer=placer, suite=suite.name, split=split, seeds=seeds,
        costs=costs, spec=spec, budget=data["config"].get("budget"), path=path, **summary,
    )  # fmt: skip
    return data, rows, entry


def _same(stored: Any, value: Any) -> bool:
    if isinstance(value, float) and type(stored) in (int, float):
        return math.isclose(float(stored), value, rel_tol=1e-9, abs_tol=1e-9)
    return stored == value


def verify_entry(path: str | Path) -> LeaderboardEntry:
    """Re-verify one stored entry: its declarations, complete, every row replays against
    the installed suite, the stored summary as recomputed (an entry written before a
    field existed lacks it; a field present must match).

    Raises:
        ValueError: naming the file and the first failure.
        FileNotFoundError: no such file.
    """
    path = Path(path)
    data, rows, entry = _stored(path)
    _replay_rows(path, data["config"], rows, list(range(len(rows))))
    info = data["entry"]
    for key, value in entry.to_dict().items():
        if key in info and not _same(info[key], value):
            raise _fail(path, f"entry.{key}: stored {info[key]!r}, rows give {value!r}")
    return entry


def entry_paths(folder: str | Path = LEADERBOARD_DIR, suite: str | None = None) -> list[Path]:
    """The entry files under ``folder`` (``<suite>/<split>/<name>.json``; of ``suite``
    only, when given), sorted."""
    root = Path(folder)
    pattern = "*/*.json" if suite is not None else "*/*/*.json"
    if suite is not None:
        check_name(suite, "suite")
        root = root / suite
    return sorted(root.glob(pattern)) if root.is_dir() else []


def verify_entries(folder: str | Path = LEADERBOARD_DIR) -> list[LeaderboardEntry]:
    """:func:`verify_entry` every entry under ``folder`` (the first failure raises)."""
    return [verify_entry(p) for p in entry_paths(folder)]


def _rank_key(e: LeaderboardEntry) -> tuple:
    return (-e.feasible, math.inf if e.geomean_best is None else e.geomean_best, e.name)


def leaderboard_table(
    suite: str, split: str = "test", folder: str | Path = LEADERBOARD_DIR
) -> str:
    """The ranked markdown table of ``suite``'s ``split`` (module docstring), then the
    command that reproduces each entry. Every entry's declarations and rows are checked
    and its numbers recomputed from them and the installed suite; :func:`verify_entries`
    also re-simulates them.

    Raises:
        ValueError: an unknown suite or split, an entry that fails a check (naming it).
    """
    from placegym.envs.suites import get_suite

    get_suite(check_name(suite, "suite")).specs(check_name(split, "--split"))
    entries = [_stored(p)[2] for p in sorted((Path(folder) / suite / split).glob("*.json"))]
    if not entries:
        return f"(no entries for {suite}/{split} under {folder})"
    entries.sort(key=_rank_key)
    lines = [
        f"Leaderboard {suite}/{split}: ranked by feasible (instance, seed) pairs, then the "
        f"geometric-mean ratio to the best known over the feasible rows with a best known. "
        f"Score: 0 = the random teacher's seed-0 placement, 100 = the best known, per "
        f"instance (an infeasible row 0), averaged. Costs measured here by `placegym "
        f"leaderboard run`, or claimed by a submitted file.",
        "",
        "| rank | entry | placer | feasible | vs best known (geomean) | over | score | calls | "
        "wall s | costs | seeds | url |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for i, e in enumerate(entries, 1):
        gm = "—" if e.geomean_best is None else f"{e.geomean_best:.3f}x"
        score = "—" if e.score is None else f"{e.score:.1f}"
        url = f"[link]({e.url})" if e.url else ""
        lines.append(
            f"| {i} | {e.name} | {e.placer} | {e.feasible}/{e.rows} | {gm} | "
            f"{e.gap_instances} | {score} | {e.calls:,} | {e.seconds:.1f} | {e.costs} | "
            f"{','.join(map(str, e.seeds))} | {url} |"
        )
    lines += ["", "Reproduce:", ""]
    lines += [f"- {e.name}: `{e.command}`" for e in entries]
    return "\n".join(lines)


def entries_table(entries: Sequence[LeaderboardEntry]) -> str:
    """One line per verified entry (``placegym leaderboard verify`` prints it)."""
    return "\n".join(
        f"ok {e.suite}/{e.split}/{e.name}: {e.placer}, {e.feasible}/{e.rows} feasible, "
        f"costs {e.costs}"
        for e in entries
    )
