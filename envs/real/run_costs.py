"""The runtime's own costs, read from the timelines of measured executions.

The simulator charges each node a ``launch_overhead`` on its device and each transfer a
``latency`` plus its bytes over the bandwidth (DESIGN §3). Probes measure those terms
with one device busy at a time (:mod:`.probes`); in a run of a graph the devices are
busy together, and on CPU workers a copy thread or a waking worker may wait for a core
that the other worker holds. :func:`run_costs` reads the terms off the timelines the
executor records (:class:`~placegym.envs.real.executor.Measurement`), in the
simulator's terms:

- ``launch``: on a worker, the gap between a node's finish and the start of the next
  node when that one was ready by then (the dispatcher's cost per kernel); the
  simulator adds it to every node's duration;
- ``wake``: the gap between the arrival of a copy and the start of the node waiting for
  it on an idle worker (the worker's wake-up);
- ``copies``: per copy, its service time on its channel (arrival minus the later of its
  producer's finish and the previous copy's arrival on the channel).

A transfer of ``b`` bytes then stands for ``service + wake - launch`` (the consumer's
wake-up comes after the arrival; the producer's simulated finish already carries a
launch), so the latency of a pair is the median of ``service - b / bandwidth`` over its
copies plus ``wake - launch`` (:meth:`RunCosts.latency`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement

if TYPE_CHECKING:
    from placegym.envs.real.executor import Measurement

__all__ = ["RunCosts", "run_costs"]


@dataclass(frozen=True)
class RunCosts:
    """Medians of the runtime's costs in measured executions (module docstring).

    Attributes:
        launch: seconds between a node's finish and its ready successor's start on a
            worker (NaN when no such pair was seen).
        wake: seconds between a copy's arrival and the start of its waiting consumer
            (NaN when none was seen).
        copies: ``(m, 4)`` rows ``(src, dst, bytes, service seconds)``, one per copy.
    """

    launch: float
    wake: float
    copies: np.ndarray

    def latency(self, src: int, dst: int, bandwidth: float) -> float:
        """Seconds of latency that make the simulator's transfer ``src -> dst`` last as
        the copies did, consumer wake-up included (module docstring); NaN when no copy
        of the pair was seen."""
        rows = self.copies[(self.copies[:, 0] == src) & (self.copies[:, 1] == dst)]
        if not len(rows) or not np.isfinite(self.wake) or not np.isfinite(self.launch):
            return float("nan")
        extra = float(np.median(rows[:, 3] - rows[:, 2] / bandwidth))
        return max(0.0, extra + self.wake - self.launch)


def run_costs(runs: Iterable[tuple[Graph, Placement, Measurement]]) -> RunCosts:
    """:class:`RunCosts` of executions: each a graph, a placement and the measurement of
    one execution of it (``repeats=1``: the timeline is that execution's)."""
    launch: list[float] = []
    wake: list[float] = []
    copies: list[np.ndarray] = []
    for graph, placement, m in runs:
        gaps, waits, served = _timeline_costs(graph, placement.device, m)
        launch += gaps
        wake += waits
        copies.append(served)
    return RunCosts(
        launch=float(np.median(launch)) if launch else float("nan"),
        wake=float(np.median(wake)) if wake else float("nan"),
        copies=np.concatenate(copies) if copies else np.empty((0, 4)),
    )


def _timeline_costs(graph: Graph, dev: np.ndarray, m: Measurement):
    """(launch gaps, wake-up gaps, copy rows) of one execution."""
    arrival = {(int(v), int(b)): t for v, _, b, _, t in m.transfers}
    gaps, waits = [], []
    for d in np.unique(dev):
        on = np.flatnonzero(dev == d)
        on = on[np.argsort(m.start[on], kind="stable")]
        prev = -np.inf
        for v in on.tolist():
            local, remote = 0.0, 0.0
            for u in graph.predecessors(v).tolist():
                if dev[u] == d:
                    local = max(local, m.finish[u])
                else:
                    remote = max(remote, arrival[(u, int(d))])
            if prev >= max(local, remote):  # ready before the worker was free
                gaps.append(m.start[v] - prev)
            elif remote > max(local, prev):  # the worker waited for a copy
                waits.append(m.start[v] - remote)
            prev = m.finish[v]
    return gaps, waits, _copy_service(graph, m)


def _copy_service(graph: Graph, m: Measurement) -> np.ndarray:
    """``(k, 4)`` ``(src, dst, bytes, service)`` of each copy: its arrival minus the later
    of its producer's finish and the previous arrival on its channel."""
    rows = []
    last: dict[tuple[int, int], float] = {}
    for v, a, b, _, arrival in sorted(m.transfers.tolist(), key=lambda t: t[3]):
        ch = (int(a), int(b))
        ready = max(last.get(ch, 0.0), float(m.finish[int(v)]))
        rows.append((a, b, float(graph.out_bytes[int(v)]), arrival - ready))
        last[ch] = arrival
    return np.array(rows, dtype=np.float64).reshape(-1, 4)
