"""The optimal teacher: proven minimum-makespan placements of small graphs.

For a graph of at most 12 nodes on at most 4 devices, :func:`solve` returns a placement
(device per node *and* priority order) whose simulated makespan (DESIGN §3, priority
dispatch, no noise) is the minimum over all ``D**n * n!`` placements that keep every
co-location group on one device, and proves it. It is the yardstick of everyone's
optimality gap.

Groups and memory: a node whose group has a member with a device gets that device (its
group's unplaced nodes follow it), so no placement searched splits a group. Memory is
not constrained by default: the optimum may exceed a device's memory
(``simulate(...).oom`` tells). With ``memory=True``, under memory pressure (some
placement's resident bytes exceed a device's memory) a device is only given a node when
its resident bytes plus the node's (and its group's unplaced nodes') fit: the resident
part of the simulator's peak, a necessary condition of feasibility, pruned exactly
(device relabellings must then keep memory, and the transposition table tells states
apart by their resident bytes), so the result is the minimum over placements whose
resident bytes fit. Live tensors stay unconstrained even then (they depend on the whole
schedule; ``simulate(...).oom`` tells), and where no placement's resident bytes fit, the
result is the unconstrained optimum.

Method (``placegym.teachers._optimal_search``):

1. **Orders reduce to dispatch choices.** Fix the devices. Call a *choice schedule* a run
   of the rules of DESIGN §3 in which, at every dispatch of an idle device with several
   ready nodes, *any* one of them may start. Priority dispatch is one such run, so every
   placement's schedule is a choice schedule. Conversely, given a choice schedule, rank
   the nodes by when they were dispatched (round by round, devices in index order within
   a round; zero-delay events make several rounds at one instant and they keep their
   order). Simulating with that order makes the same choice at every dispatch, by
   induction: the states agree up to the dispatch, and every other node ready there
   starts later, so it ranks after the chosen one. Ranks also order the finishes applied
   in one round (rule 4), but that order changes nothing: a device finishes at most one
   node per round (its next node can only start in that round's dispatch), so the
   transfers enqueued in one round are on distinct channels (rule 3), and the
   decrements of missing inputs commute. Hence the schedules of all priority orders are
   exactly the choice schedules, and the search branches on dispatch choices (a handful
   per round) instead of ``n!`` orders; the returned order is the dispatch sequence,
   which reproduces the optimum exactly (the search uses the simulator's floating-point
   operations in the same order, and the result is re-simulated as a check).
2. **Devices are chosen lazily**, when a node's first producer finishes (sources at time
   0): rule 4 needs the consumers' devices then, and nothing earlier depends on them.
   Partial schedules that differ only in devices chosen later are one search state.
3. **Symmetry.** A device permutation that leaves every duration and transfer time
   unchanged (identical devices with identical links to all others) maps a placement to
   one with identical times; device indices only order independent devices and
   channels. A node may go to any device already holding a node, or to one unused device
   per orbit of the permutations that fix every used device (on a fully symmetric
   cluster: the lowest unused index, i.e. first-occurrence labelling). Likewise nodes
   with the same producers, consumers, durations and transfer times are interchangeable:
   they start in index order (compared by round, which device relabelling keeps).
4. **Bounds** (a subtree is cut when one reaches the incumbent): the earliest finish of
   every pending node, propagated in topological order with the simulator's own
   arithmetic (device availability, producers' finish bounds plus ``max(., channel
   free) + transfer`` where both devices are known, a node without a device on its best
   device); per device, its pending nodes' earliest start plus their work plus their
   shortest tail; per node without a device, the least over devices of that plus its
   work; the average over devices of committed plus fastest pending work, also weighted
   by device speed; per channel, the transfers still to come, serialized. Each device
   choice is bounded as it is made (the node's earliest finish there plus its tail with
   the transfers to consumers already placed, the device's work, the averages), and a
   round's choices once more together before the dispatch choices multiply them. Every
   bound holds for every completion under the rules, so no optimum is cut.
5. **Transposition table.** Two paths reaching the same state (finished nodes, devices
   of the others, time-stamped pending events, channel free times that still matter) have
   the same completions; the second is cut (up to a million states, ~250 bytes each).
   The incumbent starts as the best of simple placements (all on the fastest device, the
   critical-path and HEFT teachers when installed); branches are tried best first
   (earliest finish for devices, b-level for dispatch).

Exactness: when every duration and transfer time is a multiple of one power of two and
all sums fit in 53 bits (integer-like toy instances), every addition is exact and the
result is the exact optimum (``tolerance == 0``). Otherwise bounds that add several
floats may be off by a few ulps, so the proof holds up to ``tolerance`` (1e-12): no
placement is faster by more than that fraction of the makespan.

Measured with :func:`solve` (2-core machine shared with other jobs; seed teachers
included): per size, 20 instances (random layered DAGs with DOPPLER-like block costs on
P100 devices, homogeneous and heterogeneous, and random DAGs of mixed density and cost
scales), all proven: 8 nodes on 2-4 devices median 0.003 s, max 0.2 s; 10 nodes median
0.01 s, max 0.1 s; 12 nodes on 2-4 devices median 0.03-0.05 s, max 1 s. Harder families
at 12 nodes / 4 devices: a fork-join with 10 parallel branches 0.3-7 s, random dense or
nearly independent DAGs (partition-like proofs on unequal devices) up to ~7 s.
"""

