"""The cluster as NEST sees it: a level-wise tree of aligned device blocks.

:class:`Hierarchy` sorts the devices by ``path`` into addresses and lists the block sizes
and the addresses where a block of each size may start; the NEST cost model
(:mod:`placegym.teachers._nest_cost`) and its DP (:class:`~placegym.teachers.nest.
NestTeacher`) place each run of stages on one such block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placegym.envs.core.cluster import Cluster

__all__ = ["Hierarchy"]


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """The cluster as a level-wise tree of contiguous address ranges.

    Devices are sorted by ``path`` (then index): address ``x`` is device ``order[x]``.
    Row ``r`` of ``start``/``end`` gives, for every address, the address range of its
    unit at level ``r - 1``: row 0 is the device itself, row 1 its node (level 0), ...,
    the last row the whole cluster. A tree is *regular* when all units of one level have
    the same size; otherwise the DP sees one flat unit (the link costs still use the real
    device pairs). Block sizes: inside a unit, runs of ``2^j`` child units aligned to
    ``2^j`` within it, and the whole unit; ``valid[b, x]`` says a block of ``sizes[b]``
    devices may start at address ``x``.
    """

    order: np.ndarray
    start: np.ndarray
    end: np.ndarray
    sizes: tuple[int, ...]
    valid: np.ndarray
    regular: bool

    @property
    def num_devices(self) -> int:
        return int(self.order.shape[0])

    @property
    def num_levels(self) -> int:
        """Link levels ``0..num_levels-1`` (the last one spans the whole cluster)."""
        return int(self.start.shape[0]) - 1

    def level(self, x: int, y: int) -> int:
        """Level of the smallest unit holding addresses ``x`` and ``y`` (-1 if equal)."""
        same = self.start[:, x] == self.start[:, y]
        return int(np.argmax(same)) - 1

    @classmethod
    def build(cls, cluster: Cluster) -> Hierarchy:
        d = cluster.num_devices
        paths = cluster.paths
        depth = paths.shape[1]
        order = np.lexsort((np.arange(d), *[paths[:, c] for c in range(depth - 1, -1, -1)]))
        sp = paths[order]
        starts, ends = [np.arange(d)], [np.arange(d) + 1]
        for lv in range(depth + 1):
            change = np.ones(d, dtype=bool)
            if depth - lv > 0:
                change[1:] = (sp[1:, : depth - lv] != sp[:-1, : depth - lv]).any(axis=1)
            else:
                change[1:] = False
            first = np.flatnonzero(change)
            last = np.append(first[1:], d)
            uid = np.cumsum(change) - 1
            starts.append(first[uid])
            ends.append(last[uid])
        start, end = np.array(starts), np.array(ends)
        regular = all(np.unique(end[r] - start[r]).size == 1 for r in range(len(start)))
        if not regular:
            start = np.array([np.arange(d), np.zeros(d, dtype=np.int64)])
            end = np.array([np.arange(d) + 1, np.full(d, d)])
        sizes, valid = _blocks(start, end)
        return cls(order, start, end, sizes, valid, regular)


def _blocks(start: np.ndarray, end: np.ndarray) -> tuple[tuple[int, ...], np.ndarray]:
    d = start.shape[1]
    unit = [int(end[r, 0] - start[r, 0]) for r in range(start.shape[0])]
    sizes: list[int] = []
    for r in range(1, len(unit)):
        k = unit[r - 1]
        while k < unit[r]:
            sizes.append(k)
            k *= 2
        sizes.append(unit[r])
    sizes = sorted(set(sizes))
    addr = np.arange(d)
    valid = np.zeros((len(sizes), d), dtype=bool)
    for b, k in enumerate(sizes):
        r = next(r for r in range(1, len(unit)) if unit[r] >= k)
        valid[b] = ((addr - start[r]) % k == 0) & (addr + k <= end[r])
    return tuple(sizes), valid
