"""Generated blocks and figures of the documentation, rendered from stored result files.

A page (``README.md``, ``docs/**/*.md``) marks each block it does not write by hand with
``<!-- generated: NAME -->`` and ``<!-- end generated -->`` lines. :data:`BLOCKS` says
what NAME is (:class:`Block`): the result files it reads (under ``docs/results``), how it
renders its markdown from them and, for some, a figure drawn from them with matplotlib
(``docs/NAME.png``, linked from the block). Nothing is trained or recomputed:
the per-graph and generalist tables come from their saved rows and stored baselines
(:func:`store_baselines` computes those once), the suite and workload tables from the
``results.json`` of ``placegym bench --out DIR``, the anytime curves from the
``anytime_curve.csv`` of ``placegym anytime``, the SB3 recipe's from the ``results.json``
of its seeds (:func:`~placegym.train.experiments.sb3_recipe.recipe_table`).

Every block ends with where its numbers come from: each result file ``F`` has a sidecar
``F.meta.json`` (:func:`write_sidecar`) with the command that wrote it, the date and the
machine (:func:`machine`: platform, CPU model, logical CPUs, load average at the end of
the measurement); a field not recorded is ``null``, and the page says so.

Commands (from a source checkout, or ``--root DIR``; also ``placegym report --pages``)::

    python -m placegym.train.experiments.pages            # rewrite every block and figure
    python -m placegym.train.experiments.pages --check    # exit 1 naming each stale block
    python -m placegym.train.experiments.pages --baselines per_graph   # store baselines
    python -m placegym.train.experiments.pages --record docs/results/F --command "CMD"

``--check`` compares the text of every block and requires each figure to exist; it does
not compare pixels (a PNG's bytes depend on the matplotlib and FreeType versions). To add
a result: store its file under ``docs/results``, ``--record`` its sidecar, add one entry
to :data:`BLOCKS` (a suite's ``results.json``: :func:`suite_block`), put the markers in
a page.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from placegym.train.experiments.sidecars import (
    RESULTS,
    machine,
    provenance,
    write_sidecar,
)
from placegym.train.stats import geomean

__all__ = [
    "BLOCKS",
    "Block",
    "machine",
    "main",
    "render_block",
    "stale_blocks",
    "store_baselines",
    "suite_block",
    "update_pages",
    "write_sidecar",
]

#: The folder of the generated figures, relative to the checkout.
FIGURES = Path("docs")
BEGIN = re.compile(r"<!-- generated: ([^ ]+) -->")
END = "<!-- end generated -->"


@dataclass(frozen=True)
class Block:
    """A generated block of a page.

    Attributes:
        files: the result files it reads, relative to the results folder; each has a
            sidecar (``F.meta.json``), shown below the block.
        render: ``render(results folder)``: the block's markdown.
        draw: ``draw(results folder, png path)``: its figure, or None for a table only.
        alt: the figure's alternative text.
    """

    files: tuple[str, ...]
    render: Callable[[Path], str]
    draw: Callable[[Path, Path], None] | None = None
    alt: str = ""


# ---------------------------------------------------------------------- renderers
def _read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _dataclass_rows(cls: Any, records: list[dict[str, Any]]) -> list[Any]:
    """``cls(**record)`` of each record, fields the class does not know left out."""
    known = {f.name for f in fields(cls)}
    return [cls(**{k: v for k, v in r.items() if k in known}) for r in records]


def workloads_table(path: Path) -> str:
    """The table of a workloads x clusters ``results.json`` (``placegym bench``)."""
    from placegym.train.harness.bench import Record, bench_markdown

    records = json.loads(path.read_text())["records"]
    return "Makespans in ms (ratio to critical_path):\n\n" + bench_markdown(
        _dataclass_rows(Record, records)
    )


def _suite_records(path: Path) -> list[Any]:
    from placegym.train.harness.suite_bench import SuiteRecord

    return _dataclass_rows(SuiteRecord, json.loads(path.read_text())["records"])


def suite_breakdown(records: Sequence[Any]) -> str:
    """Geometric mean of makespan / best known per placer over the (instance, seed)
    pairs every placer solved: over all of them, per CCR (instances named ``-ccrK@``) and
    per cluster."""
    placers = list(dict.fromkeys(r.placer for r in records))
    pairs: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        pairs.setdefault((r.instance, r.seed), {})[r.placer] = r
    solved = {
        k: v
        for k, v in pairs.items()
        if len(v) == len(placers)
        and all(x.feasible and x.gap_to_best is not None for x in v.values())
    }
    ccr = re.compile(r"-ccr(\d+(?:\.\d+)?)@")
    groups: dict[str, list[tuple[str, int]]] = {f"all {len(solved)}": list(solved)}
    ccrs = sorted({float(m.group(1)) for k in solved if (m := ccr.search(k[0]))})
    for c in ccrs:
        label = f"CCR {c:g}"
        groups[label] = [k for k in solved if (m := ccr.search(k[0])) and float(m.group(1)) == c]
    for cluster in dict.fromkeys(next(iter(v.values())).cluster for v in solved.values()):
        groups[f"`{cluster}`"] = [k for k, v in solved.items() if v[placers[0]].cluster == cluster]
    lines = ["| instances | " + " | ".join(placers) + " |", "|---|" + "---|" * len(placers)]
    for label, keys in groups.items():
        cells = [f"{geomean([1 + solved[k][p].gap_to_best for k in keys]):.3f}" for p in placers]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        f"\nGeometric mean of makespan / best known over the {len(solved)} of {len(pairs)} "
        "(instance, seed) pairs every placer solved."
    )
    return "\n".join(lines)


def suite_block(file: str, view: str) -> Block:
    """A block of a suite's ``results.json`` (``placegym bench --suite ... --out DIR``):
    ``view`` ``summary`` (per placer: ratio to critical_path, gaps, time, feasible count),
    ``breakdown`` (:func:`suite_breakdown`) or ``instances`` (per instance, the gaps)."""
    if view not in SUITE_VIEWS:
        raise ValueError(f"view: must be one of {', '.join(SUITE_VIEWS)}, got {view!r}")

    def render(results: Path) -> str:
        from placegym.train.harness import suite_bench

        views: dict[str, Callable[[Sequence[Any]], str]] = {
            "summary": suite_bench.summary_table,
            "breakdown": suite_breakdown,
            "instances": suite_bench.instance_table,
        }
        return views[view](_suite_records(results / file))

    return Block((file,), render)


#: The views of a suite's results (:func:`suite_block`).
SUITE_VIEWS = ("summary", "breakdown", "instances")


def _anytime_curves(
    path: Path,
) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]], dict]:
    """``(grid, {placer: (mean, std)}, info)`` from an ``anytime_curve.csv`` (nan where a
    placer has no point), info: ``normalizer``, ``instances``, ``of``."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no curve rows")
    grid = np.array(sorted({int(r["calls"]) for r in rows}))
    at = {int(c): i for i, c in enumerate(grid)}
    cv: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for r in rows:
        mean, std = cv.setdefault(
            r["placer"], (np.full(len(grid), np.nan), np.full(len(grid), np.nan))
        )
        mean[at[int(r["calls"])]] = float(r["mean_ratio"])
        std[at[int(r["calls"])]] = float(r["std_ratio"])
    info = {k: rows[0][k] for k in ("normalizer", "instances", "of")}
    return grid, cv, info


