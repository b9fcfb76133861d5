"""An independent plain-Python implementation of DESIGN §3, the baseline of ``make bench``.

Written the way a careful engineer would without a compiler: lists indexed by node id,
``heapq`` for the event queue and one ready heap per device, consumers grouped by device
once per call. It computes what :func:`placegym.envs.simulate` returns in a
:class:`~placegym.envs.Schedule` (makespan, per-node start and finish, every transfer,
peak memory per device) without sharing any code with the package beyond reading the
graph's and cluster's arrays, so the benchmark's ratio compares two implementations of
the same rules, and the benchmark checks that they agree.
"""

from __future__ import annotations

import heapq


def plain_simulate(graph, cluster, device, order):
    """``(makespan, start, finish, transfers, peak)`` of ``device``/``order`` (noise 0,
    priority dispatch); ``transfers`` is a list of ``(node, src, dst, start, arrival)``."""
    n = graph.num_nodes
    dev = [int(d) for d in device]
    rank = [0] * n
    for r, v in enumerate(order):
        rank[int(v)] = r
    flops, out_b = graph.flops.tolist(), graph.out_bytes.tolist()
    io = graph.io_bytes.tolist()
    dflops, dbw = cluster.flops.tolist(), cluster.mem_bandwidth.tolist()
    launch = cluster.launch_overhead.tolist()
    lat, bw = cluster.pair_latency.tolist(), cluster.pair_bandwidth.tolist()
    ndev = cluster.num_devices
    consumers = [[] for _ in range(n)]
    missing = [0] * n
    for u, v in graph.edges.tolist():
        consumers[u].append(v)
        missing[v] += 1
    # consumers of each node grouped by device, ascending device index
    groups = []
    for v in range(n):
        by = {}
        for w in consumers[v]:
            by.setdefault(dev[w], []).append(w)
        groups.append(sorted(by.items()))
    dur = [max(flops[v] / dflops[dev[v]], io[v] / dbw[dev[v]]) + launch[dev[v]] for v in range(n)]

    ready = [[] for _ in range(ndev)]
    for v in range(n):
        if missing[v] == 0:
            heapq.heappush(ready[dev[v]], (rank[v], v))
    busy = [False] * ndev
    chan_free = {}
    events = []  # (time, key, payload): finishes keyed by rank, arrivals by n + index
    start, finish = [0.0] * n, [0.0] * n
    transfers, served = [], []
    t = 0.0
    while True:
        for d in range(ndev):
            if not busy[d] and ready[d]:
                _, v = heapq.heappop(ready[d])
                start[v] = t
                finish[v] = t + dur[v]
                busy[d] = True
                heapq.heappush(events, (finish[v], rank[v], v))
        if not events:
            break
        t = events[0][0]
        batch = []
        while events and events[0][0] == t:
            batch.append(heapq.heappop(events))
        for _, key, x in batch:
            if key < n:  # node x finished
                a = dev[x]
                busy[a] = False
                for b, ws in groups[x]:
                    if b == a:
                        for w in ws:
                            missing[w] -= 1
                            if missing[w] == 0:
                                heapq.heappush(ready[a], (rank[w], w))
                        continue
                    s = max(t, chan_free.get((a, b), 0.0))
                    arr = s + (lat[a][b] + out_b[x] / bw[a][b])
                    chan_free[a, b] = arr
                    heapq.heappush(events, (arr, n + len(transfers), len(transfers)))
                    transfers.append((x, a, b, s, arr))
                    served.append(ws)
            else:  # transfer x arrived
                b = transfers[x][2]
                for w in served[x]:
                    missing[w] -= 1
                    if missing[w] == 0:
                        heapq.heappush(ready[b], (rank[w], w))
    makespan = max(finish) if n else 0.0
    peak = _peak(graph, ndev, dev, start, finish, transfers, served)
    return makespan, start, finish, transfers, peak


def _peak(graph, ndev, dev, start, finish, transfers, served):
    n, out_b = graph.num_nodes, graph.out_bytes.tolist()
    free = [finish[v] for v in range(n)]  # a sink's output until its own finish
    for u, v in graph.edges.tolist():
        if dev[u] == dev[v]:
            free[u] = max(free[u], finish[v])
    points = []
    for (v, _, b, s, arr), ws in zip(transfers, served):
        free[v] = max(free[v], arr)
        points.append((s, 1, b, out_b[v]))
        points.append((max(finish[w] for w in ws), 0, b, -out_b[v]))
    for v in range(n):
        points.append((start[v], 1, dev[v], out_b[v]))
        points.append((free[v], 0, dev[v], -out_b[v]))
    points.sort()  # at one instant frees (0) before allocations (1)
    cur, peak = [0.0] * ndev, [0.0] * ndev
    for _, _, d, x in points:
        cur[d] += x
        if cur[d] > peak[d]:
            peak[d] = cur[d]
    for v, p in enumerate(graph.param_bytes.tolist()):
        peak[dev[v]] += p
    return peak
