"""Busy intervals per device: the insertion-based schedule of HEFT's rule that
:meth:`PlacementState.insertion_start <placegym.envs.mdp.state.PlacementState.insertion_start>`
keeps (:class:`Timeline`, one per device, and the state's lazily updated
:class:`Insertion`)."""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

__all__ = ["Insertion", "Timeline"]


class Timeline:
    """Busy intervals of one device, sorted and disjoint (finishes sorted too)."""

    __slots__ = ("finish", "start")

    def __init__(self) -> None:
        self.start: list[float] = []
        self.finish: list[float] = []

    def earliest_fit(self, ready: float, dur: float) -> float:
        """The earliest start >= ``ready`` of an idle gap at least ``dur`` long."""
        i = bisect_right(self.finish, ready)
        prev_end = ready
        for j in range(i, len(self.start)):
            if prev_end + dur <= self.start[j]:
                return prev_end
            prev_end = max(prev_end, self.finish[j])
        return prev_end

    def insert(self, start: float, finish: float) -> None:
        """Add the busy interval ``[start, finish)`` (it must fit an idle gap)."""
        i = bisect_right(self.start, start)
        self.start.insert(i, start)
        self.finish.insert(i, finish)

    def copy(self) -> Timeline:
        """An independent copy."""
        new = Timeline()
        new.start, new.finish = self.start.copy(), self.finish.copy()
        return new


class Insertion:
    """The insertion-based schedule of a state's placed nodes, brought up to date lazily
    (:meth:`PlacementState.insertion_start`): ``finish`` per node (nan if not yet
    scheduled), a :class:`Timeline` per device, and how many placed nodes it holds."""

    __slots__ = ("finish", "lines", "seen")

    def __init__(self, n: int, d: int) -> None:
        self.finish = np.full(n, np.nan)
        self.lines = [Timeline() for _ in range(d)]
        self.seen = 0

    def copy(self) -> Insertion:
        """An independent copy."""
        new = object.__new__(Insertion)
        new.finish, new.seen = self.finish.copy(), self.seen
        new.lines = [line.copy() for line in self.lines]
        return new
