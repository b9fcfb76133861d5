"""Which nodes may be recomputed: the rule :mod:`placegym.envs.core.recompute` states.

A placement's ``recompute`` ids are checked against it (:meth:`Placement.check
<placegym.envs.core.placement.Placement.check>`), and the recomputation rewrite expands
them; both read this module, which reads nothing but the graph.
"""

from __future__ import annotations

import numpy as np

from placegym.envs.core import validate as V
from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import is_data_input

__all__ = ["check_recompute", "recomputable", "recompute_problem"]


def recompute_problem(graph: Graph, v: int) -> str | None:
    """Why forward node ``v`` of ``graph`` may not be recomputed, or None when it may
    (the rule of :mod:`placegym.envs.core.recompute`)."""
    big, n = graph.num_nodes, graph.num_nodes // 2
    if big % 2 or not 0 <= v < n:
        return (
            f"is not a forward node of a training-step graph (graph {graph.name!r} of {big} "
            f"nodes: forward nodes are the first half, node n + v is v's backward node)"
        )
    b = n + v
    spec = graph.spec[b]
    if spec.get("kind") != "backward" or spec.get("forward") != v:
        return f"has no backward node: node {b} is not one (spec kind 'backward', forward {v})"
    if is_data_input(graph.spec[v]):
        return "is a data input: it is read, not computed, so there is nothing to recompute"
    if graph.group[v] < 0 or graph.group[v] != graph.group[b]:
        return f"does not share a co-location group with its backward node {b}"
    producers = graph.predecessors(b).tolist()
    if v not in producers:
        return f"has no stash edge {v} -> {b}"
    consumers = set(graph.successors(v).tolist())
    for p in producers:
        if p != v and (p < n or p - n not in consumers):
            return f"its backward node {b} reads node {p}, not the gradient of a consumer of {v}"
    bad = [u for u in graph.predecessors(v).tolist() if u >= n]
    if bad:
        return f"reads node {bad[0]}, which is not a forward node"
    return None


def recomputable(graph: Graph) -> np.ndarray:
    """``(N,)`` whether each node of ``graph`` may be recomputed (the rule of
    :mod:`placegym.envs.core.recompute`)."""
    return np.array([recompute_problem(graph, v) is None for v in range(graph.num_nodes)])


def check_recompute(graph: Graph, nodes: np.ndarray, where: str = "recompute") -> None:
    """Raise ``ValueError`` naming ``where[i]`` at the first node of ``nodes`` that may not
    be recomputed in ``graph``."""
    for i, v in enumerate(np.asarray(nodes).tolist()):
        if not 0 <= v < graph.num_nodes:
            raise V.fail(f"{where}[{i}]", f"out of range (must be < {graph.num_nodes})", v)
        problem = recompute_problem(graph, v)
        if problem is not None:
            raise ValueError(f"{where}[{i}]: node {v} ({graph.op[v]}) {problem}")
