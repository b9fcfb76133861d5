"""The exact search behind :mod:`placegym.teachers.optimal` (method in that module's docstring).

A depth-first branch and bound over the simulator's own event loop (DESIGN §3, priority
dispatch, no noise). Its states are the simulator's states between two rounds; its
decisions are the only free choices of the rules once a placement is given:

- the device of a node, taken *lazily* when its first producer finishes (sources at
  time 0): before that moment the device influences nothing, so states that differ only
  in later choices are shared (and merged by the transposition table);
- the ready node an idle device starts at a dispatch.

Every quantity is computed with the simulator's floating-point operations in the same
order (``t + dur``, ``max(t, channel free) + (latency + bytes / bandwidth)``), so a leaf's
makespan is exactly what :func:`~placegym.envs.simulate` returns for the recovered
placement.
"""

from __future__ import annotations

import time
from array import array

from placegym.teachers._optimal_instance import InstanceTables, allowed_devices, resident

__all__ = ["ROUNDING_TOLERANCE", "Search", "SearchTimeout"]

#: Relative optimality tolerance when float additions may round (``InstanceTables.exact`` False):
#: bounds that add several floats can be off by a few ulps, so subtrees whose bound is
#: within this fraction of the incumbent are cut. 0 when arithmetic is exact.
ROUNDING_TOLERANCE = 1e-12


#: Relative margin by which the weighted load bound (products of floats, never exact)
#: must exceed the incumbent to cut, so that its rounding can never cut an optimum.
WEIGHTED_MARGIN = 1e-9


class SearchTimeout(Exception):
    """Raised inside the search when its deadline passes; the incumbent stands."""


class _State:
    """The simulator's state between two rounds (mutable; copied once per round)."""

    __slots__ = (
        "chfree",
        "dev",
        "done",
        "events",
        "fin",
        "missing",
        "ready",
        "running",
        "t",
        "used",
    )

    def __init__(self, inst: InstanceTables) -> None:
        self.t = 0.0
        self.dev = [-1] * inst.n
        self.missing = [len(p) for p in inst.prods]
        self.ready = [0] * inst.nd  # bit mask of ready, unstarted nodes per device
        self.running = [-1] * inst.nd
        self.fin = [0.0] * inst.n
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, node, device)
        self.chfree = [0.0] * (inst.nd * inst.nd)
        self.done = 0  # bit mask of finished nodes
        self.used = 0  # bit mask of devices given some node

    def copy(self) -> _State:
        s = _State.__new__(_State)
        s.t = self.t
        s.dev = self.dev.copy()
        s.missing = self.missing.copy()
        s.ready = self.ready.copy()
        s.running = self.running.copy()
        s.fin = self.fin.copy()
        s.events = self.events.copy()
        s.chfree = self.chfree.copy()
        s.done = self.done
        s.used = self.used
        return s


_FINISH, _ARRIVE = 0, 1


