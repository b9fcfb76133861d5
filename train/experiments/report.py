"""The agent report (``placegym report``, ``make agent-report``): trains (or loads)
agents and prints the figures of the learned-agent targets as markdown tables.

Parts (``--parts``, all by default), every run in its own folder under ``--out`` (a run
that finished is loaded, a killed one resumes):

- ``main``: the per-workload presets (``configs/<workload>.yaml``, shipped with the
  package, :func:`~placegym.train.config.presets_dir`: phase I + II, each with its
  ``restarts``; one run on ``doppler-unit-*``, where every placer scores the
  same) on each cluster of :data:`CLUSTERS` (``--clusters``), best evaluated weights
  kept; greedy and best-of-16 makespans of the kept restart as ratios to critical_path
  next to heft, nest, the baselines round_robin, metis and single_device (computed here,
  so finished runs need no retraining) and anneal (default budget), the mean ± std of
  the greedy ratio over the restarts, the geometric mean per cluster and the target
  checks (greedy >= 20% faster than critical_path, faster than every heuristic, best of
  16 within 5% of anneal; "every heuristic" counts the baselines too), for the kept
  restarts and for their mean. A baseline whose placement is infeasible (over a device's
  memory, a split co-location group, or the placer raised;
  :mod:`placegym.train.harness.feasibility`) is shown as ``OOM``, ``split`` or ``failed``
  and is no heuristic to beat; the training runs' own evaluation rows carry no
  feasibility and count as feasible.
- ``optimality``: one agent trained on :data:`SMALL_GRAPHS` small random DAGs on
  ``p100x4``; greedy and best-of-16 gap to the proven optimum (``optimal`` teacher).
- ``ablation``: dual policy vs SEL-only vs PLC-only (the other phase answered by the
  critical-path teacher, as :class:`placegym.teachers.wrappers.SelectOnly` / ``PlaceOnly``),
  same reduced budget for all three.
- ``reward``: phase II from scratch with the ``relative`` reward vs ``nest`` shaping:
  training episodes until the greedy policy reaches the critical_path level.
- ``transfer``: fine-tuning the ``main`` FFNN agent (p100x4) on the Llama graphs and on
  8 GPUs (``v100x8``) vs training from scratch with the same phase II budget: episodes
  until the greedy policy beats critical_path (0 = zero-shot).

Every run is seeded (``seed`` 0, restart i with ``seed`` i; one torch thread).
``--quick`` shrinks every budget (for tests).

Usage::

    placegym report --out runs/report [--parts main,ablation] [--clusters p100x4]
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from placegym.train.config import (
    TrainConfig,
    apply_overrides,
    config_from_dict,
    load_preset,
    presets_dir,
)
from placegym.train.experiments.targets import TARGETS, verdict
from placegym.train.harness.feasibility import mark
from placegym.train.restarts import finished_results, train
from placegym.train.stats import geomean

__all__ = ["CLUSTERS", "PARTS", "Budget", "report"]

#: The workloads of the main table (one training run each, per cluster).
MAIN_WORKLOADS = ("chainmm", "ffnn", "llama_block", "llama_layer")
CLUSTERS = ("p100x4", "doppler-unit-4")
#: Heuristic teachers whose makespans the training runs' evaluation records.
RUN_HEURISTICS = ("critical_path", "heft", "nest")
#: Placers without search, computed by the report itself (not by the training runs).
REPORT_PLACERS = ("round_robin", "metis", "single_device")
SMALL_GRAPHS = 10
PARTS = ("main", "optimality", "ablation", "reward", "transfer")
_COMMON = ("progress=false", "wandb.mode=disabled", "eval.gantt=false", "restarts=1")


@dataclass(frozen=True)
class Budget:
    """Training budgets (updates) of each part; :meth:`quick` for tests."""

    main_phase1: int | None = None  # None: the preset's
    main_phase2: int | None = None
    small_phase2: int = 100  # doppler-unit-4 (critical_path is within 0.2% of work/D)
    ablation_phase1: int = 50
    ablation_phase2: int = 100
    reward_updates: int = 100
    transfer_updates: int = 60
    optimality_phase1: int = 60
    optimality_phase2: int = 150
    eval_every: int = 5
    episodes: int = 16
    main_restarts: int | None = None  # None: the preset's (p100x4)

    @classmethod
    def quick(cls) -> Budget:
        """Tiny budgets, for a smoke run of every part."""
        return cls(1, 2, 2, 1, 2, 2, 2, 1, 2, 1, 2, main_restarts=2)


def _train(cfg: TrainConfig, log: Path) -> dict[str, Any]:
    """Train (or load) one run quietly; returns its ``results.json``."""
    results = finished_results(cfg.run_dir)
    if results is not None:
        return results
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh, contextlib.redirect_stdout(fh):
        train(cfg, base_dir=presets_dir())
    return json.loads((cfg.run_dir / "results.json").read_text())


def _preset(name: str, out: Path, overrides: Sequence[str]) -> TrainConfig:
    return load_preset(name, [f"out={out}", *_COMMON, *overrides])


def _rows(results: dict[str, Any], split: str = "train") -> list[dict[str, Any]]:
    return [r for r in results["rows"] if r["split"] == split]


def _episodes_to(metrics: Path, key: str, threshold: float, strict: bool) -> int | None:
    """Training episodes at the first evaluation whose ``key`` is <= (< if ``strict``)
    ``threshold``; None when never."""
    episodes = 0
    for line in metrics.read_text().splitlines():
        rec = json.loads(line)
        episodes = int(rec.get("charts/episodes", episodes))
        value = rec.get(key)
        if value is not None and (value < threshold if strict else value <= threshold):
            return episodes
    return None


def _last(metrics: Path, key: str) -> float:
    value = float("nan")
    for line in metrics.read_text().splitlines():
        value = json.loads(line).get(key, value)
    return value


# ---------------------------------------------------------------------- parts
_MAIN_KEYS = ("greedy", "best_of_16", *RUN_HEURISTICS, *REPORT_PLACERS, "anneal")


def _target_line(label: str, rows: Sequence[dict[str, Any]]) -> str:
    """The three main-table targets checked on per-workload ratio ``rows``."""
    g, bb, a = (geomean([r[k] for r in rows]) for k in ("greedy", "best_of_16", "anneal"))
    cp, anneal = TARGETS["report.greedy_vs_critical_path"], TARGETS["report.best_of_16_vs_anneal"]
    beats = sum(r["beats"] for r in rows)
    return (
        f"- {label}: greedy geomean {g:.3f} of critical_path (target <= "
        f"{cp.bound:.3f}: {verdict('report.greedy_vs_critical_path', g)}); greedy faster "
        f"than every heuristic on {beats:.3g}/{len(rows)} workloads; best of 16 geomean "
        f"{bb:.3f} vs anneal {a:.3f} ({100 * (bb / a - 1):+.1f}%; target <= "
        f"{100 * (anneal.bound - 1):+.0f}%: {verdict('report.best_of_16_vs_anneal', bb / a)})"
    )


def _ratios(r: dict[str, Any], baselines: dict[str, float | str]) -> dict[str, Any]:
    """Ratios to critical_path of a run's row and the baselines; an infeasible baseline
    keeps its reason (a string) instead of a ratio."""
    r = {**r, **baselines}
    out: dict[str, Any] = {
        k: r[k] if isinstance(r[k], str) else r[k] / r["critical_path"] for k in _MAIN_KEYS
    }
    rivals = [r[h] for h in (*RUN_HEURISTICS, *REPORT_PLACERS) if not isinstance(r[h], str)]
    out["beats"] = float(r["greedy"] < min(rivals, default=math.inf))
    return out


def _baselines(cfg: TrainConfig) -> dict[str, float | str]:
    """Makespans of the :data:`REPORT_PLACERS` on the run's training graph and cluster; the
    reason instead where a placement is infeasible."""
    from placegym.envs import load_cluster, simulate
    from placegym.envs.sim.simulator import Dispatch
    from placegym.teachers import make_teacher

    graph = cfg.data.graphs[0].graph(presets_dir())
    cluster = load_cluster(cfg.data.cluster)
    dispatch = cast(Dispatch, cfg.data.dispatch)  # validated: priority or fifo
    out: dict[str, float | str] = {}
    for name in REPORT_PLACERS:
        try:
            placement = make_teacher(name, cfg.seed).place(graph, cluster)
            s = simulate(graph, cluster, placement, dispatch=dispatch)
        except Exception as e:  # a failed baseline is marked, not a crash
            out[name] = str(e) if isinstance(e, ValueError) else f"placer raised {e!r}"
            continue
        out[name] = s.infeasibility or s.makespan
    return out


def _cell(x: float | str) -> str:
    """A ratio, or the mark of an infeasible baseline's reason."""
    return mark(x) if isinstance(x, str) else f"{x:.3f}"


