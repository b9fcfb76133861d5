"""Static analysis of a graph on a cluster: levels, bounds, CCR and memory feasibility.

- :mod:`~placegym.envs.analysis.levels`: mean costs, b-level, t-level, cost tables.
- :mod:`~placegym.envs.analysis.bounds`: lower bounds on the makespan, the serial upper
  bound.
- :mod:`~placegym.envs.analysis.ccr`: the communication-to-computation ratio and scaling
  a graph to one.
- :mod:`~placegym.envs.analysis.memory`: memory feasibility in one place: whether memory
  may bind, room for the rest of the graph, the certificates that a placement fits or
  that none can, the overflow price.

The names of :mod:`~placegym.envs.analysis.levels` and the memory tests are importable
from this package too (``from placegym.envs.analysis import b_level``).
"""

from placegym.envs.analysis.levels import (
    CostTable,
    b_level,
    critical_path_length,
    durations_on,
    mean_comm,
    mean_durations,
    step_costs,
    t_level,
)
from placegym.envs.analysis.memory import memory_may_bind, overflow_penalty

__all__ = [
    "CostTable",
    "b_level",
    "critical_path_length",
    "durations_on",
    "mean_comm",
    "mean_durations",
    "memory_may_bind",
    "overflow_penalty",
    "step_costs",
    "t_level",
]
