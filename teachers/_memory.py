"""Memory feasibility and co-location groups for the teachers: one definition, shared.

A placement is *feasible* (README "Execution semantics", DESIGN §3) when every
co-location group of the graph is on one device and the simulator's peak on every device
(the resident ``param_bytes`` of its nodes for the whole run plus its live tensors)
stays within the device's ``memory``. The simulator is the judge: every check here that
ends a search simulates (:func:`~placegym.envs.sim.simulator.simulate`).

- :func:`~placegym.envs.analysis.memory.memory_may_bind`: whether *any* placement of the graph
  could exceed some device's memory (every parameter plus one copy of every output on
  the smallest device). Where not, nothing here changes a placement or simulates: every
  teacher's placement is what its rule gives, bit for bit.
- :func:`~placegym.envs.analysis.room.units`: the graph with its groups contracted: each group is
  one *unit*, each node outside a group its own; a unit's resident bytes go to one
  device together.
- :class:`~placegym.envs.analysis.room.Room` (and :func:`room_ties`, the rules' choice
  in it): the devices where a node leaves room for the rest: after the node (its
  whole group, when it opens one) goes there, the resident bytes of every unit not yet
  placed still pack into what the devices have left (each device's memory less a
  *reserve* for live tensors). The per-state rules of ``critical_path`` and
  ``heft_rule`` and HEFT's plan choose among those devices under memory pressure.
- :func:`reserve_room`: a rule's room per (graph, cluster): none when the rule's own
  placement is feasible (or none can be), else a room that keeps space for the live
  bytes of the rule's partial schedule (outputs awaiting consumers, stashes, working
  sets to come; with checkpointed recomputation where a training step provably needs
  it), with tensor reserves raised on the devices the simulator reports over memory, a
  few rounds at most (none when no round gets there: the rule's own answers stand).
- :func:`make_feasible`: a plan over memory repaired: whole units moved off the devices
  over memory to those with the most headroom, simulated after each round; then the
  resident bytes spread worst-fit decreasing (the certificate of
  :func:`~placegym.envs.analysis.memory.fit_resident`), then contiguous stages
  (:func:`~placegym.envs.analysis.memory.stage_placement`), then, on a training step,
  checkpointed recomputation, each simulated. The plan teachers (HEFT, NEST, METIS) end
  with it, and so do the rule teachers' placements (``critical_path``, ``heft_rule``)
  where their rollout is still over memory.
- :func:`priced_makespans`, :func:`priced`: a placement's price for the searches that
  rank placements (lookahead, best_list, canonical plans): its makespan when feasible,
  else that plus the serial upper bound, so a feasible placement always ranks first.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from placegym.envs.analysis.memory import (
    CHECKPOINT_EVERY,
    FIT_CANDIDATES,
    Room,
    checkpoints,
    memory_may_bind,
    stage_placement,
    stash_infeasibility,
    units,
)
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.reward import oom_makespan
from placegym.envs.sim.simulator import Schedule, simulate, simulate_batch
from placegym.teachers._common import TIE_RTOL, ties

__all__ = [
    "Room",
    "infeasibility",
    "make_feasible",
    "oom_price",
    "priced",
    "priced_makespans",
    "reserve_room",
    "rule_room",
    "with_room",
]

#: Rounds of :func:`reserve_room` (reserves raised by the simulated excess) at most.
RESERVE_ROUNDS = 6
#: Rounds of unit moves of :func:`make_feasible` before it spreads the resident bytes.
REPAIR_ROUNDS = 8
#: The most simulator calls :func:`make_feasible` makes: its check, its rounds of moves,
#: each certificate of :data:`~placegym.envs.analysis.memory.FIT_CANDIDATES` in two
#: orders, and two placements checkpointed at each spacing of
#: :data:`~placegym.envs.analysis.memory.CHECKPOINT_EVERY`.
MAX_REPAIR_CALLS = 1 + REPAIR_ROUNDS + 2 * len(FIT_CANDIDATES) + 2 * len(CHECKPOINT_EVERY)


def room_ties(
    room: Room,
    device: np.ndarray,
    param_used: np.ndarray,
    v: int,
    legal: np.ndarray,
    score: np.ndarray,
) -> np.ndarray:
    """The devices of least ``score`` among the ``legal`` ones (ids) with room for
    ``v``, with their ties (:func:`~placegym.teachers.base.ties`); the tie set over
    every legal device when none has room. Devices are checked in ascending score,
    so most calls check one or two."""
    if len(legal) <= 1:
        return ties(score, legal, best="min")
    fits = room.checker(device, param_used, v)
    ok: dict[int, bool] = {}
    for d in legal[np.argsort(score[legal], kind="stable")].tolist():
        ok[d] = fits(d)
        if ok[d]:
            target = float(score[d])
            break
    else:
        return ties(score, legal, best="min")
    tol = TIE_RTOL * max(abs(target), 1e-300)
    near = legal[np.abs(score[legal] - target) <= tol].tolist()
    return np.array(sorted(d for d in near if (ok[d] if d in ok else fits(d))), dtype=np.int64)


def reserve_room(
    graph: Graph,
    cluster: Cluster,
    roll: Callable[[Room | None], Placement],
    rounds: int = RESERVE_ROUNDS,
    *,
    live: bool = True,
) -> Room | None:
    """The :class:`Room` a rule needs on ``graph`` and ``cluster`` (module docstring).

    None when nothing can exceed memory (``memory_may_bind``), when no placement can fit
    (the resident bytes exceed the memory of all devices together), or when
    ``roll(None)``, the rule's own placement, is feasible. Else rooms of growing tensor
    reserves until ``roll(room)`` is feasible: that room; None (the rule's own answers)
    when none is after ``rounds``.

    With ``live`` (the teachers') the rooms keep room for the live bytes of the rule's
    partial schedule (:class:`~placegym.envs.analysis.room.Room`), starting from no
    reserve; each round a device over memory raises its reserve by its simulated excess.
    Where a training step provably fits no placement without recompute
    (:func:`~placegym.envs.analysis.memory.stash_infeasibility`), the rooms recompute the
    checkpoints of :func:`~placegym.envs.analysis.memory.checkpoints` (each spacing of
    :data:`~placegym.envs.analysis.memory.CHECKPOINT_EVERY` in turn, ``rounds`` rounds
    each): the rule's placement then
    carries that recompute set (:func:`with_room`); elsewhere the resident-bytes rooms
    below compete and the faster fitting rollout's room is kept (:func:`rule_room`).
    Without ``live`` (an agent's mask, which does not track live bytes) the rooms count
    resident bytes only and each round a device over memory reserves the larger of its
    reserve plus its excess and the live tensors at its simulated peak.
    """
    return rule_room(graph, cluster, roll, rounds, live=live)[0]


def rule_room(
    graph: Graph,
    cluster: Cluster,
    roll: Callable[[Room | None], Placement],
    rounds: int = RESERVE_ROUNDS,
    *,
    live: bool = True,
) -> tuple[Room | None, bool]:
    """:func:`reserve_room`'s room and whether the rule's placement under it is known to
    fit: True where memory cannot bind, the rule's own placement fits or a room made it
    fit; False where no placement can fit or no round got there.

    With ``live`` two kinds of room compete: the live rooms (first the one that fits,
    of the recompute sets in turn where recomputation is provably needed) and, where it
    is not, the resident-bytes rooms of ``live=False``; the room whose rollout fits and
    simulates faster wins (ties: the live one), so the rule under memory pressure is
    never slower than with resident bytes alone."""
    if not memory_may_bind(graph, cluster):
        return None, True
    if float(graph.param_bytes.sum()) > float(cluster.memory.sum()):
        return None, False
    if not simulate(graph, cluster, roll(None)).oom:
        return None, True
    found: list[tuple[float, Room]] = []
    needs_recompute = live and stash_infeasibility(graph, cluster) is not None
    if live:
        sets = [checkpoints(graph, k) for k in CHECKPOINT_EVERY] if needs_recompute else [None]
        for recompute in sets:
            fit = _rounds(graph, cluster, roll, rounds, True, recompute)
            if fit is not None:
                found.append(fit)
                break
    if not needs_recompute:
        fit = _rounds(graph, cluster, roll, rounds, False, None)
        if fit is not None:
            found.append(fit)
    if not found:
        return None, False
    return min(found, key=lambda f: f[0])[1], True


def _rounds(
    graph: Graph,
    cluster: Cluster,
    roll: Callable[[Room | None], Placement],
    rounds: int,
    live: bool,
    recompute: np.ndarray | None,
) -> tuple[float, Room] | None:
    """The first room of growing reserves whose rollout fits, and its makespan (None
    after ``rounds``): live rooms raise a device's reserve by its simulated excess,
    resident-bytes rooms to at least the live tensors at its simulated peak."""
    reserve = np.zeros(cluster.num_devices)
    for _ in range(rounds):
        room = Room(graph, cluster, reserve, live=live, recompute=recompute)
        schedule = simulate(graph, cluster, with_room(roll(room), room))
        if not schedule.oom:
            return schedule.makespan, room
        over = schedule.memory_excess > 0
        if live:
            reserve = np.where(over, reserve + schedule.memory_excess, reserve)
            continue
        # a device over memory keeps free at least the live tensors it peaked with
        tensors = schedule.peak_memory - np.bincount(
            schedule.device[: graph.num_nodes],
            weights=graph.param_bytes,
            minlength=cluster.num_devices,
        )
        raised = np.maximum(reserve + schedule.memory_excess, tensors)
        reserve = np.where(over, raised, reserve)
    return None


def with_room(placement: Placement, room: Room | None) -> Placement:
    """``placement`` recomputing the ``room``'s recompute set (unchanged without one)."""
    if room is None or not room.recompute.size:
        return placement
    return Placement(placement.device, placement.order, room.recompute)


def _move_units(schedule: Schedule, dev: np.ndarray) -> bool:
    """One repair round in place on ``dev``: off each device over memory (largest excess
    first), units (the smallest that covers what is left of the excess, else the
    largest) to the device with the most headroom that takes them. Whether any moved."""
    rc, cluster = schedule.recomputation, schedule.cluster
    graph = schedule.graph if rc is None else rc.source  # the caller's nodes, not N + k
    u = units(graph)
    slack = cluster.memory - schedule.peak_memory
    unit_dev = dev[u.first]
    moved = False
    for d in np.argsort(-schedule.memory_excess, kind="stable").tolist():
        need = float(schedule.memory_excess[d])
        if need <= 0:
            break
        mine = [k for k in np.flatnonzero(unit_dev == d).tolist() if u.nbytes[k] > 0]
        while need > 0 and mine:
            nb = u.nbytes[mine]
            cover = np.flatnonzero(nb >= need)
            k = mine[int(cover[np.argmin(nb[cover])])] if len(cover) else mine[int(np.argmax(nb))]
            mine.remove(k)
            room = slack.copy()
            room[d] = -np.inf
            e = int(np.argmax(room))
            if room[e] < u.nbytes[k]:
                continue
            dev[u.members[k]] = e
            unit_dev[k] = e
            slack[e] -= u.nbytes[k]
            need -= float(u.nbytes[k])
            moved = True
    return moved


def make_feasible(
    graph: Graph,
    cluster: Cluster,
    placement: Placement,
    sim: Callable[[Graph, Cluster, Placement], Schedule] = simulate,
) -> Placement:
    """``placement``, or a repaired one that is feasible (module docstring).

    Every simulation goes through ``sim`` (default
    :func:`~placegym.envs.sim.simulator.simulate`): a search passes one that counts its calls.

    Without ``memory_may_bind``, or when ``placement`` fits (one simulation), it is returned
    as it is. Else, keeping its priority order: up to :data:`REPAIR_ROUNDS` rounds of
    whole-unit moves off the devices over memory (each simulated), then the resident
    bytes spread worst-fit decreasing, then contiguous stages (which spread the stash of
    a training step: :func:`~placegym.envs.analysis.memory.stage_placement`), each in its
    order and then in the certificate's (descending b-level); then, on a training step,
    recomputation: ``placement``'s own devices and order (when it recomputes nothing),
    then contiguous stages, each with the recompute set of
    :func:`~placegym.envs.analysis.memory.checkpoints` per device at each spacing of
    :data:`~placegym.envs.analysis.memory.CHECKPOINT_EVERY` in turn (fewest recomputed
    first). The first feasible placement found is returned, else ``placement`` itself
    (its rule's answer, over memory: callers can tell with :func:`infeasibility`).
    ``placement`` must keep every group together.
    """
    if not memory_may_bind(graph, cluster):
        return placement
    schedule = sim(graph, cluster, placement)
    if not schedule.oom:
        return placement
    dev = placement.device.copy()
    for _ in range(REPAIR_ROUNDS):
        if not _move_units(schedule, dev):
            break
        candidate = Placement(dev.copy(), placement.order, placement.recompute)
        schedule = sim(graph, cluster, candidate)
        if not schedule.oom:
            return candidate
    for _, make in FIT_CANDIDATES:
        cert = make(graph, cluster)
        if cert is None:
            continue
        # the rule's order first, then the certificate's (descending b-level, ties by id)
        for order in (placement.order, cert.order):
            candidate = Placement(cert.device, order, placement.recompute)
            if not sim(graph, cluster, candidate).oom:
                return candidate
    # recomputation, where nothing above fits: the plan's own devices checkpointed, then
    # contiguous stages checkpointed (the recompute certificate)
    bases = [placement] if not placement.recompute.size else []
    bases.append(stage_placement(graph, cluster))
    for base in bases:
        for k in CHECKPOINT_EVERY:
            nodes = checkpoints(graph, k, base.device)
            if not nodes.size:
                break
            candidate = Placement(base.device, base.order, nodes)
            if not sim(graph, cluster, candidate).oom:
                return candidate
    return placement


def infeasibility(graph: Graph, cluster: Cluster, placement: Placement) -> str | None:
    """Why ``placement`` is infeasible (a split group, or the simulated peak over a
    device's memory: :attr:`~placegym.envs.sim.simulator.Schedule.infeasibility`), None when
    it is feasible. Without ``memory_may_bind`` only the groups are checked."""
    try:
        placement.check(graph, cluster)
    except ValueError as e:
        return str(e)
    if not memory_may_bind(graph, cluster):
        return None
    return simulate(graph, cluster, placement).infeasibility


def oom_price(graph: Graph, cluster: Cluster, makespan: float | np.ndarray) -> float | np.ndarray:
    """The price of a placement over memory of simulated ``makespan``: that makespan
    plus the serial upper bound (:data:`~placegym.envs.mdp.reward.oom_makespan`, which no
    feasible placement exceeds): above every feasible makespan, and among placements over
    memory, the faster the cheaper."""
    return oom_makespan(graph, cluster) + makespan


def priced(graph: Graph, cluster: Cluster, placement: Placement, makespan: float) -> float:
    """``makespan``, or :func:`oom_price` of it when ``placement`` is over memory (one
    simulation, only when ``memory_may_bind``)."""
    if memory_may_bind(graph, cluster) and simulate(graph, cluster, placement).oom:
        return float(oom_price(graph, cluster, float(makespan)))
    return float(makespan)


def priced_makespans(
    graph: Graph,
    cluster: Cluster,
    devices: np.ndarray,
    orders: np.ndarray,
    recompute: np.ndarray | None = None,
) -> np.ndarray:
    """``(B,)`` prices of placements (``(B, n)`` rows; noiseless, priority dispatch, one
    thread; each recomputing ``recompute``, none by default): the simulated makespan of
    a feasible one, :func:`oom_price` of it for one over memory, so that ranked by price
    every feasible placement beats every infeasible one. Memory is only simulated when
    ``memory_may_bind`` (prices are the makespans otherwise)."""
    check = memory_may_bind(graph, cluster)
    result = simulate_batch(
        graph, cluster, devices, orders, memory=check, threads=1, recompute=recompute
    )
    makespan = np.asarray(result.makespan, dtype=np.float64)
    oom = np.asarray(result.oom, dtype=bool)
    if check and oom.any():
        makespan = np.where(oom, oom_price(graph, cluster, makespan), makespan)
    return makespan
