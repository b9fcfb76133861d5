"""Per-graph agents (DOPPLER's setting) against every non-learned placer at equal budget.

The ``per_graph`` part of ``placegym report`` (``make agent-report``). Instances
(:data:`INSTANCES`): the four DOPPLER workloads on ``p100x4`` (``workloads-v0``) and their
CCR-4 variants on ``p100x4`` and ``doppler-unit-4`` (``comm-heavy-v0``).

Per instance and training seed, :func:`run_seed` trains the shipped preset
``plan_imitation`` (behaviour cloning of a ``device_anneal`` plan, ``restarts=1``) and
runs :func:`~placegym.agents.doppler.search.policy_search` with :data:`PER_GRAPH_BUDGET`
simulator calls from its final weights (without the heuristic starts, as the saved rows
were made), searching with the same seed; one JSON row per (instance, seed) in
``results.jsonl``. Training is not counted in the budget; the row keeps what it cost
(the plan search's simulator calls, episodes, seconds).

:func:`baselines` computes, per instance: the single-pass placers (critical_path, heft,
nest, metis, round_robin, single_device), ``anneal`` and the ``random_search`` control
(:mod:`placegym.train.harness.anytime`, same starts) with :data:`PER_GRAPH_BUDGET` calls for seeds
0, 1, 2, the certified lower bound and the suite's best known makespan (its source).
:func:`per_graph_table` prints every figure as a ratio to critical_path (lower is
better) with the targets (:data:`~placegym.train.experiments.targets.TARGETS`): agent
greedy <= the best
single pass on every instance (reaching the lower bound counts) and >= 10% below it in
geometric mean; agent + search <= anneal (mean over seeds) on every instance and >= 3%
below it in geometric mean.

Feasibility (:mod:`placegym.train.harness.feasibility`): a row and a baseline carry
``feasible`` and, when not, ``infeasible``: ``{column: reason}`` for each placement that
is over a device's memory, splits a co-location group or whose placer raised (``greedy``,
``search``, ``plan``; ``heft``, ``anneal``, ...); such a column's ratio is None (and so
are all of them where critical_path, the unit, is infeasible). Rows and baselines saved
before these fields count as feasible. The table shows ``OOM``, ``split`` or ``failed``
for an infeasible column (any seed), the best single pass is the least feasible one, the
geometric means and the anytime lines are over the instances every compared column
solved (the count is shown when it is not all of them), a target "on every instance"
fails on an instance whose agent column is infeasible, and the last row counts each
column's feasible instances.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.bounds import lower_bound
from placegym.envs.suites import get_suite
from placegym.envs.suites.reference import load_references
from placegym.teachers import SINGLE_PASS
from placegym.train.experiments.targets import TARGETS, verdict
from placegym.train.harness.feasibility import Outcome, mark, over, place, simulate_outcome
from placegym.train.stats import geomean

__all__ = [
    "INSTANCES",
    "PER_GRAPH_BUDGET",
    "baselines",
    "per_graph_table",
    "read_rows",
    "run_seed",
]

#: Simulator calls of every search placer (agent + search, anneal, random search).
PER_GRAPH_BUDGET = 3000
_WORKLOADS = ("chainmm-6x2", "ffnn-3x2x4", "llama_block-1x16", "llama_layer-1x16x16")
#: ``SUITE/INSTANCE`` names of the twelve instances, as ``data.graphs`` takes them.
INSTANCES = (
    tuple(f"workloads-v0/{w}@p100x4" for w in _WORKLOADS)
    + tuple(f"comm-heavy-v0/{w}-ccr4@p100x4" for w in _WORKLOADS)
    + tuple(f"comm-heavy-v0/{w}-ccr4@doppler-unit-4" for w in _WORKLOADS)
)
_SEARCH_MARKS = (1, 10, 100, 1000, PER_GRAPH_BUDGET)


def _instance(name: str):
    suite, _, instance = name.partition("/")
    return get_suite(suite).instance(instance)


def teacher_outcome(name: str, g: Graph, c: Cluster, **kw: Any) -> Outcome:
    """Teacher ``name``'s placement of ``g`` on ``c``, simulated (a teacher that raises
    gives an infeasible outcome)."""
    from placegym.teachers import get_teacher

    return place(lambda gg, cc, _: get_teacher(name, **kw).place(gg, cc), g, c, 0)


def unit(cp: Outcome) -> float | None:
    """critical_path's makespan, the ratios' unit; None where it is infeasible."""
    return cp.makespan if cp.feasible else None


def ratio_of(out: Outcome, cp: Outcome) -> float | None:
    """``out``'s makespan / critical_path's; None where either is infeasible."""
    ref = unit(cp)
    return None if ref is None or not out.feasible or out.makespan is None else out.makespan / ref


def feasibility(fields: dict[str, Any], failed: dict[str, str]) -> dict[str, Any]:
    """``fields`` with ``feasible`` and, when some column failed, ``infeasible``."""
    fields["feasible"] = not failed
    if failed:
        fields["infeasible"] = failed
    return fields


def greedy_placement(
    policy: Any,
    g: Graph,
    c: Cluster,
    memory_mask: bool | str = True,
    passes: list[Placement] | None = None,
) -> Placement:
    """The policy's greedy placement under ``memory_mask``, with reserves raised to fit
    where memory binds as the single-pass teachers' are (:func:`~placegym.agents.doppler.
    decoder.reserved_greedy`; elsewhere what :func:`~placegym.agents.doppler.search.
    policy_search` times as its greedy pass); ``passes`` receives every pass decoded."""
    import torch

    from placegym.agents.doppler.decoder import Decoder, reserved_greedy

    was_training = policy.training
    policy.eval()
    with torch.no_grad():
        placement = reserved_greedy(Decoder(policy, g, c, memory_mask), passes)
    policy.train(was_training)
    return placement


def why(row: dict[str, Any], column: str) -> str | None:
    """Why ``column`` of a row or baseline is infeasible; None when it is feasible (rows
    and baselines saved before feasibility was recorded are). A None value with no reason
    (critical_path, the unit, infeasible) reads as infeasible too."""
    reason = (row.get("infeasible") or {}).get(column)
    if reason is None and row.get(column, 0.0) is None:
        return (row.get("infeasible") or {}).get("critical_path", "no value")
    return reason


def cell(text: str, reason: str | None) -> str:
    """``text``, or the mark of ``reason`` (``OOM``, ``split``, ``failed``)."""
    return text if reason is None else mark(reason)


def train_or_load(preset: str, run: Path, seed: int, overrides: Sequence[str] = ()):
    """Train the shipped ``preset`` with ``seed`` into ``run`` (no progress bar, W&B or
    Gantt charts; its output in ``run/train.log``), or load the run if it finished;
    ``(config, results.json, final policy)``."""
    from placegym.train.checkpoint import load_checkpoint, policy_from_checkpoint
    from placegym.train.config import load_preset, presets_dir
    from placegym.train.restarts import finished_results, train

    fixed = [f"out={run}", f"seed={seed}", "progress=false", "wandb.mode=disabled"]
    cfg = load_preset(preset, [*fixed, "eval.gantt=false", *overrides])
    if finished_results(cfg.run_dir) is None:
        run.mkdir(parents=True, exist_ok=True)
        with (run / "train.log").open("a") as fh, contextlib.redirect_stdout(fh):
            train(cfg, base_dir=presets_dir())
    results = json.loads((cfg.run_dir / "results.json").read_text())
    policy = policy_from_checkpoint(load_checkpoint(cfg.run_dir / "checkpoints" / "final.pt"))
    return cfg, results, policy


def run_seed(name: str, seed: int, out: Path, budget: int = PER_GRAPH_BUDGET) -> dict[str, Any]:
    """Train ``plan_imitation`` on instance ``name`` with ``seed`` under ``out`` (or load the
    finished run), search with its weights; returns the row (ratios to critical_path)."""
    from placegym.agents.doppler.search import SearchConfig, policy_search

    inst = _instance(name)
    args = [f"data.cluster={inst.cluster.name}", f"data.graphs=[{name}]"]
    cfg, results, policy = train_or_load("plan_imitation", out / f"{inst.id}-s{seed}", seed, args)
    # no heuristic starts: the saved rows were searched from the policy's placements only
    # (its greedy is at or below the best single pass on every instance)
    search = SearchConfig(budget=budget, starts=())
    res = policy_search(policy, inst.graph, inst.cluster, search, seed=seed)
    g, c = inst.graph, inst.cluster
    cp = teacher_outcome("critical_path", g, c)
    outs = {
        "greedy": simulate_outcome(g, c, greedy_placement(policy, g, c)),
        "search": simulate_outcome(g, c, res.placement),
        "plan": teacher_outcome("device_anneal", g, c, **cfg.phase1.teacher_kwargs, seed=seed),
    }
    failed = {k: o.infeasible for k, o in outs.items() if o.infeasible is not None}
    if not cp.feasible:
        failed["critical_path"] = cp.infeasible or "infeasible"
    ref = unit(cp)
    return feasibility(
        {
            "instance": name,
            "seed": seed,
            "greedy": None if ref is None or "greedy" in failed else res.greedy / ref,
            "search": ratio_of(outs["search"], cp),
            "curve": {
                str(k): float(res.curve[min(k, res.calls) - 1] / ref) if ref else None
                for k in _SEARCH_MARKS
            },
            "plan": ratio_of(outs["plan"], cp),
            "plan_calls": int(cfg.phase1.teacher_kwargs["budget"]),
            "episodes": int(results["progress"]["episodes"]),
            "train_seconds": float(results["progress"]["seconds"]),
        },
        failed,
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``results.jsonl``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def baselines(name: str, budget: int = PER_GRAPH_BUDGET, seeds: Sequence[int] = (0, 1, 2)) -> dict:
    """Ratios to critical_path of the non-learned placers on instance ``name``
    (module docstring); ``anneal`` and ``random_search`` per seed; feasibility."""
    from placegym.train.harness.anytime import SEARCH_PLACERS, Trace, TraceError
    from placegym.train.harness.suite_reference import check_reference

    inst = _instance(name)
    g, c = inst.graph, inst.cluster
    outs = {h: teacher_outcome(h, g, c) for h in SINGLE_PASS}
    cp = outs["critical_path"]
    ref = unit(cp)
    failed = {h: o.infeasible for h, o in outs.items() if o.infeasible is not None}
    row: dict[str, Any] = {h: ratio_of(o, cp) for h, o in outs.items()}
    marks = np.array(sorted({m for m in _SEARCH_MARKS if m <= budget} | {budget}))
    for placer in ("anneal", "random_search"):
        finals, curves = [], []
        for s in seeds:
            trace = Trace(budget)
            try:
                run = simulate_outcome(g, c, SEARCH_PLACERS[placer](g, c, budget, s, trace))
            except TraceError:
                raise
            except Exception as e:  # this run fails; the report goes on
                run = Outcome(None, None, False, f"placer raised {type(e).__name__}: {e}")
            if run.infeasible is not None:
                failed.setdefault(placer, run.infeasible)
            finals.append(ratio_of(run, cp))
            curves.append((trace.best_at(marks) / (ref or np.nan)).tolist())
        row[placer], row[f"{placer}_curve"] = finals, dict(zip(map(str, marks), zip(*curves)))
    row["lower_bound"] = None if ref is None else lower_bound(g, c).value / ref
    known = load_references(inst.suite).get(inst.id)
    if known is not None and known.digest == inst.digest and ref is not None:
        check_reference(inst, known)
        row["best_known"], row["best_known_source"] = known.best_makespan / ref, known.best_source
    else:
        row["best_known"], row["best_known_source"] = None, None
    return feasibility(row, failed)


def _known(b: dict[str, Any]) -> str:
    return "n/a" if b.get("best_known") is None else f"{b['best_known']:.3f}"


def _ms(xs: Sequence[float]) -> str:
    return f"{np.mean(xs):.3f} ± {np.std(xs):.3f}"


def best_feasible(b: dict[str, Any], placers: Sequence[str]) -> str | None:
    """The feasible placer of least ratio in ``b`` (None: none is feasible)."""
    ok = [h for h in placers if why(b, h) is None]
    return min(ok, key=lambda h: b[h]) if ok else None


def best_list(b: dict[str, Any]) -> float | None:
    """min(critical_path, heft) over the feasible ones in ``b``; None where neither is."""
    h = best_feasible(b, ("critical_path", "heft"))
    return None if h is None else b[h]


def best_single(b: dict[str, Any]) -> float | None:
    """The least ratio of the feasible single-pass placers in ``b``; None where none is."""
    h = best_feasible(b, SINGLE_PASS)
    return None if h is None else b[h]


def beats_both(ratio: float | None, b: dict[str, Any]) -> bool:
    """``ratio`` (None: infeasible, never a win) below both feasible ones of critical_path
    and heft (an infeasible one is beaten by any feasible placement)."""
    if ratio is None:
        return False
    best = best_list(b)
    return best is None or ratio < best * (1 - 1e-9)


def at_most(x: float | None, ref: float | None) -> bool:
    """``x`` feasible and at most ``ref`` (any feasible ``x`` where ``ref`` is not)."""
    return x is not None and (ref is None or x <= ref * (1 + 1e-9))


def agent_why(rows: Sequence[dict[str, Any]], column: str) -> str | None:
    """Why ``column`` is infeasible on some seed of ``rows`` (None: on none)."""
    return next((w for w in (why(r, column) for r in rows) if w is not None), None)


def geomeans_over(solved: int, total: int) -> str:
    """``"12 instances"``, or ``"10 of 12 instances every placer solved"``."""
    return f"{total} instances" if solved == total else over(solved, total)


_COLUMNS = ("single", "anneal", "random_search", "greedy", "search", "plan")
#: The search baselines, run per seed.
SEARCHES = ("anneal", "random_search")


def per_graph_table(rows: Sequence[dict[str, Any]], base: dict[str, dict]) -> str:
    """The markdown tables and target checks of the rows (module docstring)."""
    names = [n for n in INSTANCES if any(r["instance"] == n for r in rows)]
    lines = [
        "| instance | best single pass | anneal@3000 | random@3000 | agent greedy | "
        "agent+search@3000 | plan | best known | lower bound | seeds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    agg: dict[str, list[float]] = {k: [] for k in ("single", "anneal", "greedy", "search")}
    fails: dict[str, list[str]] = {"greedy": [], "search": []}
    solved, feasible = [], dict.fromkeys(_COLUMNS, 0)
    for n in names:
        mine = [r for r in rows if r["instance"] == n]
        b = base[n]
        best = best_feasible(b, SINGLE_PASS)
        bad = {k: agent_why(mine, k) for k in ("greedy", "search", "plan")}
        bad |= {k: why(b, k) for k in ("anneal", "random_search")}
        bad["single"] = None if best is not None else "no single-pass placer is feasible"
        anneal = None if bad["anneal"] else float(np.mean(b["anneal"]))
        short = n.split("/", 1)[1]
        shown = _shown(b, mine, bad)
        lines.append(
            f"| {short} | {f'{b[best]:.3f} ({best})' if best else 'n/a'} | "
            f"{shown['anneal']} | {shown['random_search']} | {shown['greedy']} | "
            f"{shown['search']} | {shown['plan']} | {_known(b)} | {_bound(b)} | {len(mine)} |"
        )
        feasible = {k: v + (bad[k] is None) for k, v in feasible.items()}
        greedy = None if bad["greedy"] else float(np.mean([r["greedy"] for r in mine]))
        search = None if bad["search"] else float(np.mean([r["search"] for r in mine]))
        if greedy is None:
            fails["greedy"].append(f"{short} (greedy {mark(bad['greedy'])})")
        elif best is not None:
            at_bound = b[best] <= (b["lower_bound"] or 0.0) * (1 + 1e-6)
            if greedy > b[best] * (1 + 1e-9) and not at_bound:
                fails["greedy"].append(short)
        if search is None:
            fails["search"].append(f"{short} (search {mark(bad['search'])})")
        elif anneal is not None and search > anneal * (1 + 1e-9):
            fails["search"].append(short)
        if best is not None and anneal is not None and greedy is not None and search is not None:
            solved.append(n)
            agg["single"].append(b[best])
            agg["anneal"].append(anneal)
            agg["greedy"].append(greedy)
            agg["search"].append(search)
    lines.append(
        "| feasible | " + " | ".join(f"{feasible[k]}/{len(names)}" for k in _COLUMNS) + " | | | |"
    )
    gm = {k: geomean(v) for k, v in agg.items()}
    lines += ["", *_anytime_lines(rows, base, solved)]
    greedy_gm = verdict("per_graph.greedy_vs_single_pass", gm["greedy"] / gm["single"])
    search_gm = verdict("per_graph.search_vs_anneal", gm["search"] / gm["anneal"])
    below_single = 1 - TARGETS["per_graph.greedy_vs_single_pass"].bound
    below_anneal = 1 - TARGETS["per_graph.search_vs_anneal"].bound
    lines += [
        "",
        f"Geometric means over {geomeans_over(len(solved), len(names))}: best single pass "
        f"{gm['single']:.3f}, "
        f"anneal@3000 {gm['anneal']:.3f}, agent greedy {gm['greedy']:.3f} "
        f"({gm['greedy'] / gm['single'] - 1:+.1%} vs best single pass), agent+search "
        f"{gm['search']:.3f} ({gm['search'] / gm['anneal'] - 1:+.1%} vs anneal).",
        f"- greedy <= best single pass on every instance: "
        f"{'met' if not fails['greedy'] else 'not met on ' + ', '.join(fails['greedy'])}; "
        f">= {below_single:.0%} below in geometric mean: {greedy_gm}",
        f"- agent+search@3000 <= anneal@3000 on every instance: "
        f"{'met' if not fails['search'] else 'not met on ' + ', '.join(fails['search'])}; "
        f">= {below_anneal:.0%} below in geometric mean: {search_gm}",
    ]
    return "\n".join(lines)


def _shown(b: dict[str, Any], mine: list[dict[str, Any]], bad: dict) -> dict[str, str]:
    """The per-instance cells of the searched and agent columns (marks where infeasible)."""
    out = {k: mark(bad[k]) if bad[k] else f"{np.mean(b[k]):.3f}" for k in SEARCHES}
    for k in ("greedy", "search", "plan"):
        out[k] = mark(bad[k]) if bad[k] else _ms([r[k] for r in mine])
    return out


def _bound(b: dict[str, Any]) -> str:
    return "n/a" if b.get("lower_bound") is None else f"{b['lower_bound']:.3f}"


def _anytime_lines(rows: Sequence[dict[str, Any]], base: dict[str, dict], names: list[str]):
    """Best found vs simulator calls: geometric mean over instances (``names``: those
    every placer solved) of the mean over seeds (ratio to critical_path), agent + search
    beside anneal and random search."""
    marks = sorted(map(int, rows[0]["curve"]))
    out = [
        "| simulator calls | " + " | ".join(str(m) for m in marks) + " |",
        "|---|" + "---|" * len(marks),
    ]
    series = {
        "agent+search": lambda n, m: [r["curve"][m] for r in rows if r["instance"] == n],
        "anneal": lambda n, m: base[n]["anneal_curve"][m],
        "random_search": lambda n, m: base[n]["random_search_curve"][m],
    }
    for label, get in series.items():
        cells = []
        for m in map(str, marks):
            vals = [float(np.mean(get(n, m))) for n in names]  # nan before a first report
            ok = bool(vals) and all(np.isfinite(vals))
            cells.append(f"{geomean(vals):.3f}" if ok else "n/a")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


def collect_rows(
    folder: Path,
    results: Path | None,
    missing: Callable[[list[dict[str, Any]]], Iterable[list[dict[str, Any]]]],
) -> list[dict[str, Any]]:
    """A report part's rows: read from ``results`` (nothing computed), else from
    ``folder/results.jsonl`` plus each batch that ``missing(rows so far)`` yields,
    appended to that file as it comes (a killed report resumes where it stopped)."""
    folder.mkdir(parents=True, exist_ok=True)
    if results is not None:
        return read_rows(results)
    path = folder / "results.jsonl"
    rows = read_rows(path) if path.is_file() else []
    for new in missing(list(rows)):
        rows += new
        with path.open("a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in new)
    return rows


def cached_baselines(
    cache: Path, names: Sequence[str], compute: Callable[[str], dict]
) -> dict[str, dict]:
    """``compute(name)`` of each instance in ``names``, cached in the JSON file ``cache``
    (written after each new instance, so an interrupted report keeps what it computed)."""
    base = json.loads(cache.read_text()) if cache.is_file() else {}
    for name in dict.fromkeys(names):
        if name not in base:
            base[name] = compute(name)
            cache.write_text(json.dumps(base, indent=1))
    return base


def per_graph_report(
    out: Path, *, seeds: Sequence[int] = (0, 1, 2), results: Path | None = None
) -> str:
    """The per-graph tables: rows read from ``results`` (nothing trained), else from
    ``out/per_graph/results.jsonl``, training each missing (instance, seed) first;
    baselines cached in ``out/per_graph/baselines.json``. Also written to
    ``out/per_graph/table.md``."""
    folder = out / "per_graph"

    def missing(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        done = {(r["instance"], r["seed"]) for r in rows}
        for name in INSTANCES:
            for seed in seeds:
                if (name, seed) not in done:
                    yield [run_seed(name, seed, folder / "runs")]

    rows = collect_rows(folder, results, missing)
    base = cached_baselines(folder / "baselines.json", [r["instance"] for r in rows], baselines)
    text = "## Per-graph agents (ratios to critical_path, lower is better)\n\n"
    text += per_graph_table(rows, base)
    (folder / "table.md").write_text(text + "\n")
    return text