from __future__ import annotations

import time
from typing import ClassVar, NamedTuple

import numpy as np

from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.sim.simulator import simulate
from placegym.teachers._optimal_instance import InstanceTables, make_instance
from placegym.teachers._optimal_search import Search
from placegym.teachers.base import PlanTeacher

__all__ = ["MAX_DEVICES", "MAX_NODES", "OptimalResult", "OptimalTeacher", "solve"]

#: Default size limits: the search is exponential in both.
MAX_NODES = 12
MAX_DEVICES = 4

#: Teachers whose placements seed the incumbent when they are installed.
SEED_TEACHERS = ("critical_path", "heft")


class OptimalResult(NamedTuple):
    """Outcome of :func:`solve`.

    Attributes:
        placement: the best placement found (devices and priority order).
        makespan: its simulated makespan (priority dispatch, no noise), in seconds.
        nodes: search states expanded.
        proven: True when the search finished: ``makespan`` is the optimum (up to
            ``tolerance``); False when the time limit stopped it (the incumbent).
        seconds: wall-clock time of the solve.
        tolerance: relative optimality tolerance of the proof: 0.0 when the instance's
            arithmetic is exact, else 1e-12 (floating-point rounding of the bounds).
    """

    placement: Placement
    makespan: float
    nodes: int
    proven: bool
    seconds: float
    tolerance: float


def _check_size(graph: Graph, cluster: Cluster, max_nodes: int, max_devices: int) -> None:
    if graph.num_nodes > max_nodes:
        raise ValueError(
            f"graph: the optimal teacher's exact search handles at most {max_nodes} nodes "
            f"(pass max_nodes= to raise the limit), got {graph.num_nodes}"
        )
    if cluster.links != "pair":
        raise ValueError(
            f"cluster.links: the optimal teacher's exact search models one channel per "
            f"device pair ('pair') only, got {cluster.links!r}"
        )
    if cluster.num_devices > max_devices:
        raise ValueError(
            f"cluster: the optimal teacher's exact search handles at most {max_devices} "
            f"devices (pass max_devices= to raise the limit), got {cluster.num_devices}"
        )


def _seed_placements(graph: Graph, cluster: Cluster, dur: np.ndarray) -> list[Placement]:
    """Simple placements whose best makespan starts the search as the incumbent."""
    n = graph.num_nodes
    fastest = int(np.argmin(dur.sum(axis=0))) if n else 0
    seeds = [Placement(device=np.full(n, fastest), order=graph.topological_order.copy())]
    from placegym.teachers import get_teacher  # lazy: the registry names this module

    for name in SEED_TEACHERS if n else ():
        try:
            teacher = get_teacher(name)
        except ImportError:  # not written (yet) in this checkout
            continue
        seeds.append(teacher.place(graph, cluster))
    return seeds


def _resident_fits(
    graph: Graph, cluster: Cluster, placement: Placement, inst: InstanceTables
) -> bool:
    """Whether ``placement``'s resident bytes fit every device (always, when the search
    does not constrain memory: ``inst.memory`` None)."""
    if inst.memory is None:
        return True
    used = np.bincount(placement.device, weights=graph.param_bytes, minlength=inst.nd)
    return bool((used <= cluster.memory).all())


