"""Self-imitation in phase II: imitate the best placement found so far for each graph.

With ``phase2.self_imitation.coef`` > 0 every training graph has a *plan*: at first the
placement of ``self_imitation.teacher`` (``anneal`` by default), then every better
episode the policy samples. The plans answer as one
:class:`~placegym.teachers.canonical_plan.CanonicalPlanTeacher` (device labels up to the
cluster's symmetries; SEL from ``select_teacher`` when set), and each update adds
``coef * (-mean log π(plan tie set))`` to the RL loss
(:class:`~placegym.train.losses.ImitationTerm`), taken on

- ``states="sampled"``: the batch's own episodes, labelled with the plans' tie sets while
  they are played (DAgger-style);
- ``states="plan"``: one extra episode per graph that follows its just-updated plan
  (behaviour cloning along the plan's own trajectory, whose labels always fit the states
  they are asked in).

An update: play the batch (:attr:`SelfImitation.labels_batch` says whether the rollout
records the plans' tie sets), then :meth:`SelfImitation.step` offers each graph's best
sampled episode as its new plan, plays the plan episodes when ``states="plan"``, and
returns the term and the metrics ``charts/plans_improved`` (plans replaced) and
``charts/plan_ratio`` (mean plan makespan / critical_path's). With ``data.sampler``
(instances drawn fresh every update) the trainer drops the plans before each update
(:meth:`SelfImitation.forget`): a drawn graph's plan is the best of its teacher's
placement and that update's sampled episodes, imitated once (expert iteration on fresh
instances). Otherwise the plans go into every
checkpoint (:meth:`SelfImitation.state`) and come back on resume
(:meth:`SelfImitation.restore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.envs import Cluster, Graph, Placement, PlacementEnv
from placegym.teachers import make_teacher
from placegym.teachers.canonical_plan import CanonicalPlanTeacher
from placegym.train.config import SelfImitationConfig
from placegym.train.evaluate import episode_placement
from placegym.train.losses import ImitationTerm

__all__ = ["SelfImitation", "best_per_graph"]


def best_per_graph(
    envs: Sequence[PlacementEnv], groups: Sequence[int], records: Sequence[EpisodeRecord]
) -> list[tuple[PlacementEnv, EpisodeRecord]]:
    """(an env, the best sampled episode) of each graph of a batch, in batch order."""
    best: dict[int, tuple[PlacementEnv, EpisodeRecord]] = {}
    for g, env, r in zip(groups, envs, records, strict=True):
        if g not in best:
            best[g] = (env, r)
        elif r.makespan < best[g][1].makespan:
            best[g] = (best[g][0], r)
    return list(best.values())


class SelfImitation:
    """The best-known plan of each training graph and the loss toward it.

    Args:
        cfg: the ``phase2.self_imitation`` section (``coef`` > 0).
        seed: the run's seed, for seeded plan teachers.
    """

    def __init__(self, cfg: SelfImitationConfig, seed: int) -> None:
        self.cfg = cfg
        self._source = make_teacher(cfg.teacher, seed, kwargs=cfg.teacher_kwargs)
        self._select = make_teacher(cfg.select_teacher, seed) if cfg.select_teacher else None
        self.plans = CanonicalPlanTeacher(self._source, self._select)

    def forget(self) -> None:
        """Drop every plan (with ``data.sampler``, before each update: the instances are
        drawn fresh, so a plan lasts the update that drew its graph)."""
        self.plans = CanonicalPlanTeacher(self._source, self._select)

    @property
    def labels_batch(self) -> bool:
        """Whether the batch's own episodes carry the plans' tie sets (``sampled``)."""
        return self.cfg.states == "sampled"

    def step(
        self,
        policy: DopplerPolicy,
        envs: Sequence[PlacementEnv],
        groups: Sequence[int],
        records: Sequence[EpisodeRecord],
        *,
        rng: np.random.Generator,
        graph_cache: Any = None,
    ) -> tuple[ImitationTerm, dict[str, float]]:
        """After the batch ``records``: offer each graph's best episode as its plan, play
        the plan episodes (``states="plan"``, seeds from ``rng``); returns the loss term
        and the metrics."""
        best = best_per_graph(envs, groups, records)
        metrics = self._offer(best)
        plan_records = None
        if self.cfg.states == "plan":
            firsts = [env for env, _ in best]
            plan_records = play_episodes(
                policy,
                firsts,
                rng.integers(2**31 - 1, size=len(firsts)).tolist(),
                rng=rng,
                graph_cache=graph_cache,
                teacher=self.plans,
                teacher_prob=1.0,
                record_teacher=True,
            )
        return ImitationTerm(self.cfg.coef, plan_records), metrics

    def _offer(self, best: list[tuple[PlacementEnv, EpisodeRecord]]) -> dict[str, float]:
        adopted, ratios = 0, []
        for env, r in best:
            adopted += self.plans.offer(env.graph, env.cluster, episode_placement(r), r.makespan)
            plan = self.plans.plan_makespan(env.graph, env.cluster)
            ratios.append(plan / r.info["reference_makespan"])
        return {
            "charts/plans_improved": float(adopted),
            "charts/plan_ratio": float(np.mean(ratios)),
        }

    def state(
        self, graphs: Sequence[Graph], clusters: Sequence[Cluster]
    ) -> dict[int, dict[str, Any]]:
        """The plans found so far, by training-graph index (for checkpoints); ``clusters``
        holds each graph's cluster."""
        out = {}
        for i, (graph, cluster) in enumerate(zip(graphs, clusters, strict=True)):
            if self.plans.has_plan(graph, cluster):
                p = self.plans.place(graph, cluster)
                out[i] = {
                    "device": p.device.tolist(),
                    "order": p.order.tolist(),
                    "makespan": self.plans.plan_makespan(graph, cluster),
                }
        return out

    def restore(
        self,
        saved: dict[int, dict[str, Any]],
        graphs: Sequence[Graph],
        clusters: Sequence[Cluster],
    ) -> None:
        """Offer the plans of :meth:`state` (a resumed run's) back."""
        for i, plan in saved.items():
            placement = Placement(device=plan["device"], order=plan["order"])
            self.plans.offer(graphs[int(i)], clusters[int(i)], placement, plan["makespan"])
