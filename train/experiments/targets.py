"""The milestone targets that the report drivers check, in one table.

Each :class:`Target` compares one measured figure with a bound. The drivers
(:mod:`~placegym.train.experiments.report`, ``per_graph``, ``generalist``) look their
targets up here by name and print the verdict beside the figure; changing a target is a
change to this table alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["TARGETS", "Target", "verdict"]


@dataclass(frozen=True)
class Target:
    """A figure and its bound: met when ``value <= bound`` (``sense="<="``) or
    ``value >= bound`` (``">="``).

    Attributes:
        figure: what is measured, in words.
        bound: the bound the figure must reach.
        sense: ``"<="`` (at most the bound) or ``">="`` (at least).
    """

    figure: str
    bound: float
    sense: Literal["<=", ">="] = "<="

    def met(self, value: float) -> bool:
        """Whether ``value`` reaches the bound."""
        return value <= self.bound if self.sense == "<=" else value >= self.bound


#: Every target, by name: ``<driver>.<figure>``.
TARGETS: dict[str, Target] = {
    # placegym report, main table (per cluster, over the workload presets)
    "report.greedy_vs_critical_path": Target(
        "agent greedy / critical_path, geometric mean over the workloads", 0.80
    ),
    "report.best_of_16_vs_anneal": Target(
        "agent best of 16 / anneal, geometric mean over the workloads", 1.05
    ),
    "report.best_of_16_gap_to_optimal": Target(
        "agent best of 16, mean gap to the optimal makespan", 0.03
    ),
    # per-graph plan-imitation agents (12 instances)
    "per_graph.greedy_vs_single_pass": Target(
        "agent greedy / best single-pass placer, geometric mean", 0.90
    ),
    "per_graph.search_vs_anneal": Target(
        "agent + search / anneal at equal budget, geometric mean", 0.97
    ),
    # the generalist, zero-shot on unseen suite instances
    "generalist.beats_both_share": Target(
        "share of instances where greedy beats both critical_path and heft", 0.80, ">="
    ),
    "generalist.greedy_vs_best_list": Target(
        "greedy / best of critical_path and heft, geometric mean", 0.85
    ),
    # the one-pass agent, on every unseen test split (worst training seed)
    "onepass.beats_both_share": Target(
        "share of instances where the one-pass greedy beats both critical_path and heft",
        0.80,
        ">=",
    ),
    "onepass.greedy_vs_best_single": Target(
        "one-pass greedy / best single-pass placer, geometric mean", 0.95
    ),
    "onepass.warm_at_equal_seconds_share": Target(
        "share of runs where warm-started anneal is at most anneal at equal seconds", 0.80, ">="
    ),
    "onepass.over_memory": Target(
        "one-pass greedy placements over memory where a placement fits", 0
    ),
    "onepass.seconds_per_1k_nodes": Target("one-pass decode seconds per 1,000 nodes", 1.0),
}


def verdict(name: str, value: float) -> str:
    """``"met"`` or ``"not met"`` for target ``name`` at ``value``."""
    return "met" if TARGETS[name].met(value) else "not met"