def _mean(xs: Sequence[float | str]) -> float | str:
    """Mean over restarts; the first reason where any is infeasible."""
    bad = [x for x in xs if isinstance(x, str)]
    return bad[0] if bad else float(np.mean([x for x in xs if not isinstance(x, str)]))


def _restart_rows(run: Path, baselines: dict[str, float | str]) -> list[dict[str, Any]]:
    """Ratios of every restart of a finished run ([] when it has none)."""
    summary = run / "restarts.json"
    if not summary.is_file():
        return []
    runs = [run / x["run"] for x in json.loads(summary.read_text())["restarts"]]
    return [
        _ratios(_rows(json.loads((r / "results.json").read_text()))[0], baselines) for r in runs
    ]


def _main_config(w: str, cluster: str, out: Path, b: Budget) -> TrainConfig:
    """The main part's config of workload ``w`` on ``cluster``: the preset, its restarts
    on ``p100x4`` (one run on ``doppler-unit-*``, where every placer scores the same)."""
    over = [f"data.cluster={cluster}", "eval.keep_best=true", "eval.every=25"]
    if b.main_phase1 is not None:
        over.append(f"phase1.updates={b.main_phase1}")
    small = cluster.startswith("doppler-unit")
    p2 = b.small_phase2 if small else b.main_phase2
    if p2 is not None:
        over.append(f"phase2.updates={p2}")
    restarts = b.main_restarts or load_preset(w).restarts
    over.append(f"restarts={1 if small else restarts}")
    return _preset(w, out / "main" / cluster / w, over)


