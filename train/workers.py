"""Rollouts of the simulator phases on Ray actors (``workers: N`` in the training config).

Every update the trainer draws its batch as always (graphs, environments, reset seeds and
one generator seed per episode: a :class:`~placegym.train.players.Job`); with
``workers`` > 0 its :class:`RayPlayer` plays the episodes on N Ray actors instead of in
this process (:class:`~placegym.train.players.InProcessPlayer`). Each
actor holds a copy of the training graphs, their clusters, its own environments and a
policy whose weights are replaced by the learner's at every update. With
``data.sampler`` (fresh instances every update) each actor holds a sampler of the run's
options and seed instead, and draws the update's instances by their index
(:attr:`Job.instances`): the same graphs, made where they are played, and a fresh pool of
environments for each update (as the trainer's), so nothing accumulates. The batch is split by
graph (the episodes of one graph stay together, round robin over the actors), and every
episode draws only from its own generator, so each graph's episodes meet the same
batched forwards and the same draws as in one process: the records, and so the weights
after any number of updates, are those of the in-process run (``workers: 0``). Learning
(scores, gradients, PPO, self-imitation's plan offers) stays in the trainer.

Phase I's teacher is rebuilt in each actor from the phase's config; phase II's
self-imitation plans are sent with every update (:meth:`SelfImitation.state`). Phase III
(the real backend, whose devices are this machine's) always plays in process.

Ray is optional (``pip install 'placegym[ray]'``). Without a running Ray, a local one is
started (``RAY_ADDRESS`` joins a cluster instead, whose nodes need placegym installed);
it looks up an outward address at start-up, so on a machine that must not contact the
network run the trainer inside ``unshare -n sh -c 'ip link set lo up; ...'``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import torch

from placegym.agents.doppler.config import PolicyConfig
from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.envs import Cluster, Graph, PlacementEnv
from placegym.teachers.base import Teacher
from placegym.train.config import ImitationConfig, SelfImitationConfig, TrainConfig
from placegym.train.config_schema import instance_sampler
from placegym.train.evaluate import EnvPool
from placegym.train.players import Job, episode_rngs, phase1_teacher
from placegym.train.self_imitation import SelfImitation

__all__ = ["RayPlayer", "RolloutWorker"]


class RolloutWorker:
    """One actor's state: graphs, clusters, environments, a policy copy and teachers.

    Args:
        policy: the policy's sizes.
        graphs: the training graphs (indexed by :attr:`Job.groups`).
        clusters: the cluster of each graph.
        env_kwargs: keyword arguments of the environments (``memory_mask``, ``dispatch``).
        threads: torch CPU threads (the trainer's).
        seed: the run's seed (seeded teachers, the sampler).
        sampler: the options of ``data.sampler`` (None: the training graphs).
    """

    def __init__(
        self,
        policy: PolicyConfig,
        graphs: list[Graph],
        clusters: list[Cluster],
        env_kwargs: dict[str, Any],
        threads: int,
        seed: int,
        sampler: dict[str, Any] | None = None,
    ) -> None:
        torch.set_num_threads(threads)
        self.policy = DopplerPolicy(policy)
        self.graphs, self.clusters, self.seed = graphs, clusters, seed
        self.env_kwargs = env_kwargs
        self.pools = {r: EnvPool(reward=r, **env_kwargs) for r in ("relative", "nest")}
        self.sampler = instance_sampler(seed, sampler)
        self.teachers: dict[str, Teacher] = {}
        self._si: SelfImitation | None = None

    def set_phase1(self, pcfg: ImitationConfig) -> None:
        """Build phase I's teacher."""
        self.teachers["phase1"] = phase1_teacher(pcfg, self.seed)

    def set_plans(self, cfg: SelfImitationConfig, state: dict[int, dict[str, Any]]) -> None:
        """Self-imitation's plans as the learner holds them (:meth:`SelfImitation.state`)."""
        if self._si is None:
            self._si = SelfImitation(cfg, self.seed)
            self.teachers["plans"] = self._si.plans
        self._si.restore(state, self.graphs, self.clusters)

    def play(self, weights: dict[str, torch.Tensor], job: Job) -> list[EpisodeRecord]:
        """The episodes of ``job`` with the policy's weights set to ``weights``."""
        self.policy.load_state_dict(weights)
        self.policy.train()
        pool = self.pools[job.reward]
        if job.instances is None:
            source = {gi: (self.graphs[gi], self.clusters[gi]) for gi in set(job.groups)}
        else:  # this update's fresh instances, by index
            if self.sampler is None:
                raise ValueError("job.instances: this worker has no sampler (data.sampler)")
            pool = EnvPool(reward=job.reward, **self.env_kwargs)
            drawn = {gi: self.sampler.draw(job.instances[gi]) for gi in set(job.groups)}
            source = {gi: (inst.graph, inst.cluster) for gi, inst in drawn.items()}
        envs = []
        for gi, count in _runs(job.groups):
            envs += pool.get(*source[gi], count)
        return play_episodes(
            self.policy,
            envs,
            job.seeds,
            rng=episode_rngs(job.streams),
            teacher=None if job.teacher is None else self.teachers[job.teacher],
            teacher_prob=job.teacher_prob,
            record_teacher=job.record_teacher,
            graph_cache=pool.graph_cache,
            greedy=job.greedy,
            temperature=job.temperature,
        )


def _runs(groups: Sequence[int]) -> list[tuple[int, int]]:
    """``(graph index, episodes)`` of each run of equal adjacent entries of ``groups``."""
    return [(g, len(list(run))) for g, run in itertools.groupby(groups)]


def _split(job: Job, parts: int) -> list[tuple[list[int], Job]]:
    """Whole graphs of ``job`` dealt round robin to ``parts`` actors: (the batch positions,
    the sub-job) of each actor that gets any."""
    positions: list[list[int]] = [[] for _ in range(parts)]
    start = 0
    for k, (_, count) in enumerate(_runs(job.groups)):
        positions[k % parts] += range(start, start + count)
        start += count
    return [
        (
            pos,
            dataclasses.replace(
                job,
                groups=[job.groups[i] for i in pos],
                seeds=[job.seeds[i] for i in pos],
                streams=[job.streams[i] for i in pos],
            ),
        )
        for pos in positions
        if pos
    ]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError("workers: Ray is not installed (pip install 'placegym[ray]')") from None
    return ray


class RayPlayer:
    """An :class:`~placegym.train.players.EpisodePlayer` over ``n`` :class:`RolloutWorker`
    Ray actors (Ray started here when not running).

    Args:
        n: number of actors.
        policy: the policy's sizes.
        graphs: the training graphs (indexed by :attr:`Job.groups`).
        clusters: the cluster of each graph.
        **kwargs: the other arguments of :class:`RolloutWorker`.
    """

    def __init__(
        self,
        n: int,
        *,
        policy: PolicyConfig,
        graphs: list[Graph],
        clusters: list[Cluster],
        **kwargs: Any,
    ) -> None:
        ray = self._ray = _import_ray()
        self.graphs, self.clusters = graphs, clusters
        self._started = not ray.is_initialized()
        if self._started:
            ray.init(include_dashboard=False, log_to_driver=False)
        actor = ray.remote(num_cpus=1)(RolloutWorker)
        self.actors = [
            actor.remote(policy=policy, graphs=graphs, clusters=clusters, **kwargs)
            for _ in range(n)
        ]

    @classmethod
    def for_run(cls, cfg: TrainConfig, graphs: list[Graph], clusters: list[Cluster]) -> RayPlayer:
        """The ``cfg.workers`` actors of a training run (its policy sizes, environment
        settings, threads and seed) over its training ``graphs`` and their clusters."""
        return cls(
            cfg.workers,
            policy=cfg.policy,
            graphs=graphs,
            clusters=clusters,
            env_kwargs={"memory_mask": cfg.data.memory_mask, "dispatch": cfg.data.dispatch},
            threads=cfg.threads,
            seed=cfg.seed,
            sampler=dict(cfg.data.sampler) if cfg.data.sampler else None,
        )

    def set_phase1(self, pcfg: ImitationConfig) -> None:
        """Build phase I's teacher in every actor."""
        self._ray.get([a.set_phase1.remote(pcfg) for a in self.actors])

    def set_plans(self, cfg: SelfImitationConfig, state: dict[int, dict[str, Any]]) -> None:
        """Send self-imitation's plans to every actor."""
        self._ray.get([a.set_plans.remote(cfg, state) for a in self.actors])

    def play(
        self,
        policy: DopplerPolicy,
        envs: list[PlacementEnv],
        job: Job,
        pool: EnvPool,
        teacher: Any,
        plans: SelfImitation | None = None,
    ) -> list[EpisodeRecord]:
        """The records of ``job`` in batch order, played by the actors with ``policy``'s
        weights (sent as CPU tensors, wherever ``policy`` is; ``teacher`` is rebuilt
        there: :meth:`set_phase1`, and ``plans`` are sent when the job imitates them); the
        records share ``pool``'s graph inputs and the first environment of each graph is
        reset, as after an in-process rollout."""
        if plans is not None and job.teacher == "plans":
            self.set_plans(plans.cfg, plans.state(self.graphs, self.clusters))
        ray = self._ray
        state = policy.state_dict()  # the actors' policies are on the CPU
        weights = ray.put({k: v.detach().cpu().clone() for k, v in state.items()})
        parts = _split(job, len(self.actors))
        refs = [a.play.remote(weights, sub) for a, (_, sub) in zip(self.actors, parts)]
        slots: list[EpisodeRecord | None] = [None] * len(job.groups)
        for (pos, _), part in zip(parts, ray.get(refs)):
            for i, r in zip(pos, part):
                slots[i] = r
        records = [r for r in slots if r is not None]
        first: dict[int, PlacementEnv] = {}
        for env, gi, seed, r in zip(envs, job.groups, job.seeds, records, strict=True):
            if gi not in first:  # reset, so that it names its graph as after a rollout
                first[gi] = env
                env.reset(seed=seed)
            g, c = first[gi].graph, first[gi].cluster  # this update's graph gi
            known = pool.graph_cache.get(g, c)
            if known is None:  # one GraphInputs per graph, as in process
                pool.graph_cache.put(g, c, value=r.graph)
            else:
                r.graph = known
        return records

    def close(self) -> None:
        """End the actors (and the Ray this object started)."""
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []
        if self._started:
            self._ray.shutdown()
