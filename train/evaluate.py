"""Evaluation of trained agents, and agents as placers for ``placegym bench``.

Three modes, all seeded:

- ``greedy``: one episode taking the most probable action at every step;
- ``sample``: one episode sampling every action from the policy;
- ``best_of_k``: ``k`` sampled episodes (played in one batched rollout), keep the one of
  smallest makespan (an inference-time search that costs ``k`` simulations).

:func:`evaluate_policy` reports all of them for one graph; :class:`AgentPlacer` wraps a
policy as a placer ``place(graph, cluster)`` (and ``(graph, cluster, seed)`` for the
benchmark); :func:`load_agent` builds one from a checkpoint, for any graph and cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placegym.agents.doppler import DopplerPolicy
from placegym.agents.rollout import EpisodeRecord, rollout
from placegym.envs import Cluster, Graph, Placement, PlacementEnv, load_cluster, simulate
from placegym.train.checkpoint import load_checkpoint, policy_from_checkpoint

MODES = ("greedy", "sample", "best_of_k")

__all__ = [
    "MODES",
    "AgentPlacer",
    "EnvPool",
    "EvalResult",
    "episode_placement",
    "evaluate_policy",
    "load_agent",
    "teacher_makespans",
]


class EnvPool:
    """Environments per (graph, cluster), created on demand and reused (each caches its
    observation builder and reference makespan for its graph)."""

    def __init__(self, **env_kwargs: Any) -> None:
        self.env_kwargs = env_kwargs
        self._envs: dict[tuple[int, int], tuple[Graph, Cluster, list[PlacementEnv]]] = {}
        self.graph_cache: dict[Any, Any] = {}

    def get(self, graph: Graph, cluster: Cluster, count: int) -> list[PlacementEnv]:
        """``count`` environments of ``graph`` on ``cluster`` (the same objects each call)."""
        key = (id(graph), id(cluster))
        hit = self._envs.get(key)
        if hit is None or hit[0] is not graph or hit[1] is not cluster:
            hit = (graph, cluster, [])
            self._envs[key] = hit
        envs = hit[2]
        while len(envs) < count:
            envs.append(PlacementEnv(graph, cluster, **self.env_kwargs))
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
    a fixed rule, see :mod:`placegym.agents.rollout`); the ``k`` samples draw from a fresh
    ``np.random.default_rng(seed)``, so the best of ``k`` is the placement that
    ``AgentPlacer(policy, mode="best_of_k", k=k).place(graph, cluster, seed)`` returns.
    """
    pool = pool or EnvPool()
    was_training = policy.training
    policy.eval()
    envs = pool.get(graph, cluster, k + 1)
    # separate generators: the samples are those of AgentPlacer(mode="best_of_k")
    [g] = rollout(
        policy,
        envs[:1],
        [seed],
        rng=np.random.default_rng(seed),
        greedy=True,
        graph_cache=pool.graph_cache,
    )
    samples = rollout(
        policy,
        envs[1:],
        [seed] * k,
        rng=np.random.default_rng(seed),
        graph_cache=pool.graph_cache,
    )
    policy.train(was_training)
    best = min(samples, key=lambda r: r.makespan)
    return EvalResult(
        greedy=g.makespan,
        sampled=float(np.mean([r.makespan for r in samples])),
        best=best.makespan,
        greedy_placement=episode_placement(g),
        best_placement=episode_placement(best),
    )


def teacher_makespans(
    graph: Graph, cluster: Cluster, names: list[str], *, seed: int = 0, dispatch: str = "priority"
) -> dict[str, float]:
    """Simulated makespan of each teacher's placement (``seed`` for seeded teachers)."""
    from placegym.train.bench import teacher_placer

    out = {}
    for name in names:
        placement = teacher_placer(name)(graph, cluster, seed)
        out[name] = simulate(graph, cluster, placement, dispatch=dispatch).makespan
    return out


class AgentPlacer:
    """A trained policy as a placer for any graph and cluster.

    Args:
        policy: the dual policy.
        mode: ``greedy``, ``sample`` or ``best_of_k``.
        k: samples of ``best_of_k``.
        name: label in benchmark tables.
    """

    def __init__(
        self, policy: DopplerPolicy, *, mode: str = "greedy", k: int = 16, name: str = "agent"
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        self.policy, self.mode, self.k, self.name = policy.eval(), mode, k, name
        self._pool = EnvPool()

    def place(self, graph: Graph, cluster: Cluster | str, seed: int = 0) -> Placement:
        """Place ``graph`` on ``cluster`` (a preset name, JSON path or Cluster)."""
        cluster = load_cluster(cluster)
        count = self.k if self.mode == "best_of_k" else 1
        envs = self._pool.get(graph, cluster, count)
        records = rollout(
            self.policy,
            envs,
            [seed] * count,
            rng=np.random.default_rng(seed),
            greedy=self.mode == "greedy",
            graph_cache=self._pool.graph_cache,
        )
        return episode_placement(min(records, key=lambda r: r.makespan))

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"AgentPlacer({self.name!r}, mode={self.mode!r}, k={self.k})"


def load_agent(path: str | Path, *, mode: str = "greedy", k: int = 16) -> AgentPlacer:
    """An :class:`AgentPlacer` from a checkpoint written by ``placegym train``, named after
    its run (``<run>`` greedy, ``<run>-best<k>``, ``<run>-sample``)."""
    ckpt = load_checkpoint(path)
    base = str(ckpt.get("name") or Path(path).stem)
    name = {"greedy": base, "best_of_k": f"{base}-best{k}", "sample": f"{base}-sample"}.get(
        mode, base
    )
    return AgentPlacer(policy_from_checkpoint(ckpt), mode=mode, k=k, name=name)