def anytime_table(path: Path, marks: Sequence[int] = (10, 100, 1000)) -> str:
    """Best makespan / normalizer at ``marks`` and the budget, per placer, mean ± std over
    seeds (an ``anytime_curve.csv``)."""
    grid, cv, info = _anytime_curves(path)
    cols = [m for m in marks if m < grid[-1]] + [int(grid[-1])]
    lines = [
        "| placer | " + " | ".join(f"{c:,} calls" for c in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for name, (mean, std) in cv.items():
        cells = []
        for c in cols:
            ok = np.flatnonzero((grid <= c) & np.isfinite(mean))
            cells.append(f"{mean[ok[-1]]:.3f} ± {std[ok[-1]]:.3f}" if len(ok) else "n/a")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    some = (
        info["instances"]
        if info["instances"] == info["of"]
        else f"{info['instances']} of {info['of']}"
    )
    lines.append(
        f"\nBest makespan / {info['normalizer']}: geometric mean over {some} instances, "
        "mean ± std over seeds."
    )
    return "\n".join(lines)


def draw_anytime(path: Path, png: Path, title: str) -> None:
    """The figure ``placegym anytime`` draws, from its ``anytime_curve.csv``."""
    from placegym.train.harness.anytime import plot_curves

    grid, cv, info = _anytime_curves(path)
    plot_curves(cv, grid, png, normalizer=info["normalizer"], title=title)


def _part(
    results: Path, part: str, rows_file: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, dict]]:
    """The rows of ``part`` (or of ``rows_file``) and ``part``'s baselines, every row's
    instance among them."""
    rows = _read_rows(results / (rows_file or f"{part}.jsonl"))
    base = json.loads((results / f"{part}.baselines.json").read_text())
    missing = sorted({r["instance"] for r in rows} - set(base))
    if missing:
        raise ValueError(
            f"{part}.baselines.json: no baselines for {', '.join(missing)} "
            f"(--baselines {part} computes them)"
        )
    return rows, base


def _per_graph(results: Path) -> str:
    from placegym.train.experiments.per_graph import per_graph_table

    return per_graph_table(*_part(results, "per_graph"))


def _generalist(part: str) -> Callable[[Path], str]:
    """The table of generalist study ``part``
    (:data:`placegym.train.experiments.generalist.STUDIES`)."""

    def render(results: Path) -> str:
        from placegym.train.experiments.generalist import STUDIES, generalist_table

        return generalist_table(*_part(results, part), STUDIES[part])

    return render


def _sb3_recipe(results: Path) -> str:
    from placegym.train.experiments.sb3_recipe import RecipeRun, recipe_table

    runs = [RecipeRun(**r) for f in _SB3 for r in json.loads((results / f).read_text())]
    bench = json.loads((results / _P100).read_text())["records"]
    ffnn = [r for r in bench if (r["workload"], r["cluster"]) == ("ffnn", "p100x4")]  # FFNN-v0
    return recipe_table(runs, {r["placer"]: r["ratio_to_critical_path"] for r in ffnn})


def _onepass(results: Path) -> str:
    from placegym.train.experiments.onepass import onepass_table

    return onepass_table(*_part(results, "onepass"))


def _onepass_start(results: Path) -> str:
    """The one-pass evaluation of the generalist the recipe starts from (its own rows,
    the one-pass baselines)."""
    from placegym.train.experiments.onepass import onepass_table

    rows, base = _part(results, "onepass", "onepass-generalist.jsonl")
    return onepass_table(rows, base, over="search seeds")


def _onepass_rows(rows_file: str) -> Callable[[Path], str]:
    """The one-pass evaluation of the seeds whose rows are in ``rows_file`` (the policy
    with HEFT's lookahead columns, at the recipe's scale or the issue's), against the
    one-pass baselines."""

    def render(results: Path) -> str:
        from placegym.train.experiments.onepass import onepass_table

        return onepass_table(*_part(results, "onepass", rows_file))

    return render


_CH = "bench/comm-heavy-v0-test/results.json"
_ANY = "anytime/comm-heavy-v0-test/anytime_curve.csv"
_P100 = "bench/p100x4/results.json"
_SB3 = tuple(f"sb3_recipe/s{seed}/results.json" for seed in (0, 1, 2))
#: Every generated block, by the name its markers carry.
#: The suite runs stored under ``docs/results/bench/<run>/`` and the views shown of each.
SUITE_RUNS = {
    "comm-heavy-v0-test": ("summary", "breakdown", "instances"),
    "generalize-v0-test": ("summary",),
    "memory-tight-v0-test": ("summary", "instances"),
    "memory-tight-v0-test-agents": ("summary", "instances"),
    "published-v0-test": ("summary", "instances"),
    "published-v0-test-expert": ("instances",),
    "training-v0-test": ("summary", "instances"),
    "pipedream-v0-test": ("summary", "instances"),
}


def _leaderboard(results: Path) -> str:
    """Every suite's test-split ranking from the repository's ``leaderboard/`` entries."""
    from placegym.train.leaderboard import entry_paths, leaderboard_table

    board = results.parents[1] / "leaderboard"
    suites = sorted({p.parts[-3] for p in entry_paths(board)})
    return "\n\n".join(leaderboard_table(suite, "test", board) for suite in suites)


BLOCKS: dict[str, Block] = {
    "bench-p100x4": Block((_P100,), lambda results: workloads_table(results / _P100)),
    **{
        f"suite-{view}-{run}": suite_block(f"bench/{run}/results.json", view)
        for run, views in SUITE_RUNS.items()
        for view in views
    },
    "leaderboard": Block((), _leaderboard),
    "anytime-comm-heavy-v0-test": Block(
        (_ANY,),
        lambda results: anytime_table(results / _ANY),
        lambda results, png: draw_anytime(
            results / _ANY, png, "comm-heavy-v0 test: 48 instances, seeds 0,1,2"
        ),
        "anytime curves of anneal and random search on comm-heavy-v0 test",
    ),
    "per_graph": Block(("per_graph.jsonl", "per_graph.baselines.json"), _per_graph),
    **{
        part: Block((f"{part}.jsonl", f"{part}.baselines.json"), _generalist(part))
        for part in ("generalist", "generalist_rollout_memory", "generalist_memory")
    },
    "sb3-recipe": Block((*_SB3, _P100), _sb3_recipe),
    "onepass": Block(("onepass.jsonl", "onepass.baselines.json"), _onepass),
    "onepass-generalist": Block(
        ("onepass-generalist.jsonl", "onepass.baselines.json"), _onepass_start
    ),
    **{
        name: Block((f"{name}.jsonl", "onepass.baselines.json"), _onepass_rows(f"{name}.jsonl"))
        for name in (
            "onepass-successors",
            "onepass-scale",
            "onepass-timed",
            "onepass-select",
            "onepass-rollouts",
            "onepass-contention",
            "onepass-peak",
            "onepass-polish",
            "onepass-deep-polish",
            "onepass-pair-polish",
            "onepass-relief",
            "onepass-weigh",
            "onepass-insert",
        )
    },
}


# ---------------------------------------------------------------------- pages
def figure_path(root: Path, name: str) -> Path:
    """Where block ``name``'s figure is drawn."""
    return root / FIGURES / f"{name}.png"


def render_block(name: str, root: Path, page: Path) -> str:
    """The text between the markers of block ``name`` on ``page`` (its figure linked
    relative to the page).

    Raises:
        ValueError: no block has that name (naming the page).
    """
    if name not in BLOCKS:
        raise ValueError(f"{page}: unknown generated block {name!r} (known: {', '.join(BLOCKS)})")
    block = BLOCKS[name]
    results = root / RESULTS
    parts = [block.render(results).rstrip()]
    if block.draw is not None:
        link = os.path.relpath(figure_path(root, name), page.parent)
        parts.append(f"![{block.alt}]({Path(link).as_posix()})")
    parts.append(
        "Generated by `python -m placegym.train.experiments.pages` from:\n\n"
        + provenance(results, block.files)
    )
    return "\n" + "\n\n".join(parts) + "\n"


def split_page(text: str, page: Path) -> list[tuple[str | None, str]]:
    """The page as ``(None, hand-written text)`` and ``(name, block body)`` pieces, in
    order; the markers stay in the hand-written pieces.

    Raises:
        ValueError: a block not closed, or opened inside another (naming page and line).
    """
    out: list[tuple[str | None, str]] = []
    lines = text.splitlines(keepends=True)
    name: str | None = None
    start = 0
    body: list[str] = []
    hand: list[str] = []
    for i, line in enumerate(lines, 1):
        begin = BEGIN.fullmatch(line.strip())
        if name is None:
            hand.append(line)
            if begin:
                out.append((None, "".join(hand)))
                hand, name, start, body = [], begin.group(1), i, []
            elif line.strip() == END:
                raise ValueError(f"{page}:{i}: {END} without a block opened")
        elif begin:
            raise ValueError(f"{page}:{i}: block {begin.group(1)!r} opened inside {name!r}")
        elif line.strip() == END:
            out.append((name, "".join(body)))
            hand, name = [line], None
        else:
            body.append(line)
    if name is not None:
        raise ValueError(f"{page}:{start}: block {name!r} is not closed ({END})")
    out.append((None, "".join(hand)))
    return out


def pages(root: Path) -> list[Path]:
    """The pages that may hold generated blocks: README.md and docs/**/*.md."""
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p.is_file()]


