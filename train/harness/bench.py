"""The placement benchmark behind ``placegym bench``.

Runs placers (teachers by name; trained agents are added through :data:`PLACERS`
extensions) over workloads (generator names or graph JSON files) × clusters (preset names
or cluster JSON files) × seeds, simulates every placement, and reports:

- a markdown table (:func:`bench_markdown`): per workload and cluster, each placer's
  makespan, its ratio to ``critical_path`` (:data:`REFERENCE`, always computed) and its
  gap to the proven optimum where one is known (graphs within the ``optimal`` teacher's
  size limits, :data:`placegym.teachers.optimal.MAX_NODES` nodes on
  :data:`placegym.teachers.optimal.MAX_DEVICES` devices, when ``with_optimal`` is set);
- ``results.csv`` and ``results.json``: one record per (workload, cluster, seed, placer)
  with makespan, ratio, gap, OOM flag, seconds taken, simulator calls made (``calls``:
  :mod:`placegym.train.harness.calls`), ``feasible`` and, when not, the reason
  (``infeasible``); ``results.json`` also stores each placement (``device``, ``order``),
  so ``placegym bench --replay`` can re-check it;
- ``ratios.png``: a bar chart of the geometric-mean ratio to critical_path per placer and
  workload.

Placers: teachers by name, and any object :func:`~placegym.train.harness.placers.as_placer`
takes as an extra placer (a :class:`~placegym.train.harness.placers.Placer`, a teacher
object, a function ``(graph, cluster, seed)``, a search placer with a budget).

Infeasible records (:mod:`placegym.train.harness.feasibility`: over a device's memory,
a split co-location group, a placer that raised or was stopped at its budget of
simulator calls) are failures: their ratio and gap are None, and the table shows
``OOM``, ``split``, ``failed`` or ``budget`` in their place. A table row
(workload, cluster) aggregates over seeds only those on which every placer (and
critical_path, the ratios' reference) is feasible, saying how many when not all; each
other seed gets a row of its own (``ffnn, seed 1``), where the failures show. The last
rows give each placer's time (``time taken``, seconds summed over its records), its
simulator calls (``simulator calls``, summed likewise) and its feasible records
(``feasible | 7/8``).

Seeds feed generators that take a ``seed`` and placers that take one (``random``,
``anneal``), so a run is reproducible from its command line. Makespans are simulated
without noise unless ``noise`` > 0 (then with ``rng=seed``).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from placegym.envs import Cluster, Graph, Placement, load_cluster
from placegym.envs.mdp.sources import resolve_graph
from placegym.train.harness.calls import patched
from placegym.train.harness.feasibility import Outcome, by_key, count, mark, place, seed_rows
from placegym.train.harness.placers import TORCH_THREADS, Placer, as_placer, placing_threads
from placegym.train.progress import progress_bar
from placegym.train.stats import geomean

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The teacher every makespan ratio is taken against: the benchmark's tables, the
#: leaderboard's files and training's evaluation (``placegym.train.evaluate``).
REFERENCE = "critical_path"
#: Every placer of the registry but ``optimal`` (small graphs only; see ``with_optimal``),
#: ``device_anneal`` (a plan teacher for behaviour cloning, 30,000 calls by default),
#: ``best_list`` (a phase-I teacher: the fastest of placers the table has already) and
#: ``heft_rule`` (a phase-I teacher: HEFT's devices in rank order, within a few percent of
#: ``heft``) and ``lookahead`` and ``fortified_lookahead`` (phase-I teachers: ``n * D``
#: simulator calls a placement; name them with ``--teachers`` to run them).
DEFAULT_TEACHERS = (
    "critical_path",
    "heft",
    "nest",
    "anneal",
    "metis",
    "random",
    "round_robin",
    "single_device",
)


@dataclass
class BenchConfig:
    """What to run. Names are resolved by :func:`~placegym.envs.mdp.sources.resolve_graph`
    (with the seed) / :func:`load_cluster`; ``extra_placers`` maps column names to
    anything :func:`~placegym.train.harness.placers.as_placer` takes; the placers run with
    ``torch_threads`` torch threads (:func:`~placegym.train.harness.placers.
    placing_threads`; None: the process's setting)."""

    teachers: Sequence[str] = DEFAULT_TEACHERS
    workloads: Sequence[str] = ("ffnn",)
    clusters: Sequence[str] = ("p100x4",)
    seeds: Sequence[int] = (0,)
    with_optimal: bool = False
    noise: float = 0.0
    out: Path | None = None
    extra_placers: dict[str, Any] = field(default_factory=dict)
    torch_threads: int | None = TORCH_THREADS


@dataclass
class Record:
    """One benchmark result: a placer's makespan on one workload, cluster and seed.

    ``feasible`` False: ``infeasible`` says why; ``makespan`` is None where nothing was
    simulated (a split group, a placer that raised) and ratio and gap are always None.
    ``ratio_to_critical_path`` is also None where critical_path is infeasible."""

    workload: str
    cluster: str
    seed: int
    placer: str
    makespan: float | None
    ratio_to_critical_path: float | None
    gap_to_optimal: float | None
    oom: bool
    seconds: float
    calls: int = 0
    feasible: bool = True
    infeasible: str | None = None
    device: list[int] | None = None
    order: list[int] | None = None
    recompute: list[int] | None = None


#: Record fields kept out of ``results.csv`` (the placement: in ``results.json`` only).
JSON_ONLY = ("device", "order", "recompute")


class RegistryTeacher:
    """The registered teacher ``name`` as a :class:`~placegym.train.harness.placers.Placer`,
    built for each placement with its seed (:func:`placegym.teachers.make_teacher`).

    Raises:
        ValueError: an unknown teacher name.
    """

    def __init__(self, name: str) -> None:
        from placegym.teachers import teacher_class

        teacher_class(name)  # fails early on unknown names
        self.name = name

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """The teacher's placement of ``graph``, the teacher built with ``seed``."""
        from placegym.teachers import make_teacher

        return make_teacher(self.name, seed).place(graph, cluster)

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """:meth:`place` (a placer as a function)."""
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"RegistryTeacher({self.name!r})"


def teacher_placer(name: str) -> RegistryTeacher:
    """The teacher ``name`` as a placer (:class:`RegistryTeacher`)."""
    return RegistryTeacher(name)


#: One cell of the grid: ``(workload label, graph, cluster, seed, placer name)``.
Cell = tuple[str, Graph, Cluster, int, str]
#: Runs ``fn`` on every cell and yields ``(index, result)`` pairs as they finish.
CellMap = Callable[[Callable[[Cell], Any], Sequence[Cell]], Iterable[tuple[int, Any]]]


def serial_map(fn: Callable[[Cell], Any], cells: Sequence[Cell]) -> Iterable[tuple[int, Any]]:
    """Run the cells one after another in this process."""
    for i, cell in enumerate(cells):
        yield i, fn(cell)


def check_placers(placers: dict[str, Any], problems: Iterable[tuple[Graph, Cluster]]) -> None:
    """Let every placer that can tell (a ``check(graph, cluster)`` method, e.g. the
    budget of an agent's :func:`~placegym.agents.doppler.search.policy_search`) refuse a
    problem before any cell runs: a bad setting fails at once, not after hours of
    finished cells."""
    checks = [c for c in (getattr(p, "check", None) for p in placers.values()) if callable(c)]
    for graph, cluster in problems:
        for check in checks:
            check(graph, cluster)


def run_benchmark(
    cfg: BenchConfig, progress: bool | str = True, cell_map: CellMap | None = None
) -> list[Record]:
    """Run every combination and return the records (also written to ``cfg.out``).

    Every (workload, cluster, seed, placer) cell is independent: ``cell_map`` runs them
    (default :func:`serial_map`; :func:`placegym.train.harness.ray_bench.ray_map` spreads
    them over a Ray cluster). The records, their order and every field but ``seconds``
    are the same whichever runs them. ``progress``: a bar (True), nothing (False), or
    ``"auto"``: a bar on a terminal, else a line every few seconds on stderr
    (:func:`placegym.train.progress.progress_bar`).
    """
    placers: dict[str, Placer] = {name: teacher_placer(name) for name in cfg.teachers}
    placers.update({name: as_placer(p) for name, p in cfg.extra_placers.items()})
    ref = placers.get(REFERENCE) or teacher_placer(REFERENCE)
    clusters = [load_cluster(c) for c in cfg.clusters]
    # every input is resolved before the progress bar starts, so errors print on their own line
    graphs = {(w, s): resolve_graph(w, seed=s) for w in cfg.workloads for s in cfg.seeds}
    jobs = [(w, c, s) for w in cfg.workloads for c in clusters for s in cfg.seeds]
    check_placers(placers, [(graphs[(w, s)], c) for w, c, s in jobs])
    names = list(placers) + ([] if REFERENCE in placers else [_REF_ONLY])
    cells: list[Cell] = [
        (_label(w), graphs[(w, s)], c, s, name) for w, c, s in jobs for name in names
    ]
    if cfg.with_optimal:
        cells += [(_label(w), graphs[(w, s)], c, s, _OPTIMAL) for w, c, s in jobs]
    everyone = {**placers, _REF_ONLY: ref}
    noise = cfg.noise

    def run_cell(cell: Cell) -> Any:
        _, graph, cluster, seed, name = cell
        if name == _OPTIMAL:
            return _optimum(graph, cluster)
        return place(everyone[name], graph, cluster, seed, noise)

    bar = progress_bar(len(cells), desc="bench", unit="runs", mode=progress)
    results: list[Any] = [None] * len(cells)
    # once for every cell (each cell counts its placer's calls)
    with bar, patched(), placing_threads(cfg.torch_threads):
        for i, result in (cell_map or serial_map)(run_cell, cells):
            results[i] = result
            bar.set_postfix_str(f"{cells[i][0]}/{cells[i][2].name}/{cells[i][4]}")
            bar.update()
    records = _records(cells, results, list(placers))
    if cfg.out is not None:
        write_outputs(records, cfg)
    return records


#: Cell names of the reference when it is not a benchmarked placer, and of the optimum.
_REF_ONLY, _OPTIMAL = "<reference>", "<optimal>"


def _label(workload: str) -> str:
    return Path(workload).stem if workload.endswith(".json") else workload


def _records(cells: Sequence[Cell], results: Sequence[Any], placers: list[str]) -> list[Record]:
    """The records of the finished cells, in job then placer order."""
    by_cell = {(id(c[1]), id(c[2]), c[3], c[4]): r for c, r in zip(cells, results, strict=True)}
    records = []
    for label, graph, cluster, seed, name in cells:
        if name not in placers:
            continue
        key = (id(graph), id(cluster), seed)
        ref: Outcome = by_cell[(*key, REFERENCE if REFERENCE in placers else _REF_ONLY)]
        optimum = by_cell.get((*key, _OPTIMAL))
        out: Outcome = by_cell[(*key, name)]
        ms = out.makespan if out.feasible else None
        ref_ms = ref.makespan if ref.feasible else None
        records.append(
            Record(
                workload=label,
                cluster=cluster.name,
                seed=seed,
                placer=name,
                makespan=out.makespan,
                ratio_to_critical_path=None
                if ms is None or ref_ms is None
                else _ratio(ms, ref_ms),
                gap_to_optimal=None if ms is None or optimum is None else _ratio(ms, optimum) - 1,
                oom=out.oom,
                seconds=out.seconds,
                calls=out.calls,
                feasible=out.feasible,
                infeasible=out.infeasible,
                device=_listed(out.placement, "device"),
                order=_listed(out.placement, "order"),
                recompute=_listed(out.placement, "recompute") or None,
            )
        )
    return records


def _listed(placement: Placement | None, field: str) -> list[int] | None:
    return None if placement is None else np.asarray(getattr(placement, field)).tolist()


def _ratio(x: float, ref: float) -> float:
    return x / ref if ref > 0 else (1.0 if x == ref else math.inf)


def _optimum(graph: Graph, cluster: Cluster) -> float | None:
    """The proven optimum's makespan; None where it is not computed (beyond the
    ``optimal`` teacher's size limits) or is infeasible (the ``optimal`` teacher ignores
    memory: an optimum over memory is no optimum)."""
    from placegym.teachers import get_teacher
    from placegym.teachers.optimal import MAX_DEVICES, MAX_NODES

    if graph.num_nodes > MAX_NODES or cluster.num_devices > MAX_DEVICES:
        return None

    out = place(get_teacher("optimal"), graph, cluster, 0)
    return out.makespan if out.feasible else None


# ---------------------------------------------------------------------- reporting
@dataclass
class TableRow:
    """One row of the table: a workload and cluster over ``seeds`` (every seed, or those
    on which every placer is feasible), or one seed of it where some placer is not.

    Attributes:
        label: the workload cell (``ffnn``, ``ffnn (2 of 3 seeds every placer solved)``,
            ``ffnn, seed 1``).
        cluster: the cluster's name.
        cells: per placer, its records of the row's seeds.
    """

    label: str
    cluster: str
    cells: dict[str, list[Record]]


def _comparable(r: Record) -> bool:
    """Feasible, with a ratio (critical_path feasible too): a record a row may aggregate."""
    return r.feasible and r.ratio_to_critical_path is not None


def table_rows(records: Sequence[Record]) -> list[TableRow]:
    """The rows of :func:`bench_markdown` and :func:`ratios_figure`: per (workload,
    cluster), one row over the seeds on which every placer and critical_path are feasible
    (all of them when they all are), then one row per other seed."""
    placers = list(dict.fromkeys(r.placer for r in records))
    several = len({r.seed for r in records}) > 1
    out = []
    for (w, c), rs in by_key(records, lambda r: (r.workload, r.cluster)).items():
        for label, xs in seed_rows(rs, w, _comparable, several):
            out.append(TableRow(label, c, {p: [r for r in xs if r.placer == p] for p in placers}))
    return out


def _geo_ratio(rs: Sequence[Record]) -> float | None:
    """Geometric-mean ratio to critical_path; None unless every record has one."""
    ratios = [r.ratio_to_critical_path for r in rs if r.ratio_to_critical_path is not None]
    if not rs or len(ratios) < len(rs):
        return None
    return geomean(ratios)


def _cell(rs: Sequence[Record]) -> str:
    """Mean makespan in ms, geometric-mean ratio, mean gap to optimal; the mark of an
    infeasible record (a row holds one where any is infeasible)."""
    if not rs:
        return ""
    bad = [r for r in rs if not r.feasible]
    if bad:
        return "/".join(dict.fromkeys(mark(r.infeasible) for r in bad))
    cell = f"{float(np.mean([r.makespan for r in rs])) * 1e3:.3f} ms"
    ratio = _geo_ratio(rs)
    cell += f" ({ratio:.2f}x)" if ratio is not None else " (critical_path infeasible)"
    gaps = [r.gap_to_optimal for r in rs if r.gap_to_optimal is not None]
    if gaps:
        cell += f" gap {float(np.mean(gaps)):+.1%}"
    return cell


def bench_markdown(records: Sequence[Record]) -> str:
    """One row per (workload, cluster), one column per placer: makespan in ms, ratio to
    critical_path, gap to optimal when known, averaged over the seeds every placer
    solved; ``OOM``, ``split``, ``budget`` or ``failed`` for an infeasible record, in a
    row of its seed (:func:`table_rows`); then the time each placer took, the simulator
    calls it made (both summed over its records) and its feasible count."""
    placers = list(dict.fromkeys(r.placer for r in records))
    lines = [
        "| workload | cluster | " + " | ".join(placers) + " |",
        "|---|---|" + "---|" * len(placers),
    ]
    for row in table_rows(records):
        cells = [_cell(row.cells[p]) for p in placers]
        lines.append(f"| {row.label} | {row.cluster} | " + " | ".join(cells) + " |")
    secs = {p: sum(r.seconds for r in records if r.placer == p) for p in placers}
    lines.append("| time taken | | " + " | ".join(f"{secs[p]:.3f} s" for p in placers) + " |")
    calls = {p: sum(r.calls for r in records if r.placer == p) for p in placers}
    lines.append("| simulator calls | | " + " | ".join(f"{calls[p]}" for p in placers) + " |")
    feasible = [count(r.feasible for r in records if r.placer == p) for p in placers]
    lines.append("| feasible | | " + " | ".join(feasible) + " |")
    return "\n".join(lines)


def write_outputs(records: Sequence[Record], cfg: BenchConfig) -> None:
    """``results.csv``, ``results.json``, ``table.md`` and ``ratios.png`` in ``cfg.out``."""
    out = Path(cfg.out)  # type: ignore[arg-type]
    out.mkdir(parents=True, exist_ok=True)
    rows = [asdict(r) for r in records]
    with open(out / "results.csv", "w", newline="") as f:
        fields = [k for k in rows[0] if k not in JSON_ONLY] if rows else ["placer"]
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    meta = {
        "teachers": list(cfg.teachers),
        "workloads": list(cfg.workloads),
        "clusters": list(cfg.clusters),
        "seeds": list(cfg.seeds),
        "with_optimal": cfg.with_optimal,
        "noise": cfg.noise,
        "reference": REFERENCE,
    }
    (out / "results.json").write_text(json.dumps({"config": meta, "records": rows}, indent=1))
    (out / "table.md").write_text(bench_markdown(records) + "\n")
    bar_chart(records, out / "ratios.png")


def bar_chart(records: Sequence[Record], path: Path) -> None:
    """Write :func:`ratios_figure` to ``path``."""
    ratios_figure(records).savefig(path, dpi=110)


def ratios_figure(records: Sequence[Record]) -> Figure:
    """Grouped bars: geometric-mean ratio to critical_path, per table row
    (:func:`table_rows`) and placer; an infeasible record is its mark, not a bar."""
    from matplotlib.figure import Figure

    rows = table_rows(records)
    placers = list(dict.fromkeys(r.placer for r in records))
    fig = Figure(
        figsize=(max(6.0, 1.2 * len(rows) * max(1, len(placers)) / 3), 4), layout="constrained"
    )
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(placers))
    x = np.arange(len(rows))
    for i, p in enumerate(placers):
        at = x + i * width - 0.4 + width / 2
        ratios = [_geo_ratio(row.cells[p]) for row in rows]
        shown = [k for k, v in enumerate(ratios) if v is not None]
        ax.bar(at[shown], [v for v in ratios if v is not None], width, label=p)
        for k, row in enumerate(rows):
            bad = [r for r in row.cells[p] if not r.feasible]
            if bad:
                ax.annotate(
                    mark(bad[0].infeasible),
                    (at[k], 0),
                    ha="center",
                    va="bottom",
                    rotation=90,
                    fontsize=7,
                    color="crimson",
                )
    ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xticks(x, [f"{row.label}\n{row.cluster}" for row in rows], fontsize=8)
    ax.set_ylabel("makespan / critical_path (lower is better)")
    # outside the axes, so that it never covers a bar
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig
