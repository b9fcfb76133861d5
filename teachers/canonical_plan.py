"""Label-invariant imitation of whole plans (anneal, NEST, the best placement found so far).

A plan's device labels are arbitrary among symmetric devices: a plan that puts a layer
on device 2 is as good as the same plan with devices 2 and 3 exchanged. Imitating its
labels literally asks the learner to guess a permutation it cannot see, so
:class:`CanonicalPlanTeacher` answers PLC *up to the cluster's symmetries*: as the
learner's episode proceeds it maps the plan's labels to the learner's devices by first
use, and a plan label not mapped yet may go to any learner device that is still free of
mapped labels and is interchangeable with it.

SEL follows the plan's priority order *per device*: under work-conserving priority
dispatch a node's rank only competes with nodes on its own device, so the tie set is
every frontier node that comes first, in plan rank, among all the unselected nodes
planned on its device (the frontier node of lowest plan rank when there is none: a plan
order that is not topological).

Mapping, recomputed from the state at every PLC query (``D`` small loops):

- walk the placed nodes in selection order; plan label ``p = plan[v]`` is mapped to the
  learner's device ``d = state.device[v]`` the first time ``p`` meets a learner device
  that is not mapped yet and is *compatible* with ``p``;
- ``p`` and ``d`` are compatible when some automorphism of the cluster (a device
  permutation preserving speed, memory, memory bandwidth, launch overhead and every
  pair's network level; enumerated once per cluster of at most
  :data:`MAX_ENUMERATED_DEVICES` devices) agrees with the mapping so far and sends ``p``
  to ``d``. On larger clusters ``d`` must instead be among the unmapped devices of fewest
  mismatches (different attributes, or a mapped pair ``p' -> d'`` with
  ``level(p, p') != level(d, d')``).

PLC tie set for the selected node of plan label ``p``: ``{map[p]}`` when mapped (and
legal); else the legal unmapped devices compatible with ``p`` (the legal devices of
earliest start when every legal device is mapped).
The learner's own deviations (DAgger roll-in) are absorbed by the mapping, so labels
stay meaningful in every state it visits.

:meth:`CanonicalPlanTeacher.offer` replaces a graph's plan by a better placement
(self-imitation / expert iteration: the best placement found so far).
"""

from __future__ import annotations

import itertools
from typing import ClassVar

import numpy as np

from placegym.envs import Cluster, Graph, Placement, simulate
from placegym.envs.core.cache import IdentityCache
from placegym.envs.mdp.state import PlacementState
from placegym.teachers._memory import oom_price, priced
from placegym.teachers.base import Teacher, ties

__all__ = ["CanonicalPlanTeacher", "device_mapping"]


def _signature(cluster: Cluster) -> np.ndarray:
    """``(D, 5)`` per-device attributes that must match for two devices to swap."""
    return cluster.device_traits


def _mismatch(
    p: int, d: int, mapping: dict[int, int], sig: np.ndarray, level: np.ndarray
) -> float:
    """How far mapping plan label ``p`` to device ``d`` is from a symmetry: a large
    constant when their attributes differ, plus the number of mapped pairs ``p' -> d'``
    whose network level differs (``level(p, p') != level(d, d')``, either direction)."""
    cost = 0.0 if np.array_equal(sig[p], sig[d]) else 1e6
    for q, e in mapping.items():
        cost += float(level[p, q] != level[d, e]) + float(level[q, p] != level[e, d])
    return cost


#: Clusters up to this many devices get their automorphism group enumerated.
MAX_ENUMERATED_DEVICES = 8


def _automorphisms(cluster: Cluster) -> np.ndarray | None:
    d = cluster.num_devices
    if d > MAX_ENUMERATED_DEVICES:
        return None
    perms = np.array(list(itertools.permutations(range(d))), dtype=np.int64).reshape(-1, d)
    sig, level = _signature(cluster), cluster.pair_level
    ok = (sig[perms] == sig[None]).all(axis=(1, 2))
    ok &= (level[perms[:, :, None], perms[:, None, :]] == level[None]).all(axis=(1, 2))
    return perms[ok]


_AUTOMORPHISMS = IdentityCache(_automorphisms, size=16)


def automorphisms(cluster: Cluster) -> np.ndarray | None:
    """``(K, D)`` every device permutation that preserves device attributes and network
    levels (identity included), or None beyond :data:`MAX_ENUMERATED_DEVICES` devices
    (computed once per cluster object)."""
    return _AUTOMORPHISMS(cluster)


def _best_free(
    p: int,
    free: list[int],
    mapping: dict[int, int],
    sig: np.ndarray,
    level: np.ndarray,
    auts: np.ndarray | None = None,
) -> list[int]:
    """The devices of ``free`` that ``p`` may map to: the images of ``p`` under the
    automorphisms that agree with ``mapping`` when the group is known, else those of
    smallest :func:`_mismatch`."""
    if not free:
        return []
    if auts is not None:
        ok = np.ones(len(auts), dtype=bool)
        for q, e in mapping.items():
            ok &= auts[:, q] == e
        images = set(auts[ok, p].tolist()) & set(free)
        if images:
            return sorted(images)
    cost = np.array([_mismatch(p, d, mapping, sig, level) for d in free])
    return sorted(np.asarray(free)[cost <= cost.min()].tolist())


def device_mapping(state: PlacementState, plan_device: np.ndarray) -> dict[int, int]:
    """Plan label -> learner device, by first compatible use (see the module docstring)."""
    cluster = state.cluster
    sig, level = _signature(cluster), cluster.pair_level
    placed = np.asarray([v for v in state.order if state.device[v] >= 0], dtype=np.int64)
    mapping: dict[int, int] = {}
    if not len(placed):
        return mapping
    labels = plan_device[placed]
    mine = state.device[placed]
    _, first = np.unique(labels, return_index=True)
    all_devices, auts = range(cluster.num_devices), automorphisms(cluster)
    for idx in np.sort(first):  # labels in order of first use
        p = int(labels[idx])
        used = set(mapping.values())
        free = [d for d in all_devices if d not in used]
        best = set(_best_free(p, free, mapping, sig, level, auts))
        for d in dict.fromkeys(mine[labels == p].tolist()):
            if d in best:
                mapping[p] = int(d)
                break
    return mapping


class CanonicalPlanTeacher(Teacher):
    """Answers SEL and PLC from a per-graph plan, PLC up to device symmetries.

    Args:
        source: a teacher whose :meth:`~placegym.teachers.base.Teacher.place` gives the
            plan of a graph (e.g. ``anneal``, ``nest``); computed once per (graph, cluster)
            object pair and kept.
        select: answer SEL with this teacher's tie sets instead of the plan's order
            (e.g. ``critical_path``: a plan's device map carries most of its value, its
            order little, and a b-level order is easy to learn); None follows the plan.

    Memory and groups: the plan is the source's (its class docstring says how it treats
    them). Labels map through device permutations that keep every device attribute,
    memory included, so the image of a feasible plan is feasible; PLC answers are legal
    devices of the state (a node of a co-location group with a member placed gets that
    member's device), and :meth:`offer` never lets a placement over memory replace a
    feasible plan.
    """

    name: ClassVar[str] = "canonical_plan"

    def __init__(self, source: Teacher, select: Teacher | None = None) -> None:
        self.source = source
        self.select = select
        # (plan, its simulated makespan) per (graph, cluster), the source's until offered
        self._plans = IdentityCache(self._source_plan, size=None)

    def _source_plan(self, graph: Graph, cluster: Cluster) -> tuple[Placement, float]:
        plan = self.source.place(graph, cluster)
        schedule = simulate(graph, cluster, plan)
        if schedule.oom:
            return plan, float(oom_price(graph, cluster, schedule.makespan))
        return plan, schedule.makespan

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The current plan of ``graph`` on ``cluster``."""
        return self._plans(graph, cluster)[0]

    def has_plan(self, graph: Graph, cluster: Cluster) -> bool:
        """Whether the plan of ``graph`` has been computed (or offered) already."""
        return self._plans.get(graph, cluster) is not None

    def plan_makespan(self, graph: Graph, cluster: Cluster) -> float:
        """Simulated makespan of the current plan of ``graph`` (priced above every
        feasible makespan when it is over memory: :func:`~placegym.teachers._memory.
        priced`)."""
        return self._plans(graph, cluster)[1]

    def offer(self, graph: Graph, cluster: Cluster, placement: Placement, makespan: float) -> bool:
        """Adopt ``placement`` (of simulated ``makespan``) as the plan if it is better;
        returns whether it was adopted. A placement over memory is priced above every
        feasible makespan (one simulation under memory pressure), so it never replaces a
        feasible plan; one that splits a co-location group is refused (``ValueError``)."""
        placement.check(graph, cluster)
        makespan = priced(graph, cluster, placement, makespan)
        if makespan < self.plan_makespan(graph, cluster):
            self._plans.put(graph, cluster, value=(placement, float(makespan)))
            return True
        return False

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The select teacher's tie set, else the frontier nodes first in plan rank on
        their device."""
        if self.select is not None:
            return self.select.select_actions(state)
        plan = self.place(state.graph, state.cluster)
        frontier = state.frontier()
        if len(frontier) == 0:
            raise ValueError(f"state: no frontier node to select (phase {state.phase!r})")
        left = np.flatnonzero(state.rank < 0)  # not selected yet
        first = np.full(state.cluster.num_devices, np.iinfo(np.int64).max)
        np.minimum.at(first, plan.device[left], plan.rank[left])
        rank = plan.rank[frontier]
        best = frontier[rank == first[plan.device[frontier]]]
        return np.sort(best) if len(best) else np.array([frontier[np.argmin(rank)]])

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The learner's device of the node's plan label (see the module docstring)."""
        if state.selected < 0:
            raise ValueError("state: phase is 'select', no node awaits a device")
        plan = self.place(state.graph, state.cluster)
        legal = state.place_mask()
        mapping = device_mapping(state, plan.device)
        p = int(plan.device[state.selected])
        if p in mapping:
            if legal[mapping[p]]:
                return np.array([mapping[p]])
        else:
            used = set(mapping.values())
            free = [d for d in np.flatnonzero(legal).tolist() if d not in used]
            sig, level = _signature(state.cluster), state.cluster.pair_level
            best = _best_free(p, free, mapping, sig, level, automorphisms(state.cluster))
            if best:
                return np.array(best, dtype=np.int64)
        return ties(state.earliest_start(), np.flatnonzero(legal), best="min")

    def __repr__(self) -> str:
        return f"CanonicalPlanTeacher({self.source!r})"