def main_table(out: Path, b: Budget, clusters: Sequence[str] = CLUSTERS) -> str:
    """Per-workload presets on each cluster (with their ``restarts``): the kept run's
    ratios, and the mean ± std of the greedy ratio over the restarts."""
    lines = [
        "| workload | cluster | greedy | greedy, mean of restarts | best of 16 | "
        + " | ".join(_MAIN_KEYS[2:])
        + " |",
        "|---|---|" + "---|" * (len(_MAIN_KEYS) + 1),
    ]
    checks = []
    for cluster in clusters:
        kept: list[dict[str, Any]] = []
        mean: list[dict[str, Any]] = []
        restarted = False
        for w in MAIN_WORKLOADS:
            cfg = _main_config(w, cluster, out, b)
            [r] = _rows(_train(cfg, out / "main" / "log.txt"))
            baselines = _baselines(cfg)
            kept.append(_ratios(r, baselines))
            restarts = _restart_rows(cfg.run_dir, baselines) or [kept[-1]]
            restarted |= len(restarts) > 1
            mean.append({k: _mean([x[k] for x in restarts]) for k in restarts[0]})
            greedy = [x["greedy"] for x in restarts]
            spread = (
                f"{np.mean(greedy):.3f} ± {np.std(greedy):.3f} ({len(greedy)})"
                if len(greedy) > 1
                else ""
            )
            cells = [_cell(kept[-1][k]) for k in _MAIN_KEYS]
            cells.insert(1, spread)
            lines.append(f"| {w} | {cluster} | " + " | ".join(cells) + " |")
        g, bb, a = (geomean([m[k] for m in kept]) for k in ("greedy", "best_of_16", "anneal"))
        gm = geomean([m["greedy"] for m in mean])
        blanks = " |" * (len(_MAIN_KEYS) - 4)  # no geometric mean for the other placers
        lines.append(
            f"| **geomean** | {cluster} | {g:.3f} | {gm:.3f} | {bb:.3f} | 1.000 |{blanks} "
            f"{a:.3f} |"
        )
        checks.append(_target_line(cluster, kept))
        if restarted:
            checks.append(_target_line(f"{cluster}, mean over the restarts", mean))
    head = "### Agents vs teachers (makespan / critical_path; lower is better)\n\n"
    return head + "\n".join(lines) + "\n\n" + "\n".join(checks)


