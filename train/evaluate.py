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
:class:`AgentPlacer` wraps a policy as a placer ``place(graph, cluster)`` (and
``(graph, cluster, seed)`` for the benchmark); :func:`load_agent` builds one from a
checkpoint, for any graph and cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.decoder import (
    Decoder,
    best_of_samples,
    calibrated_greedy,
    decodes_like_episodes,
    sample_placements,
)
from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs import Cluster, Graph, Placement, PlacementEnv, load_cluster, simulate
from placegym.envs.core.cache import IdentityCache
from placegym.envs.mdp.reward import DEFAULT_REFERENCE, SharedReference
from placegym.envs.mdp.state import memory_mask_mode
from placegym.envs.sim.simulator import Dispatch
from placegym.teachers import make_feasible
from placegym.train.checkpoint import load_checkpoint, policy_from_checkpoint
from placegym.train.stats import geomean

MODES = ("greedy", "sample", "best_of_k")
#: The teacher every makespan is compared with (ratios, the relative reward).
REFERENCE = "critical_path"

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


class EnvPool:
    """Environments per (graph, cluster), created on demand and reused (each caches its
    observation builder and reference makespan for its graph), and the policy inputs of
    their graphs (``graph_cache`` for :func:`~placegym.agents.doppler.episodes.play_episodes`).

    The environments are built with ``env_kwargs`` plus two settings that change no
    episode: compact observations (:func:`~placegym.agents.doppler.episodes.play_episodes`
    reads the per-graph keys once per graph, not at every step) and one
    :class:`~placegym.envs.mdp.reward.SharedReference` for all of them, so the reference
    placement of a graph is computed once, not once per environment.
    """

    def __init__(self, **env_kwargs: Any) -> None:
        self.env_kwargs = env_kwargs
        self._build_kwargs = {
            "observation": "compact",
            **env_kwargs,
            "reference": SharedReference(env_kwargs.get("reference", DEFAULT_REFERENCE)),
        }
        self._envs: IdentityCache[list[PlacementEnv]] = IdentityCache(lambda g, c: [], size=None)
        self.graph_cache: IdentityCache[GraphInputs] = IdentityCache(size=None)

    def get(self, graph: Graph, cluster: Cluster, count: int) -> list[PlacementEnv]:
        """``count`` environments of ``graph`` on ``cluster`` (the same objects each call)."""
        envs = self._envs(graph, cluster)
        while len(envs) < count:
            envs.append(PlacementEnv(graph, cluster, **self._build_kwargs))
        return envs[:count]


def episode_placement(r: EpisodeRecord) -> Placement:
    """The placement an episode ended with."""
    return Placement(device=np.asarray(r.info["placement"]), order=np.asarray(r.info["order"]))


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