def _rendered(root: Path, page: Path) -> tuple[str, list[str]]:
    """The page with every block rendered, and the names of its blocks."""
    pieces = split_page(page.read_text(), page)
    names = [n for n, _ in pieces if n is not None]
    text = "".join(body if n is None else render_block(n, root, page) for n, body in pieces)
    return text, names


def stale_blocks(root: Path) -> list[str]:
    """``page: block NAME`` for every block that differs from its rendering, and
    ``missing figure PATH`` for every figure of a used block that does not exist."""
    stale, used = [], set()
    for page in pages(root):
        pieces = split_page(page.read_text(), page)
        for name, body in pieces:
            if name is None:
                continue
            used.add(name)
            if body != render_block(name, root, page):
                stale.append(f"{page.relative_to(root)}: block {name}")
    for name in sorted(used):
        path = figure_path(root, name)
        if BLOCKS[name].draw is not None and not path.is_file():
            stale.append(f"missing figure {path.relative_to(root)}")
    return stale


def update_pages(root: Path) -> list[str]:
    """Rewrite every block of every page and draw the figures of the blocks in use;
    returns the pages and figures written."""
    written, used = [], set()
    for page in pages(root):
        text, names = _rendered(root, page)
        used |= set(names)
        if text != page.read_text():
            page.write_text(text)
            written.append(str(page.relative_to(root)))
    for name in sorted(used):
        block = BLOCKS[name]
        if block.draw is not None:
            path = figure_path(root, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            block.draw(root / RESULTS, path)
            written.append(str(path.relative_to(root)))
    return written


# ---------------------------------------------------------------------- stored baselines
def store_baselines(part: str, root: Path) -> Path:
    """Compute the baselines of every instance of report part ``part``'s saved rows
    (``per_graph``: :func:`placegym.train.experiments.per_graph.baselines`,
    a generalist study's part: :func:`placegym.train.experiments.generalist.
    generalist_baselines` at the study's budget; seeded, so the same on any machine)
    into ``docs/results/PART.baselines.json`` with its sidecar.

    Raises:
        ValueError: an unknown part.
    """
    from placegym.train.experiments import generalist, per_graph

    compute = {"per_graph": per_graph.baselines}
    for study in generalist.STUDIES.values():
        compute[study.part] = functools.partial(
            generalist.generalist_baselines, budget=study.budget
        )
    if part not in compute:
        raise ValueError(f"--baselines: must be one of {', '.join(compute)}, got {part!r}")
    results = root / RESULTS
    names = dict.fromkeys(r["instance"] for r in _read_rows(results / f"{part}.jsonl"))
    base = {}
    for i, name in enumerate(names, 1):
        base[name] = compute[part](name)
        print(f"[{i}/{len(names)}] {name}", flush=True)
    path = results / f"{part}.baselines.json"
    path.write_text(json.dumps(base, indent=1) + "\n")
    write_sidecar(path, f"python -m placegym.train.experiments.pages --baselines {part}")
    return path


# ---------------------------------------------------------------------- command line
def add_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """This module's options (also those of ``placegym report --pages``)."""
    p.add_argument("--root", default=".", help="the source checkout (default .)")
    p.add_argument("--check", action="store_true", help="exit 1 naming each stale block")
    p.add_argument("--baselines", metavar="PART", help="compute and store PART's baselines")
    p.add_argument("--record", metavar="FILE", help="write the sidecar of result file FILE")
    p.add_argument("--command", help="with --record: the command that wrote FILE")
    p.add_argument("--load", help="with --record: the load average '1,5,15' at the end")
    p.add_argument("--wall", type=float, help="with --record: the command's wall seconds")


def run(args: argparse.Namespace) -> int:
    """Carry out :func:`add_arguments`' options: 0, 1 (``--check``: stale blocks) or 2
    (bad input: one line naming it)."""
    root = Path(args.root)
    try:
        if args.record:
            if not args.command:
                raise ValueError("--record: --command is required")
            load = [float(x) for x in args.load.split(",")] if args.load else None
            extra = {} if args.wall is None else {"wall_seconds": round(args.wall, 2)}
            side = write_sidecar(Path(args.record), args.command, load=load, **extra)
            print(f"written: {side}")
            return 0
        if not (root / RESULTS).is_dir():
            raise ValueError(f"--root: {root} has no {RESULTS} (run from a source checkout)")
        if args.baselines:
            print(f"written: {store_baselines(args.baselines, root)}")
            return 0
        if args.check:
            stale = stale_blocks(root)
            print("".join(f"stale: {line}\n" for line in stale), end="")
            if stale:
                print("rewrite with: python -m placegym.train.experiments.pages")
            return 1 if stale else 0
        for line in update_pages(root):
            print(f"written: {line}")
        return 0
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module docstring)."""
    p = argparse.ArgumentParser(
        prog="python -m placegym.train.experiments.pages",
        description="Rewrite the generated blocks of README.md and docs/ from docs/results.",
    )
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
