"""What the benchmark harness runs: the :class:`Placer` and :class:`SearchPlacer`
protocols, the budgeted :class:`Simulator` handle, and the adapters that make teachers,
trained agents and plain functions placers.

- :class:`Placer`: ``place(graph, cluster, seed) -> Placement``: one pass, any internal
  simulation counted (:mod:`placegym.train.harness.calls`); deterministic placers may
  ignore ``seed``.
- :class:`SearchPlacer`: ``search(graph, cluster, sim, seed) -> Placement``: spends a
  budget of simulator calls through ``sim`` (:class:`Simulator`), given by the harness;
  the call that would exceed the budget raises
  :class:`~placegym.train.harness.calls.BudgetExceeded` and the run is recorded as over
  budget. The placer reports nothing: the handle counts.

:func:`as_placer` is the one door into the harness: it turns whatever a user hands in
into a :class:`Placer` (a teacher's ``place(graph, cluster)`` ignores the seed, a
function ``(graph, cluster, seed)`` is called, a :class:`SearchPlacer` runs with its
budget from :func:`with_budget`), or raises a ``ValueError`` naming what is missing.
:func:`run_placer` runs one placer on one problem, timed and counted (a :class:`PlacerRun`).
"""

from __future__ import annotations

import inspect
import math
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from placegym.envs import Cluster, Graph, Placement
from placegym.envs.sim import simulator as _simulator
from placegym.envs.sim.simulator import BatchResult, Schedule
from placegym.train.harness.calls import BudgetExceeded, CallCounter, counting

__all__ = [
    "TORCH_THREADS",
    "BestOf",
    "Budgeted",
    "Placer",
    "PlacerRun",
    "SearchPlacer",
    "Simulator",
    "as_placer",
    "not_a_placement",
    "placer_name",
    "placing_threads",
    "run_placer",
    "unique_name",
    "with_budget",
]


@runtime_checkable
class Placer(Protocol):
    """Places a whole graph in one pass: ``place(graph, cluster, seed) -> Placement``.

    ``seed`` feeds every random draw of the placer (deterministic placers ignore it). The
    simulator calls it makes inside, if any, are counted by the harness (``calls``)."""

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """A complete placement (device per node, priority order) of ``graph``."""
        ...


@runtime_checkable
class SearchPlacer(Protocol):
    """Searches with a budget of simulator calls: ``search(graph, cluster, sim, seed)``.

    ``sim`` is the harness's :class:`Simulator` for this graph and cluster: it simulates
    placements (one, or a batch), counts every call, and raises
    :class:`~placegym.train.harness.calls.BudgetExceeded` at the call that would exceed
    the budget. Return the best placement found (the harness re-simulates it)."""

    def search(self, graph: Graph, cluster: Cluster, sim: Simulator, seed: int) -> Placement:
        """The best placement of ``graph`` found within ``sim.budget`` calls."""
        ...


