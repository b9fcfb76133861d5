"""Polishing a placement by local search on an estimated schedule, with no simulator call.

A one-pass agent's kept placement (:func:`~placegym.agents.doppler.selector.choose`) is
the policy's own or a proposal's; :func:`polish` moves single nodes (a co-location group
moves whole) between devices where :func:`eager_schedule` says the makespan falls, and
stops after ``evals`` schedules or when no move on the critical chain helps.

**The estimate** (:func:`eager_schedule`, ``O(n + E)`` per call, compiled): a list
schedule in the placement's ready order (:func:`~placegym.agents.doppler.summaries.
ready_order`), nearer to the simulator's rules (DESIGN §3) than the selector's
summaries on two points:

- **copies leave when their producer finishes.** When a node is scheduled, one copy
  per other device hosting a consumer (rule 4), in ascending device index, is queued on
  its channel (``links="pair"``: the ordered device pair) or its send and receive ports
  at its level (``links="port"``), starting at the later of the producer's finish and
  the last arrival on what it takes; the summaries' contended estimate queues a copy
  only when a consumer first needs it, which lets a late copy jump the queue;
- **with ``insert``, a node fills the earliest idle gap** on its device at or after its
  inputs' arrival that is long enough (HEFT's insertion rule), the way a
  work-conserving device runs a ready node before one listed earlier that is not yet
  ready; without it, each device runs its nodes in list order.

It is not the simulator: copies queue in list order rather than by time, and no device
dispatches among its ready nodes.

**Memory** (:func:`eager_peak`): each device's peak bytes in that schedule by DESIGN
§3's lifetimes (parameters throughout; an output from its node's start until its last
local consumer has finished and its last copy has arrived; a copy from its start until
its last consumer there has finished); a placement with a recompute set is estimated
as the simulator runs it, on the extended graph (:func:`extended`). With ``memory``,
:func:`polish` keeps only moves after which every device's peak stays within it.

**The search** (:func:`polish`): from the last node to finish, the chain of what bound
each start (the input that arrived last, or the node before it on its device); for each
node of the chain in turn, each other device (every one on up to :data:`ALL_DEVICES`
devices, else those of its producers and consumers), the first move that shortens the
estimate by more than a relative ``1e-9`` is kept and the chain is traced again (with
``pairs``, where no single move helps, each node with the next on the chain). The
priority order and the recompute set stay as they are. Deterministic: no random draw.
Each move's schedule is partial and stops early, with the same result as a full one:
nothing listed before the moved nodes changes, nor before a producer of theirs whose
copies then go to other devices (one whose copies go to the same devices is not run
again: the moved nodes read its copy to their new device), so it runs from the state
recorded at the last of :data:`CHECKPOINTS` positions before that, and it stops
once a node's finish plus a lower bound on what must follow it (the longest path to a
sink over the fastest devices, or its device's work still to run) reaches the
makespan to beat.
Whether the result fits is the caller's to check
(:func:`~placegym.agents.doppler.selector.polish_kept` admits it as it admits a
proposal, else keeps the placement it polished).
"""

from __future__ import annotations

import numpy as np

from placegym.agents.doppler._polish_kernel import eager_kernel, peak_kernel, polish_kernel
from placegym.agents.doppler.summaries import ready_order
from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.levels import step_costs
from placegym.envs.core.recompute import expand

__all__ = [
    "ALL_DEVICES",
    "CHECKPOINTS",
    "VISITS",
    "EagerInputs",
    "eager_estimate",
    "eager_makespan",
    "eager_peak",
    "eager_schedule",
    "extended",
    "polish",
]

#: :func:`polish` tries every device for a node on clusters of at most this many devices,
#: else only its producers' and consumers' devices.
ALL_DEVICES = 32
#: :func:`polish` makes at most this many schedules' visits in all, a schedule visiting
#: ``n + E`` nodes and edges and its ``D * D`` channels (``D * levels`` ports), counted
#: as if each ran in full: on large graphs fewer schedules than asked for (none where one
#: schedule would exceed it); about 0.1 s of search a placement at most.
VISITS = 4_000_000
#: :func:`polish` records the schedule's state at most this many times along its order,
#: a move's schedule starting from the last record before the first node it changes.
CHECKPOINTS = 64