def optimality_table(out: Path, b: Budget) -> str:
    graphs = [
        {"name": "random_dag", "params": {"nodes": 8 + i % 3, "width": 3, "seed": i}}
        for i in range(SMALL_GRAPHS)
    ]
    cfg = config_from_dict(
        {
            "name": "optimality",
            "out": str(out / "optimality"),
            "data": {"cluster": "p100x4", "graphs": graphs},
            "phase1": {"updates": b.optimality_phase1, "graphs_per_update": 5, "lr": 2e-3},
            "phase2": {
                "updates": b.optimality_phase2,
                "graphs_per_update": 5,
                "episodes_per_graph": b.episodes,
                "lr": 2e-3,
            },
            "eval": {
                "every": 50,
                "teachers": ["critical_path", "optimal"],
                "keep_best": True,
            },
        }
    )
    cfg = apply_overrides(cfg, list(_COMMON))
    rows = _rows(_train(cfg, out / "optimality" / "log.txt"))
    gap_g = [r["greedy"] / r["optimal"] - 1 for r in rows]
    gap_b = [r["best_of_16"] / r["optimal"] - 1 for r in rows]
    gap_cp = [r["critical_path"] / r["optimal"] - 1 for r in rows]
    lines = [
        f"### Optimality gap on {len(rows)} random DAGs of 8-10 nodes (p100x4)\n",
        "| placer | mean gap | max gap | optimal found |",
        "|---|---|---|---|",
    ]
    for name, gaps in (
        ("agent greedy", gap_g),
        ("agent best of 16", gap_b),
        ("critical_path", gap_cp),
    ):
        hits = sum(g <= 1e-9 for g in gaps)
        lines.append(
            f"| {name} | {100 * sum(gaps) / len(gaps):.2f}% | {100 * max(gaps):.2f}% "
            f"| {hits}/{len(gaps)} |"
        )
    gap = TARGETS["report.best_of_16_gap_to_optimal"]
    ok = verdict("report.best_of_16_gap_to_optimal", sum(gap_b) / len(gap_b))
    lines.append(f"\nTarget (best of 16, mean gap <= {gap.bound:.0%}): {ok}.")
    return "\n".join(lines)


