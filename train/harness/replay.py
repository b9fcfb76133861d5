"""``placegym bench --replay results.json``: re-simulate every row of a benchmark result.

Both kinds of ``placegym bench`` results are accepted: suite runs
(:mod:`placegym.train.harness.suite_bench`, rows naming a suite instance) and workloads ×
clusters runs (:mod:`placegym.train.harness.bench`, rows naming a workload and cluster of the
file's ``config``). Per row, replay rebuilds the instance and checks:

- the instance (suite rows): the rebuilt instance's digest equals the row's ``digest``,
  and every number of the row that belongs to the instance is the installed suite's, not
  the file's: ``split``, ``cluster`` and ``nodes`` those of the suite's catalog,
  ``lower_bound`` and ``best_known`` those the suite bench takes from the suite's
  reference file (:func:`~placegym.train.harness.suite_bench.instance_bounds`: the
  certified bound and the best known of a fresh entry; the bound computed now and no best
  known without one). A row is never its own reference;
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
  same instance and seed; for suite rows, ``gap_to_bound`` = makespan / the suite's
  lower bound − 1 and ``gap_to_best`` = makespan / the suite's best known − 1 (checked
  where the row's bound and best known are the suite's; where not, that is the row's
  problem). An infeasible row, and any row whose critical_path row is infeasible, has no
  ratio (None); an infeasible row has no gaps.

A row that fails any check is reported with its index, instance, placer and seed, and
what differs; the command exits with status 1 if any row fails.

A file that cannot be checked at all raises one ``ValueError`` naming the file and, for a
row, its index and field: not JSON, no ``config`` and ``records``, more than
:data:`ROW_LIMIT` rows, a missing or mistyped field (a string for a seed, a negative or
64-bit-overflowing integer, a number beyond the float range, negative or non-finite
``calls`` or ``seconds``), a row of the other kind, a noise outside the simulator's
range. The work per row is bounded: a stored placement is checked against the instance's
size before anything is built from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs import Cluster, Graph, Placement, load_cluster
from placegym.envs.core import validate as V
from placegym.envs.sim.simulator import check_noise
from placegym.train.harness import suite_bench
from placegym.train.harness.feasibility import simulate_outcome

#: Relative tolerance of every comparison of a re-simulated makespan with a recorded or
#: reported one: here, and in the anytime harness's check of a run's final placement
#: (results are deterministic; this only absorbs last-digit differences of other
#: platforms).
RTOL = 1e-9
#: The most rows a results file may hold.
ROW_LIMIT = 100_000
#: The longest name (suite, instance, placer, workload, cluster, digest) a row may hold.
TEXT_LIMIT = 256


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
    infinities only when equal, NaN with nothing)."""
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= RTOL * max(abs(a), abs(b), 1e-300)


# ---------------------------------------------------------------------- the rows' fields
def _text(row: Mapping[str, Any], key: str, where: str) -> None:
    v = row.get(key)
    if not isinstance(v, str) or not v or len(v) > TEXT_LIMIT:
        what = "missing" if key not in row else f"expected a name of 1-{TEXT_LIMIT} characters"
        raise V.fail(f"{where}.{key}", what, v, show_value=key in row)


