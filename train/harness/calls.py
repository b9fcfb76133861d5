"""Simulator calls, counted where they happen: the cost column of every benchmark table.

A placer's cost is its wall time and the simulator calls it makes. The calls are counted
here, not reported by the placer: while :func:`counting` is active, every call of the
simulator's entry points (:data:`ENTRY_POINTS` of :mod:`placegym.envs.sim.simulator`) made
in this process, by any code and on any thread, is charged to the active counter(s):

- :func:`~placegym.envs.sim.simulator.simulate` and
  :func:`~placegym.envs.sim.simulator.simulate_makespan`: one call each;
- :func:`~placegym.envs.sim.simulator.simulate_batch` of ``B`` placements: ``B`` calls;
- an entry point's own calls of another (``simulate_batch`` with a recompute set
  simulates each row with ``simulate``): nothing more.

So a teacher that simulates inside (``anneal``, ``lookahead``, ``metis``' refinement), an
agent whose environment simulates each finished episode, and a search placer's own
evaluations all show their real cost. Counters nest (an outer counter also counts what an
inner one counts); :func:`uncounted` suspends them, for the harness's own evaluation of a
result, which is never part of a placer's cost.

A counter may have a ``budget``: a call that would take the count past it raises
:class:`BudgetExceeded` *before* anything is simulated, and the counter remembers that
it was exceeded even if the placer catches the exception.

How: :func:`patched` replaces the three functions, in :mod:`placegym.envs.sim.simulator` and
in every loaded module that imported them by name (``from placegym.envs import
simulate``), with counting wrappers, and puts the originals back when the outermost
:func:`patched` ends (modules imported meanwhile included). Without an active counter a
wrapper only forwards the call. Each module is scanned once for such names (tens of
milliseconds for a loaded torch stack, the first time); later patches scan only the
modules loaded since. A harness loop enters :func:`patched` once around its cells.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = [
    "ENTRY_POINTS",
    "BudgetExceeded",
    "CallCounter",
    "counting",
    "patched",
    "uncounted",
]

#: The simulator functions whose calls are counted (names in :mod:`placegym.envs.sim.simulator`).
ENTRY_POINTS = ("simulate", "simulate_makespan", "simulate_batch")


class BudgetExceeded(RuntimeError):
    """A run asked for more simulator calls than its budget allows.

    Raised by the call that would go past the budget, before it simulates anything. The
    harness stops the placer there and records the row as over budget (a failure, never
    a result).

    Attributes:
        budget: the run's budget of simulator calls.
        calls: calls made before the refused one.
        asked: calls the refused one asked for (a batch's size); 0 when the placer
            caught the refusal and returned a placement anyway (the run is stopped all
            the same).
    """

    def __init__(self, budget: int, calls: int, asked: int) -> None:
        self.budget, self.calls, self.asked = budget, calls, asked
        super().__init__(
            f"over budget: stopped at {calls} of {budget} simulator calls ({asked} more asked)"
            if asked
            else f"over budget: went on after its {budget} simulator calls were spent"
        )


class CallCounter:
    """The simulator calls of one run (see the module docstring).

    Args:
        budget: the most calls the run may make; None for no limit.

    Attributes:
        calls: calls made so far.
        exceeded: a call was refused for going past the budget.
    """

    def __init__(self, budget: int | None = None) -> None:
        if budget is not None and (isinstance(budget, bool) or int(budget) < 0):
            raise ValueError(f"budget: must be an integer >= 0 simulator calls, got {budget!r}")
        self.budget = None if budget is None else int(budget)
        self.calls = 0
        self.exceeded = False

    @property
    def remaining(self) -> int | None:
        """Calls left in the budget (None: no budget)."""
        return None if self.budget is None else self.budget - self.calls

    def __repr__(self) -> str:
        return f"CallCounter(calls={self.calls}, budget={self.budget})"


_LOCK = threading.RLock()
#: The active counters, innermost last; every counted call is charged to all of them.
_ACTIVE: list[CallCounter] = []
#: Depth of nested :func:`patched`, and the originals -> wrappers while patched.
_STATE: dict[str, Any] = {"depth": 0, "wrappers": {}}
#: Modules already scanned for names bound to an entry point, and those names: a module
#: is scanned once, so that patching again costs only the modules loaded since.
_SCANNED: weakref.WeakSet[Any] = weakref.WeakSet()
_HOLDERS: dict[tuple[weakref.ref[Any], str], None] = {}


def _charge(n: int) -> None:
    """Charge ``n`` calls to every active counter, or raise :class:`BudgetExceeded` (and
    charge none) when that would take one past its budget."""
    with _LOCK:
        for c in _ACTIVE:
            if c.budget is not None and c.calls + n > c.budget:
                c.exceeded = True
                raise BudgetExceeded(c.budget, c.calls, n)
        for c in _ACTIVE:
            c.calls += n


def _batch_rows(args: tuple, kwargs: dict) -> int:
    """The number of placements of a ``simulate_batch(graph, cluster, devices, ...)`` call
    (0 for a malformed ``devices``, which the simulator refuses)."""
    devices = args[2] if len(args) > 2 else kwargs.get("devices")
    shape: tuple[int, ...] = np.shape(devices) if devices is not None else ()
    return int(shape[0]) if len(shape) == 2 else 0


#: Per thread, how deep it is inside counted entry points: an entry point that calls
#: another (``simulate_batch`` with a recompute set runs ``simulate`` per row) is charged
#: once, at the outermost call.
_INSIDE = threading.local()


def _counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    batch = name == "simulate_batch"

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_INSIDE, "depth", 0)
        if _ACTIVE and depth == 0:
            _charge(_batch_rows(args, kwargs) if batch else 1)
        _INSIDE.depth = depth + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _INSIDE.depth = depth

    return wrapper


def _scan_new(targets: dict[int, Any]) -> None:
    """Record, in :data:`_HOLDERS`, every name of a module not scanned yet that is bound
    to one of ``targets`` (by ``id``)."""
    for m in list(sys.modules.values()):
        try:
            if m in _SCANNED:
                continue
            _SCANNED.add(m)
        except TypeError:  # not weak-referenceable: no module
            continue
        d = getattr(m, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            if id(value) in targets and value is targets[id(value)]:
                _HOLDERS[(weakref.ref(m), key)] = None


def _rebind(mapping: dict[int, tuple[Any, Any]]) -> None:
    """Point every recorded name bound to an ``old`` function at its ``new`` one
    (``mapping``: ``id(old) -> (old, new)``)."""
    for ref, key in list(_HOLDERS):
        m = ref()
        d = getattr(m, "__dict__", None) if m is not None else None
        if not isinstance(d, dict):
            del _HOLDERS[(ref, key)]
            continue
        value = d.get(key)
        if id(value) in mapping and value is mapping[id(value)][0]:
            d[key] = mapping[id(value)][1]


@contextmanager
def patched() -> Iterator[None]:
    """Counting wrappers in place of the simulator's entry points while active
    (reentrant; module docstring)."""
    from placegym.envs.sim import simulator

    with _LOCK:
        if _STATE["depth"] == 0:
            originals = {id(f): f for f in (getattr(simulator, n) for n in ENTRY_POINTS)}
            _scan_new(originals)
            wrappers = {
                id(f): (f, _counted(n, f))
                for n, f in ((n, getattr(simulator, n)) for n in ENTRY_POINTS)
            }
            _rebind(wrappers)
            _STATE["wrappers"] = wrappers
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                back = {id(w): (w, f) for f, w in _STATE["wrappers"].values()}
                # modules imported meanwhile bound the wrappers by name: they are recorded
                _scan_new({k: w for k, (w, _) in back.items()})
                _rebind(back)
                _STATE["wrappers"] = {}


@contextmanager
def counting(budget: int | None = None) -> Iterator[CallCounter]:
    """Count the simulator calls made while active (module docstring).

    Args:
        budget: the most calls allowed; the call that would exceed it raises
            :class:`BudgetExceeded`. None: count only.

    Yields:
        The :class:`CallCounter`; read ``calls`` (and ``exceeded``) after the block.
    """
    counter = CallCounter(budget)
    with patched():
        with _LOCK:
            _ACTIVE.append(counter)
        try:
            yield counter
        finally:
            with _LOCK:
                _ACTIVE.remove(counter)


@contextmanager
def uncounted() -> Iterator[None]:
    """Suspend every active counter: calls made here are charged to none (the harness's
    own evaluation of a placement)."""
    with _LOCK:
        saved = list(_ACTIVE)
        _ACTIVE.clear()
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[:0] = saved
