"""Evaluation of trained agents: during a run, in its results, and as placers for
``placegym bench``.

Three modes, all seeded:

- ``greedy``: one episode taking the most probable action at every step;
- ``sample``: one episode sampling every action from the policy;
- ``best_of_k``: ``k`` sampled episodes (played in one batched rollout), keep the one of
  smallest makespan (an inference-time search that costs ``k`` simulations; the samples
  are decoded without environments and simulated in one batch,
  :func:`~placegym.agents.doppler.decoder.sample_placements`, with the same result).

:func:`evaluate_policy` reports all of them for one graph; :func:`evaluate_run` does it
for every graph of a training run against the teachers (rows for :func:`results_table`,
``eval/...`` metrics: ratios to critical_path and their geometric means).
:func:`load_agent` builds a placer for any graph and cluster from a checkpoint (or a
shipped agent): an :class:`~placegym.agents.doppler.placer.AgentPlacer`, the policy as a
placer ``place(graph, cluster, seed=0)``, defined in the DOPPLER wing
(:mod:`placegym.agents.doppler.placer`) and importable from here too, as are
:class:`~placegym.agents.doppler.placer.EnvPool`, :data:`MODES`,
:func:`~placegym.agents.doppler.placer.episode_placement` and
:func:`~placegym.agents.doppler.placer.trained_mask`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placegym.agents.doppler.decoder import decodes_like_episodes, sample_placements
from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.placer import (
    MODES,
    THREADS,
    AgentPlacer,
    EnvPool,
    check_threads,
    episode_placement,
    torch_threads,
    trained_mask,
)
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.doppler.selector import ProposalSelector, load_selector
from placegym.envs import Cluster, Graph, Placement, PlacementEnv, simulate
from placegym.envs.sim.simulator import Dispatch
from placegym.train.checkpoint import PRETRAINED, load_checkpoint, policy_from_checkpoint
from placegym.train.harness.bench import REFERENCE
from placegym.train.stats import geomean

__all__ = [
    "MODES",
    "REFERENCE",
    "AgentPlacer",
    "EnvPool",
    "EvalResult",
    "RunEvaluation",
    "episode_metrics",
    "episode_placement",
    "evaluate_policy",
    "evaluate_run",
    "load_agent",
    "load_policy",
    "results_table",
    "teacher_makespans",
    "train_greedy_ratio",
    "trained_mask",
]


@dataclass
class EvalResult:
    """Makespans (seconds) of one graph: greedy, mean of ``k`` samples, best of them."""

    greedy: float
    sampled: float
    best: float
    greedy_placement: Placement
    best_placement: Placement


def evaluate_policy(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    *,
    k: int = 16,
    seed: int = 0,
    pool: EnvPool | None = None,
) -> EvalResult:
    """Greedy, sampled and best-of-``k`` evaluation of ``policy`` on ``graph``.

    The greedy episode depends on the weights, the graph and the cluster only (ties go by
    a fixed rule, see :mod:`placegym.agents.doppler.episodes`); the ``k`` samples draw from a fresh
    ``np.random.default_rng(seed)``, so the best of ``k`` is the placement that
    ``AgentPlacer(policy, mode="best_of_k", k=k).place(graph, cluster, seed)`` returns.
    """
    pool = pool or EnvPool()
    was_training = policy.training
    policy.eval()
    envs = pool.get(graph, cluster, k + 1)
    # separate generators: the samples are those of AgentPlacer(mode="best_of_k")
    [g] = play_episodes(
        policy,
        envs[:1],
        [seed],
        rng=np.random.default_rng(seed),
        greedy=True,
        graph_cache=pool.graph_cache,
        keep_inputs=False,
    )
    makespans, placements = _samples(policy, graph, cluster, k, seed, pool, envs[1:])
    policy.train(was_training)
    best = int(np.argmin(makespans))
    return EvalResult(
        greedy=g.makespan,
        sampled=float(np.mean(makespans)),
        best=float(makespans[best]),
        greedy_placement=episode_placement(g),
        best_placement=placements(best),
    )


def _samples(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    k: int,
    seed: int,
    pool: EnvPool,
    envs: list[PlacementEnv],
) -> tuple[np.ndarray, Callable[[int], Placement]]:
    """The makespans of ``k`` episodes sampled with ``default_rng(seed)`` and a function
    giving the placement of one: decoded without environments and simulated in one batch
    (:func:`~placegym.agents.doppler.decoder.sample_placements`) where that plays the same episodes
    (the pool's environments differ from the defaults in memory mask and dispatch only),
    else played in ``envs``."""
    opts = pool.env_kwargs
    if decodes_like_episodes(policy) and set(opts) <= {"memory_mask", "dispatch"}:
        devs, orders, makespans = sample_placements(policy, graph, cluster, k, seed, **opts)
        return makespans, lambda i: Placement(device=devs[i], order=orders[i])
    records = play_episodes(
        policy,
        envs,
        [seed] * k,
        rng=np.random.default_rng(seed),
        graph_cache=pool.graph_cache,
        keep_inputs=False,
    )
    return np.array([r.makespan for r in records]), lambda i: episode_placement(records[i])


def teacher_makespans(
    graph: Graph,
    cluster: Cluster,
    names: Sequence[str],
    *,
    seed: int = 0,
    dispatch: Dispatch = "priority",
) -> dict[str, float]:
    """Simulated makespan of each teacher's placement (``seed`` for seeded teachers)."""
    from placegym.teachers import make_teacher

    out = {}
    for name in names:
        placement = make_teacher(name, seed).place(graph, cluster)
        out[name] = simulate(graph, cluster, placement, dispatch=dispatch).makespan
    return out


def train_greedy_ratio(rows: Sequence[dict[str, Any]]) -> float:
    """Geometric mean over the training graphs of greedy / critical_path makespan (of
    evaluation ``rows``): what ``eval.keep_best`` and ``restarts`` select by."""
    return geomean([r["greedy"] / r[REFERENCE] for r in rows if r["split"] == "train"])


def episode_metrics(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """``charts/...`` of a batch of training episodes: mean makespan (ms), mean and best
    ratio to the reference makespan, mean return."""
    ratios = [r.makespan / r.info["reference_makespan"] for r in records]
    return {
        "charts/makespan_ms": float(np.mean([r.makespan for r in records])) * 1e3,
        "charts/ratio_to_critical_path": float(np.mean(ratios)),
        "charts/best_ratio": float(np.min(ratios)),
        "charts/return_mean": float(np.mean([r.ret for r in records])),
    }


@dataclass
class RunEvaluation:
    """The evaluation of a run's policy at one moment.

    Attributes:
        rows: per graph: ``split``, ``graph`` (label), ``greedy``, ``sampled``,
            ``best_of_<k>`` and each teacher's makespan (seconds).
        metrics: ``eval/<split>/<graph>/{greedy,best,sampled}_ratio`` and ``greedy_ms``,
            and ``eval/<split>/{greedy,best}_ratio_geomean``.
        best_placements: the best-of-k placement of each row.
    """

    rows: list[dict[str, Any]]
    metrics: dict[str, float]
    best_placements: list[Placement]


def evaluate_run(
    policy: DopplerPolicy,
    graphs: Sequence[tuple[str, str, Graph]],
    cluster: Cluster | Sequence[Cluster],
    teacher_times: Callable[[Graph], dict[str, float]],
    *,
    k: int,
    seed: int,
    pool: EnvPool | None = None,
) -> RunEvaluation:
    """:func:`evaluate_policy` on every ``(split, label, graph)`` next to the teachers.

    ``cluster`` is every graph's cluster, or a sequence of one per graph.
    ``teacher_times(graph)`` gives each compared teacher's makespan (on the graph's
    cluster), the reference (:data:`REFERENCE`) included; ratios are to the reference.
    """
    clusters = [cluster] * len(graphs) if isinstance(cluster, Cluster) else list(cluster)
    if len(clusters) != len(graphs):
        raise ValueError(f"cluster: expected {len(graphs)} clusters, got {len(clusters)}")
    rows: list[dict[str, Any]] = []
    metrics: dict[str, float] = {}
    best: list[Placement] = []
    for (split, label, graph), on in zip(graphs, clusters):
        res = evaluate_policy(policy, graph, on, k=k, seed=seed, pool=pool)
        teachers = teacher_times(graph)
        rows.append(
            {
                "split": split,
                "graph": label,
                "greedy": res.greedy,
                "sampled": res.sampled,
                f"best_of_{k}": res.best,
                **teachers,
            }
        )
        best.append(res.best_placement)
        cp, key = teachers[REFERENCE], f"eval/{split}/{label}"
        metrics[f"{key}/greedy_ratio"] = res.greedy / cp
        metrics[f"{key}/best_ratio"] = res.best / cp
        metrics[f"{key}/sampled_ratio"] = res.sampled / cp
        metrics[f"{key}/greedy_ms"] = res.greedy * 1e3
    for split in ("train", "heldout"):
        rs = [r for r in rows if r["split"] == split]
        for mode, col in (("greedy", "greedy"), ("best", f"best_of_{k}")):
            if rs:
                metrics[f"eval/{split}/{mode}_ratio_geomean"] = geomean(
                    [r[col] / r[REFERENCE] for r in rs]
                )
    return RunEvaluation(rows, metrics, best)


def write_results(
    run_dir: Path, rows: list[dict[str, Any]], k: int, progress: dict[str, Any]
) -> None:
    """A finished run's ``results.md`` (:func:`results_table`) and ``results.json``
    (``progress`` and the evaluation ``rows``)."""
    (run_dir / "results.md").write_text(results_table(rows, k, progress["seconds"]) + "\n")
    (run_dir / "results.json").write_text(
        json.dumps({"progress": progress, "rows": rows}, indent=1)
    )


def results_table(rows: Sequence[dict[str, Any]], k: int, seconds: float) -> str:
    """Markdown: per graph, the agent's greedy and best-of-k makespans and each teacher's,
    in ms with the ratio to critical_path."""
    if not rows:
        return "(no evaluation)"
    fixed = {"split", "graph"}
    cols = [c for c in rows[0] if c not in fixed]
    head = "| split | graph | " + " | ".join(cols) + " |"
    lines = [head, "|---|---|" + "---|" * len(cols)]
    for r in rows:
        cp = r[REFERENCE]
        cells = [f"{r[c] * 1e3:.3f} ({r[c] / cp:.2f}x)" for c in cols]
        lines.append(f"| {r['split']} | {r['graph']} | " + " | ".join(cells) + " |")
    lines.append(
        f"\ntraining time {seconds:.1f} s (evaluation excluded); best_of_{k}: best of {k} samples"
    )
    return "\n".join(lines)


def load_policy(path: str | Path) -> tuple[DopplerPolicy, str]:
    """The policy of a checkpoint written by ``placegym train`` and its run name, or of a
    shipped agent named ``pretrained:NAME`` (:func:`placegym.agents.pretrained`) and NAME."""
    policy, name, _, _, _ = _load(path)
    return policy, name


def _load(
    path: str | Path,
) -> tuple[DopplerPolicy, str, bool | str, bool, ProposalSelector | None]:
    """:func:`load_policy`, the memory mask the policy was trained under
    (:func:`trained_mask`), whether it places in one pass by default (a shipped
    agent's card says so; a checkpoint never) and its proposal selector (a shipped
    agent's, where its card names one; else None)."""
    if str(path).startswith(PRETRAINED):
        from placegym.agents.zoo import pretrained

        agent = pretrained(str(path)[len(PRETRAINED) :])
        return agent.policy, agent.name, agent.memory_mask, agent.one_pass, agent.selector
    ckpt = load_checkpoint(path)
    name = str(ckpt.get("name") or Path(path).stem)
    return policy_from_checkpoint(ckpt), name, trained_mask(ckpt.get("config")), False, None


def load_search_agent(path: str | Path, budget: int, *, threads: int | None = THREADS) -> Any:
    """:func:`~placegym.agents.doppler.search.policy_search` with a checkpoint's policy as a placer
    (:class:`~placegym.agents.doppler.search.PolicySearch`) of ``budget`` simulator calls, named
    ``<run>-search<budget>``, decoding under the memory mask the policy was trained under,
    searching with ``threads`` torch threads (default 1; None: the process's setting)."""
    from placegym.agents.doppler.search import PolicySearch, SearchConfig

    if budget < 1:
        raise ValueError(f"budget: must be >= 1, got {budget}")
    check_threads(threads)
    policy, base, mask, _, _ = _load(path)
    cfg = SearchConfig(budget=budget, memory_mask=mask)

    class ThreadedSearch(PolicySearch):
        def place(self, graph: Graph, cluster: Cluster, seed: int = 0) -> Placement:
            """The best placement the search finds with ``seed``, on ``threads`` threads."""
            with torch_threads(threads):
                return super().place(graph, cluster, seed)

    return ThreadedSearch(policy, cfg, name=f"{base}-search{budget}")


def load_agent(
    path: str | Path,
    *,
    mode: str = "greedy",
    k: int = 16,
    threads: int | None = THREADS,
    one_pass: bool | None = None,
    memory_mask: bool | str | None = None,
    selector: str | Path | None = None,
) -> AgentPlacer:
    """An :class:`~placegym.agents.doppler.placer.AgentPlacer` from a checkpoint written by
    ``placegym train`` (or a shipped agent, ``pretrained:NAME``: :func:`load_policy`),
    named after its run (``<run>`` greedy, ``<run>-best<k>``, ``<run>-sample``), decoding
    under the memory mask the policy was trained under (``data.memory_mask``), placing
    with ``threads`` torch threads (default 1; None: the process's setting; the caller's
    count is restored after each placement). ``one_pass`` (greedy only): place by the
    one-pass decode, no simulator call; None: as a shipped agent's card says (its
    ``one_pass``), else not; a greedy agent loaded otherwise keeps the default.
    ``memory_mask``: decode under this mask instead (e.g. to compare a shipped agent with
    policies trained under another). ``selector``: a saved
    :class:`~placegym.agents.doppler.selector.ProposalSelector` its one-pass placements go
    through (a shipped agent keeps its card's unless one is given; with ``one_pass``
    None, a selector makes it place in one pass)."""
    policy, base, mask, card_one_pass, shipped = _load(path)
    mask = mask if memory_mask is None else memory_mask
    name = {"greedy": base, "best_of_k": f"{base}-best{k}", "sample": f"{base}-sample"}.get(
        mode, base
    )
    if one_pass is None:
        one_pass = mode == "greedy" and (card_one_pass or selector is not None)
    chosen = load_selector(selector) if selector is not None else shipped if one_pass else None
    return AgentPlacer(
        policy,
        mode=mode,
        k=k,
        name=name,
        memory_mask=mask,
        threads=threads,
        one_pass=one_pass,
        selector=chosen,
    )
