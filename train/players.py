"""Episode players: who plays an update's episodes, behind one interface.

The trainer draws each update's batch itself (graphs, environments, reset seeds and one
generator seed per episode, a :class:`Job`) and hands it to an :class:`EpisodePlayer`,
which returns the episode records in batch order. Two players exist, with the same
records for the same job:

- :class:`InProcessPlayer`: plays the episodes here with
  :func:`~placegym.agents.doppler.episodes.play_episodes` (every phase's default; phase III, whose
  devices are this machine's, always plays here);
- :class:`~placegym.train.workers.RayPlayer`: plays them on Ray actors (``workers`` > 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.envs import Cluster, Graph, PlacementEnv
from placegym.teachers import make_teacher
from placegym.teachers.base import FirstOfTies, Teacher
from placegym.train.config import ImitationConfig, PhaseConfig

if TYPE_CHECKING:
    from placegym.train.evaluate import EnvPool
    from placegym.train.self_imitation import SelfImitation

__all__ = [
    "Batch",
    "EpisodePlayer",
    "InProcessPlayer",
    "Job",
    "draw_job",
    "episode_rngs",
    "phase1_teacher",
]


@dataclass(frozen=True)
class Job:
    """The episodes of one update: what every player plays.

    Attributes:
        groups: training-graph index of each episode (episodes of a graph adjacent).
        seeds: reset seed of each episode.
        streams: seed of each episode's own generator (:func:`episode_rngs`).
        reward: the environments' reward (``relative`` or ``nest``).
        teacher_prob: probability of a teacher roll-in step (phase I), else 0.
        record_teacher: record the teacher's tie sets.
        teacher: ``phase1`` (the phase's teacher), ``plans`` (self-imitation's) or None.
        greedy: the learner's own steps take its greedy action (phase I's
            ``rollin: greedy``), else a sample.
        temperature: softmax temperature of the sampled steps (phases II and III's
            ``temperature``).
        instances: with ``data.sampler``, the sampler index of each graph the
            ``groups`` index (a Ray actor draws the same instances from its own
            sampler); None for the training graphs.
    """

    groups: list[int]
    seeds: list[int]
    streams: list[int]
    reward: str
    teacher_prob: float = 0.0
    record_teacher: bool = False
    teacher: str | None = None
    greedy: bool = False
    temperature: float = 1.0
    instances: list[int] | None = None


#: An update's environments and the :class:`Job` of their episodes.
Batch = tuple[list[PlacementEnv], Job]


def draw_job(
    rng: np.random.Generator,
    graphs: Sequence[Graph],
    clusters: Sequence[Cluster],
    pcfg: PhaseConfig,
    pool: EnvPool,
    *,
    cluster: Cluster | None = None,
    reward: str = "relative",
    teacher_prob: float = 0.0,
    record_teacher: bool = False,
    teacher: str | None = None,
    greedy: bool = False,
    temperature: float = 1.0,
) -> Batch:
    """One update's batch, drawn with ``rng``: ``pcfg.graphs_per_update`` graphs (all
    when there are no more), ``pcfg.episodes_per_graph`` environments of each from
    ``pool`` (on its cluster, or on ``cluster`` when given), and the :class:`Job` of
    their episodes (graph index of each, the baseline groups; reset seeds; the seed of
    each episode's own generator) with the other fields as given."""
    n = len(graphs)
    if pcfg.graphs_per_update >= n:
        chosen = list(range(n))
    else:
        chosen = sorted(rng.choice(n, pcfg.graphs_per_update, replace=False).tolist())
    envs: list[PlacementEnv] = []
    groups: list[int] = []
    for gi in chosen:
        envs += pool.get(graphs[gi], cluster or clusters[gi], pcfg.episodes_per_graph)
        groups += [gi] * pcfg.episodes_per_graph
    seeds = rng.integers(2**31 - 1, size=len(envs)).tolist()
    streams = rng.integers(2**63 - 1, size=len(envs)).tolist()
    job = Job(
        groups, seeds, streams, reward, teacher_prob, record_teacher, teacher, greedy, temperature
    )
    return envs, job


def episode_rngs(streams: Sequence[int]) -> list[np.random.Generator]:
    """One generator per episode, from the seeds a :class:`Job` carries."""
    return [np.random.default_rng(int(s)) for s in streams]


def phase1_teacher(pcfg: ImitationConfig, seed: int) -> Teacher:
    """Phase I's teacher as its config describes it (the same in every process)."""
    teacher = make_teacher(
        pcfg.teacher,
        seed,
        canonical=pcfg.canonical_labels,
        select=pcfg.select_teacher,
        kwargs=pcfg.teacher_kwargs,
    )
    return FirstOfTies(teacher) if pcfg.deterministic_teacher else teacher


class EpisodePlayer(Protocol):
    """Plays the episodes of a :class:`Job` with the learner's current weights."""

    def set_phase1(self, pcfg: ImitationConfig) -> None:
        """Phase I starts: its teacher is ``pcfg``'s (:func:`phase1_teacher`)."""

    def play(
        self,
        policy: DopplerPolicy,
        envs: list[PlacementEnv],
        job: Job,
        pool: EnvPool,
        teacher: Any,
        plans: SelfImitation | None = None,
    ) -> list[EpisodeRecord]:
        """The records of ``job`` in batch order.

        Args:
            policy: the learner's policy (its current weights play).
            envs: the job's environments, from ``pool`` (one per episode).
            job: the episodes.
            pool: the pool ``envs`` came from; its graph cache holds each graph's
                :class:`~placegym.agents.nn.encoder.GraphInputs` after the call.
            teacher: the teacher of ``job.teacher`` (None when it is None).
            plans: phase II's self-imitation, whose plans are ``job.teacher == "plans"``.
        """
        ...

    def close(self) -> None:
        """Release what the player holds (actors, processes)."""


class InProcessPlayer:
    """Plays every episode in this process, in lockstep batches."""

    def set_phase1(self, pcfg: ImitationConfig) -> None:
        """Nothing to prepare: the trainer passes its teacher to :meth:`play`."""

    def play(
        self,
        policy: DopplerPolicy,
        envs: list[PlacementEnv],
        job: Job,
        pool: EnvPool,
        teacher: Any,
        plans: SelfImitation | None = None,
    ) -> list[EpisodeRecord]:
        """The records of ``job`` (see :meth:`EpisodePlayer.play`)."""
        return play_episodes(
            policy,
            envs,
            job.seeds,
            rng=episode_rngs(job.streams),
            teacher=teacher,
            teacher_prob=job.teacher_prob,
            record_teacher=job.record_teacher,
            graph_cache=pool.graph_cache,
            greedy=job.greedy,
            temperature=job.temperature,
        )

    def close(self) -> None:
        """Nothing to release."""
