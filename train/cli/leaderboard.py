"""``placegym leaderboard``: run or submit a verified suite run, show a split's ranking,
re-verify.

::

    placegym leaderboard run --placer mymod:MyPlacer --suite generalize-v0 --name mine
                                                 # runs here: calls and time measured
    placegym bench --suite generalize-v0 --split test --placer mymod:MyPlacer --out run
    placegym leaderboard submit run/results.json --name my-placer   # costs claimed
    placegym leaderboard show generalize-v0 --split test
    placegym leaderboard verify                  # every entry (CI runs it)

What is checked and how entries rank: :mod:`placegym.train.leaderboard`. Errors are one line
with exit code 2 (a refused submission names the row and the field).
"""

from __future__ import annotations

import argparse


def _seeds(text: str) -> list[int]:
    """``--seeds``: ``0,1,2`` (the leaderboard takes 0 .. k-1)."""
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds: expected comma-separated integers, got {text!r}") from None


def add_leaderboard_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``leaderboard`` on the CLI's subparsers."""
    p = sub.add_parser(
        "leaderboard",
        help="run or submit verified suite results, show a split's ranking, re-verify entries",
        description="A leaderboard per suite split. `run` runs a placer on a suite split "
        "here, calls and time measured by the counting simulator, and adds it as an entry; "
        "`submit` verifies a results file of `placegym bench --suite` (every instance and "
        "declared seed present, the suite's settings, every row replays against the "
        "installed suite: digests, bounds, best known, placements, makespans, feasibility) "
        "and adds it with its calls and time claimed; `show` ranks a split's entries by "
        "feasible count, then geometric-mean ratio to the best known, with a normalized "
        "score and the command that reproduces each; `verify` re-checks every stored entry.",
    )
    p.add_argument(
        "--dir", default="leaderboard", help="the leaderboard folder (default ./leaderboard)"
    )
    ops = p.add_subparsers(dest="op", required=True, metavar="{run,submit,show,verify}")
    s = ops.add_parser("run", help="run a placer on a suite split and add it (costs measured)")
    s.add_argument(
        "--placer",
        required=True,
        help="a teacher (heft), a shipped agent (pretrained:NAME), a plug-in, or "
        "MODULE:ATTRIBUTE[=JSON keyword arguments]",
    )
    s.add_argument("--suite", required=True, help="the suite (placegym suites lists them)")
    s.add_argument("--split", default="test", help="split (default test)")
    s.add_argument("--seeds", default="0", help="seeds 0,1,...,k-1 (default 0)")
    s.add_argument("--name", help="entry name (default: the placer's name)")
    s.add_argument("--url", default="", help="where to read about the placer (http or https)")
    s.add_argument(
        "--budget", type=int, help="simulator calls per placement (a search placer needs one)"
    )
    s.add_argument("--overwrite", action="store_true", help="replace an entry of that name")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_run)
    s = ops.add_parser("submit", help="verify a results file and add it (costs claimed)")
    s.add_argument("results", help="results.json of `placegym bench --suite ... --out DIR`")
    s.add_argument("--name", required=True, help="entry name (letters, digits, . _ -)")
    s.add_argument("--url", default="", help="where to read about the placer (http or https)")
    s.add_argument(
        "--placer", help="the placer of the file to enter (default: the only non-teacher one)"
    )
    s.add_argument("--overwrite", action="store_true", help="replace an entry of that name")
    s.set_defaults(func=cmd_submit)
    s = ops.add_parser("show", help="the ranked entries of a suite split (markdown)")
    s.add_argument("suite")
    s.add_argument("--split", default="test", help="split (default test)")
    s.set_defaults(func=cmd_show)
    s = ops.add_parser("verify", help="re-verify every stored entry")
    s.set_defaults(func=cmd_verify)


def _added(e) -> str:
    gm = "—" if e.geomean_best is None else f"{e.geomean_best:.3f}x the best known"
    score = "" if e.score is None else f", score {e.score:.1f}"
    return (
        f"verified and added {e.path}: {e.placer}, {e.feasible}/{e.rows} feasible, {gm}"
        f"{score}, {e.calls:,} calls and {e.seconds:.1f} s {e.costs}"
    )


def cmd_run(args: argparse.Namespace) -> int:
    """Run the placer, verify its rows and add the entry; print where it went."""
    from placegym.train.leaderboard import run_entry

    e = run_entry(
        args.placer,
        suite=args.suite,
        split=args.split,
        seeds=_seeds(args.seeds),
        name=args.name,
        url=args.url,
        budget=args.budget,
        folder=args.dir,
        overwrite=args.overwrite,
        progress=not args.no_progress,
    )
    print(_added(e))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    """Verify the results file and add the entry; print where it went."""
    from placegym.train.leaderboard import submit_entry

    e = submit_entry(
        args.results,
        name=args.name,
        url=args.url,
        placer=args.placer,
        folder=args.dir,
        overwrite=args.overwrite,
    )
    print(_added(e))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print the split's ranked entries."""
    from placegym.train.leaderboard import leaderboard_table

    print(leaderboard_table(args.suite, args.split, args.dir))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Re-verify every entry; the first failure is the error."""
    from placegym.train.leaderboard import entries_table, verify_entries

    entries = verify_entries(args.dir)
    print(entries_table(entries) if entries else f"(no entries under {args.dir})")
    return 0