class Simulator:
    """The budgeted simulator handle a :class:`SearchPlacer` gets (one graph, one cluster).

    Every simulator call made during the run counts against ``budget``: those through
    this handle and those made any other way (a teacher called inside the search
    included); see :mod:`placegym.train.harness.calls`. The handle also keeps the best
    placement it has simulated: placements that fit in memory before those that do not,
    then the smaller makespan, the earlier on ties.

    Args:
        graph: the graph being placed.
        cluster: its cluster.
        counter: the run's counter (its budget is the handle's).
        on_best: called ``(calls, makespan, feasible)`` each time the best changes (the
            anytime harness draws its curves from it).
    """

    def __init__(
        self,
        graph: Graph,
        cluster: Cluster,
        counter: CallCounter,
        on_best: Callable[[int, float, bool], None] | None = None,
    ) -> None:
        self.graph, self.cluster, self._counter, self._on_best = graph, cluster, counter, on_best
        self.best: Placement | None = None
        self.best_makespan = math.inf
        self.best_feasible = False

    @property
    def budget(self) -> int | None:
        """The most simulator calls the run may make."""
        return self._counter.budget

    @property
    def calls(self) -> int:
        """Simulator calls made so far in this run."""
        return self._counter.calls

    @property
    def remaining(self) -> int | None:
        """Calls left (size a batch with it)."""
        return self._counter.remaining

    def simulate(self, placement: Placement) -> Schedule:
        """Simulate one placement (one call): its full schedule, ``oom`` included.

        Raises:
            BudgetExceeded: the budget is spent.
            ValueError: the placement does not fit the graph or cluster, or splits a
                co-location group.
        """
        s = _simulator.simulate(self.graph, self.cluster, placement)
        self._observe(float(s.makespan), bool(s.oom), placement)
        return s

    def batch(self, devices: np.ndarray, orders: np.ndarray) -> BatchResult:
        """Simulate ``B`` placements (``devices``, ``orders``: ``(B, n)``) at once: ``B``
        calls, refused whole when fewer than ``B`` remain.

        Raises:
            BudgetExceeded: fewer than ``B`` calls remain.
            ValueError: as :func:`~placegym.envs.sim.simulator.simulate_batch`.
        """
        res = _simulator.simulate_batch(self.graph, self.cluster, devices, orders)
        devs, ords = np.asarray(devices), np.asarray(orders)
        key = np.lexsort((res.makespan, res.oom))  # fits first, then the fastest
        if len(key):
            i = int(key[0])
            self._observe(float(res.makespan[i]), bool(res.oom[i]), (devs[i], ords[i]))
        return res

    def _observe(self, makespan: float, oom: bool, placement: Any) -> None:
        if (oom, makespan) >= (not self.best_feasible, self.best_makespan):
            return
        if not isinstance(placement, Placement):
            placement = Placement(device=placement[0].copy(), order=placement[1].copy())
        self.best, self.best_makespan, self.best_feasible = placement, makespan, not oom
        if self._on_best is not None:
            self._on_best(self.calls, makespan, not oom)

    def __repr__(self) -> str:
        return f"Simulator({self.graph.name!r}, calls={self.calls}, budget={self.budget})"


# ---------------------------------------------------------------------- adapters
def placer_name(obj: Any) -> str:
    """A placer's label: its ``name`` attribute when a non-empty string, else its
    function's name, else its class's name."""
    for attr in ("name", "__name__"):  # a function's (or a wrapped one's) name
        name = getattr(obj, attr, None)
        if isinstance(name, str) and name:
            return name
    return type(obj).__name__


def unique_name(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base#2``, ``base#3``, ... : the first not in ``taken``."""
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}#{i}"
    return name


def _takes(fn: Callable[..., Any], count: int) -> bool:
    """``fn`` accepts ``count`` positional arguments (True when it cannot be told)."""
    try:
        inspect.signature(fn).bind(*range(count))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): trust the protocol
        return True
    return True


class _Adapter:
    """A placer built around another object, whose ``name`` and ``check`` it keeps."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, placer_name(inner)

    def check(self, graph: Graph, cluster: Cluster) -> None:
        """The wrapped object's ``check(graph, cluster)``, if it has one."""
        check = getattr(self.inner, "check", None)
        if callable(check):
            check(graph, cluster)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


class SeedlessPlacer(_Adapter):
    """A ``place(graph, cluster)`` object (a teacher) as a :class:`Placer`: the seed is
    not passed (a teacher draws from the seed it was built with)."""

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """``inner.place(graph, cluster)``."""
        return self.inner.place(graph, cluster)


class FunctionPlacer(_Adapter):
    """A function ``(graph, cluster, seed) -> Placement`` as a :class:`Placer`."""

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """``inner(graph, cluster, seed)``."""
        return self.inner(graph, cluster, seed)


