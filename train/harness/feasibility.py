"""Feasibility of benchmark rows: one definition for every table of the harness.

A placement is *infeasible* when it splits a co-location group (``placegym.graph/v2``
``group``: :meth:`~placegym.envs.Placement.check` and ``simulate`` raise ``ValueError``)
or when its simulated peak memory exceeds a device's memory
(:attr:`~placegym.envs.sim.simulator.Schedule.oom`; :attr:`~placegym.envs.sim.simulator.Schedule.
infeasibility` says which device and by how much). A placer that raises, one stopped at
its budget of simulator calls and one that returns anything but a ``Placement`` have no
placement at all and fail the same way. An
infeasible placement is a failure, never a fast result:

- every record carries ``feasible`` and, when not, ``infeasible`` (the reason: the
  schedule's memory message, the split-group error, ``over budget: ...``, ``placer
  raised <Error>: ...`` or ``placer returned <type>, not a Placement``);
- a table shows an infeasible record as its :func:`mark` instead of a number: ``OOM``
  (over a device's memory), ``split`` (splits a co-location group), ``budget`` (stopped
  at its budget of simulator calls: :mod:`placegym.train.harness.calls`) or ``failed``
  (the placer raised, returned something other than a ``Placement``, or a placement that
  does not fit the graph or cluster);
- it never enters a ratio, a geometric mean, a best or a rank: aggregates over instances
  are taken over the instances every compared placer solved (:func:`solved_by_all`), and
  each table says over how many (:func:`over`) and shows each placer's feasible count
  (:func:`count`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from placegym.envs import Cluster, Graph, Placement, simulate
from placegym.train.harness.calls import uncounted
from placegym.train.harness.placers import run_placer

__all__ = [
    "MARKS",
    "Outcome",
    "count",
    "mark",
    "over",
    "place",
    "simulate_outcome",
    "solved_by_all",
]

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

#: The marks a table shows for an infeasible record (see :func:`mark`).
MARKS = ("OOM", "split", "budget", "failed")


@dataclass(frozen=True)
class Outcome:
    """A placer's result on one instance.

    Attributes:
        placement: what the placer returned (None: it raised, was stopped, or returned
            no ``Placement``).
        makespan: the simulated makespan; None where nothing could be simulated (a split
            group, a placement that does not fit, a placer that raised). An over-memory
            placement keeps its makespan, for the record only.
        oom: the simulated peak exceeds a device's memory.
        infeasible: why the placement is infeasible; None when it is feasible.
        seconds: the time the placer took (wall clock).
        calls: the simulator calls the placer made (its result's own evaluation not
            included; :mod:`placegym.train.harness.calls`).
    """

    placement: Placement | None
    makespan: float | None
    oom: bool
    infeasible: str | None
    seconds: float = 0.0
    calls: int = 0

    @property
    def feasible(self) -> bool:
        """Feasible: simulated, within every device's memory, every group kept whole."""
        return self.infeasible is None


def simulate_outcome(
    graph: Graph, cluster: Cluster, placement: Placement, noise: float = 0.0, rng: Any = None
) -> Outcome:
    """Simulate ``placement``: an over-memory schedule and a ``ValueError`` of the
    simulator (a split group, a placement that does not fit) give an infeasible outcome."""
    try:
        s = simulate(graph, cluster, placement, noise=noise, rng=rng)
    except ValueError as e:
        return Outcome(placement, None, False, str(e) or "invalid placement")
    return Outcome(placement, s.makespan, s.oom, s.infeasibility)


def place(placer: Any, graph: Graph, cluster: Cluster, seed: int, noise: float = 0.0) -> Outcome:
    """Run ``placer`` (anything :func:`~placegym.train.harness.placers.as_placer` takes:
    a function ``(graph, cluster, seed)``, a placer, a teacher, a budgeted search) and
    simulate its placement (noise draws use ``seed``), timed and with its simulator calls
    counted; the simulation of the result is not one of them. A placer that raises
    (``Exception``), is stopped at its budget or returns something other than a
    ``Placement`` (None, an array, a dict) gives an infeasible outcome saying so: one
    placer's failure never stops a benchmark."""
    run = run_placer(placer, graph, cluster, seed)
    if run.placement is None:
        return Outcome(None, None, False, run.error, run.seconds, run.calls)
    with uncounted():
        out = simulate_outcome(graph, cluster, run.placement, noise, seed if noise > 0 else None)
    return Outcome(out.placement, out.makespan, out.oom, out.infeasible, run.seconds, run.calls)


def mark(reason: str | None) -> str:
    """What a table shows for a record infeasible for ``reason`` (module docstring)."""
    text = reason or ""
    if text.startswith("out of memory"):
        return "OOM"
    if "splits co-location group" in text:
        return "split"
    if text.startswith("over budget"):
        return "budget"
    return "failed"


def count(feasible: Iterable[bool]) -> str:
    """``"ok/total"``: feasible records of all."""
    flags = list(feasible)
    return f"{sum(flags)}/{len(flags)}"


def solved_by_all(
    rows: Iterable[R],
    instance: Callable[[R], K],
    feasible: Callable[[R], bool] = lambda r: bool(r.feasible),  # type: ignore[attr-defined]
) -> tuple[list[K], list[K]]:
    """``(instances every row of which is feasible, every instance)``, both in first-seen
    order: the instances on which aggregates may compare placers."""
    ok: dict[K, bool] = {}
    for r in rows:
        key = instance(r)
        ok[key] = ok.get(key, True) and feasible(r)
    return [k for k, v in ok.items() if v], list(ok)


def over(solved: int, total: int, what: str = "instances") -> str:
    """``"k of n <what> every placer solved"``."""
    return f"{solved} of {total} {what} every placer solved"


def by_key(rows: Iterable[R], key: Callable[[R], K]) -> Mapping[K, list[R]]:
    """Rows grouped by ``key``, groups and rows in first-seen order."""
    out: dict[K, list[R]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def seed_rows(
    rows: list[R], name: str, comparable: Callable[[R], bool], several: bool
) -> list[tuple[str, list[R]]]:
    """The table rows of one instance's (or workload's) ``rows``: first ``(name, rows)``
    over the seeds on which every row is ``comparable`` (labelled with how many when
    not all), then ``("<name>, seed <s>", rows)`` per other seed (``name`` alone unless
    ``several`` seeds are in the table)."""
    per_seed = by_key(rows, lambda r: r.seed)  # type: ignore[attr-defined]
    ok = [s for s, xs in per_seed.items() if all(comparable(r) for r in xs)]
    out: list[tuple[str, list[R]]] = []
    if ok:
        label = (
            name
            if len(ok) == len(per_seed)
            else f"{name} ({over(len(ok), len(per_seed), 'seeds')})"
        )
        out.append((label, [r for r in rows if r.seed in ok]))  # type: ignore[attr-defined]
    out += [
        (f"{name}, seed {s}" if several else name, xs) for s, xs in per_seed.items() if s not in ok
    ]
    return out