def _real(row: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> None:
    """A recorded number, or null (absent unless ``required``). NaN and infinities pass:
    they are compared, never used."""
    if key not in row:
        if required:
            raise V.fail(f"{where}.{key}", "missing", show_value=False)
        return
    v = row[key]
    if v is None and not required:
        return
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise V.fail(f"{where}.{key}", "expected a number" + ("" if required else " or null"), v)
    try:
        float(v)
    except OverflowError:  # an integer beyond the float range
        raise V.fail(f"{where}.{key}", "too large for a float", show_value=False) from None


def _flag(row: Mapping[str, Any], key: str, where: str) -> None:
    if key in row and not isinstance(row[key], bool):
        raise V.fail(f"{where}.{key}", "expected true or false", row[key])


def _list_or_null(row: Mapping[str, Any], key: str, where: str) -> None:
    if row.get(key) is not None and not isinstance(row[key], list):
        raise V.fail(f"{where}.{key}", "expected a list of integers or null", row[key])


def check_row(row: Any, where: str, suite_row: bool) -> None:
    """Raise ``ValueError`` naming ``where`` and the field unless ``row`` is a well-formed
    row of its kind (types and ranges; whether it replays is :func:`replay`'s question).
    ``calls`` and ``seconds``, when present, are non-negative finite numbers."""
    if not isinstance(row, dict):
        raise V.fail(where, "expected a row (a JSON object)", row)
    keys = ("suite", "instance", "placer") if suite_row else ("workload", "cluster", "placer")
    if suite_row != ("suite" in row):
        kind = "a suite run (rows name a suite)" if suite_row else "a workloads run"
        raise ValueError(f"{where}: the file is {kind}, and this row is of the other kind")
    for key in keys:
        _text(row, key, where)
    V.integer(V.get(row, "seed", where), f"{where}.seed", lo=0)
    for key in ("makespan", "ratio_to_critical_path", "gap_to_bound", "gap_to_best"):
        _real(row, key, where)
    for key in ("oom", "feasible"):
        _flag(row, key, where)
    for key in ("device", "order", "recompute"):
        _list_or_null(row, key, where)
    if row.get("infeasible") is not None and not isinstance(row["infeasible"], str):
        raise V.fail(f"{where}.infeasible", "expected a reason (text) or null", row["infeasible"])
    if "calls" in row:
        V.integer(row["calls"], f"{where}.calls", lo=0)
    if "seconds" in row:
        V.number(row["seconds"], f"{where}.seconds")
    if suite_row:
        for key in ("split", "cluster", "digest"):
            if key in row:
                _text(row, key, where)
        if "nodes" in row:
            V.integer(row["nodes"], f"{where}.nodes", lo=0)
        _real(row, "lower_bound", where, required=True)
        _real(row, "best_known", where)


def read_results(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A results file of ``placegym bench`` and its rows, every row well-formed
    (:func:`check_row`).

    Raises:
        ValueError: not JSON, not such a file (no ``config`` and ``records``), too many
            rows, a malformed row (naming the file, the row and the field).
        FileNotFoundError: no such file.
    """
    data = V.read_json(path, "bench results")
    rows = data.get("records")
    if not isinstance(rows, list) or not isinstance(data.get("config"), dict):
        raise ValueError(f"{path}: not a placegym bench results file (no config and records)")
    if len(rows) > ROW_LIMIT:
        raise ValueError(f"{path}: records: {len(rows):,} rows, over the limit of {ROW_LIMIT:,}")
    suite_rows = bool(rows) and isinstance(rows[0], dict) and "suite" in rows[0]
    try:
        for i, row in enumerate(rows):
            check_row(row, f"records[{i}]", suite_rows)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return data, rows


# ---------------------------------------------------------------------- instances
@dataclass(frozen=True)
class _Built:
    """A rebuilt instance; ``facts``: the suite's values of a suite row's instance."""

    graph: Graph
    cluster: Cluster
    digest: str | None
    facts: dict[str, Any] = field(default_factory=dict)


def _suite_loader() -> Callable[[dict], _Built]:
    from placegym.envs.suites import get_suite

    cache: dict[tuple[str, str], _Built | ValueError] = {}
    refs: dict[str, dict] = {}

    def build(name: str, instance: str) -> _Built:
        suite = get_suite(name)
        if name not in refs:  # read as the suite bench reads them (one source of truth)
            refs[name] = suite_bench.load_references(name)
        inst = suite.instance(instance)
        bound, best = suite_bench.instance_bounds(inst, refs[name])
        facts = {
            "split": inst.split,
            "cluster": inst.cluster.name,
            "nodes": inst.graph.num_nodes,
            "lower_bound": bound,
            "best_known": best,
        }
        return _Built(inst.graph, inst.cluster, inst.digest, facts)

    def load(row: dict) -> _Built:
        key = (row["suite"], row["instance"])
        if key not in cache:
            try:
                cache[key] = build(*key)
            except ValueError as e:  # remembered: a bad name costs one lookup per file
                cache[key] = e
        got = cache[key]
        if isinstance(got, ValueError):
            raise got
        return got

    return load


#: The largest graph or cluster file a workloads run's config may name.
FILE_LIMIT = 256 * 2**20


def _spec_file(spec: str, where: str) -> None:
    """A spec naming a path must name a regular file of at most :data:`FILE_LIMIT`
    bytes (never a device, a pipe or a virtual file of the kernel's)."""
    p = Path(spec)
    if (p.exists() or spec.endswith(".json")) and not p.is_file():
        raise V.fail(where, "expected a preset, a workload or a regular JSON file", spec)
    if p.is_file() and p.stat().st_size > FILE_LIMIT:
        raise V.fail(where, f"a file over {FILE_LIMIT // 2**20} MiB", spec)


def _workload_loader(config: dict) -> Callable[[dict], _Built]:
    from placegym.envs.mdp.sources import resolve_graph

    lists: dict[str, list[str]] = {}
    for key in ("workloads", "clusters"):
        value = config.get(key)
        if not isinstance(value, list) or not all(
            isinstance(s, str) and 0 < len(s) <= TEXT_LIMIT for s in value
        ):
            raise V.fail(key, "expected a list of names", value)
        for i, spec in enumerate(value):
            _spec_file(spec, f"{key}[{i}]")
        lists[key] = value
    specs = {(Path(w).stem if w.endswith(".json") else w): w for w in lists["workloads"]}
    clusters = {c.name: c for c in (load_cluster(spec) for spec in lists["clusters"])}
    graphs: dict[tuple[str, int], Graph] = {}

    def load(row: dict) -> _Built:
        if row["workload"] not in specs or row["cluster"] not in clusters:
            raise ValueError(
                f"workload {row['workload']!r} or cluster {row['cluster']!r} "
                "is not in the file's config"
            )
        key = (row["workload"], row["seed"])
        if key not in graphs:
            graphs[key] = resolve_graph(specs[row["workload"]], seed=row["seed"])
        return _Built(graphs[key], clusters[row["cluster"]], None)

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


# ---------------------------------------------------------------------- the checks
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


def _check_facts(row: dict, built: _Built) -> list[str]:
    """A suite row's instance: the digest, then every value the suite defines."""
    if built.digest is not None and row.get("digest") != built.digest:
        return [f"instance digest {row.get('digest')!r} differs from the rebuilt {built.digest!r}"]
    out = []
    for key in ("split", "cluster", "nodes"):
        if key in row and key in built.facts and row[key] != built.facts[key]:
            out.append(f"{key} recorded {row[key]!r}, the suite's is {built.facts[key]!r}")
    if "lower_bound" in built.facts and not close(row["lower_bound"], built.facts["lower_bound"]):
        bound = built.facts["lower_bound"]
        out.append(f"lower_bound recorded {row['lower_bound']!r}, certified {bound!r}")
    if "best_known" in built.facts and not close(row.get("best_known"), built.facts["best_known"]):
        best = built.facts["best_known"]
        out.append(f"best_known recorded {row.get('best_known')!r}, the suite's is {best!r}")
    return out


def _placement(row: dict, graph: Graph) -> Placement | str:
    """The row's placement, or why it is not one for ``graph`` (sizes and ranges checked
    before anything is built from the lists)."""
    n = graph.num_nodes
    for key in ("device", "order"):
        v = row[key]
        if len(v) != n:
            return f"{key}: {len(v):,} entries, the instance has {n:,} nodes"
        if not all(type(x) is int and 0 <= x < 2**31 for x in v):
            return f"{key}: expected integers >= 0"
    rc = row.get("recompute") or []
    if len(rc) > n or not all(type(x) is int and 0 <= x < n for x in rc):
        return f"recompute: expected at most {n:,} node indices in [0, {n})"
    try:
        return Placement(
            device=row["device"], order=row["order"], recompute=np.asarray(rc, dtype=np.int64)
        )
    except ValueError as e:
        return str(e)


def _check_row(row: dict, graph: Graph, cluster: Cluster, noise: float):
    """Problems of one row (a list of strings) and its replayed makespan (None: the row
    replays infeasible or could not be replayed)."""
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
    placement = _placement(row, graph)
    if isinstance(placement, str):
        return (["invalid placement: " + placement] if claims else problems), None
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


def _check_gaps(row: dict, facts: dict[str, Any], makespan: float) -> list[str]:
    """The gaps of a feasible suite row against the suite's bound and best known (where
    the row records the suite's: otherwise that is its problem, reported once)."""
    from placegym.train.harness.suite_bench import gap

    out = []
    bound, best = facts["lower_bound"], facts["best_known"]
    if close(row["lower_bound"], bound) and not close(
        row.get("gap_to_bound"), gap(makespan, bound)
    ):
        out.append(f"gap_to_bound {row.get('gap_to_bound')!r} is not makespan / lower_bound - 1")
    if close(row.get("best_known"), best) and not close(
        row.get("gap_to_best"), gap(makespan, best)
    ):
        out.append(f"gap_to_best {row.get('gap_to_best')!r} is not makespan / best_known - 1")
    return out


def _simulate_rows(rows: list[dict], load, noise: float, progress: bool):
    """Mismatches of the instance and makespan checks, and per row ``(facts, replayed
    makespan)`` or None where the row could not be replayed or is infeasible."""
    from tqdm.auto import tqdm

    bad: list[Mismatch] = []
    replayed: list[tuple[dict[str, Any], float] | None] = []
    for i, row in enumerate(tqdm(rows, disable=not progress, desc="replay", leave=False)):
        try:
            built = load(row)
        except (ValueError, FileNotFoundError) as e:
            bad.append(Mismatch(i, _label(row), f"cannot rebuild the instance: {e}"))
            replayed.append(None)
            continue
        problems = _check_facts(row, built)
        if problems and problems[0].startswith("instance digest"):
            bad.append(Mismatch(i, _label(row), problems[0]))
            replayed.append(None)
            continue
        more, makespan = _check_row(row, built.graph, built.cluster, noise)
        bad += [Mismatch(i, _label(row), p) for p in problems + more]
        replayed.append(None if makespan is None else (built.facts, makespan))
    return bad, replayed


def _check_derived(rows: list[dict], replayed: list) -> list[Mismatch]:
    """Ratio and gap columns against the replayed makespans (critical_path's included):
    rows that replayed feasible; a feasible row whose critical_path row is infeasible
    must have no ratio."""
    from placegym.train.harness.suite_bench import ratio

    cp = [(row, done) for row, done in zip(rows, replayed) if row["placer"] == "critical_path"]
    reference = {_key(row): done[1] for row, done in cp if done is not None}
    failed = {_key(row) for row, _ in cp if not _claims_feasible(row)}
    bad = []
    for i, (row, done) in enumerate(zip(rows, replayed)):
        if done is None:
            continue
        facts, makespan = done
        recorded = row.get("ratio_to_critical_path")
        ref = reference.get(_key(row))  # None: critical_path ran as the reference only
        if _key(row) in failed and recorded is not None:
            problem = f"ratio_to_critical_path {recorded!r} recorded, but the critical_path row"
            bad.append(Mismatch(i, _label(row), problem + " is infeasible"))
        elif ref is not None and not close(recorded, ratio(makespan, ref)):
            problem = f"ratio_to_critical_path {recorded!r} does not match"
            bad.append(Mismatch(i, _label(row), problem + " the critical_path row"))
        if facts:
            bad += [Mismatch(i, _label(row), p) for p in _check_gaps(row, facts, makespan)]
    return bad


def replay_rows(
    config: Mapping[str, Any], rows: list[dict], progress: bool = False
) -> list[Mismatch]:
    """Re-check ``rows`` (well-formed: :func:`check_row`) of a results file whose
    ``config`` is given; see the module docstring. Mismatches name indices into ``rows``.

    Raises:
        ValueError: the config's noise, workloads or clusters are not usable.
    """
    noise = check_noise(0.0 if config.get("noise") is None else config["noise"])
    suite_rows = bool(rows) and "suite" in rows[0]
    load = _suite_loader() if suite_rows else _workload_loader(dict(config))
    bad, replayed = _simulate_rows(rows, load, noise, progress)
    bad += _check_derived(rows, replayed)
    bad.sort(key=lambda m: m.row)
    return bad


def replay(path: str | Path, progress: bool = False) -> tuple[int, list[Mismatch]]:
    """Re-check every row of the results file ``path`` (see the module docstring).

    Returns:
        ``(rows checked, mismatches)``.

    Raises:
        ValueError: not a results file of ``placegym bench``, or one that cannot be
            checked (one line naming the file, and the row and field where there is one).
        FileNotFoundError: no such file.
    """
    data, rows = read_results(path)
    try:
        return len(rows), replay_rows(data["config"], rows, progress)
    except ValueError as e:
        raise ValueError(f"{path}: config: {e}") from None
