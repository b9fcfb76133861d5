"""What the importers share: finding a cycle among a file's edges, and reading a
non-negative number from a token."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["find_cycle", "nonnegative"]


def find_cycle(n: int, pairs: Sequence[tuple[int, int]]) -> list[int] | None:
    """The indices into ``pairs`` of the edges of one cycle, in cycle order, or None when
    the ``n`` nodes and edges ``pairs`` form a DAG (Kahn's algorithm; the cycle is found
    by walking back along the edges from nodes left unresolved until one repeats)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]  # edge indices into each node
    indeg = [0] * n
    for k, (u, v) in enumerate(pairs):
        succ[u].append(v)
        pred[v].append(k)
        indeg[v] += 1
    ready = [v for v in range(n) if indeg[v] == 0]
    done = 0
    while ready:
        v = ready.pop()
        done += 1
        for c in succ[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    if done == n:
        return None
    v = next(i for i in range(n) if indeg[i] > 0)
    path: list[int] = []  # edge indices, walking backwards
    at: dict[int, int] = {}
    while v not in at:
        at[v] = len(path)
        k = next(k for k in pred[v] if indeg[pairs[k][0]] > 0)
        path.append(k)
        v = pairs[k][0]
    return path[at[v] :][::-1]


def nonnegative(tok: str, what: str, fail: Callable[[str], Exception]) -> float:
    """``tok`` as a finite number >= 0; otherwise raises ``fail(problem)``."""
    try:
        x = float(tok)
    except ValueError:
        raise fail(f"{what}: expected a number, {tok!r} is not one") from None
    if not math.isfinite(x) or x < 0:
        raise fail(f"{what}: must be a finite number >= 0, not {tok!r}")
    return x
