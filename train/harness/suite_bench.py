"""``placegym bench --suite NAME [--split S]``: placers over a benchmark suite.

Every placer (teachers by name; as extra placers, anything
:func:`~placegym.train.harness.placers.as_placer` takes: trained agents, a user's
:class:`~placegym.train.harness.placers.Placer`, a search placer with its budget) places
every instance of the split for every seed; each placement is simulated and recorded as a
:class:`SuiteRecord` with

- ``seconds`` and ``calls``: the placer's wall time and the simulator calls it made
  (:mod:`placegym.train.harness.calls`; the simulation of its result is not one);

- the placement itself (``device``, ``order``) and the instance's ``digest``, so
  ``placegym bench --replay results.json`` can re-simulate it (:mod:`.replay`);
- ``ratio_to_critical_path`` (critical_path is always run, as the reference);
- ``gap_to_bound`` = makespan / certified lower bound − 1 (>= 0, how far from optimal at
  most) and ``gap_to_best`` = makespan / best known − 1 (negative: a new best known). The
  bound and the best known come from the suite's reference file when its entry is fresh;
  a missing or stale entry gets the bound computed on the spot and no best known. A
  reference whose best-known placement is infeasible is an error naming the instance
  (:func:`~placegym.train.harness.suite_reference.check_reference`).

Feasibility (:mod:`placegym.train.harness.feasibility`): every record has ``feasible``
and, when not, ``infeasible`` (why: over a device's memory, a split co-location group, a
placer that raised, was stopped at its budget of simulator calls or returned no
``Placement``). An infeasible record has no ratio and no gaps (None) and its ``makespan``
is None unless it was simulated (over memory); the tables show ``OOM``, ``split``,
``budget`` or ``failed`` in its place. The summary's means, maxima and counts of a
placer are over the (instance, seed) pairs that it and critical_path both solved (its
``compared`` column says how many of all), so one placer's failures never empty another's
row; a per-instance row averages the seeds on which every placer and critical_path are
feasible, saying how many of all; each placer's feasible count is a column of its own.

Outputs (``out``): ``results.json`` (config and records, placements included),
``results.csv`` (records without placements), ``table.md`` (a per-placer summary: the
geometric-mean ratio to critical_path, mean and max gaps, instances within 1% of the best
known, time, simulator calls, feasible count, pairs compared; then per instance each
placer's gaps to the best known and to the bound, and each placer's feasible count).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs.analysis.bounds import lower_bound
from placegym.envs.suites import Instance, Suite
from placegym.envs.suites.reference import Reference, load_references
from placegym.train.harness.bench import REFERENCE, check_placers, teacher_placer
from placegym.train.harness.calls import patched
from placegym.train.harness.feasibility import (
    by_key,
    count,
    mark,
    over,
    place,
    seed_rows,
)
from placegym.train.harness.placers import TORCH_THREADS, Placer, as_placer, placing_threads
from placegym.train.harness.suite_reference import check_reference
from placegym.train.progress import progress_bar
from placegym.train.stats import geomean

RESULTS_FORMAT = "placegym.suite-results/v1"
#: A placer within this fraction of the best known counts as reaching it.
NEAR_BEST = 0.01


@dataclass
class SuiteRecord:
    """One placement of one instance by one placer with one seed (module docstring)."""

    suite: str
    split: str
    instance: str
    cluster: str
    nodes: int
    seed: int
    placer: str
    makespan: float | None
    ratio_to_critical_path: float | None
    lower_bound: float
    best_known: float | None
    gap_to_bound: float | None
    gap_to_best: float | None
    oom: bool
    seconds: float
    digest: str
    device: list[int] | None
    order: list[int] | None
    calls: int = 0  # a default: results written before this field still load
    feasible: bool = True
    infeasible: str | None = None
    recompute: list[int] | None = None


def _recompute(placement: Any) -> list[int] | None:
    """A placement's recomputed nodes (None when there are none: the field is omitted
    from nothing, old files read the same)."""
    rc = getattr(placement, "recompute", None)
    return None if rc is None or not len(rc) else [int(v) for v in rc]


def instance_bounds(inst: Instance, refs: dict[str, Reference]) -> tuple[float, float | None]:
    """(lower bound, best known or None) of ``inst``: from a fresh reference entry, else the
    bound computed now and no best known.

    Raises:
        ValueError: the fresh entry's best-known placement is infeasible (naming the
            instance; :func:`~placegym.train.harness.suite_reference.check_reference`).
    """
    ref = refs.get(inst.id)
    if ref is not None and ref.digest == inst.digest:
        check_reference(inst, ref)
        return ref.lower_bound, ref.best_makespan
    return lower_bound(inst.graph, inst.cluster).value, None


def ratio(x: float, ref: float) -> float:
    """``x / ref`` (1 for 0 / 0, inf over another zero)."""
    return x / ref if ref > 0 else (1.0 if x == ref else math.inf)


def gap(x: float, ref: float | None) -> float | None:
    """``x / ref - 1``, None without a reference."""
    return None if ref is None else ratio(x, ref) - 1.0


def _records(
    inst: Instance,
    placers: dict[str, Placer],
    seed: int,
    noise: float,
    refs: dict,
    bar: Any = None,
) -> list[SuiteRecord]:
    bound, best = instance_bounds(inst, refs)
    g, c = inst.graph, inst.cluster
    runs = {}
    for name, p in placers.items():
        if bar is not None:
            bar.set_postfix_str(f"{inst.id}, {name}")
        runs[name] = place(p, g, c, seed, noise)
        if bar is not None:
            bar.update()
    ref = runs[REFERENCE]
    ref_ms = ref.makespan if ref.feasible else None
    out = []
    for name, run in runs.items():
        ms = run.makespan if run.feasible else None
        out.append(
            SuiteRecord(
                suite=inst.suite,
                split=inst.split,
                instance=inst.id,
                cluster=inst.cluster.name,
                nodes=inst.graph.num_nodes,
                seed=seed,
                placer=name,
                makespan=run.makespan,
                ratio_to_critical_path=None if ms is None or ref_ms is None else ratio(ms, ref_ms),
                lower_bound=bound,
                best_known=best,
                gap_to_bound=None if ms is None else ratio(ms, bound) - 1.0,
                gap_to_best=None if ms is None else gap(ms, best),
                oom=run.oom,
                seconds=run.seconds,
                calls=run.calls,
                digest=inst.digest,
                device=None if run.placement is None else run.placement.device.tolist(),
                order=None if run.placement is None else run.placement.order.tolist(),
                recompute=_recompute(run.placement),
                feasible=run.feasible,
                infeasible=run.infeasible,
            )
        )
    return out


def run_suite(
    suite: Suite,
    split: str | None,
    teachers: Sequence[str],
    *,
    extra_placers: dict[str, Any] | None = None,
    seeds: Sequence[int] = (0,),
    noise: float = 0.0,
    out: Path | None = None,
    progress: bool | str = True,
    meta: dict[str, Any] | None = None,
    torch_threads: int | None = TORCH_THREADS,
) -> list[SuiteRecord]:
    """Run the placers over ``split`` of ``suite`` (every split for None); see the module
    docstring. critical_path always runs (it is the ratios' reference).

    Args:
        suite: the suite.
        split: ``train``, ``test`` or None (every split).
        teachers: registered teachers to run, by name.
        extra_placers: more placers by column name (anything
            :func:`~placegym.train.harness.placers.as_placer` takes).
        seeds: seeds of every placer (and of the noise draws).
        noise: σ of the simulator's noise (0: exact).
        out: folder for ``results.json``, ``results.csv`` and ``table.md``.
        progress: a bar (True), nothing (False), or ``"auto"``: a bar on a terminal,
            else a line every few seconds on stderr (placer runs done of all:
            :func:`placegym.train.progress.progress_bar`).
        meta: more entries of ``results.json``'s ``config`` (e.g. budgets).
        torch_threads: torch threads the placers run with (None: the process's
            setting; :func:`~placegym.train.harness.placers.placing_threads`).
    """
    placers: dict[str, Placer] = {name: teacher_placer(name) for name in teachers}
    placers.update({name: as_placer(p) for name, p in (extra_placers or {}).items()})
    placers.setdefault(REFERENCE, teacher_placer(REFERENCE))
    refs = load_references(suite.name)
    instances = [suite.build(s, spec) for s, spec in suite.specs(split)]
    check_placers(placers, [(inst.graph, inst.cluster) for inst in instances])
    records: list[SuiteRecord] = []
    total = len(instances) * len(seeds) * len(placers)
    bar = progress_bar(total, desc=suite.name, unit="runs", mode=progress)
    # once for every run (each run counts its placer's calls)
    with bar, patched(), placing_threads(torch_threads):
        for inst in instances:
            for seed in seeds:
                records += _records(inst, placers, seed, noise, refs, bar)
    if out is not None:
        write_suite_outputs(
            records, Path(out), suite_config(suite, split, seeds, noise, list(placers), meta)
        )
    return records


def suite_config(
    suite: Suite,
    split: str | None,
    seeds: Sequence[int],
    noise: float,
    placers: Sequence[str],
    more: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``config`` of a suite run's ``results.json``."""
    meta = {"suite": suite.name, "split": split, "seeds": list(seeds), "noise": noise}
    return {**meta, "placers": list(placers), **(more or {})}


# ---------------------------------------------------------------------- reporting
def _comparable(r: SuiteRecord) -> bool:
    """Feasible, with a ratio (critical_path feasible too)."""
    return r.feasible and r.ratio_to_critical_path is not None


def _pairs(records: Sequence[SuiteRecord]) -> str:
    return "instances" if len({r.seed for r in records}) <= 1 else "(instance, seed) pairs"


def summary_table(records: Sequence[SuiteRecord]) -> str:
    """Per placer, over the (instance, seed) pairs that it and critical_path (the
    ratios' reference) both solved: geometric-mean ratio to critical_path, mean and max
    gap to the lower bound and to the best known, instances within :data:`NEAR_BEST` of
    the best known; seconds, simulator calls (both summed) and the feasible count over
    all; then ``compared``, how many pairs its figures are over, of all. One placer's
    failures never empty another's row."""
    placers = list(dict.fromkeys(r.placer for r in records))
    every = len({_pair(r) for r in records})
    lines = [
        "| placer | ratio to critical_path (geo. mean) | gap to bound: mean / max "
        "| gap to best known: mean / max | within 1% of best | time | calls | feasible "
        "| compared |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    compared: dict[str, frozenset[tuple[str, str, int]]] = {}
    for p in placers:
        mine = [r for r in records if r.placer == p]
        rs = [r for r in mine if _comparable(r)]
        compared[p] = frozenset(map(_pair, rs))
        lb = [r.gap_to_bound for r in rs if r.gap_to_bound is not None]
        best = [r.gap_to_best for r in rs if r.gap_to_best is not None]
        near = sum(g <= NEAR_BEST for g in best)
        best_cell = f"{np.mean(best):+.1%} / {max(best):+.1%}" if best else "n/a"
        ratios = [r.ratio_to_critical_path for r in rs if r.ratio_to_critical_path is not None]
        ratio_cell = f"{geomean(ratios):.3f}" if ratios else "n/a"
        lb_cell = f"{np.mean(lb):+.1%} / {max(lb):+.1%}" if lb else "n/a"
        lines.append(
            f"| {p} | {ratio_cell} | {lb_cell} | {best_cell} | {near}/{len(best)} "
            f"| {sum(r.seconds for r in mine):.1f} s | {sum(r.calls for r in mine)} "
            f"| {count(r.feasible for r in mine)} | {len(rs)}/{len({_pair(r) for r in mine})} |"
        )
    what = _pairs(records)
    if len(set(compared.values())) <= 1:  # the same pairs for every placer
        where = f"over the {over(len(next(iter(compared.values()), ())), every, what)}"
    else:
        where = f"per placer over the {what} that it and {REFERENCE} solved (compared)"
    lines.append(f"\nRatios, gaps and counts {where}; time, calls and feasible over all.")
    return "\n".join(lines)


def _pair(r: SuiteRecord) -> tuple[str, str, int]:
    return (r.split, r.instance, r.seed)


def _instance_rows(records: Sequence[SuiteRecord]) -> list[tuple[str, list[SuiteRecord]]]:
    """Per instance: a row over the seeds every placer solved (all when they all did,
    else labelled with how many), then a row per other seed."""
    several = len({r.seed for r in records}) > 1
    out = []
    for (_, inst), rs in by_key(records, lambda r: (r.split, r.instance)).items():
        out += seed_rows(rs, inst, _comparable, several)
    return out


def _gap_cell(mine: Sequence[SuiteRecord]) -> str:
    bad = [r for r in mine if not r.feasible]
    if bad:
        return "/".join(dict.fromkeys(mark(r.infeasible) for r in bad))
    to_lb = np.mean([r.gap_to_bound for r in mine])
    to_best = [r.gap_to_best for r in mine if r.gap_to_best is not None]
    head = f"{np.mean(to_best):+.1%}" if to_best else "n/a"
    if to_best and np.mean(to_best) < -1e-12:
        head += " new best"
    return f"{head} / {to_lb:+.0%}"


def instance_table(records: Sequence[SuiteRecord]) -> str:
    """Per instance (seeds every placer solved averaged, :func:`_instance_rows`): bound,
    best known, and each placer's gap to the best known / to the bound (``new best`` where
    a placer beats the best known; ``OOM``, ``split``, ``budget`` or ``failed`` where
    infeasible); the last row counts each placer's feasible records."""
    placers = list(dict.fromkeys(r.placer for r in records))
    lines = [
        "| instance | nodes | bound (ms) | best known (ms) | " + " | ".join(placers) + " |",
        "|---|---|---|---|" + "---|" * len(placers),
    ]
    for label, rs in _instance_rows(records):
        first = rs[0]
        best = "n/a" if first.best_known is None else f"{first.best_known * 1e3:.4g}"
        cells = [_gap_cell([r for r in rs if r.placer == p]) for p in placers]
        lines.append(
            f"| {label} | {first.nodes} | {first.lower_bound * 1e3:.4g} | {best} | "
            + " | ".join(cells)
            + " |"
        )
    feasible = [count(r.feasible for r in records if r.placer == p) for p in placers]
    lines.append("| feasible | | | | " + " | ".join(feasible) + " |")
    return "\n".join(lines)


def suite_markdown(records: Sequence[SuiteRecord]) -> str:
    """:func:`summary_table`, then :func:`instance_table`."""
    return (
        summary_table(records)
        + "\n\nPer instance: gap to the best known / gap to the lower bound.\n\n"
        + instance_table(records)
    )


def write_suite_outputs(records: Sequence[SuiteRecord], out: Path, meta: dict[str, Any]) -> None:
    """``results.json``, ``results.csv`` and ``table.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_results_json(records, out / "results.json", meta)
    fields = [
        f for f in SuiteRecord.__dataclass_fields__ if f not in ("device", "order", "recompute")
    ]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(asdict(r) for r in records)
    (out / "table.md").write_text(suite_markdown(records) + "\n")


def write_results_json(records: Sequence[SuiteRecord], path: Path, meta: dict[str, Any]) -> None:
    """The ``results.json`` of a suite run (``placegym bench --replay`` checks it): the
    format tag, the run's ``config`` (``meta``) and the records, one line each."""
    head = {"format": RESULTS_FORMAT, "config": meta}
    path.write_text(results_text(head, [asdict(r) for r in records]))


def results_text(head: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """A results document: the keys of ``head``, then ``records``, one row a line (so a
    diff of two runs reads row by row)."""
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows)
    return json.dumps(head)[:-1] + ', "records": [\n' + body + "\n]}\n"
