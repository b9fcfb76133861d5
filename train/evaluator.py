"""A training run's evaluation: its policy on its training and held-out graphs.

:class:`RunEvaluator` holds what every evaluation of one run shares (the environments,
each graph's teacher makespans, computed once) and logs each evaluation's ``eval/...``
metrics and, with ``eval.gantt``, a Gantt chart of the first training graph's best
placement. Which weights are kept (``eval.keep_best``) is the trainer's decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from placegym.agents.doppler import DopplerPolicy
from placegym.envs import Graph, Placement, simulate
from placegym.envs.core.cache import IdentityCache
from placegym.envs.sim.simulator import Dispatch
from placegym.train.config import TrainConfig
from placegym.train.data import TrainingGraph
from placegym.train.evaluate import REFERENCE, EnvPool, RunEvaluation, evaluate_run
from placegym.train.evaluate import teacher_makespans as _teacher_makespans
from placegym.train.tracking import Tracker

__all__ = ["RunEvaluator"]


class RunEvaluator:
    """Evaluates a run's policy (greedy, ``eval.k`` samples) beside its teachers.

    Args:
        cfg: the run's configuration (``eval``, ``data.memory_mask``, ``data.dispatch``,
            ``seed``).
        train_set: the training graphs with their clusters.
        heldout_set: the held-out graphs with their clusters.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        train_set: Sequence[TrainingGraph],
        heldout_set: Sequence[TrainingGraph],
    ) -> None:
        self.cfg = cfg
        self.sets = [("train", t) for t in train_set] + [("heldout", t) for t in heldout_set]
        self.pool = EnvPool(memory_mask=cfg.data.memory_mask, dispatch=cfg.data.dispatch)
        self._cluster_of = {id(t.graph): t.cluster for _, t in self.sets}
        self.dispatch = cast(Dispatch, cfg.data.dispatch)  # validated: priority or fifo
        teachers = list(dict.fromkeys([REFERENCE, *cfg.eval.teachers]))
        self.teacher_times: IdentityCache[dict[str, float]] = IdentityCache(
            lambda g: _teacher_makespans(
                g, self._cluster_of[id(g)], teachers, seed=cfg.seed, dispatch=self.dispatch
            ),
            size=None,
        )

    def evaluate(self, policy: DopplerPolicy, step: int, tracker: Tracker) -> RunEvaluation:
        """Evaluate ``policy`` on every graph and log the metrics at ``step``."""
        cfg = self.cfg
        ev = evaluate_run(
            policy,
            [(split, t.label, t.graph) for split, t in self.sets],
            [t.cluster for _, t in self.sets],
            self.teacher_times,
            k=cfg.eval.k,
            seed=cfg.seed,
            pool=self.pool,
        )
        if cfg.eval.gantt:
            self._gantt(self.sets[0][1].graph, ev.best_placements[0], step, tracker)
        tracker.log(ev.metrics, step=step)
        return ev

    def _gantt(self, graph: Graph, placement: Placement, step: int, tracker: Tracker) -> None:
        from placegym.envs.sim.gantt import gantt_rgb

        schedule = simulate(graph, self._cluster_of[id(graph)], placement, dispatch=self.dispatch)
        tracker.image(
            "charts/gantt",
            gantt_rgb(schedule),
            step,
            caption=f"{graph.name}: best of {self.cfg.eval.k}, {schedule.makespan * 1e3:.3f} ms",
        )
