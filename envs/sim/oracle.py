"""A plain pure-Python (heapq) implementation of the simulator rules of DESIGN §3.

It is the oracle the compiled simulator is tested against and the baseline of the speed
benchmark, so it is written for clarity, the way one would without a compiler: dicts,
sets and a heap of ``(time, key, event)`` tuples. It returns the same :class:`Schedule`.

Links (rule 3, by the cluster's ``links``): with ``"pair"`` each ordered device pair
``(a, b)`` is a FIFO channel with its own free time. With ``"port"`` each device has a
send port and a receive port per network level, each with a free time; a transfer from
``a`` to ``b`` at level ``l`` enqueued at ``t`` starts at ``max(t, free time of ("send",
a, l), free time of ("recv", b, l))`` and sets both free times to its arrival. Either
way the start is fixed when the transfer is enqueued, in the enqueue order of rule 4
(finish time; at one time the finishes of one round before the next, in ascending rank;
one producer's transfers in ascending destination index), so the links are first-in
first-out and a transfer never waits for one enqueued after it.

A placement with a ``recompute`` set is run on the extended graph and placement of
:func:`placegym.envs.core.recompute.expand`, as :func:`placegym.envs.simulate` does; the
schedule's ``recomputation`` maps the recompute nodes back.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict

import numpy as np

from placegym.envs.core.costs import cost_table
from placegym.envs.core.placement import Placement, load_placement
from placegym.envs.core.recompute import expand
from placegym.envs.sim.simulator import (
    Dispatch,
    RngLike,
    Schedule,
    TransferTrace,
    _check_dispatch,
    _inputs,
    _noise_factors,
)

__all__ = ["simulate_oracle"]

_FINISH, _ARRIVE = 0, 1


def simulate_oracle(
    graph,
    cluster,
    placement,
    *,
    noise: float = 0.0,
    rng: RngLike = None,
    dispatch: Dispatch = "priority",
) -> Schedule:
    """Same contract as :func:`placegym.envs.simulate`, in plain Python."""
    g, c = _inputs(graph, cluster)
    p = placement if isinstance(placement, Placement) else load_placement(placement)
    p.check(g, c)
    fifo = _check_dispatch(dispatch)
    rc = None
    if p.recompute.size:
        rc = expand(g, c, p)
        g, p = rc.graph, rc.placement
    n = g.num_nodes
    factor = _noise_factors(float(noise), rng, (n,)).tolist() or [1.0] * n

    dev = p.device.tolist()
    rank = p.rank.tolist()
    flops, out_b, par_b = g.flops.tolist(), g.out_bytes.tolist(), g.param_bytes.tolist()
    consumers: list[list[int]] = [[] for _ in range(n)]
    producers: list[list[int]] = [[] for _ in range(n)]
    for u, v in g.edges.tolist():
        consumers[u].append(v)
        producers[v].append(u)
    dflops, dbw, launch = c.flops.tolist(), c.mem_bandwidth.tolist(), c.launch_overhead.tolist()
    lat, bw = c.pair_latency.tolist(), c.pair_bandwidth.tolist()
    level = c.pair_level.tolist()
    ports = c.links == "port"

    table, classes = cost_table(g, c)
    kind = classes.tolist()

    def duration(v: int) -> float:
        d = dev[v]
        t = float(table[v, kind[d]]) if kind[d] >= 0 else math.nan
        if math.isnan(t):  # not profiled: the roofline
            io = out_b[v] + par_b[v] + sum(out_b[u] for u in producers[v])
            t = max(flops[v] / dflops[d], io / dbw[d])
        return t * factor[v] + launch[d]

    dur = [duration(v) for v in range(n)]
    missing = [len(producers[v]) for v in range(n)]
    ready: dict[int, list[tuple[float, int, int]]] = defaultdict(list)  # device -> heap
    busy: set[int] = set()
    channel_free: dict[tuple[int, int], float] = defaultdict(float)
    port_free: dict[tuple[str, int, int], float] = defaultdict(float)  # (direction, dev, level)
    events: list[tuple[float, int, int, int]] = []  # (time, kind-order key, seq, payload)
    seq = 0
    start = [math.nan] * n
    finish = [math.nan] * n
    transfers: list[tuple[int, int, int, float, float, list[int]]] = []

    def make_ready(v: int, t: float) -> None:
        heapq.heappush(ready[dev[v]], (t if fifo else 0.0, rank[v], v))

    def push(t: float, key: int, payload: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, key, seq, payload))
        seq += 1

    for v in range(n):
        if missing[v] == 0:
            make_ready(v, 0.0)
    t = 0.0
    while True:
        for d in sorted(ready):
            if d not in busy and ready[d]:
                _, _, v = heapq.heappop(ready[d])
                start[v], finish[v] = t, t + dur[v]
                busy.add(d)
                push(finish[v], rank[v], v)  # finishes at one time pop in rank order
        if not events:
            break
        t = events[0][0]
        batch = []
        while events and events[0][0] == t:
            batch.append(heapq.heappop(events))
        for _, key, _, payload in batch:
            if key < n:  # a finish
                v, a = payload, dev[payload]
                busy.discard(a)
                by_dev: dict[int, list[int]] = defaultdict(list)
                for w in consumers[v]:
                    by_dev[dev[w]].append(w)
                for b in sorted(by_dev):
                    if b == a:
                        arrived = by_dev[b]
                    else:
                        if ports:
                            held = [("send", a, level[a][b]), ("recv", b, level[a][b])]
                            s = max(t, *(port_free[k] for k in held))
                        else:
                            s = max(t, channel_free[a, b])
                        arr = s + (lat[a][b] + out_b[v] / bw[a][b])
                        if ports:
                            port_free.update(dict.fromkeys(held, arr))
                        else:
                            channel_free[a, b] = arr
                        transfers.append((v, a, b, s, arr, by_dev[b]))
                        push(arr, n + len(transfers), len(transfers) - 1)
                        continue
                    for w in arrived:
                        missing[w] -= 1
                        if missing[w] == 0:
                            make_ready(w, t)
            else:  # an arrival
                for w in transfers[payload][5]:
                    missing[w] -= 1
                    if missing[w] == 0:
                        make_ready(w, t)

    peak = _peak_memory(n, dev, start, finish, out_b, par_b, consumers, transfers, c.num_devices)
    makespan = max(finish) if n else 0.0
    tr = np.array([x[:5] for x in transfers], dtype=np.float64).reshape(-1, 5)
    trace = TransferTrace(
        node=tr[:, 0].astype(np.int64),
        src=tr[:, 1].astype(np.int64),
        dst=tr[:, 2].astype(np.int64),
        start=tr[:, 3],
        arrival=tr[:, 4],
        nbytes=g.out_bytes[tr[:, 0].astype(np.int64)],
    )
    peak_arr = np.array(peak, dtype=np.float64)
    return Schedule(
        makespan=float(makespan),
        start=np.array(start),
        finish=np.array(finish),
        transfers=trace,
        peak_memory=peak_arr,
        oom=bool((peak_arr > c.memory).any()),
        graph=g,
        cluster=c,
        placement=p,
        dispatch=dispatch,
        recomputation=rc,
    )


def _peak_memory(n, dev, start, finish, out_b, par_b, consumers, transfers, ndev):
    intervals: list[tuple[int, float, float, float]] = []  # (device, alloc, free, bytes)
    last_use = [finish[v] if not consumers[v] else -math.inf for v in range(n)]
    for v in range(n):
        for w in consumers[v]:
            if dev[w] == dev[v]:
                last_use[v] = max(last_use[v], finish[w])
    for v, _a, b, s, arr, served in transfers:
        last_use[v] = max(last_use[v], arr)
        intervals.append((b, s, max(finish[w] for w in served), out_b[v]))
    intervals += [(dev[v], start[v], last_use[v], out_b[v]) for v in range(n)]
    # Half-open [alloc, free): at equal times frees (sort key 0) before allocations (1).
    points = sorted(
        [(f, 0, d, -x) for d, s, f, x in intervals] + [(s, 1, d, x) for d, s, f, x in intervals]
    )
    cur = [0.0] * ndev
    peak = [0.0] * ndev
    for _, _, d, x in points:
        cur[d] += x
        peak[d] = max(peak[d], cur[d])
    for v in range(n):
        peak[dev[v]] += par_b[v]
    return peak
