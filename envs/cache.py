"""A small identity-keyed LRU cache for values derived from (graph, cluster) objects."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph

__all__ = ["IdentityCache"]

T = TypeVar("T")


class IdentityCache(Generic[T]):
    """A small LRU cache of values computed from a (graph, cluster) pair of *objects*.

    Keys are object identities (graphs and clusters are immutable); the stored objects are
    compared with ``is`` on a hit, so a recycled ``id`` never returns a stale value.
    """

    def __init__(self, compute: Callable[[Graph, Cluster], T], size: int = 8) -> None:
        self._compute = compute
        self._size = size
        self._items: OrderedDict[tuple[int, int], tuple[Graph, Cluster, T]] = OrderedDict()

    def __call__(self, graph: Graph, cluster: Cluster) -> T:
        key = (id(graph), id(cluster))
        hit = self._items.get(key)
        if hit is not None and hit[0] is graph and hit[1] is cluster:
            self._items.move_to_end(key)
            return hit[2]
        value = self._compute(graph, cluster)
        self._items[key] = (graph, cluster, value)
        while len(self._items) > self._size:
            self._items.popitem(last=False)
        return value