class EagerInputs:
    """What :func:`eager_schedule` reads of a graph, a cluster and a priority ``rank``
    (:attr:`~placegym.envs.core.placement.Placement.rank`), built once
    (``O(n log n + E)``) for the many schedules of one search; the devices are each
    call's."""

    def __init__(self, graph: Graph, cluster: Cluster, rank: np.ndarray) -> None:
        costs = step_costs(graph, cluster)
        self.duration = np.ascontiguousarray(costs.duration, dtype=np.float64)
        self.order = np.asarray(ready_order(costs, rank), dtype=np.int64)
        self.pptr, self.pidx = (np.asarray(a, dtype=np.int64) for a in graph.producer_csr)
        self.cptr, self.cidx = (np.asarray(a, dtype=np.int64) for a in graph.consumer_csr)
        # producer-list entry j (edge u -> v) as its index in u's consumer list: the
        # consumer lists hold the edges by (u, v) ascending, so sorting the producer
        # entries by (u, v) lines them up with 0..E-1
        n = graph.num_nodes
        v_of_j = np.repeat(np.arange(n), np.diff(self.pptr))
        self.pedge = np.empty(len(self.pidx), dtype=np.int64)
        self.pedge[np.lexsort((v_of_j, self.pidx))] = np.arange(len(self.pidx))
        self.out = np.asarray(graph.out_bytes, dtype=np.float64)
        self.latency = np.ascontiguousarray(costs.latency, dtype=np.float64)
        self.inv_bandwidth = np.ascontiguousarray(costs.inv_bandwidth, dtype=np.float64)
        self.level = np.ascontiguousarray(cluster.pair_level, dtype=np.int64)
        self.levels = _levels(cluster)
        self.port = cluster.links == "port"
        self.start = np.zeros(n)
        self.finish = np.zeros(n)
        self.binding = np.zeros(n, dtype=np.int64)
        self.earr = np.zeros((len(self.cidx), 2))
        self.slot_t = np.zeros((n + cluster.num_devices, 2))
        self.slot_n = np.zeros(n + cluster.num_devices, dtype=np.int64)

    def operands(self, device: np.ndarray, insert: bool) -> tuple:
        """The compiled schedule's operands for ``device`` (an int64 array)."""
        return (
            self.order,
            device,
            self.duration,
            self.out,
            self.pptr,
            self.pidx,
            self.pedge,
            self.cptr,
            self.cidx,
            self.latency,
            self.inv_bandwidth,
            self.level,
            self.levels,
            self.port,
            bool(insert),
            self.start,
            self.finish,
            self.binding,
            self.earr,
            self.slot_t,
            self.slot_n,
        )

    def schedule(self, device: np.ndarray, insert: bool) -> float:
        """The makespan of :func:`eager_schedule` for ``device`` (an int64 array);
        ``start``, ``finish`` and ``binding`` hold its schedule until the next call."""
        return float(eager_kernel(self.operands(device, insert)))