class Search:
    """Depth-first branch and bound over rounds of the simulator (priority dispatch).

    Args:
        inst: the instance tables.
        incumbent: makespan of a known placement; only strictly better ones are recorded.
        deadline: ``time.perf_counter()`` value after which :meth:`run` gives up.
        memo_limit: most states kept in the transposition table (~250 bytes each).

    After :meth:`run`: ``best`` (the optimum when it returned True), ``best_dev`` and
    ``best_order`` (None when nothing beat ``incumbent``), ``nodes`` (states expanded).
    """

    def __init__(
        self,
        inst: InstanceTables,
        incumbent: float = float("inf"),
        *,
        deadline: float | None = None,
        memo_limit: int = 1_000_000,
    ) -> None:
        self.inst = inst
        self.best = incumbent
        self.best_dev: list[int] | None = None
        self.best_order: list[int] | None = None
        self.nodes = 0
        self.deadline = deadline
        self._ticks = 0
        self._order: list[int] = []  # dispatch sequence on the current path
        self._memo: set[bytes] = set()
        self._done_bytes = (inst.n + 7) // 8
        self._memo_limit = memo_limit
        self.tolerance = 0.0 if inst.exact else ROUNDING_TOLERANCE
        self._cut = incumbent * (1.0 - self.tolerance)  # prune when a bound reaches it
        # the weighted load bound multiplies: it only cuts with a margin over rounding
        self._weight_sum = sum(inst.weight or [0.0]) * (1.0 + WEIGHTED_MARGIN)

    def run(self) -> bool:
        """Search; True when the search space was exhausted (``best`` is optimal)."""
        inst = self.inst
        st = _State(inst)
        sources = [v for v in range(inst.n) if not inst.prods[v]]
        sources.sort(key=inst.prio.__getitem__, reverse=True)
        try:
            self._assign(st, [], sources, 0, [0.0] * inst.n)
        except SearchTimeout:
            return False
        return True

    # ------------------------------------------------------------------ decisions
    def _assign(
        self, st: _State, finished: list[int], todo: list[int], i: int, fin_lb: list[float]
    ) -> None:
        """Give a device to ``todo[i:]`` (nodes whose first producer finishes now);
        ``fin_lb``: finish bounds of every node at the start of the round."""
        if i == len(todo):
            self._release(st, finished, todo)
            return
        v = todo[i]
        used = st.used
        for d in self._devices(st, v, fin_lb):
            st.dev[v] = d
            st.used = used | 1 << d
            self._assign(st, finished, todo, i + 1, fin_lb)
        st.dev[v] = -1
        st.used = used

    def _devices(self, st: _State, v: int, fin_lb: list[float]) -> list[int]:
        """Devices worth giving ``v`` now, most promising first.

        Symmetric devices are skipped (``new_devices``) and so is every device where a
        valid lower bound on the makespan reaches the incumbent: ``v``'s earliest finish
        there (device availability, its producers' finish bounds plus transfers; the
        simulator's own arithmetic) plus its tail (transfers to consumers that already
        have a device included); the device's committed work; the (weighted) average
        committed work over all devices.
        """
        inst = self.inst
        nd, dur, comm, dev, chfree = inst.nd, inst.dur, inst.comm, st.dev, st.chfree
        cut = self._cut
        avail, load = self._commitments(st)
        free = [u for u in range(inst.n) if dev[u] < 0 and u != v]
        total = sum(avail) + sum(load) + sum(inst.dur_min[u] for u in free)
        wt = inst.weight
        if wt is not None:
            wtotal = sum(wt[d] * (avail[d] + load[d]) for d in range(nd))
            wtotal += sum(inst.weighted_min[u] for u in free)
            wcut = cut * self._weight_sum
        scored = []
        cands = inst.new_devices[st.used]
        if inst.mates[v] or inst.memory is not None:
            cands = allowed_devices(inst, st.dev, v, cands)
        for d in cands:
            x = avail[d]
            for p in inst.prods[v]:
                a = fin_lb[p]
                dp = dev[p]
                if dp >= 0 and dp != d:
                    ch = dp * nd + d
                    if chfree[ch] > a:
                        a = chfree[ch]
                    a = a + comm[p][dp * nd + d]
                if a > x:
                    x = a
            w = dur[v][d]
            f = x + w
            q = inst.tail[v]
            for c in inst.cons[v]:
                dc = dev[c]
                if dc >= 0:
                    y = dur[c][dc] + inst.tail[c]
                    if dc != d:
                        y += comm[v][d * nd + dc]
                    if y > q:
                        q = y
            busy = avail[d] + load[d]
            if (
                f >= cut
                or f + q >= cut
                or busy + w >= cut
                or total + w >= cut * nd
                or (wt is not None and wtotal + wt[d] * w >= wcut)
            ):
                continue
            scored.append(((x if x > busy else busy) + w, d))
        scored.sort()
        return [d for _, d in scored]

    def _commitments(self, st: _State) -> tuple[list[float], list[float]]:
        """``(when each device is next free, its unstarted work)``."""
        dur, dev, fin = self.inst.dur, st.dev, st.fin
        started = st.done
        avail = [st.t] * self.inst.nd
        for d, r in enumerate(st.running):
            if r >= 0:
                started |= 1 << r
                avail[d] = fin[r]
        load = [0.0] * self.inst.nd
        for u, d in enumerate(dev):
            if d >= 0 and not started >> u & 1:
                load[d] += dur[u][d]
        return avail, load

    def _release(self, st: _State, finished: list[int], todo: list[int]) -> None:
        """Apply rule 4 for the nodes finishing now, then dispatch (rule 6)."""
        inst = self.inst
        nd = inst.nd
        self._tick()
        s = st.copy()
        t = s.t
        for v in finished:
            a = s.dev[v]
            sent = 0
            for c in inst.cons[v]:
                b = s.dev[c]
                if b == a:
                    s.missing[c] -= 1
                    if s.missing[c] == 0:
                        s.ready[a] |= 1 << c
                elif not sent >> b & 1:
                    sent |= 1 << b
                    ch = a * nd + b
                    s0 = s.chfree[ch] if s.chfree[ch] > t else t
                    arr = s0 + inst.comm[v][ch]
                    s.chfree[ch] = arr
                    s.events.append((arr, _ARRIVE, v, b))
        if not finished:  # the root: sources are ready at 0
            for v in todo:
                s.ready[s.dev[v]] |= 1 << v
        idle = [d for d in range(nd) if s.running[d] < 0 and s.ready[d]]
        if todo and sum(s.ready[d].bit_count() > 1 for d in idle) and self._pruned(s):
            return  # one check of the new devices instead of one per dispatch choice
        self._dispatch(s, idle, 0)

    def _dispatch(self, s: _State, idle: list[int], i: int) -> None:
        """Let idle device ``idle[i]`` start each of its ready nodes in turn.

        Interchangeable nodes (``twins_before``) must start in index order, rounds
        compared (not devices, whose order within a round a relabelling may change): a
        node is skipped when a lower twin can no longer start in this round, and a round
        that started a node before a lower twin is dropped at its end.
        """
        inst = self.inst
        twins = inst.twins_before
        started = s.done
        for x in s.running:
            if x >= 0:
                started |= 1 << x
        if i == len(idle):
            if all(started & twins[x] == twins[x] for x in s.running if x >= 0):
                self._between(s)
            return
        later = 0  # nodes that may still start in this round
        for j in range(i + 1, len(idle)):
            later |= s.ready[idle[j]]
        d = idle[i]
        r = s.ready[d]
        cands = [v for v in range(inst.n) if r >> v & 1 and not twins[v] & ~(started | later)]
        cands.sort(key=inst.prio.__getitem__, reverse=True)
        t = s.t
        for v in cands:
            s.ready[d] = r ^ (1 << v)
            s.running[d] = v
            f = t + inst.dur[v][d]
            s.fin[v] = f
            s.events.append((f, _FINISH, v, d))
            self._order.append(v)
            self._dispatch(s, idle, i + 1)
            s.events.pop()
            self._order.pop()
        s.ready[d] = r
        s.running[d] = -1

    # ------------------------------------------------------------------ states
    def _between(self, s: _State) -> None:
        """A state after a dispatch: leaf, pruned, already seen, or the next round."""
        self.nodes += 1
        self._tick()
        events = s.events
        if not events:
            makespan = max(s.fin, default=0.0)
            if makespan < self.best:
                self.best = makespan
                self._cut = makespan * (1.0 - self.tolerance)
                self.best_dev = s.dev.copy()
                self.best_order = self._order.copy()
            return
        t_next = min(events)[0]
        key = self._key(s, t_next)
        if key in self._memo:
            return
        if len(self._memo) < self._memo_limit:
            self._memo.add(key)
        if self._pruned(s):
            return
        self._next_round(s, t_next)

    def _tick(self) -> None:
        """Count work; every 256 calls (from the first), check the deadline."""
        self._ticks += 1
        if (
            self.deadline is not None
            and not (self._ticks - 1) & 255
            and time.perf_counter() > self.deadline
        ):
            raise SearchTimeout

    def _key(self, s: _State, t_next: float) -> bytes:
        """Everything the future of ``s`` depends on, packed: finished nodes, devices of
        the others, pending events, channel free times that still matter (> t_next)."""
        done = s.done
        mates = self.inst.mates  # a finished node's device still binds its group's others
        devs = bytes([0 if done >> v & 1 and not mates[v] else d + 1 for v, d in enumerate(s.dev)])
        flat = [float(len(s.events))]
        for time_, kind, v, d in sorted(s.events):
            flat.append(time_)
            flat.append(float((kind * self.inst.n + v) * self.inst.nd + d))
        for ch, c in enumerate(s.chfree):
            if c > t_next:
                flat.append(float(ch))
                flat.append(c)
        if self.inst.memory is not None:  # the future's room depends on finished nodes too
            flat.extend(resident(self.inst, s.dev))
        return done.to_bytes(self._done_bytes, "little") + devs + array("d", flat).tobytes()

    def _next_round(self, st: _State, t: float) -> None:
        """Pop every event at ``t`` (one round), then branch on the new assignments."""
        inst = self.inst
        s = st.copy()
        s.t = t
        keep = []
        finished = []
        for e in s.events:
            if e[0] != t:
                keep.append(e)
            elif e[1] == _FINISH:
                v = e[2]
                finished.append(v)
                s.done |= 1 << v
                s.running[e[3]] = -1
            else:
                u, b = e[2], e[3]
                for c in inst.cons[u]:
                    if s.dev[c] == b:
                        s.missing[c] -= 1
                        if s.missing[c] == 0:
                            s.ready[b] |= 1 << c
        s.events = keep
        todo = sorted({c for v in finished for c in inst.cons[v] if s.dev[c] < 0})
        todo.sort(key=inst.prio.__getitem__, reverse=True)
        fin_lb = self._finish_bounds(s)[3] if todo else s.fin
        self._assign(s, finished, todo, 0, fin_lb)

    def _pruned(self, s: _State) -> bool:
        """Whether a valid lower bound on every completion of ``s`` reaches the cut."""
        lb, avail, est, fin_lb, pending = self._finish_bounds(s)
        if lb >= self._cut:
            return True
        tail = self._tails(s, pending)
        if self._device_bound(s, avail, est, tail, pending):
            return True
        return self.inst.nd > 1 and self._channel_bound(s, fin_lb, tail) >= self._cut

    def _finish_bounds(
        self, s: _State
    ) -> tuple[float, list[float], list[float], list[float], list[int]]:
        """``fin_lb[v]``: a lower bound on each unstarted node's finish, propagated in
        topological order with the simulator's arithmetic (never above the true finish,
        rounding included): start >= device availability and >= every input's arrival (a
        producer's finish bound, plus ``max(., channel free) + transfer`` when both
        devices are known and differ); a node without a device takes its best device.

        Returns ``(max finish bound, per-device availability, start bounds, finish bounds,
        unstarted nodes in topological order)``.
        """
        inst = self.inst
        nd, comm, dur = inst.nd, inst.comm, inst.dur
        dev, fin, done, chfree = s.dev, s.fin, s.done, s.chfree
        lb = 0.0
        started = done
        avail = [s.t] * nd
        for d, r in enumerate(s.running):
            if r >= 0:
                started |= 1 << r
                avail[d] = fin[r]
                if fin[r] > lb:
                    lb = fin[r]
        est = [s.t] * inst.n
        for time_, kind, u, b in s.events:
            if kind == _ARRIVE:
                for c in inst.cons[u]:
                    if dev[c] == b and est[c] < time_:
                        est[c] = time_
        fin_lb = fin.copy()
        pending = []
        for v in inst.topo:
            if started >> v & 1:
                continue
            pending.append(v)
            d = dev[v]
            if d < 0:
                e, f = self._best_device(s, v, avail, fin_lb)
            else:
                e = est[v] if est[v] > avail[d] else avail[d]
                for u in inst.prods[v]:
                    if done >> u & 1:
                        continue
                    x = fin_lb[u]
                    du = dev[u]
                    if du >= 0 and du != d:
                        ch = du * nd + d
                        if chfree[ch] > x:
                            x = chfree[ch]
                        x = x + comm[u][ch]
                    if x > e:
                        e = x
                f = e + dur[v][d]
            est[v] = e
            fin_lb[v] = f
            if f > lb:
                lb = f
        return lb, avail, est, fin_lb, pending

    def _tails(self, s: _State, pending: list[int]) -> list[float]:
        """Longest path after each unstarted node finishes: known transfers, fastest
        durations for nodes without a device."""
        inst = self.inst
        nd, dev, dur, comm = inst.nd, s.dev, inst.dur, inst.comm
        tail = [0.0] * inst.n
        for v in reversed(pending):
            d = dev[v]
            q = 0.0
            for c in inst.cons[v]:
                dc = dev[c]
                if dc < 0:
                    x = inst.dur_min[c] + tail[c]
                elif d < 0 or dc == d:
                    x = dur[c][dc] + tail[c]
                else:
                    x = comm[v][d * nd + dc] + dur[c][dc] + tail[c]
                if x > q:
                    q = x
            tail[v] = q
        return tail

    def _device_bound(
        self,
        s: _State,
        avail: list[float],
        est: list[float],
        tail: list[float],
        pending: list[int],
    ) -> bool:
        """Per device: its unstarted nodes' earliest start + their work + their shortest
        tail; per node without a device: the least, over devices, of that plus its own
        work; overall: committed plus fastest unplaced work, averaged over devices (and
        weighted by speed). Sums of floats: the cut already allows for their rounding."""
        inst = self.inst
        nd, dev, dur, cut = inst.nd, s.dev, inst.dur, self._cut
        inf = float("inf")
        load = [0.0] * nd
        first = [inf] * nd
        last = [inf] * nd
        total = sum(avail)
        for v in pending:
            d = dev[v]
            if d < 0:
                total += inst.dur_min[v]
                continue
            load[d] += dur[v][d]
            if est[v] < first[d]:
                first[d] = est[v]
            if tail[v] < last[d]:
                last[d] = tail[v]
        for d in range(nd):
            total += load[d]
            if first[d] < inf:
                x = (avail[d] if avail[d] > first[d] else first[d]) + load[d] + last[d]
                if x >= cut:
                    return True
        if total >= cut * nd:
            return True
        for v in pending:  # a node without a device adds its work to one device's
            if dev[v] < 0:
                t = tail[v]
                x = min(
                    avail[d] + load[d] + dur[v][d] + (t if t < last[d] else last[d])
                    for d in range(nd)
                )
                if x >= cut:
                    return True
        wt = inst.weight
        if wt is None:
            return False
        wtotal = sum(wt[d] * (avail[d] + load[d]) for d in range(nd))
        wtotal += sum(inst.weighted_min[v] for v in pending if dev[v] < 0)
        return wtotal >= cut * self._weight_sum

    def _channel_bound(self, s: _State, fin_lb: list[float], tail: list[float]) -> float:
        """Transfers still to come on one channel run one after another (rule 3): the last
        arrives at >= max(channel free, earliest of their producers' finishes) + their
        total transfer time, and a consumer on the receiving device then still runs."""
        inst = self.inst
        nd, dev, dur, comm = inst.nd, s.dev, inst.dur, inst.comm
        inf = float("inf")
        busy = [0.0] * (nd * nd)
        first = [inf] * (nd * nd)
        after = [inf] * (nd * nd)
        for u in range(inst.n):
            a = dev[u]
            if a < 0 or s.done >> u & 1:
                continue
            sent = 0
            for c in inst.cons[u]:
                b = dev[c]
                if b < 0 or b == a:
                    continue
                ch = a * nd + b
                if not sent >> b & 1:
                    sent |= 1 << b
                    busy[ch] += comm[u][ch]
                    if fin_lb[u] < first[ch]:
                        first[ch] = fin_lb[u]
                x = dur[c][b] + tail[c]
                if x < after[ch]:
                    after[ch] = x
        lb = 0.0
        for ch in range(nd * nd):
            if busy[ch] > 0.0:
                x = s.chfree[ch] if s.chfree[ch] > first[ch] else first[ch]
                x = x + busy[ch] + after[ch]
                if x > lb:
                    lb = x
        return lb

    def _best_device(
        self, s: _State, v: int, avail: list[float], fin_lb: list[float]
    ) -> tuple[float, float]:
        """Lower bounds on the start and finish of ``v`` (no device yet), any device."""
        inst = self.inst
        nd, dev, chfree, comm = inst.nd, s.dev, s.chfree, inst.comm
        best_e = best_f = float("inf")
        for d in range(nd):
            e = avail[d]
            for u in inst.prods[v]:  # finished ones only this round: fin_lb is their finish
                x = fin_lb[u]
                du = dev[u]
                if du >= 0 and du != d:
                    ch = du * nd + d
                    if chfree[ch] > x:
                        x = chfree[ch]
                    x = x + comm[u][ch]
                if x > e:
                    e = x
            if e < best_e:
                best_e = e
            f = e + inst.dur[v][d]
            if f < best_f:
                best_f = f
        return best_e, best_f
