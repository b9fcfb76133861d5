"""Memory feasibility, in one place: whether memory may bind, room for the rest of the
graph, certificates that a placement fits or that none can, and the overflow price.

- :func:`memory_may_bind`: whether any placement could exceed any device's memory at all.
- :func:`memory_infeasibility`: a certificate that *no* placement fits (or None).
- :func:`fit_resident`: a constructive placement that fits the resident bytes (groups
  kept whole); simulate it to know whether its peak with live tensors fits too.
- :func:`live_certificate`: a placement shown by simulation to fit, live tensors
  included (from :func:`fit_resident` or :func:`stage_placement`, contiguous stages).
- :func:`stash_infeasibility`: a certificate that no placement *without recompute* fits
  a training step (:func:`stash_bound`: its stash at the loss turn), or None.
- :func:`recompute_certificate`: a placement with a recompute set shown by simulation to
  fit (contiguous stages, checkpointed: :func:`recompute_placement`); and
  :func:`fit_certificate`, the first certified placement of either kind, named.
- :func:`overflow_penalty`: the time price of resident bytes beyond memory (NEST's cost).

Room for the rest of the graph (the units a device takes whole, the packing check, the
environment's room mask and the teachers' :class:`Room`) is
:mod:`placegym.envs.analysis.room`'s, re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from placegym.envs.analysis.levels import b_level, durations_on
from placegym.envs.analysis.room import Room, Units, packs, room_mask, units, working_set
from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.core.recompute_rule import recomputable
from placegym.envs.sim.simulator import simulate

__all__ = [
    "CHECKPOINT_EVERY",
    "FIT_CANDIDATES",
    "Room",
    "Units",
    "checkpointed",
    "checkpoints",
    "fit_certificate",
    "fit_resident",
    "live_certificate",
    "memory_infeasibility",
    "memory_may_bind",
    "overflow_penalty",
    "packs",
    "recompute_certificate",
    "recompute_placement",
    "room_mask",
    "stage_placement",
    "stash_bound",
    "stash_floors",
    "stash_infeasibility",
    "units",
    "working_set",
]


# ---------------------------------------------------------------- certificates
def memory_may_bind(graph: Graph, cluster: Cluster) -> bool:
    """Whether some placement of ``graph`` could exceed some device's memory: a device
    never holds more than every parameter plus one copy of every output, so below the
    smallest memory nothing can."""
    if graph.num_nodes == 0:
        return False
    worst = float(graph.param_bytes.sum() + graph.out_bytes.sum())
    return worst > float(cluster.memory.min())


def overflow_penalty(
    param_bytes: np.ndarray, cluster: Cluster, *, overflow_weight: float = 1.0
) -> float:
    """Time to ship every device's resident parameters beyond its memory.

    ``overflow_weight · Σ_e max(0, param_bytes_e − memory_e) / min_l bandwidth_l``: the
    excess over the slowest network level. It is the memory term of
    :func:`placegym.teachers.nest.nest_cost` and of the ``nest`` reward's potential.

    Args:
        param_bytes: ``(D,)`` resident parameter bytes per device.
        cluster: the devices' memories and the network levels.
        overflow_weight: multiplier of the penalty.
    """
    excess = np.maximum(np.asarray(param_bytes, dtype=np.float64) - cluster.memory, 0.0)
    slowest = min(lv.bandwidth for lv in cluster.levels)
    return float(overflow_weight * excess.sum() / slowest)


def memory_infeasibility(graph: Graph, cluster: Cluster) -> str | None:
    """Why no placement of ``graph`` fits ``cluster``'s memory, or None when none of these
    certificates applies (a placement may still be infeasible: None proves nothing).

    Under DESIGN §3's memory rule, while node ``v`` runs on device ``d``, ``d`` holds the
    resident bytes of every node of ``v``'s co-location group (``v`` alone without one),
    ``v``'s own output (live from its start) and one tensor per distinct producer (a local
    output lives until its last local consumer finishes, a received copy until its last
    consumer on ``d`` finishes: both outlast ``v``). So every placement is over memory when

    1. the resident bytes of all nodes exceed the devices' total memory; or
    2. some group's resident bytes exceed the largest device memory; or
    3. some node of positive duration on every device has a footprint ``group resident +
       out_bytes_v + Σ producers' out_bytes`` over the largest device memory (a node of
       zero duration holds them for no time at all).

    The first that applies is named (the node or group, its bytes, the memory).
    """
    n = graph.num_nodes
    if n == 0:
        return None
    memory = cluster.memory
    if not np.isfinite(memory).all():
        return None
    largest = float(memory.max())
    resident = graph.param_bytes.astype(np.float64)
    total, capacity = float(resident.sum()), float(memory.sum())
    if total > capacity:
        return f"resident bytes {total:.6g} exceed the total device memory {capacity:.6g}"
    share = resident.copy()  # each node's group resident bytes (its own without a group)
    for g, nodes in graph.groups.items():
        need = float(resident[nodes].sum())
        if need > largest:
            return (
                f"group {g} holds {need:.6g} resident bytes, more than the largest device "
                f"memory {largest:.6g}"
            )
        share[nodes] = need
    footprint = share + graph.out_bytes + graph.in_bytes
    footprint[durations_on(graph, cluster).min(axis=1) <= 0] = 0.0
    v = int(np.argmax(footprint))
    if footprint[v] > largest:
        return (
            f"node {v} ({graph.op[v]}) needs {footprint[v]:.6g} bytes while it runs (resident "
            f"{share[v]:.6g}, output {graph.out_bytes[v]:.6g}, inputs {graph.in_bytes[v]:.6g}), "
            f"more than the largest device memory {largest:.6g}"
        )
    return None


def fit_resident(graph: Graph, cluster: Cluster) -> Placement | None:
    """Whole groups, then lone nodes, in descending resident bytes (ties by first node),
    each on the device with the most free memory (ties by index) if it has room for its
    resident bytes (worst-fit decreasing: it spreads the bytes and leaves every device
    headroom for live tensors); the priority order is descending b-level, ties by id.
    None when some group or node fits nowhere. Live tensors are not counted: simulate
    the placement to know whether its peak fits."""
    items: list[tuple[float, int, list[int]]] = []
    grouped = np.zeros(graph.num_nodes, dtype=bool)
    for nodes in graph.groups.values():
        grouped[nodes] = True
        items.append((float(graph.param_bytes[nodes].sum()), int(nodes[0]), nodes.tolist()))
    items += [(float(graph.param_bytes[v]), v, [v]) for v in np.flatnonzero(~grouped).tolist()]
    items.sort(key=lambda it: (-it[0], it[1]))
    free = cluster.memory.astype(float).copy()
    device = np.empty(graph.num_nodes, dtype=np.int64)
    for need, _, members in items:
        d = int(np.argmax(free))  # the first of the devices with the most room
        if need > free[d]:
            return None
        free[d] -= need
        device[members] = d
    order = np.lexsort((np.arange(graph.num_nodes), -b_level(graph, cluster)))
    return Placement(device=device, order=order)


def stage_placement(graph: Graph, cluster: Cluster) -> Placement:
    """Contiguous stages, as a pipeline partitions a model: the units (a co-location
    group, else one node) in the order of their first node in ``graph``'s topological
    order, cut into ``D`` runs of about equal bytes (resident plus output bytes, each
    device's share proportional to its memory), run ``d`` on device ``d``; the priority
    order is descending b-level, ties by id. On a training step (each layer's forward and
    backward one group) it keeps each stage's stash on its device, the layout that
    spreads live activations evenly; :func:`live_certificate` simulates it."""
    n = graph.num_nodes
    if n == 0:
        return Placement(device=np.zeros(0, dtype=np.int64), order=np.zeros(0, dtype=np.int64))
    head = np.where(graph.group_first >= 0, graph.group_first, np.arange(n))
    position = np.empty(n, dtype=np.int64)
    position[graph.topological_order] = np.arange(n)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, head, position)
    heads = np.unique(head)
    units = heads[np.argsort(first[heads], kind="stable")]
    weight = np.bincount(head, weights=graph.param_bytes + graph.out_bytes, minlength=n)[units]
    middle = np.cumsum(weight) - weight / 2  # a unit goes where its middle byte falls
    cuts = np.concatenate([[0.0], np.cumsum(cluster.memory) / cluster.memory.sum()])
    stage = np.searchsorted(cuts * weight.sum(), middle, side="right") - 1
    unit_device = np.zeros(n, dtype=np.int64)
    unit_device[units] = np.clip(stage, 0, cluster.num_devices - 1)
    order = np.lexsort((np.arange(n), -b_level(graph, cluster)))
    return Placement(device=unit_device[head], order=order)


def live_certificate(graph: Graph, cluster: Cluster) -> Placement | None:
    """A placement shown by simulation to fit ``cluster``'s memory, live tensors
    included (a constructive certificate that a feasible placement exists), or None when
    none of the candidates fits (which proves nothing: :func:`memory_infeasibility`
    proves the opposite where it applies).

    The candidates, in order: :func:`fit_resident` (worst-fit decreasing on resident
    bytes) and :func:`stage_placement` (contiguous stages, which keep each stage's stash
    on its device); each is simulated (DESIGN §3's peak: resident bytes, outputs,
    stashes and received copies) and the first within memory everywhere is returned.
    """
    found = _first_fit(graph, cluster)
    return None if found is None else found[1]


#: The constructive placements tried, in order, by :func:`live_certificate`,
#: :func:`fit_certificate` and the teachers' repair: what each is, and its maker.
FIT_CANDIDATES: tuple[tuple[str, Callable[[Graph, Cluster], Placement | None]], ...] = (
    ("the resident bytes spread worst-fit decreasing", fit_resident),
    ("contiguous stages", stage_placement),
)


def _first_fit(graph: Graph, cluster: Cluster) -> tuple[str, Placement] | None:
    """The first of :data:`FIT_CANDIDATES` that simulates within memory, and its name."""
    for name, make in FIT_CANDIDATES:
        placement = make(graph, cluster)
        if placement is not None and not simulate(graph, cluster, placement).oom:
            return name, placement
    return None


# ---------------------------------------------------------------- recomputation
def _reach(csr: tuple[np.ndarray, np.ndarray], start: int, n: int) -> np.ndarray:
    """``(n,)`` bool: ``start`` and the nodes reachable from it along ``csr``."""
    ptr, idx = csr
    seen = np.zeros(n, dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    while frontier.size:
        nxt = np.concatenate([idx[ptr[v] : ptr[v + 1]] for v in frontier.tolist()])
        nxt = np.unique(nxt[~seen[nxt]])
        seen[nxt] = True
        frontier = nxt
    return seen


def _stash_sets(graph: Graph, cluster: Cluster) -> tuple[float, np.ndarray, np.ndarray] | None:
    """:func:`stash_bound`'s sinks: ``(resident bytes, (S,) sinks s, (S, n) bool: the
    set F of each)``, None where none applies (computed once per graph and cluster)."""
    big = graph.num_nodes
    if big == 0 or big % 2:
        return None
    n = big // 2
    ok = recomputable(graph)[:n]
    if not ok.any():
        return None
    edges = graph.edges
    sink = np.ones(n, dtype=bool)
    sink[edges[(edges[:, 0] < n) & (edges[:, 1] < n), 0]] = False
    positive = durations_on(graph, cluster, np.arange(n, big)).min(axis=1) > 0
    sinks = np.flatnonzero(ok & sink & positive)
    if not sinks.size:
        return None
    live = np.zeros((len(sinks), n), dtype=bool)
    for i, s in enumerate(sinks.tolist()):
        above = _reach(graph.producer_csr, s, big)[:n]
        below = _reach(graph.consumer_csr, n + s, big)[n:]
        live[i] = ok & above & below
    return float(graph.param_bytes.sum()), sinks.astype(np.int64), live


#: :func:`_stash_sets` per (graph, cluster) object (the last 32 pairs are kept: the live
#: mask reads it once per checkpoint spacing).
_stash_table = IdentityCache(_stash_sets, size=32)


def _stash_floor(
    graph: Graph, cluster: Cluster, recompute: np.ndarray | None = None
) -> tuple[float, int, int] | None:
    """``(bytes, s, |F|)`` of :func:`stash_bound`'s sink ``s``, None where none applies."""
    table = _stash_table(graph, cluster)
    if table is None:
        return None
    resident, sinks, live = table
    n = graph.num_nodes // 2
    if recompute is not None and len(recompute):
        live = live.copy()
        live[:, np.asarray(recompute, dtype=np.int64)] = False
    out = graph.out_bytes
    totals = [resident + float(out[:n][f].sum() + out[n + s]) for s, f in zip(sinks, live)]
    i = int(np.argmax(totals))  # the first sink of the largest, as sinks ascend
    return totals[i], int(sinks[i]), int(live[i].sum())