def _every(n: int, edges: int, state: int) -> int:
    """How many positions apart :func:`polish` records the schedule's state (``state``
    numbers each): at most :data:`CHECKPOINTS` records, their copying at most eight
    schedules' visits."""
    rows = max(1, min(CHECKPOINTS, n, 8 * (n + edges) // state))
    return -(-n // rows)


def _record_size(cluster: Cluster) -> int:
    """The numbers in one record of the schedule's state: each device's busy time, last
    node and work to run, and each link's free time (``port``: the send and receive
    ports of each device and level; else each ordered device pair)."""
    d = cluster.num_devices
    return 3 * d + (2 * d * _levels(cluster) if cluster.links == "port" else d * d)


def _levels(cluster: Cluster) -> int:
    """The number of network levels the port state is kept for."""
    return int(cluster.pair_level.max()) + 1 if cluster.num_devices else 1


def extended(graph: Graph, cluster: Cluster, placement: Placement) -> tuple[Graph, Placement]:
    """The graph and placement the estimate schedules: ``placement``'s own, or with a
    recompute set the extended ones the simulator runs
    (:func:`~placegym.envs.core.recompute.expand`: node ``N + i`` recomputes
    ``recompute[i]``)."""
    if not placement.recompute.size:
        return graph, placement
    rc = expand(graph, cluster, placement)
    return rc.graph, rc.placement


def eager_schedule(
    graph: Graph, cluster: Cluster, placement: Placement, insert: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(start, finish)`` per node of the estimated schedule of ``placement`` (module
    docstring), ``O(n log n + E)`` with its set-up; no simulator call. With a recompute
    set, of the extended graph's ``N + k`` nodes (:func:`extended`)."""
    graph, placement = extended(graph, cluster, placement)
    inputs = EagerInputs(graph, cluster, placement.rank)
    inputs.schedule(np.asarray(placement.device, dtype=np.int64), insert)
    return inputs.start.copy(), inputs.finish.copy()


def eager_makespan(
    graph: Graph, cluster: Cluster, placement: Placement, insert: bool = False
) -> float:
    """The makespan of :func:`eager_schedule` (0 for no node), its recompute set
    included; no simulator call."""
    return float(eager_schedule(graph, cluster, placement, insert)[1].max(initial=0.0))


def eager_peak(
    graph: Graph, cluster: Cluster, placement: Placement, insert: bool = False
) -> np.ndarray:
    """``(D,)`` each device's peak bytes in the estimated schedule of ``placement``, by
    DESIGN §3's lifetimes (the ``memory`` test of :func:`polish`), with its recompute
    set (the extended graph's, :func:`extended`); no simulator call."""
    return eager_estimate(graph, cluster, placement, insert)[1]


def eager_estimate(
    graph: Graph, cluster: Cluster, placement: Placement, insert: bool = False
) -> tuple[float, np.ndarray]:
    """:func:`eager_makespan` and :func:`eager_peak` of one schedule."""
    graph, placement = extended(graph, cluster, placement)
    inputs = EagerInputs(graph, cluster, placement.rank)
    dev = np.asarray(placement.device, dtype=np.int64)
    inputs.schedule(dev, insert)
    makespan = float(inputs.finish.max(initial=0.0))
    base = np.bincount(dev, weights=graph.param_bytes, minlength=cluster.num_devices)
    peak = np.zeros(cluster.num_devices)
    peak_kernel(
        dev,
        inputs.start,
        inputs.finish,
        inputs.out,
        inputs.cptr,
        inputs.cidx,
        inputs.earr,
        base,
        peak,
    )
    return makespan, peak


def polish(
    graph: Graph,
    cluster: Cluster,
    placement: Placement,
    evals: int,
    insert: bool = False,
    memory: np.ndarray | None = None,
    pairs: bool = False,
) -> Placement:
    """``placement`` with nodes moved where :func:`eager_schedule` says the makespan falls
    (module docstring), after at most ``evals`` schedules (each ``O(n + E)``; fewer
    where they would make more than :data:`VISITS` visits); the same placement where no
    move helps. Its order and recompute set are ``placement``'s; with a recompute set
    the search runs on the extended graph (:func:`_polish_extended`).

    ``pairs``: once no single move on the chain helps, also move each node of the chain
    with the next one on it (what bound its start; each with its group) to one device,
    going back to single moves after a pair move is kept.

    ``memory``: ``(D,)`` bytes; where given, a move is kept only if every device's peak
    bytes in the estimated schedule (DESIGN §3's lifetimes, as
    :func:`~placegym.agents.doppler.summaries.estimated_peak` takes them, recompute
    nodes included) stay within its ``memory`` or, on a device already above it,
    within its peak before the search (``O((n + E) log(n + E))`` more per move that
    shortens the estimate).

    Raises:
        ValueError: ``evals`` < 0, or ``memory`` not one value per device.
    """
    if evals < 0:
        raise ValueError(f"evals: must be >= 0, got {evals}")
    if memory is not None and np.shape(memory) != (cluster.num_devices,):
        raise ValueError(
            f"memory: expected {cluster.num_devices} values (one per device), "
            f"got shape {np.shape(memory)}"
        )
    if placement.recompute.size:
        return _polish_extended(graph, cluster, placement, evals, insert, memory, pairs)
    n, d = graph.num_nodes, cluster.num_devices
    links = d * _levels(cluster) if cluster.links == "port" else d * d
    evals = min(evals, VISITS // (n + len(graph.edges) + links))
    if n == 0 or d < 2 or evals < 2:
        return placement
    inputs = EagerInputs(graph, cluster, placement.rank)
    dev = np.array(placement.device, dtype=np.int64)
    group = np.asarray(graph.group, dtype=np.int64)
    # each group's nodes (ascending) at gidx[gptr[g] : gptr[g + 1]]
    grouped = np.flatnonzero(group >= 0)
    gidx = grouped[np.argsort(group[grouped], kind="stable")]
    gptr = np.concatenate([[0], np.cumsum(np.bincount(group[grouped]))]).astype(np.int64)
    param = np.asarray(graph.param_bytes, dtype=np.float64)
    cap = np.full(d, np.inf) if memory is None else np.asarray(memory, dtype=np.float64)
    moved, _ = polish_kernel(
        evals,
        d <= ALL_DEVICES,
        group,
        gptr,
        gidx,
        memory is not None,
        param,
        cap,
        inputs.operands(dev, insert),
        n + 1 if insert else _every(n, len(graph.edges), _record_size(cluster)),
        pairs,
    )
    if not moved:
        return placement
    # every move tried and not kept was undone
    return Placement(device=dev, order=placement.order, recompute=placement.recompute)


def _polish_extended(
    graph: Graph,
    cluster: Cluster,
    placement: Placement,
    evals: int,
    insert: bool,
    memory: np.ndarray | None,
    pairs: bool,
) -> Placement:
    """:func:`polish` of a placement with a recompute set: the search runs on the
    extended graph and placement (:func:`extended`; a recompute node is in its forward
    node's co-location group, so it moves with it), and the devices it leaves the
    graph's own nodes are kept where the placement they make, expanded anew (the
    triggers follow the devices), has a smaller estimate than ``placement`` and, with
    ``memory``, peaks within it (or within ``placement``'s peak) on every device."""
    ext_graph, ext = extended(graph, cluster, placement)
    moved = polish(ext_graph, cluster, ext, evals, insert, memory, pairs)
    if moved is ext:
        return placement
    n = graph.num_nodes
    out = Placement(device=moved.device[:n], order=placement.order, recompute=placement.recompute)
    before, peak_before = eager_estimate(graph, cluster, placement, insert)
    after, peak_after = eager_estimate(graph, cluster, out, insert)
    if after >= before * (1 - 1e-9):
        return placement
    if memory is not None and (peak_after > np.maximum(memory, peak_before)).any():
        return placement
    return out