class AgentPlacer:
    """A trained policy as a placer for any graph and cluster.

    Its placement keeps every co-location group together (the environment's mask) and
    fits in memory whenever the repair can reach a feasible one: the policy's placement
    (greedy, calibrated to fit as the teachers' single passes are:
    :func:`~placegym.agents.doppler.decoder.calibrated_greedy`; sampled; or the best of
    ``k`` samples, a feasible sample first) when it fits, else
    :func:`~placegym.teachers.make_feasible` of it (whole units moved off the devices
    over memory, then the resident bytes spread worst-fit), so an agent never ends over
    memory where the certificate of a fit exists.

    Args:
        policy: the dual policy.
        mode: ``greedy``, ``sample`` or ``best_of_k``.
        k: samples of ``best_of_k``.
        name: label in benchmark tables.
        memory_mask: the environments' device mask (``True``, ``"resident"``, ``"room"``:
            :class:`~placegym.envs.mdp.state.PlacementState`).
    """

    def __init__(
        self,
        policy: DopplerPolicy,
        *,
        mode: str = "greedy",
        k: int = 16,
        name: str = "agent",
        memory_mask: bool | str = True,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        memory_mask_mode(memory_mask)  # raises on a bad value, naming the field
        self.policy, self.mode, self.k, self.name = policy.eval(), mode, k, name
        self.memory_mask = memory_mask
        self._pool = EnvPool(memory_mask=memory_mask)

    def place(self, graph: Graph, cluster: Cluster | str, seed: int = 0) -> Placement:
        """Place ``graph`` on ``cluster`` (a preset name, JSON path or Cluster)."""
        cluster = load_cluster(cluster)
        return make_feasible(graph, cluster, self._place(graph, cluster, seed))

    def _decodes_greedy(self) -> bool:
        """Whether the greedy pass is decoded without environments: the same episode,
        without their reference placement's simulator calls; a priced policy plays in
        environments, whose pricer serves all its states."""
        return decodes_like_episodes(self.policy) and not self.policy.config.prices

    def _place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        if self.mode == "greedy" and self._decodes_greedy():
            with torch.no_grad():
                dec = Decoder(self.policy, graph, cluster, self.memory_mask)
                return calibrated_greedy(dec)
        if self.mode == "best_of_k" and decodes_like_episodes(self.policy):
            return best_of_samples(
                self.policy,
                graph,
                cluster,
                self.k,
                seed,
                feasible=True,
                memory_mask=self.memory_mask,
            )[0]
        count = self.k if self.mode == "best_of_k" else 1
        envs = self._pool.get(graph, cluster, count)
        records = play_episodes(
            self.policy,
            envs,
            [seed] * count,
            rng=np.random.default_rng(seed),
            greedy=self.mode == "greedy",
            graph_cache=self._pool.graph_cache,
            keep_inputs=False,
        )
        # a feasible episode first (the environment marks an infeasible one), then the fastest
        best = min(records, key=lambda r: (bool(r.info.get("infeasible")), r.makespan))
        placement = episode_placement(best)
        if self.mode == "greedy" and best.info.get("oom") and decodes_like_episodes(self.policy):
            # over memory: decoded again under the room mask with calibrated reserves
            dec = Decoder(self.policy, graph, cluster, self.memory_mask)
            with torch.no_grad():
                placement = calibrated_greedy(dec, first=placement)
        return placement

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """The placer interface of ``placegym bench``: :meth:`place` with ``seed``."""
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"AgentPlacer({self.name!r}, mode={self.mode!r}, k={self.k})"


#: The prefix naming a shipped agent instead of a checkpoint file (``pretrained:NAME``).
PRETRAINED = "pretrained:"


def load_policy(path: str | Path) -> tuple[DopplerPolicy, str]:
    """The policy of a checkpoint written by ``placegym train`` and its run name, or of a
    shipped agent named ``pretrained:NAME`` (:func:`placegym.agents.pretrained`) and NAME."""
    policy, name, _ = _load(path)
    return policy, name


def trained_mask(config: dict[str, Any] | None) -> bool | str:
    """The memory mask a training config (a checkpoint's or a zoo card's) trained its
    policy under: ``data.memory_mask``, True where it names none."""
    return ((config or {}).get("data") or {}).get("memory_mask", True)


def _load(path: str | Path) -> tuple[DopplerPolicy, str, bool | str]:
    """:func:`load_policy` and the memory mask the policy was trained under
    (:func:`trained_mask`)."""
    if str(path).startswith(PRETRAINED):
        from placegym.agents.zoo import pretrained

        name = str(path)[len(PRETRAINED) :]
        agent = pretrained(name)
        return agent.policy, name, trained_mask(agent.card.get("config"))
    ckpt = load_checkpoint(path)
    name = str(ckpt.get("name") or Path(path).stem)
    return policy_from_checkpoint(ckpt), name, trained_mask(ckpt.get("config"))


def load_search_agent(path: str | Path, budget: int) -> Any:
    """:func:`~placegym.agents.doppler.search.policy_search` with a checkpoint's policy as a placer
    (:class:`~placegym.agents.doppler.search.SearchPlacer`) of ``budget`` simulator calls, named
    ``<run>-search<budget>``, decoding under the memory mask the policy was trained under."""
    from placegym.agents.doppler.search import SearchConfig, SearchPlacer

    if budget < 1:
        raise ValueError(f"budget: must be >= 1, got {budget}")
    policy, base, mask = _load(path)
    cfg = SearchConfig(budget=budget, memory_mask=mask)
    return SearchPlacer(policy, cfg, name=f"{base}-search{budget}")


def load_agent(path: str | Path, *, mode: str = "greedy", k: int = 16) -> AgentPlacer:
    """An :class:`AgentPlacer` from a checkpoint written by ``placegym train`` (or a shipped
    agent, ``pretrained:NAME``: :func:`load_policy`), named after its run (``<run>``
    greedy, ``<run>-best<k>``, ``<run>-sample``), decoding under the memory mask the policy
    was trained under (``data.memory_mask``)."""
    policy, base, mask = _load(path)
    name = {"greedy": base, "best_of_k": f"{base}-best{k}", "sample": f"{base}-sample"}.get(
        mode, base
    )
    return AgentPlacer(policy, mode=mode, k=k, name=name, memory_mask=mask)