@dataclass(frozen=True)
class Budgeted:
    """A placer with a budget of simulator calls per placement (:func:`with_budget`).

    A :class:`SearchPlacer` needs one (its ``sim`` has it); a :class:`Placer` run under a
    budget is stopped at the call that would exceed it. Either way a stopped run is
    recorded as over budget, never as a result."""

    inner: Any
    budget: int

    @property
    def name(self) -> str:
        """The inner placer's label."""
        return placer_name(self.inner)

    def check(self, graph: Graph, cluster: Cluster) -> None:
        """The inner object's ``check(graph, cluster)``, if it has one."""
        check = getattr(self.inner, "check", None)
        if callable(check):
            check(graph, cluster)

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """Run the inner placer (a search with a :class:`Simulator` of this budget)
        within the budget; raises :class:`BudgetExceeded` when it goes past it."""
        with counting(self.budget) as counter:
            placement = _place(self.inner, graph, cluster, seed, counter)
        if counter.exceeded:  # the placer caught the refusal and returned anyway
            raise BudgetExceeded(self.budget, counter.calls, 0)
        return placement


def with_budget(placer: Any, budget: int) -> Budgeted:
    """``placer`` limited to ``budget`` simulator calls per placement (:class:`Budgeted`).

    Raises:
        ValueError: ``budget`` is not an integer >= 1.
    """
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget < 1:
        raise ValueError(f"budget: must be an integer >= 1 simulator calls, got {budget!r}")
    if isinstance(placer, Budgeted):
        placer = placer.inner
    if not _is_search(placer):
        as_placer(placer)  # refuses a non-placer now, not at its first run
    return Budgeted(placer, int(budget))


def _place(inner: Any, graph: Graph, cluster: Cluster, seed: int, counter: CallCounter):
    if _is_search(inner):
        return inner.search(graph, cluster, Simulator(graph, cluster, counter), seed)
    return as_placer(inner).place(graph, cluster, seed)


def _is_search(obj: Any) -> bool:
    return callable(getattr(obj, "search", None)) and not isinstance(obj, type)


def as_placer(obj: Any) -> Placer:
    """``obj`` as a :class:`Placer` (module docstring).

    Accepted: a :class:`Placer` (``place(graph, cluster, seed)``, e.g. a trained agent),
    an object with ``place(graph, cluster)`` (a teacher: the seed is not passed), a
    function ``(graph, cluster, seed)``, and a :class:`SearchPlacer` or a :class:`Placer`
    given a budget by :func:`with_budget` (an object that has both ``place`` and
    ``search`` places without a budget and searches with one).

    Raises:
        ValueError: ``obj`` is a class (an instance is needed), a :class:`SearchPlacer`
            without a budget, or none of the above.
    """
    if isinstance(obj, Budgeted | SeedlessPlacer | FunctionPlacer):
        return obj
    if isinstance(obj, type):
        raise ValueError(f"placer {obj.__name__!r}: a class, not a placer (instantiate it)")
    name = placer_name(obj)
    place = getattr(obj, "place", None)
    if callable(place):
        if _takes(place, 3):
            return obj
        if _takes(place, 2):
            return SeedlessPlacer(obj)
        raise ValueError(f"placer {name!r}: place() must take (graph, cluster, seed)")
    if _is_search(obj):
        raise ValueError(
            f"placer {name!r}: a SearchPlacer needs a budget of simulator calls "
            "(with_budget(placer, calls), evaluate(..., budget=), --budget)"
        )
    if callable(obj) and _takes(obj, 3):
        return FunctionPlacer(obj)
    raise ValueError(
        f"placer {name!r}: not a Placer (no place(graph, cluster, seed) method) nor a "
        "SearchPlacer (no search(graph, cluster, sim, seed) method)"
    )