def stash_bound(graph: Graph, cluster: Cluster, recompute: np.ndarray | None = None) -> float:
    """A lower bound on the sum over devices of the simulated peaks of every placement
    of the training step ``graph`` on ``cluster`` *without recompute*, or with the
    recompute set ``recompute`` (0 where it does not apply: not a training step, or no
    forward sink below).

    The argument (DESIGN §3's memory rule; any durations, noise, dispatch or links). Let
    ``s`` be a forward sink whose backward node ``s'`` has a positive duration on every
    device, and ``F`` the forward nodes ``v`` that may be recomputed
    (:func:`~placegym.envs.core.recompute.recomputable`: the stash edge ``v -> v'``, both
    in one co-location group, so on one device) with ``v`` an ancestor of ``s`` (or ``s``)
    and ``v'`` a descendant of ``s'`` (or ``s'``). At the instant ``t`` that ``s'``
    starts, every ``v`` of ``F`` has finished (``s'`` waits for ``s``, which waits for
    ``v``) and ``v'`` has not (it starts once ``s'`` has finished, or is ``s'``), so
    without recompute ``v``'s output is live on its device at ``t``, as is ``s'``'s own
    output (live from its start), and every resident byte is held throughout. The bound
    is ``resident + Σ_F out_bytes + out_bytes[s']``, the largest over such sinks. With a
    recompute set the nodes of the set leave ``F`` (the rewrite,
    :mod:`~placegym.envs.core.recompute`, keeps every other stash edge; what recomputing
    keeps or rebuilds is not counted, so the bound stays a lower one).
    """
    floor = _stash_floor(graph, cluster, recompute)
    return 0.0 if floor is None else floor[0]


