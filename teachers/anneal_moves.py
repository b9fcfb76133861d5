"""The move set of simulated annealing over placements and priorities, shared.

The :class:`~placegym.teachers.anneal.AnnealTeacher` (:func:`~placegym.teachers.anneal.
anneal`) and the agents' policy search
(:func:`~placegym.agents.doppler.search.policy_search`) both perturb a placement with
these moves:

- :data:`MOVES`: the move kinds, :func:`effective_weights` how often each is drawn;
- :func:`propose_move`: one random move of a kind around a node, in place;
- :func:`hold_groups`: co-location groups pulled whole after a move;
- :func:`critical_chain`: the nodes whose moves can shorten a schedule (the search
  focuses on them);
- :class:`MoveProblem` (:func:`move_problem`): the per-graph data the moves read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.sim.simulator import Schedule

__all__ = [
    "MOVES",
    "MoveProblem",
    "critical_chain",
    "effective_weights",
    "hold_groups",
    "move_problem",
    "propose_move",
]

#: Move kinds, in the order of ``AnnealTeacher.move_weights`` (and of
#: ``SearchConfig.move_weights`` of the agents' search).
MOVES = ("move", "swap", "neighbourhood", "layer", "priority")


@dataclass
class MoveProblem:
    """Per-graph data the moves need (plain lists: faster to index one by one).

    Attributes:
        graph, cluster: the problem.
        neighbours: producers and consumers of each node.
        layers: nodes of the layer of each node (empty: no layer).
        penalty: added by the anneal teacher to the makespan of an OOM placement (10x
            the worst start; 0 until its starts are scored).
        check_memory: whether any placement could exceed some device's memory.
        groups: co-location groups (moves move them whole, :func:`hold_groups`).
    """

    graph: Graph
    cluster: Cluster
    neighbours: list[np.ndarray]
    layers: list[np.ndarray]
    penalty: float
    check_memory: bool
    groups: dict[int, np.ndarray]


def move_problem(graph: Graph, cluster: Cluster) -> MoveProblem:
    """The :class:`MoveProblem` of ``graph`` on ``cluster``."""
    n = graph.num_nodes
    neighbours = [np.concatenate([graph.predecessors(v), graph.successors(v)]) for v in range(n)]
    groups: dict[int, np.ndarray] = {
        int(lay): np.flatnonzero(graph.layer == lay) for lay in np.unique(graph.layer)
    }
    empty = np.zeros(0, dtype=np.int64)
    layers = [groups[int(lay)] if lay >= 0 else empty for lay in graph.layer.tolist()]
    return MoveProblem(
        graph=graph,
        cluster=cluster,
        neighbours=neighbours,
        layers=layers,
        penalty=0.0,  # set once the start is scored
        check_memory=memory_may_bind(graph, cluster),
        groups=graph.groups,
    )


def hold_groups(p: MoveProblem, dev: np.ndarray, old: np.ndarray) -> None:
    """After a move changed ``old`` into ``dev`` (in place): every co-location group with
    a node moved goes whole to the new device of its first node moved."""
    seen: set[int] = set()
    group = p.graph.group
    for v in np.flatnonzero(dev != old).tolist():
        g = int(group[v])
        if g >= 0 and g not in seen:
            seen.add(g)
            dev[p.groups[g]] = dev[v]


def critical_chain(schedule: Schedule) -> np.ndarray:
    """Nodes on the chain of delays that ends at the last finish, latest first.

    Walking back from the last node to finish, each node's start is explained either by
    an input's arrival (go to that producer) or by its device freeing up (go to the node
    that ran before it there); moves on these nodes are the ones that can shorten the run.
    """
    g, dev = schedule.graph, schedule.device
    start, finish = schedule.start, schedule.finish
    tr = schedule.transfers
    arrival = {(int(u), int(d)): float(a) for u, d, a in zip(tr.node, tr.dst, tr.arrival)}
    by_device = np.lexsort((start, dev))
    prev = np.full(g.num_nodes, -1, dtype=np.int64)
    same = dev[by_device[1:]] == dev[by_device[:-1]]
    prev[by_device[1:][same]] = by_device[:-1][same]
    tol = 1e-12 * max(schedule.makespan, 1e-300)
    v, chain = int(np.argmax(finish)), list[int]()
    while v >= 0 and len(chain) < g.num_nodes:
        chain.append(v)
        s, nxt = float(start[v]), -1
        for u in g.predecessors(v).tolist():
            t = float(finish[u]) if dev[u] == dev[v] else arrival[(u, int(dev[v]))]
            if abs(t - s) <= tol:
                nxt = u
                break
        if nxt < 0 and prev[v] >= 0 and abs(float(finish[prev[v]]) - s) <= tol:
            nxt = int(prev[v])
        v = nxt
    return np.array(chain, dtype=np.int64)


def _other_device(rng: np.random.Generator, nd: int, d: int) -> int:
    x = int(rng.integers(nd - 1))
    return x + (x >= d)


def propose_move(
    rng: np.random.Generator,
    p: MoveProblem,
    kind: int,
    v: int,
    dev: np.ndarray,
    order: np.ndarray,
    rank: np.ndarray,
) -> None:
    """Apply one random move of ``MOVES[kind]`` around node ``v`` in place to ``dev`` and
    ``order`` (one candidate row). ``rank`` is the inverse of ``order`` (read only)."""
    n, nd = len(dev), p.cluster.num_devices
    if kind == 0:  # one node to another device
        dev[v] = _other_device(rng, nd, int(dev[v]))
    elif kind == 1:  # swap two nodes' devices (half the time a graph neighbour)
        nb = p.neighbours[v]
        use_nb = len(nb) > 0 and rng.random() < 0.5
        u = int(nb[rng.integers(len(nb))]) if use_nb else int(rng.integers(n))
        dev[v], dev[u] = dev[u], dev[v]
    elif kind == 2:  # a node and its producers and consumers onto one device
        d = int(dev[v]) if rng.random() < 0.5 else int(rng.integers(nd))
        dev[p.neighbours[v]] = d
        dev[v] = d
    elif kind == 3:  # exchange two devices within the node's layer
        group = p.layers[v] if len(p.layers[v]) else p.neighbours[v]
        a, b = int(dev[v]), _other_device(rng, nd, int(dev[v]))
        sub = dev[group]
        dev[group] = np.where(sub == a, b, np.where(sub == b, a, sub))
    else:  # swap priorities with the next (or previous) node on the same device
        same = np.flatnonzero(dev[order] == dev[v])
        i = int(np.searchsorted(same, rank[v]))
        j = i + 1 if rng.random() < 0.5 else i - 1
        if 0 <= j < len(same):
            a, b = int(same[i]), int(same[j])
            order[a], order[b] = order[b], order[a]


def effective_weights(move_weights: tuple[float, ...], n: int, nd: int) -> np.ndarray:
    """The weights of :data:`MOVES` that apply on a graph of ``n`` nodes and ``nd``
    devices (unnormalised, a new array): ``move_weights``, only the priority move's with
    one device, all zero with fewer than two nodes (or none left).

    Raises:
        ValueError: not one finite weight >= 0 per move, or all zero.
    """
    w = np.asarray(move_weights, dtype=np.float64)
    if w.shape != (len(MOVES),) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"move_weights: need {len(MOVES)} weights >= 0, got {move_weights}")
    if nd < 2:
        w[:4] = 0.0  # one device: only priorities can change
    return w if n >= 2 and w.sum() > 0 else np.zeros_like(w)
