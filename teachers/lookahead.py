"""One-step lookahead over a list rule: the rollout algorithm (pilot method) as a teacher.

A single-pass rule (critical_path, heft_rule) decides each device from an estimate of the
partial schedule; it never sees what the decision costs the rest of the graph on the
work-conserving simulator. :class:`LookaheadTeacher` asks, for every legal device of the
selected node, what the *whole* placement would take if the node went there and the base
rule placed everything after it, and answers with the devices of least simulated
makespan. This is Bertsekas' rollout algorithm (the pilot method of list scheduling) with
the base rule as its heuristic: per PLC state one exact simulation per legal device.

Because the completions follow the base rule deterministically (first of each tie set, as
:func:`~placegym.teachers.base.complete`) and SEL follows the base rule's first node too,
the completion through the base rule's own device at a state *is* the completion chosen at
the previous state; the best completion's makespan therefore never rises along
:meth:`LookaheadTeacher.place`, and the lookahead's placement is never slower than the
base rule's (the cost-improvement property; ``tests/test_teachers.py`` checks it).

**Fortified** (``starts``, Bertsekas' fortified rollout): the teacher also keeps an
*incumbent*, the best complete placement it knows that extends the decisions so far. It
starts as the fastest of the base rule's own placement and the device maps of the
``starts`` teachers (e.g. NEST, METIS, single_device), each run in the base rule's
selection order, the order SEL follows (selection depends on the placed set only, not on
devices). Each legal device is priced by the better of the base rule's completion and
the incumbent's own completion (the incumbent itself on its device; with ``moves``, on
every device: the incumbent with the node moved there, the rest kept); the completion
the chosen device is priced by becomes the incumbent. The incumbent's own device is
priced at the incumbent's makespan, so the least price never rises and the placement is
never slower than any starting placement (in the simulator's noiseless makespan; the
first incumbent is the fastest feasible start if one is, and a start whose devices the
memory mask forbids on the way can be lost). Where the rule misses a
communication-bound structure (all on one device, NEST's stages), the fortified
lookahead keeps it and improves on it.

**Following** (``follow``): run in the base rule's order a start loses its own
priorities (HEFT runs ``heft_rule``'s device map in its planned-start order, sometimes
faster). Bertsekas' fortified rollout follows the incumbent's whole trajectory, its
selections included: with ``follow`` every start keeps its own order
(:func:`sel_order`), and SEL takes the incumbent's next node, unless the base rule's own
completion with the base rule's node (one simulator call, only where the two nodes
differ) is faster than the incumbent, in which case it takes the base rule's node and
the least price still falls. The incumbent is then a completion of every state SEL
reaches, so the placement is never slower than any start as it is.

**Memory and groups.** A completion's price is its simulated makespan when it is
feasible and, when its peak exceeds a device's memory, that makespan plus the serial
upper bound (:func:`~placegym.teachers._memory.priced_makespans`; the environment scores
an infeasible episode with that bound, which no feasible placement exceeds): a feasible
completion always beats an infeasible one, and among infeasible ones the faster wins.
So neither the chosen completion nor the incumbent is ever over memory while a feasible
one is known, and since the least price never rises, the placement is feasible whenever
the first state's prices include a feasible completion (the base rule's own placement,
or, fortified, a feasible start). Legal devices are the state's, so a co-location group
stays on its first member's device; with ``moves`` the node's whole group moves with it.
Completions through the base rule keep its groups and its room under memory pressure
(:meth:`~placegym.teachers.critical_path.CriticalPathTeacher.room`), compiled or not.

Cost: :meth:`~LookaheadTeacher.place` makes one simulator call per legal device per node
(``n * D`` calls, plus the starts and, following, at most one a node;
:attr:`LookaheadTeacher.calls` counts them) and as many base-rule
completions; answers are cached per state, so imitating it with teacher roll-in pays
each state once. With ``heft_rule`` or ``critical_path`` as the base the completions run
compiled (:mod:`placegym.teachers._rule_kernel`, the same placements), 45-70 times
faster than through :class:`~placegym.envs.mdp.state.PlacementState` on graphs with and
without groups (``make bench``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.reward import oom_makespan
from placegym.envs.mdp.state import PlacementState
from placegym.teachers._completions import COMPILED, compiled_completions
from placegym.teachers._memory import make_feasible, priced_makespans
from placegym.teachers.base import StepTeacher, complete, ties
from placegym.teachers.critical_path import CriticalPathTeacher

__all__ = ["FortifiedLookaheadTeacher", "Incumbent", "LookaheadTeacher"]

#: The starting placements of :class:`FortifiedLookaheadTeacher` (the single-pass placers).
FORTIFY = ("critical_path", "heft", "nest", "metis", "round_robin", "single_device")


class Incumbent(NamedTuple):
    """A complete placement that extends a state's decisions (its ``order`` starts with
    the state's placed nodes in selection order) and its simulated makespan."""

    device: np.ndarray
    order: np.ndarray
    makespan: float