def stash_floors(
    graph: Graph, cluster: Cluster, device: np.ndarray, recompute: np.ndarray | None = None
) -> np.ndarray:
    """``(D,)`` a lower bound on each device's simulated peak of every placement of the
    training step ``graph`` with the device map ``device``, without recompute or with
    the recompute set ``recompute``: :func:`stash_bound`'s argument device by device
    (at the instant a sink's backward node starts, each device holds its resident bytes
    and the outputs of the nodes of ``F`` on it, and that node's own output where it
    runs), the largest over the sinks; the resident bytes alone where no sink applies.
    It bounds any schedule that keeps DESIGN §3's precedence and lifetimes, the
    agents' estimated schedules too."""
    device = np.asarray(device, dtype=np.int64)
    d = cluster.num_devices
    floors = np.bincount(device, weights=graph.param_bytes, minlength=d).astype(np.float64)
    table = _stash_table(graph, cluster)
    if table is None:
        return floors
    _, sinks, live = table
    n = graph.num_nodes // 2
    out = np.array(graph.out_bytes[:n], dtype=np.float64)
    if recompute is not None and len(recompute):
        out[np.asarray(recompute, dtype=np.int64)] = 0.0
    held = np.zeros((len(sinks), d))
    for i in range(d):  # (S, D): each sink's stash on each device
        held[:, i] = live[:, device[:n] == i] @ out[device[:n] == i]
    held[np.arange(len(sinks)), device[n + sinks]] += graph.out_bytes[n + sinks]
    return floors + held.max(axis=0)


