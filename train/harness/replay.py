"""``placegym bench --replay results.json``: re-simulate every row of a benchmark result.

Both kinds of ``placegym bench`` results are accepted: suite runs
(:mod:`placegym.train.harness.suite_bench`, rows naming a suite instance) and workloads ×
clusters runs (:mod:`placegym.train.harness.bench`, rows naming a workload and cluster of the
file's ``config``). Per row, replay rebuilds the instance and checks:

- the instance (suite rows): the rebuilt instance's digest equals the row's ``digest``;
- the placement: ``device`` and ``order`` (and ``recompute``, the recomputed nodes, when
  the placement has any) are stored and valid for the instance;
- feasibility (:mod:`placegym.train.harness.feasibility`): a row recorded ``feasible``
  must replay feasible (no split co-location group, within every device's memory), and a
  row recorded infeasible must replay infeasible (a row without a placement, whose placer
  raised, has nothing to re-simulate); its ``oom`` flag must match. A row of a file
  written before the ``feasible`` field claims what its ``oom`` says;
- the makespan: the placement re-simulated (with the run's noise and the row's seed)
  gives the recorded ``makespan`` within a relative :data:`RTOL` (over-memory rows too);
- the derived columns: ``ratio_to_critical_path`` against the critical_path row of the
  same instance and seed; for suite rows, ``lower_bound`` equals the certified bound of
  the rebuilt instance, ``gap_to_bound`` = makespan / lower_bound − 1 and ``gap_to_best``
  = makespan / best_known − 1. An infeasible row, and any row whose critical_path row is
  infeasible, has no ratio (None); an infeasible row has no gaps.

A row that fails any check is reported with its index, instance, placer and seed, and
what differs; the command exits with status 1 if any row fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs import Cluster, Graph, Placement, load_cluster
from placegym.envs.core.validate import read_json
from placegym.train.harness.feasibility import simulate_outcome

#: Relative tolerance of every comparison of a re-simulated makespan with a recorded or
#: reported one: here, and in the anytime harness's check of a run's final placement
#: (results are deterministic; this only absorbs last-digit differences of other
#: platforms).
RTOL = 1e-9


@dataclass(frozen=True)
class Mismatch:
    """One failed check: the row's index and label, and what differs."""

    row: int
    label: str
    problem: str

    def __str__(self) -> str:
        return f"row {self.row} ({self.label}): {self.problem}"


def close(a: float | None, b: float | None) -> bool:
    """Whether two recorded numbers agree within :data:`RTOL` (None only with None,
    infinities only when equal)."""
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= RTOL * max(abs(a), abs(b), 1e-300)


def _suite_loader() -> Callable[[dict], tuple[Graph, Cluster, str | None]]:
    from placegym.envs.suites import get_suite

    cache: dict[tuple[str, str], Any] = {}

    def load(row: dict) -> tuple[Graph, Cluster, str | None]:
        key = (row["suite"], row["instance"])
        if key not in cache:
            cache[key] = get_suite(key[0]).instance(key[1])
        inst = cache[key]
        return inst.graph, inst.cluster, inst.digest

    return load


def _workload_loader(config: dict) -> Callable[[dict], tuple[Graph, Cluster, str | None]]:
    from placegym.envs.mdp.sources import resolve_graph

    specs = {(Path(w).stem if w.endswith(".json") else w): w for w in config["workloads"]}
    clusters = {c.name: c for c in (load_cluster(spec) for spec in config["clusters"])}

    def load(row: dict) -> tuple[Graph, Cluster, str | None]:
        if row["workload"] not in specs or row["cluster"] not in clusters:
            raise ValueError(
                f"workload {row['workload']!r} or cluster {row['cluster']!r} "
                "is not in the file's config"
            )
        graph = resolve_graph(specs[row["workload"]], seed=row["seed"])
        return graph, clusters[row["cluster"]], None

    return load


def _label(row: dict) -> str:
    where = (
        f"{row['suite']}/{row['instance']}"
        if "suite" in row
        else (f"{row['workload']} on {row['cluster']}")
    )
    return f"{where}, {row['placer']}, seed {row['seed']}"


def _key(row: dict) -> tuple:
    where = (
        (row["suite"], row["instance"]) if "suite" in row else (row["workload"], row["cluster"])
    )
    return (*where, row["seed"])


#: Columns an infeasible row must leave empty (None): it never enters a ratio or a gap.
_EMPTY_WHEN_INFEASIBLE = (
    "ratio_to_critical_path",
    "gap_to_optimal",
    "gap_to_bound",
    "gap_to_best",
)


def _claims_feasible(row: dict) -> bool:
    """The row's ``feasible``; a row written before that field claims ``not oom``."""
    return bool(row.get("feasible", not row.get("oom", False)))