def ablation_table(out: Path, b: Budget, workloads: Sequence[str] = ("ffnn", "chainmm")) -> str:
    lines = [
        "### Ablation (p100x4; same budget for all: "
        f"{b.ablation_phase1} imitation + {b.ablation_phase2} RL updates)\n",
        "| workload | dual greedy | dual best16 | SEL-only greedy | SEL-only best16 "
        "| PLC-only greedy | PLC-only best16 |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in workloads:
        cells = []
        for learn in ("both", "select", "place"):
            over = [
                f"policy.learn={learn}",
                f"phase1.updates={b.ablation_phase1}",
                f"phase2.updates={b.ablation_phase2}",
                f"phase2.episodes_per_graph={b.episodes}",
                "eval.teachers=[critical_path]",
                "eval.every=0",
            ]
            res = _train(
                _preset(w, out / "ablation" / f"{w}-{learn}", over), out / "ablation" / "log.txt"
            )
            [r] = _rows(res)
            cells += [r["greedy"] / r["critical_path"], r["best_of_16"] / r["critical_path"]]
        lines.append(f"| {w} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return "\n".join(lines)


def reward_table(out: Path, b: Budget, workloads: Sequence[str] = ("ffnn", "llama_block")) -> str:
    lines = [
        f"### Reward: RL from scratch, {b.reward_updates} updates x {b.episodes} episodes "
        "(p100x4)\n",
        "| workload | reward | episodes to reach critical_path (greedy <= 1.0) "
        "| final greedy | final best16 |",
        "|---|---|---|---|---|",
    ]
    for w in workloads:
        for reward in ("relative", "nest"):
            run = out / "reward" / f"{w}-{reward}"
            over = [
                "phases=[phase2]",
                f"phase2.reward={reward}",
                f"phase2.updates={b.reward_updates}",
                f"phase2.episodes_per_graph={b.episodes}",
                f"eval.every={b.eval_every}",
                "eval.teachers=[critical_path]",
            ]
            _train(_preset(w, run, over), out / "reward" / "log.txt")
            m = run / "metrics.jsonl"
            n = _episodes_to(m, f"eval/train/{w}/greedy_ratio", 1.0, strict=False)
            lines.append(
                f"| {w} | {reward} | {'never' if n is None else n} "
                f"| {_last(m, f'eval/train/{w}/greedy_ratio'):.3f} "
                f"| {_last(m, f'eval/train/{w}/best_ratio'):.3f} |"
            )
    return "\n".join(lines)


def transfer_table(out: Path, b: Budget) -> str:
    source = out / "main" / "p100x4" / "ffnn" / "checkpoints" / "final.pt"
    if not source.is_file():
        _train(_main_config("ffnn", "p100x4", out, b), out / "main" / "log.txt")
    cases = (
        ("FFNN -> llama_block", "p100x4", "llama_block"),
        ("FFNN -> llama_layer", "p100x4", "llama_layer"),
        ("4 -> 8 GPUs (ffnn)", "v100x8", "ffnn"),
    )
    lines = [
        f"### Transfer: fine-tuning the FFNN/p100x4 agent vs from scratch ({b.transfer_updates} "
        f"RL updates x {b.episodes} episodes)\n",
        "| case | cluster | zero-shot greedy | fine-tune: episodes to beat critical_path "
        "| fine-tune final | scratch: episodes to beat critical_path | scratch final |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, cluster, w in cases:
        found = {}
        for mode in ("finetune", "scratch"):
            run = out / "transfer" / f"{w}-{cluster}-{mode}"
            over = [
                "phases=[phase2]",
                f"data.cluster={cluster}",
                f"data.graphs=[{w}]",
                "data.heldout=[]",
                f"phase2.updates={b.transfer_updates}",
                f"phase2.episodes_per_graph={b.episodes}",
                f"eval.every={b.eval_every}",
                "eval.teachers=[critical_path]",
            ]
            if mode == "finetune":
                over.append(f"init={source}")
            _train(_preset(w, run, over), out / "transfer" / "log.txt")
            m = run / "metrics.jsonl"
            key = f"eval/train/{w}/greedy_ratio"
            first = json.loads(m.read_text().splitlines()[0]).get(key, float("nan"))
            n = _episodes_to(m, key, 1.0, strict=True)
            found[mode] = (first, "never" if n is None else str(n), _last(m, key))
        lines.append(
            f"| {label} | {cluster} | {found['finetune'][0]:.3f} | {found['finetune'][1]} "
            f"| {found['finetune'][2]:.3f} | {found['scratch'][1]} | {found['scratch'][2]:.3f} |"
        )
    return "\n".join(lines)


def report(
    out: Path,
    parts: Sequence[str] = PARTS,
    budget: Budget | None = None,
    *,
    clusters: Sequence[str] = CLUSTERS,
) -> str:
    """Run the ``parts`` and return the markdown report (also written to
    ``out / "report.md"``); ``clusters`` are the ``main`` part's."""
    b = budget or Budget()
    makers = {
        "main": lambda o, bb: main_table(o, bb, clusters),
        "optimality": optimality_table,
        "ablation": ablation_table,
        "reward": reward_table,
        "transfer": transfer_table,
    }
    for part in parts:  # before any training
        if part not in makers:
            raise ValueError(f"parts: unknown part {part!r} (parts: {', '.join(PARTS)})")
    sections = []
    for part in parts:
        sections.append(makers[part](out, b))
        print(sections[-1] + "\n", flush=True)
    text = "\n\n".join(sections) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    return text