def stash_infeasibility(
    graph: Graph, cluster: Cluster, recompute: np.ndarray | None = None
) -> str | None:
    """Why no placement of the training step ``graph`` *without recompute* (or with the
    recompute set ``recompute``) fits ``cluster``'s memory: :func:`stash_bound` exceeds
    the total device memory. None when it does not (which proves nothing); a placement
    with ``recompute`` may still fit (:func:`recompute_certificate`)."""
    floor = _stash_floor(graph, cluster, recompute)
    capacity = float(cluster.memory.sum())
    if floor is None or not np.isfinite(capacity) or floor[0] <= capacity:
        return None
    total, s, k = floor
    b = graph.num_nodes // 2 + s
    how = (
        "without recompute"
        if recompute is None or not len(recompute)
        else f"recomputing those {len(recompute)} nodes"
    )
    return (
        f"{how} no placement fits: when backward node {b} ({graph.op[b]}) "
        f"starts, the stash of the {k} forward nodes before it and every resident byte are "
        f"live, {total:.6g} bytes, more than the total device memory {capacity:.6g}"
    )


#: The checkpoint spacings :func:`recompute_placement` tries: every ``k``-th node kept.
CHECKPOINT_EVERY = tuple(range(2, 13))


def _candidates(graph: Graph) -> np.ndarray:
    """The forward nodes checkpointing chooses among, in topological order: those that
    may be recomputed and feed a forward node."""
    n = graph.num_nodes // 2
    if not graph.num_nodes or graph.num_nodes % 2:
        return np.zeros(0, dtype=np.int64)
    ok = recomputable(graph)[:n]
    edges = graph.edges
    feeds = np.zeros(n, dtype=bool)
    feeds[edges[(edges[:, 0] < n) & (edges[:, 1] < n), 0]] = True
    topo = graph.topological_order
    candidates = topo[topo < n]
    out = candidates[ok[candidates] & feeds[candidates]].astype(np.int64)
    out.flags.writeable = False  # shared by the cache
    return out