#: Incumbents, and priced states' per-device completions, that a fortified lookahead
#: keeps per (graph, cluster) pair: enough for the episodes decoded in lockstep; a state
#: whose incumbent was dropped is replayed from its nearest kept ancestor.
_INCUMBENTS, _ROWS = 256, 128


def _least(scores: np.ndarray) -> np.ndarray:
    """The devices of least finite score (exact tie set, ascending)."""
    return ties(scores, np.flatnonzero(np.isfinite(scores)), best="min")


def sel_order(graph: Graph, order: np.ndarray) -> np.ndarray:
    """``order`` as a selection order: Kahn's algorithm taking, among the nodes whose
    producers are all taken, the one ranked first by ``order`` (its priority). An order
    that is already topological comes back unchanged (the same priorities, so the same
    simulated makespan); another becomes the topological order nearest it."""
    import heapq

    order = np.asarray(order, dtype=np.int64)
    n = graph.num_nodes
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    e = graph.edges
    if not len(e) or (rank[e[:, 0]] < rank[e[:, 1]]).all():
        return order.copy()
    indeg = graph.in_degree.tolist()
    ptr, idx = graph.consumer_csr
    rank_l = rank.tolist()
    heap = [(rank_l[v], v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for c in idx[ptr[v] : ptr[v + 1]].tolist():
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, (rank_l[c], c))
    return np.asarray(out, dtype=np.int64)


class LookaheadTeacher(StepTeacher):
    """Per selected node, the devices whose base-rule completion simulates fastest.

    Rule:
        - **SEL**: the first node of the base rule's tie set: the node its completions
          select next (following another node of the tie set would void the
          cost-improvement property). Following (``follow``): the incumbent's next
          node, unless the base rule's completion with its own node is faster.
        - **PLC**: for each legal device ``d``: a copy of the state with the node on
          ``d``, completed by the base rule (first of each tie set); the legal devices of
          least simulated makespan (:func:`~placegym.envs.sim.simulator.simulate_batch`,
          noiseless, priority dispatch) form the tie set. Fortified (``starts``): each
          device's price is the lesser of that and the incumbent's completion there
          (module docstring).
        - **Memory and groups**: a completion over memory is priced above every
          feasible makespan, so the placement is feasible whenever a completion of the
          empty state is (the base rule's own placement or, fortified, a start); legal
          devices are the state's, so groups stay whole (module docstring).

    :meth:`place` rolls the rule out taking the first device of least makespan (exact
    ties only, whatever ``rtol``); its makespan is at most the base rule's (module
    docstring).

    Args:
        base: a registered step teacher to look ahead with (default ``heft_rule``).
        rtol: the PLC tie set holds every legal device within this relative margin of the
            least makespan (0: exact ties, :data:`~placegym.teachers.base.TIE_RTOL`). A
            margin leaves the base rule's own device among the labels wherever deviating
            gains less than it, so an imitator learns the deviations that matter.
        cache_size: PLC answers kept per (graph, cluster) pair (the state's decisions so
            far are the key; the least recently used go first); 0 keeps none.
        starts: registered teachers whose device maps (in the base rule's selection
            order), with the base rule's own placement, seed the incumbent (the module
            docstring's fortified rollout); empty and ``moves`` False: the plain
            lookahead.
        moves: fortified, also price every legal device by the incumbent with the node
            moved there (one more simulator call per legal device).
        follow: fortified, SEL follows the incumbent: the next node is the incumbent's
            next one (the base rule's where a state has left its order), and the starts
            keep their own orders (:func:`sel_order`). The placement is then never slower
            than any start as it is, priorities included (module docstring).
        compiled: complete with the compiled copy of the base rule
            (:mod:`placegym.teachers._rule_kernel`, the same placements number for number)
            when the base is ``heft_rule`` or ``critical_path``; ``False`` (or another
            base) completes through :class:`~placegym.envs.mdp.state.PlacementState`.

    Raises:
        ValueError: ``base`` is not a registered :class:`~placegym.teachers.base.StepTeacher`
            or is ``lookahead`` itself; a start is not a registered teacher or is a
            lookahead; ``follow`` without ``starts`` or ``moves``.
    """

    name: ClassVar[str] = "lookahead"

    def __init__(
        self,
        base: str = "heft_rule",
        rtol: float = 0.0,
        cache_size: int = 200_000,
        compiled: bool = True,
        starts: Sequence[str] = (),
        moves: bool = False,
        follow: bool = False,
    ) -> None:
        from placegym.teachers import get_teacher, list_teachers, teacher_class

        if base == self.name:
            raise ValueError(f"base: expected a rule other than {self.name!r}, got {base!r}")
        rule = get_teacher(base)
        if not isinstance(rule, StepTeacher):
            raise ValueError(
                f"base: expected a step teacher (a per-state rule), got {base!r} "
                f"({type(rule).__name__})"
            )
        if not rtol >= 0:
            raise ValueError(f"rtol: expected a margin >= 0, got {rtol!r}")
        if isinstance(starts, str):
            starts = (starts,)
        for t in starts:
            if t not in list_teachers() or issubclass(teacher_class(t), LookaheadTeacher):
                raise ValueError(
                    f"starts: expected registered teachers other than a lookahead, got {t!r}"
                )
        self.starts = tuple(starts)
        self.moves = bool(moves)
        self.fortified = bool(self.starts) or self.moves
        if follow and not self.fortified:
            raise ValueError("follow: needs a fortified lookahead (starts or moves)")
        self.follow = bool(follow)
        self.base = base
        self.rtol = float(rtol)
        self.rule = rule
        # exact types only: a subclass may answer differently from the compiled rule
        self._kind = COMPILED.get(type(rule)) if compiled else None
        self.cache_size = cache_size
        self.calls = 0
        """Simulator calls made so far (one per completed candidate placement)."""
        self.observer: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None
        """Called with ``(devices, orders, makespans)`` (``(k, n)``, ``(k, n)``,
        ``(k,)``) after every batch of completions simulated: the complete placements
        behind the prices and their prices (noiseless, priority dispatch; one over
        memory priced above every feasible makespan, module docstring), e.g. for a
        search that counts them in its budget and keeps the best."""
        self._answers: IdentityCache[OrderedDict[tuple[int, bytes, bytes], np.ndarray]]
        self._answers = IdentityCache(lambda graph, cluster: OrderedDict(), size=64)
        # fortified: incumbents per SEL-phase state, completions per priced PLC state
        self._incumbents: IdentityCache[OrderedDict[tuple[bytes, bytes], Incumbent]]
        self._incumbents = IdentityCache(lambda graph, cluster: OrderedDict(), size=64)
        self._first: IdentityCache[Incumbent] = IdentityCache(self._start, size=64)
        # follow: SEL's choice per SEL-phase state where the incumbent leaves the rule
        self._picks: IdentityCache[OrderedDict[tuple[bytes, bytes], int]]
        self._picks = IdentityCache(lambda graph, cluster: OrderedDict(), size=64)
        self._rows: IdentityCache[OrderedDict[tuple[int, bytes, bytes], tuple]]
        self._rows = IdentityCache(lambda graph, cluster: OrderedDict(), size=64)
        # while a state is replayed, the caches grow instead of dropping what episodes in
        # flight still need; the replay's intermediate entries go afterwards
        self._replaying = False

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The first node of the base rule's SEL tie set (the completions' next node).

        With ``follow``, where the incumbent selects another node next: the base rule's
        node if the base rule's own completion of the state (one simulator call) is
        faster than the incumbent, else the incumbent's node (cached per state)."""
        pick = self.rule.select_actions(state)[:1]
        if not self.follow or state.done or state.selected >= 0:
            return pick
        inc = self.incumbent(state)
        v = int(inc.order[state.num_placed])
        if v == int(pick[0]) or not state.is_legal(v):
            return pick
        picks = self._picks(state.graph, state.cluster)
        key = self._placed_key(state)
        hit = picks.get(key)
        if hit is None:
            after = state.copy()
            after.select(int(pick[0]))
            own = self.rule.place_actions(after)[:1]
            hit = int(pick[0]) if self._base_completions(after, own)[2][0] < inc.makespan else v
            picks[key] = hit
            while len(picks) > max(self.cache_size, _INCUMBENTS):
                picks.popitem(last=False)
        return np.array([hit], dtype=np.int64)

    def incumbent(self, state: PlacementState) -> Incumbent:
        """The fortified lookahead's incumbent at ``state``'s placed nodes: the fastest
        start at the empty state, then the completion its chosen device was priced by.
        Only for a fortified teacher (``starts`` or ``moves``)."""
        if not self.fortified:
            raise ValueError("incumbent: this lookahead is not fortified (no starts, no moves)")
        k = state.num_placed
        if k == 0:
            return self._first(state.graph, state.cluster)
        incs = self._incumbents(state.graph, state.cluster)
        key = self._placed_key(state)
        hit = incs.get(key)
        if hit is not None:
            incs.move_to_end(key)
            return hit
        placed = np.asarray(state.order[:k], dtype=np.int64)
        devices = state.device[placed]
        # the parent state's completion for the device taken, if still kept
        parent = (int(placed[-1]), placed[:-1].tobytes(), devices[:-1].tobytes())
        row = self._rows(state.graph, state.cluster).get(parent)
        if row is not None:
            d = int(devices[-1])
            inc = Incumbent(row[0][d], row[1][d], float(row[2][d]))
            self._keep(incs, state, inc)
            return inc
        # else the nearest ancestor kept (the empty state's always is), then forward, each
        # step pricing its state; what the replay adds on the way is dropped after it,
        # and nothing is dropped for it (else episodes decoded in lockstep would drop
        # each other's parents and replay in turn, each from further back)
        j = k - 1
        while j > 0 and (placed[:j].tobytes(), devices[:j].tobytes()) not in incs:
            j -= 1
        s = PlacementState(state.graph, state.cluster, memory_mask=state.memory_mask)
        for i in range(j):
            s.select(int(placed[i]))
            s.place(int(devices[i]))
        rows = self._rows(state.graph, state.cluster)
        had_incs, had_rows = set(incs), set(rows)
        outer, self._replaying = self._replaying, True
        try:
            for i in range(j, k):
                s.select(int(placed[i]))
                self._child(s, int(devices[i]))
                s.place(int(devices[i]))
        finally:
            self._replaying = outer
        inc = incs[key]
        if not outer:
            for added in [x for x in incs if x not in had_incs]:
                del incs[added]
            for priced in [x for x in rows if x not in had_rows]:
                del rows[priced]
            self._keep(incs, state, inc)
        return inc

    def _start(self, graph: Graph, cluster: Cluster) -> Incumbent:
        """The fastest of the base rule's placement and the starts' device maps in its
        selection order (the empty state's incumbent); one that fits in memory if any
        does."""
        from placegym.teachers import get_teacher

        plans = [self.rule.place(graph, cluster)]
        plans += [get_teacher(t).place(graph, cluster) for t in self.starts]
        devices = np.stack([np.asarray(p.device, dtype=np.int64) for p in plans])
        if self.follow:
            # every start in its own order (SEL follows the incumbent's)
            orders = np.stack([sel_order(graph, p.order) for p in plans])
        else:
            # every start in the base rule's selection order (its own placement's), the
            # order SEL follows: the incumbent is then a completion of every state on the way
            orders = np.tile(np.asarray(plans[0].order, dtype=np.int64), (len(plans), 1))
        self.calls += len(plans)
        # priced: a start over memory loses to any that fits
        makespan = priced_makespans(
            graph, cluster, devices, orders, self.recompute(graph, cluster)
        )
        if self.observer is not None:
            self.observer(devices, orders, makespan)
        i = int(np.argmin(makespan))
        return Incumbent(devices[i], orders[i], float(makespan[i]))

    def _keep(self, incs: OrderedDict, state: PlacementState, inc: Incumbent) -> None:
        incs[self._placed_key(state)] = inc
        while len(incs) > _INCUMBENTS and not self._replaying:
            incs.popitem(last=False)

    def _child(self, state: PlacementState, device: int) -> None:
        """Keep the incumbent after ``state``'s selected node goes to ``device``: the
        completion that priced that device."""
        rows = self._rows(state.graph, state.cluster)
        key = self._key(state)
        hit = rows.get(key)
        if hit is None:
            self._scores(state)  # prices the state (or finds it priced), rows included
            hit = rows.get(key)
            if hit is None:  # priced earlier, its rows since dropped: price it again
                self._price(state)
                hit = rows[key]
        devices, orders, makespan = hit
        child = Incumbent(devices[device], orders[device], float(makespan[device]))
        after = state.copy()
        after.place(device)
        self._keep(self._incumbents(state.graph, state.cluster), after, child)

    def completion_makespans(self, state: PlacementState) -> tuple[np.ndarray, np.ndarray]:
        """``(legal, makespan)``: the legal devices of ``state.selected`` and the simulated
        makespan of the base rule's completion after placing it on each; fortified, the
        lesser of that and the incumbent's completion there (the prices)."""
        if state.selected < 0:
            raise ValueError("state: phase is 'select', no node awaits a device")
        if self.fortified:
            return self._price(state)
        legal = np.flatnonzero(state.place_mask())
        return legal, self._base_completions(state, legal)[2]

    def _base_completions(
        self, state: PlacementState, legal: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The base rule's completions after the selected node on each of ``legal``, and
        their simulated makespans (counted, and shown to the observer)."""
        graph, cluster = state.graph, state.cluster
        if self._kind is not None and isinstance(self.rule, CriticalPathTeacher):
            devices, orders = compiled_completions(state, legal, self._kind, self.rule)
        else:
            n = state.graph.num_nodes
            devices = np.empty((len(legal), n), dtype=np.int64)
            orders = np.empty((len(legal), n), dtype=np.int64)
            for i, d in enumerate(legal.tolist()):
                s = state.copy()
                s.place(d)
                done = complete(s, self.rule)
                devices[i] = done.device
                orders[i] = done.order
        self.calls += len(legal)
        makespan = priced_makespans(
            graph, cluster, devices, orders, self.recompute(graph, cluster)
        )
        if self.observer is not None:
            self.observer(devices, orders, makespan)
        return devices, orders, makespan

    def _price(self, state: PlacementState) -> tuple[np.ndarray, np.ndarray]:
        """Fortified prices of ``state``'s legal devices; keeps each device's completion
        (the incumbent if that device is chosen)."""
        inc = self.incumbent(state)
        legal = np.flatnonzero(state.place_mask())
        devices, orders, makespan = self._base_completions(state, legal)
        k, v = state.num_placed, state.selected
        prefix = np.asarray(state.order[:k], dtype=np.int64)
        rest = inc.order[k:]
        # the incumbent is a completion here: it selected the state's nodes in its order
        follows = len(rest) > 0 and rest[0] == v and np.array_equal(inc.order[:k], prefix)
        # moves: the incumbent with the node on each legal device; else the incumbent
        # itself, where it is a completion of this state
        suffix = legal if self.moves else legal[legal == inc.device[v]] if follows else legal[:0]
        if len(suffix):
            taken = np.zeros(state.graph.num_nodes, dtype=bool)
            taken[prefix] = True
            taken[v] = True
            order = np.concatenate([prefix, [v], inc.order[~taken[inc.order]]])
            sdev = np.tile(inc.device, (len(suffix), 1))
            # the node moves with its group (its placed members are on the one legal
            # device already)
            g = int(state.graph.group[v])
            sdev[:, state.graph.groups[g] if g >= 0 else [v]] = suffix[:, None]
            sord = np.tile(order, (len(suffix), 1))
            exact = suffix == inc.device[v] if follows else np.zeros(len(suffix), dtype=bool)
            sms = np.full(len(suffix), inc.makespan)
            if (~exact).any():  # the incumbent itself needs no simulation
                self.calls += int((~exact).sum())
                sms[~exact] = priced_makespans(
                    state.graph,
                    state.cluster,
                    sdev[~exact],
                    sord[~exact],
                    self.recompute(state.graph, state.cluster),
                )
                if self.observer is not None:
                    self.observer(sdev[~exact], sord[~exact], sms[~exact].copy())
            at = np.searchsorted(legal, suffix)
            better = sms <= makespan[at]  # ties keep the incumbent's line
            devices[at[better]] = sdev[better]
            orders[at[better]] = sord[better]
            makespan[at[better]] = sms[better]
        n, d = state.graph.num_nodes, state.cluster.num_devices
        all_dev = np.zeros((d, n), dtype=np.int64)
        all_ord = np.zeros((d, n), dtype=np.int64)
        all_ms = np.full(d, np.inf)
        all_dev[legal], all_ord[legal], all_ms[legal] = devices, orders, makespan
        rows = self._rows(state.graph, state.cluster)
        rows[self._key(state)] = (all_dev, all_ord, all_ms)
        while len(rows) > _ROWS and not self._replaying:
            rows.popitem(last=False)
        return legal, makespan

    @staticmethod
    def _key(state: PlacementState) -> tuple[int, bytes, bytes]:
        """A PLC-phase state's key: its selected node and :meth:`_placed_key`."""
        return (state.selected, *LookaheadTeacher._placed_key(state))

    @staticmethod
    def _placed_key(state: PlacementState) -> tuple[bytes, bytes]:
        """The key of ``state``'s decisions: its placed nodes in selection order and
        their devices (an incumbent's, a pick's)."""
        placed = np.asarray(state.order[: state.num_placed], dtype=np.int64)
        return (placed.tobytes(), state.device[placed].tobytes())

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The legal devices of least simulated completion makespan (within ``rtol``)."""
        scores = self._scores(state)
        if self.rtol == 0:
            return _least(scores)
        legal = np.flatnonzero(np.isfinite(scores))
        return legal[scores[legal] <= scores[legal].min() * (1.0 + self.rtol)]

    def place_costs(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` price of the base rule's completion after each device (inf where
        illegal): its simulated makespan, above every feasible makespan when it is over
        memory (module docstring); the cost-to-go a cost-sensitive imitator weighs its
        misses by."""
        return self._scores(state).copy()

    def recompute(self, graph: Graph, cluster: Cluster) -> np.ndarray | None:
        """The recompute set every completion and placement carries: the base rule's
        room's (:meth:`~placegym.teachers.critical_path.CriticalPathTeacher.room`; a
        training step that provably fits no placement without recompute), else None."""
        room_of = getattr(self.rule, "room", None)
        room = room_of(graph, cluster) if room_of is not None else None
        return room.recompute if room is not None and room.recompute.size else None

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """Roll the rule out from the empty state, first device of least makespan,
        carrying :meth:`recompute`; repaired
        (:func:`~placegym.teachers._memory.make_feasible`) where still over memory."""
        state = PlacementState(graph, cluster)
        price = 0.0
        while not state.done:
            state.select(int(self.select_actions(state)[0]))
            scores = self._scores(state)
            d = int(_least(scores)[0])
            price = float(scores[d])  # the last one is the placement's own price
            state.place(d)
        placement = state.to_placement()
        rc = self.recompute(graph, cluster)
        if rc is not None:
            placement = Placement(placement.device, placement.order, rc)
        if price >= oom_makespan(graph, cluster):  # priced over memory
            return make_feasible(graph, cluster, placement)
        return placement

    def _scores(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` completion makespan per device, inf where illegal (cached per state)."""
        answers = self._answers(state.graph, state.cluster) if self.cache_size > 0 else None
        key = None
        if answers is not None:
            key = self._key(state)
            hit = answers.get(key)
            if hit is not None:
                answers.move_to_end(key)
                return hit
        legal, makespan = self.completion_makespans(state)
        scores = np.full(state.cluster.num_devices, np.inf)
        scores[legal] = makespan
        if answers is not None and key is not None:
            answers[key] = scores
            while len(answers) > self.cache_size:
                answers.popitem(last=False)
        return scores

    def __repr__(self) -> str:
        extra = f", starts={self.starts!r}" if self.starts else ""
        extra += ", moves=True" if self.moves else ""
        extra += ", follow=True" if self.follow else ""
        return f"LookaheadTeacher(base={self.base!r}, rtol={self.rtol!r}{extra})"


class FortifiedLookaheadTeacher(LookaheadTeacher):
    """The fortified lookahead over ``heft_rule`` with the single-pass placers'
    placements as starts (:data:`FORTIFY`): ``LookaheadTeacher(starts=FORTIFY)`` under
    its own name, for the benchmark's ``--teachers`` (module docstring). Never slower
    than ``heft_rule`` or any of their device maps in ``heft_rule``'s selection order
    (noiseless; module docstring on memory); ``n * D`` + 7 simulator calls a placement."""

    name: ClassVar[str] = "fortified_lookahead"

    def __init__(self, **kwargs: Any) -> None:
        # keyword arguments only, so that ``starts`` cannot also come by position
        kwargs.setdefault("starts", FORTIFY)
        super().__init__(**kwargs)