class BestOf:
    """The best of several placers' placements of each problem, one placer after another
    with the same seed: the placement that keeps every co-location group whole, then fits
    in memory, then has the smallest makespan (the earliest placer on ties). Each
    placement is simulated to compare them: those calls are this placer's cost.

    Args:
        placers: the candidates (anything :func:`as_placer` takes).
        name: the label in tables.
    """

    def __init__(self, placers: Sequence[Any], name: str) -> None:
        if not placers:
            raise ValueError("placers: BestOf needs at least one placer")
        self.placers, self.name = [as_placer(p) for p in placers], name

    def check(self, graph: Graph, cluster: Cluster) -> None:
        """Every candidate's ``check(graph, cluster)``."""
        for p in self.placers:
            check = getattr(p, "check", None)
            if callable(check):
                check(graph, cluster)

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """The best candidate placement (class docstring)."""
        best: tuple[tuple[int, float], Placement] | None = None
        for p in self.placers:
            placement = p.place(graph, cluster, seed)
            if not_a_placement(placement) is not None:  # no result: never picked over one
                key = (3, math.inf)
            else:
                try:
                    s = _simulator.simulate(graph, cluster, placement)
                    key = (int(s.oom), float(s.makespan))
                except ValueError:  # splits a group or does not fit: the last resort
                    key = (2, math.inf)
            if best is None or key < best[0]:
                best = (key, placement)
        assert best is not None
        return best[1]

    def __repr__(self) -> str:
        return f"BestOf({self.name!r}, {self.placers!r})"


# ---------------------------------------------------------------------- running
#: Torch threads the harness runs placers with (None: the process's own setting): one,
#: as a trained agent places (:data:`placegym.agents.doppler.placer.THREADS`), so that a
#: policy's small forward passes are not spread over every core.
TORCH_THREADS = 1


@contextmanager
def placing_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads where torch is loaded (a placer that
    runs torch has loaded it by the time it was built; nothing is imported here), the
    caller's count put back after; nothing otherwise, and nothing for None. A placer that
    sets its own count while it places (an agent's ``threads``) keeps it.

    Raises:
        ValueError: ``threads`` is not None nor an integer >= 1.
    """
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1
    ):
        raise ValueError(f"torch_threads: must be an integer >= 1 or None, got {threads!r}")
    torch = sys.modules.get("torch")
    if threads is None or torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class PlacerRun:
    """One placer's run on one problem (:func:`run_placer`).

    Attributes:
        placement: what it returned (None: it raised, was stopped, or returned
            something other than a :class:`~placegym.envs.Placement`).
        seconds: wall time of the run.
        calls: simulator calls it made (:mod:`placegym.train.harness.calls`).
        error: why there is no placement: ``over budget: ...`` (stopped at its budget),
            ``placer raised <Error>: ...`` or ``placer returned <type>, not a
            Placement``; None when there is one.
    """

    placement: Placement | None
    seconds: float
    calls: int
    error: str | None = None


def run_placer(placer: Any, graph: Graph, cluster: Cluster, seed: int) -> PlacerRun:
    """Run ``placer`` (anything :func:`as_placer` takes) on one problem, timed and with
    its simulator calls counted. An exception of the placer (``Exception``), a budget
    exceeded and a result that is not a :class:`~placegym.envs.Placement` (None, an
    array, a dict: :func:`not_a_placement`) are recorded in :attr:`PlacerRun.error`, with
    no placement: one placer's failure never stops a benchmark; the placement is not simulated here
    (:func:`~placegym.train.harness.feasibility.place` does, giving an ``Outcome``)."""
    p = as_placer(placer)
    t0 = time.perf_counter()
    with counting() as counter:
        try:
            placement: Placement | None = p.place(graph, cluster, seed)
            error = not_a_placement(placement)
        except BudgetExceeded as e:
            placement, error = None, str(e)
        except Exception as e:  # recorded as the row's failure
            placement, error = None, f"placer raised {type(e).__name__}: {e}"
    if error is not None:
        placement = None
    return PlacerRun(placement, time.perf_counter() - t0, counter.calls, error)


def not_a_placement(returned: Any) -> str | None:
    """Why what a placer returned is no result (``placer returned ndarray, not a
    Placement``); None for a :class:`~placegym.envs.Placement`."""
    if isinstance(returned, Placement):
        return None
    return f"placer returned {type(returned).__name__}, not a Placement"
