"""A small identity-keyed LRU cache for values derived from immutable objects.

Graphs and clusters are immutable, so values computed from them (b-levels, plans,
observation builders, reference makespans, environments) can be kept per *object*. The
key is the identity of one or more objects; a hit also checks the stored objects with
``is``, so a recycled ``id`` never returns a stale value.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["IdentityCache"]

T = TypeVar("T")


class IdentityCache(Generic[T]):
    """An LRU cache of values keyed by the identity of one or more objects.

    ``cache(graph, cluster)`` returns the value of that object pair, computing it with
    ``compute(graph, cluster)`` on a miss; :meth:`get` and :meth:`put` read and write
    without computing (for values that are offered, not computed).

    Args:
        compute: builds the value of a key's objects; None for a cache filled with
            :meth:`put` only.
        size: most entries kept (the least recently used go first); None keeps all.
    """

    def __init__(self, compute: Callable[..., T] | None = None, size: int | None = 8) -> None:
        self._compute = compute
        self._size = size
        self._items: OrderedDict[tuple[int, ...], tuple[tuple[Any, ...], T]] = OrderedDict()

    def __call__(self, *objs: Any) -> T:
        """The value of ``objs``, computed on a miss."""
        hit = self._lookup(objs)
        if hit is not None:
            return hit[0]
        if self._compute is None:
            raise KeyError("IdentityCache: no value for these objects and no compute function")
        value = self._compute(*objs)
        self.put(*objs, value=value)
        return value

    def get(self, *objs: Any) -> T | None:
        """The stored value of ``objs``, or None."""
        hit = self._lookup(objs)
        return None if hit is None else hit[0]

    def put(self, *objs: Any, value: T) -> None:
        """Store ``value`` for ``objs`` (replacing any)."""
        key = tuple(map(id, objs))
        self._items[key] = (objs, value)
        self._items.move_to_end(key)
        while self._size is not None and len(self._items) > self._size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every value."""
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def _lookup(self, objs: tuple[Any, ...]) -> tuple[T] | None:
        key = tuple(map(id, objs))
        hit = self._items.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], objs, strict=True)):
            return None
        self._items.move_to_end(key)
        return (hit[1],)