def _check_row(row: dict, graph: Graph, cluster: Cluster, digest: str | None, noise: float):
    """Problems of one row (a list of strings) and its replayed makespan (None: the row
    replays infeasible or could not be replayed)."""
    if digest is not None and row.get("digest") != digest:
        return [f"instance digest {row.get('digest')!r} differs from the rebuilt {digest!r}"], None
    claims = _claims_feasible(row)
    problems = []
    if not claims and "feasible" in row:
        problems += [
            f"{k} {row[k]!r} recorded for an infeasible row"
            for k in _EMPTY_WHEN_INFEASIBLE
            if row.get(k) is not None
        ]
    if row.get("device") is None or row.get("order") is None:
        if claims:
            return ["no placement stored (device, order)"], None
        if row.get("makespan") is not None:
            problems.append(f"makespan {row['makespan']!r} recorded without a placement")
        return problems, None  # the placer raised: nothing to re-simulate
    try:
        placement = Placement(
            device=row["device"],
            order=row["order"],
            recompute=np.asarray(row.get("recompute") or [], dtype=np.int64),
        )
    except ValueError as e:
        return (["invalid placement: " + str(e)] if claims else problems), None
    out = simulate_outcome(graph, cluster, placement, noise, row["seed"] if noise > 0 else None)
    if claims and not out.feasible:
        if out.makespan is None:  # no schedule: a split group or a bad placement
            return [f"recorded feasible, replays infeasible: {out.infeasible}"], None
        problems.append(f"recorded feasible, replays infeasible: {out.infeasible}")
    elif not claims and out.feasible:
        why = row.get("infeasible")
        return [*problems, f"recorded infeasible ({why}), replays feasible"], None
    if "oom" in row and bool(row["oom"]) != out.oom:
        problems.append(f"oom recorded {row['oom']!r}, replayed {out.oom!r}")
    if out.makespan is None:
        if row.get("makespan") is not None:
            problems.append(f"makespan {row['makespan']!r} recorded, none replayed")
        return problems, None
    if row.get("makespan") is None or not close(out.makespan, row["makespan"]):
        problems.append(f"makespan recorded {row.get('makespan')!r}, replayed {out.makespan!r}")
    return problems, out.makespan if out.feasible else None


def _check_suite_columns(row: dict, bound: float, makespan: float) -> list[str]:
    out = []
    if not close(row["lower_bound"], bound):
        out.append(f"lower_bound recorded {row['lower_bound']!r}, certified {bound!r}")
    if not close(row["gap_to_bound"], makespan / row["lower_bound"] - 1.0):
        out.append(f"gap_to_bound {row['gap_to_bound']!r} is not makespan / lower_bound - 1")
    best = row.get("best_known")
    expected = None if best is None else makespan / best - 1.0
    if not close(row.get("gap_to_best"), expected):
        out.append(f"gap_to_best {row.get('gap_to_best')!r} is not makespan / best_known - 1")
    return out


def _simulate_rows(rows: list[dict], load, noise: float, progress: bool):
    """Mismatches of the instance and makespan checks, and per row ``(graph, cluster,
    replayed makespan)`` or None where the row could not be replayed."""
    from tqdm.auto import tqdm

    bad: list[Mismatch] = []
    replayed: list[tuple[Graph, Cluster, float] | None] = []
    for i, row in enumerate(tqdm(rows, disable=not progress, desc="replay", leave=False)):
        try:
            graph, cluster, digest = load(row)
        except (ValueError, KeyError) as e:
            bad.append(Mismatch(i, _label(row), f"cannot rebuild the instance: {e}"))
            replayed.append(None)
            continue
        problems, makespan = _check_row(row, graph, cluster, digest, noise)
        bad += [Mismatch(i, _label(row), p) for p in problems]
        replayed.append(None if makespan is None else (graph, cluster, makespan))
    return bad, replayed


def _check_derived(rows: list[dict], replayed: list, suite_rows: bool) -> list[Mismatch]:
    """Ratio and gap columns against the replayed makespans (critical_path's included):
    rows that replayed feasible; a feasible row whose critical_path row is infeasible
    must have no ratio."""
    from placegym.envs.analysis.bounds import lower_bound

    cp = [(row, done) for row, done in zip(rows, replayed) if row["placer"] == "critical_path"]
    reference = {_key(row): done[2] for row, done in cp if done is not None}
    failed = {_key(row) for row, _ in cp if not _claims_feasible(row)}
    bounds: dict[tuple, float] = {}
    bad = []
    for i, (row, done) in enumerate(zip(rows, replayed)):
        if done is None:
            continue
        graph, cluster, makespan = done
        ratio = row.get("ratio_to_critical_path")
        ref = reference.get(_key(row))  # None: critical_path ran as the reference only
        if _key(row) in failed and ratio is not None:
            problem = f"ratio_to_critical_path {ratio!r} recorded, but the critical_path row"
            bad.append(Mismatch(i, _label(row), problem + " is infeasible"))
        elif ref is not None and not close(ratio, makespan / ref):
            problem = f"ratio_to_critical_path {ratio!r} does not match"
            bad.append(Mismatch(i, _label(row), problem + " the critical_path row"))
        if suite_rows:
            key = _key(row)[:-1]
            if key not in bounds:
                bounds[key] = lower_bound(graph, cluster).value
            bad += [
                Mismatch(i, _label(row), p)
                for p in _check_suite_columns(row, bounds[key], makespan)
            ]
    return bad


def read_results(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A results file of ``placegym bench`` and its rows.

    Raises:
        ValueError: not JSON, or not such a file (no ``config`` and ``records``), naming it.
    """
    data = read_json(path, "bench results")
    rows = data.get("records")
    if not isinstance(rows, list) or not isinstance(data.get("config"), dict):
        raise ValueError(f"{path}: not a placegym bench results file (no config and records)")
    return data, rows


def replay(path: str | Path, progress: bool = False) -> tuple[int, list[Mismatch]]:
    """Re-check every row of the results file ``path`` (see the module docstring).

    Returns:
        ``(rows checked, mismatches)``.

    Raises:
        ValueError: not a results file of ``placegym bench`` (naming the file).
    """
    data, rows = read_results(path)
    config = data["config"]
    suite_rows = bool(rows) and "suite" in rows[0]
    load = _suite_loader() if suite_rows else _workload_loader(config)
    bad, replayed = _simulate_rows(rows, load, float(config.get("noise", 0.0)), progress)
    bad += _check_derived(rows, replayed, suite_rows)
    bad.sort(key=lambda m: m.row)
    return len(rows), bad