#: :func:`_candidates` of a graph (the last 32 graphs are kept: every spacing of
#: :data:`CHECKPOINT_EVERY` reads them).
_checkpoint_candidates = IdentityCache(_candidates, size=32)


def checkpoints(graph: Graph, k: int, device: np.ndarray | None = None) -> np.ndarray:
    """The recompute set of checkpoint spacing ``k``: of the forward nodes that may be
    recomputed and feed a forward node, in topological order, every ``k``-th keeps its
    stash and the rest are recomputed (ascending ids; empty on a graph that is not a
    training step). With ``device`` (a device map) the count runs per device, so that
    each device rebuilds one segment between two of its checkpoints at a time (√n
    checkpointing within each stage)."""
    candidates = _checkpoint_candidates(graph)
    if device is None:
        rank = np.arange(len(candidates))
    else:
        rank = np.empty_like(candidates)  # position of each candidate on its device
        on = np.asarray(device)[candidates]
        for d in np.unique(on).tolist():
            mine = on == d
            rank[mine] = np.arange(int(mine.sum()))
    return np.sort(candidates[rank % k != k - 1])


def checkpointed(
    graph: Graph, cluster: Cluster, base: Placement
) -> tuple[float, Placement, bool] | None:
    """``base``'s devices and order with the lowest-peak recompute set of
    :func:`checkpoints` per device, one per spacing of :data:`CHECKPOINT_EVERY` (each
    simulated; ties: smaller spacing): ``(peak, placement, over memory)``, None where no
    node of ``graph`` may be recomputed.

    Recomputing every node of a stage lowers no peak: a chain ``a .. b`` recomputed on
    one device is rebuilt at once when the backward pass reaches ``b``
    (:mod:`~placegym.envs.core.recompute`), so the stage's whole stash is live again.
    Checkpoints split it, so one segment between two checkpoints is rebuilt at a time.
    """
    if not _checkpoint_candidates(graph).size:
        return None
    best: tuple[float, Placement, bool] | None = None
    for k in CHECKPOINT_EVERY:
        nodes = checkpoints(graph, k, base.device)
        placement = Placement(device=base.device, order=base.order, recompute=nodes)
        schedule = simulate(graph, cluster, placement)
        peak = float(schedule.peak_memory.max())
        if best is None or peak < best[0]:
            best = (peak, placement, bool(schedule.oom))
    return best


def _checkpointed(graph: Graph, cluster: Cluster) -> tuple[float, Placement, bool] | None:
    """Contiguous stages (:func:`stage_placement`), checkpointed (:func:`checkpointed`)."""
    if not _checkpoint_candidates(graph).size:
        return None
    return checkpointed(graph, cluster, stage_placement(graph, cluster))


def recompute_placement(graph: Graph, cluster: Cluster) -> Placement | None:
    """Contiguous stages, checkpointed: the lowest-peak placement with a recompute set
    among a few (None where no node of ``graph`` may be recomputed); see
    :func:`_checkpointed`."""
    best = _checkpointed(graph, cluster)
    return None if best is None else best[1]


def recompute_certificate(graph: Graph, cluster: Cluster) -> Placement | None:
    """A placement with a recompute set shown by simulation to fit ``cluster``'s memory
    (:func:`recompute_placement`, when it fits), else None (which proves nothing)."""
    best = _checkpointed(graph, cluster)
    return None if best is None or best[2] else best[1]


def fit_certificate(graph: Graph, cluster: Cluster) -> tuple[str, Placement] | None:
    """The first placement shown by simulation to fit, and what it is: the resident
    bytes spread (:func:`fit_resident`), contiguous stages (:func:`stage_placement`),
    then contiguous stages with recomputation (:func:`recompute_certificate`); None when
    none of them fits."""
    found = _first_fit(graph, cluster)
    if found is not None:
        return found
    placement = recompute_certificate(graph, cluster)
    if placement is None:
        return None
    k = len(placement.recompute)
    return f"contiguous stages recomputing {k} forward node{'s' * (k != 1)}", placement