def solve(
    graph: Graph,
    cluster: Cluster,
    *,
    time_limit: float | None = None,
    max_nodes: int = MAX_NODES,
    max_devices: int = MAX_DEVICES,
    memory: bool = False,
) -> OptimalResult:
    """The minimum-makespan placement of ``graph`` on ``cluster``, with proof.

    Args:
        graph: the graph (at most ``max_nodes`` nodes).
        cluster: the cluster (at most ``max_devices`` devices).
        time_limit: seconds after which the search stops and returns its incumbent with
            ``proven=False``; None searches to the end.
        max_nodes: size limit (the search is exponential in the nodes).
        max_devices: size limit (and in the devices).
        memory: constrain resident bytes to fit every device (module docstring).

    Returns:
        An :class:`OptimalResult`; ``simulate(graph, cluster, result.placement).makespan``
        equals ``result.makespan`` exactly.

    Raises:
        ValueError: the graph or cluster exceeds the size limits (naming the limit), or
            the cluster's ``links`` are not ``"pair"``.
    """
    _check_size(graph, cluster, max_nodes, max_devices)
    start = time.perf_counter()
    inst = make_instance(graph, cluster, memory=memory)
    seeds = _seed_placements(graph, cluster, np.array(inst.dur).reshape(inst.n, inst.nd))
    spans = [simulate(graph, cluster, p).makespan for p in seeds]
    placement = seeds[int(np.argmin(spans))]
    # the incumbent: the best seed the search could return (resident bytes that fit)
    fit = [s for s, p in zip(spans, seeds) if _resident_fits(graph, cluster, p, inst)]
    deadline = None if time_limit is None else start + float(time_limit)
    search = Search(inst, min(fit, default=float("inf")), deadline=deadline)
    proven = search.run()
    if search.best_dev is None and not fit:  # no placement's resident bytes fit
        return solve(
            graph, cluster, time_limit=time_limit, max_nodes=max_nodes, max_devices=max_devices
        )
    if fit and len(fit) < len(spans):  # a seed that fits beats any that does not
        placement = min(
            (p for p in seeds if _resident_fits(graph, cluster, p, inst)),
            key=lambda p: simulate(graph, cluster, p).makespan,
        )
    if search.best_dev is not None and search.best_order is not None:
        placement = Placement(
            device=np.array(search.best_dev, dtype=np.int64),
            order=np.array(search.best_order, dtype=np.int64),
        )
    makespan = simulate(graph, cluster, placement).makespan
    assert makespan == search.best, (makespan, search.best)  # the search mirrors the rules
    return OptimalResult(
        placement=placement,
        makespan=makespan,
        nodes=search.nodes,
        proven=proven,
        seconds=time.perf_counter() - start,
        tolerance=search.tolerance,
    )


class OptimalTeacher(PlanTeacher):
    """Plans the proven minimum-makespan placement (see the module docstring).

    Args:
        time_limit: seconds per solve; past it the best placement found so far is used.
        max_nodes, max_devices: size limits; larger instances raise ``ValueError``.
        memory: constrain resident bytes to fit every device (module docstring; off by
            default: the yardstick is the unconstrained optimum).
    """

    name: ClassVar[str] = "optimal"

    def __init__(
        self,
        *,
        time_limit: float | None = None,
        max_nodes: int = MAX_NODES,
        max_devices: int = MAX_DEVICES,
        memory: bool = False,
    ) -> None:
        super().__init__()
        self.time_limit = time_limit
        self.max_nodes = max_nodes
        self.max_devices = max_devices
        self.memory = bool(memory)

    def solve(self, graph: Graph, cluster: Cluster) -> OptimalResult:
        """:func:`solve` with this teacher's settings (not cached)."""
        return solve(
            graph,
            cluster,
            time_limit=self.time_limit,
            max_nodes=self.max_nodes,
            max_devices=self.max_devices,
            memory=self.memory,
        )

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """The proven optimal placement (see the class docstring)."""
        return self.solve(graph, cluster).placement

    def __repr__(self) -> str:
        return (
            f"OptimalTeacher(time_limit={self.time_limit}, max_nodes={self.max_nodes}, "
            f"max_devices={self.max_devices}" + (", memory=True)" if self.memory else ")")
        )
