"""``placegym leaderboard``: submit a verified suite run, show a split's ranking, re-verify.

::

    placegym bench --suite generalize-v0 --split test --placer mymod:MyPlacer --out run
    placegym leaderboard submit run/results.json --name my-placer --url https://...
    placegym leaderboard show generalize-v0 --split test
    placegym leaderboard verify                  # every entry (CI runs it)

What is checked and how entries rank: :mod:`placegym.train.leaderboard`. Errors are one line
with exit code 2 (a refused submission names the row).
"""

from __future__ import annotations

import argparse


def add_leaderboard_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``leaderboard`` on the CLI's subparsers."""
    p = sub.add_parser(
        "leaderboard",
        help="submit verified suite results, show a split's ranking, re-verify entries",
        description="A leaderboard per suite split. `submit` verifies a results file of "
        "`placegym bench --suite` (every instance and declared seed present, every row "
        "replays: digests, placements, makespans, feasibility) and adds it as an entry; "
        "`show` ranks a split's entries by feasible count, then geometric-mean ratio to "
        "the best known; `verify` re-checks every stored entry.",
    )
    p.add_argument(
        "--dir", default="leaderboard", help="the leaderboard folder (default ./leaderboard)"
    )
    ops = p.add_subparsers(dest="op", required=True, metavar="{submit,show,verify}")
    s = ops.add_parser("submit", help="verify a results file and add it as an entry")
    s.add_argument("results", help="results.json of `placegym bench --suite ... --out DIR`")
    s.add_argument("--name", required=True, help="entry name (letters, digits, . _ -)")
    s.add_argument("--url", default="", help="where to read about the placer (paper, code)")
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
    gm = "—" if e.geomean_best is None else f"{e.geomean_best:.3f}x the best known"
    print(f"verified and added {e.path}: {e.placer}, {e.feasible}/{e.rows} feasible, {gm}")
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
