"""The work-conserving execution simulator (DESIGN §3). No Gymnasium import.

Rules, which define the simulated time of a placement exactly:

1. Node ``v`` on device ``d`` runs for ``max(flops_v / flops_d, io_v / mem_bandwidth_d)
   * f_v + launch_overhead_d`` with ``io_v = out_bytes_v + param_bytes_v + sum of
   out_bytes_u over the producers u of v`` (no second term without ``mem_bandwidth``).
   ``f_v = 1`` without noise; with noise σ > 0, ``f_v = exp(σ z_v − σ²/2)``,
   ``z = rng.standard_normal(n)`` drawn in node-id order (mean-preserving).
   Profiled costs (an extension of DESIGN §3.1, :mod:`placegym.envs.core.costs`): when the
   cluster carries a ``profile`` and ``d``'s ``kind`` has ``v``'s kernel signature in it,
   the profiled seconds replace the ``max(...)`` term (noise and launch overhead apply
   alike). Without a profile, the roofline is the rule.
2. A transfer of ``b`` bytes at level ``l`` takes ``latency_l + b / bandwidth_l``.
3. The links, by the cluster's ``links`` (:mod:`placegym.envs.core.cluster`); compute and
   transfers overlap freely either way.

   - ``"pair"`` (default): each ordered device pair ``(a, b)`` is one FIFO channel,
     independent of the others. A transfer enqueued on ``(a, b)`` at ``t`` starts at
     ``max(t, channel free time)``; the channel is then busy until it arrives.
   - ``"port"``: each device has one send port and one receive port per network level.
     A transfer from ``a`` to ``b`` at level ``l = pair_level[a, b]`` enqueued at ``t``
     starts at ``max(t, free time of send port (a, l), free time of receive port (b,
     l))`` and holds both ports until it arrives (they are free again from then on).
     Transfers take their ports one at a time in enqueue order (rule 4), so the ports are
     first-in first-out: a transfer never delays one enqueued before it, and one enqueued
     later never starts on a common port before it ends, even if that port is idle
     meanwhile (no back-filling). Ports of different levels, and the send and receive
     ports of one device, are independent; with at most two devices this is ``"pair"``.
4. When ``v`` finishes on ``a`` at ``t``, its consumers on ``a`` have the input at ``t``;
   for each distinct other device ``b`` hosting a consumer, one transfer of
   ``out_bytes_v`` is enqueued at ``t`` (on channel ``(a, b)``, or for ports ``(a, l)``
   and ``(b, l)``) and on arrival serves every consumer on ``b``. Enqueue order, which
   is the FIFO order of rule 3: by time; at one time, finishes applied in one round
   (rule 7) before those of the next, within a round in ascending rank; one producer's
   transfers in ascending destination index.
5. A node is ready when every producer's tensor is on its device (sources at 0).
6. A device runs one node at a time, non-preemptively. At each event time, after every
   finish and arrival at that time, each idle device with ready nodes starts its ready
   node of lowest rank (``dispatch="priority"``) or its earliest-ready node, rank
   breaking ties (``dispatch="fifo"``, DOPPLER's public simulator).
7. Makespan = the largest finish time (0 for an empty graph). An event created at ``t``
   with zero delay is handled after the dispatch at ``t`` (in a second round at ``t``).

Memory: a device holds the ``param_bytes`` of its nodes for the whole run plus live
tensors: ``v``'s output from ``v``'s start until its last local consumer has finished and
its last outgoing transfer has arrived (a sink's until its own finish); a received copy
from the transfer's start until the last consumer on the receiving device has finished.
Intervals are half-open: at one instant frees come before allocations.

Recomputation: a placement whose ``recompute`` is not empty is simulated as the extended
graph and placement of :func:`placegym.envs.core.recompute.expand` (one recompute node per
recomputed forward node, on its device, with its duration), under these same rules; the
schedule is theirs (:attr:`Schedule.recomputation` maps its extra nodes back).
:mod:`placegym.envs.core.recompute` is the specification.

Invariants every schedule satisfies (tested on random graphs): precedence including
arrivals, one node at a time per device, FIFO per channel (``"pair"``) or per port, at
most one transfer at a time on a port (``"port"``), work conservation, every node runs
once, makespan >= the busiest device's total work and >= the longest path of placed
durations. ``"port"`` does not bound the makespan by ``"pair"``'s either way: its
transfers wait for ports, but a later arrival can change which ready node a device
starts first, which can shorten the schedule (a list-scheduling anomaly); with at most
one node per device, where no such choice exists, ``"port"`` is never shorter.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Any, Literal

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster, Device, Level
from placegym.envs.core.costs import cost_table
from placegym.envs.core.graph import Graph, load_graph
from placegym.envs.core.placement import Placement, load_placement, split_group, split_message
from placegym.envs.core.presets import load_cluster
from placegym.envs.core.recompute import Recomputation, expand
from placegym.envs.sim import _kernel

Dispatch = Literal["priority", "fifo"]
RngLike = np.random.Generator | int | None

__all__ = [
    "BatchResult",
    "Schedule",
    "TransferTrace",
    "simulate",
    "simulate_batch",
    "simulate_makespan",
]


@dataclass(frozen=True, eq=False)
class TransferTrace:
    """One row per transfer, in enqueue order. Arrays of length ``len(self)``.

    Attributes:
        node: producer whose output is sent.
        src, dst: devices of the channel ``(src, dst)``.
        start, arrival: times; ``arrival - start`` is ``latency + bytes / bandwidth``.
        nbytes: bytes sent (the producer's ``out_bytes``).
    """

    node: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    start: np.ndarray
    arrival: np.ndarray
    nbytes: np.ndarray

    def __len__(self) -> int:
        return int(self.node.shape[0])


@dataclass(frozen=True, eq=False)
class Schedule:
    """The simulated execution of one placement.

    Attributes:
        makespan: the largest finish time (s).
        start, finish: ``(n,)`` per-node start and finish times.
        transfers: every inter-device transfer (:class:`TransferTrace`).
        peak_memory: ``(D,)`` peak bytes per device, resident params included.
        oom: whether any device's peak exceeds its ``memory``.
        graph, cluster, placement: the inputs; ``dispatch`` the rule used. With a
            recompute set these are the extended graph and placement, whose nodes
            ``N ..`` are the recompute nodes.
        recomputation: the :class:`~placegym.envs.core.recompute.Recomputation` of the
            caller's graph and placement (None without recompute).
    """

    makespan: float
    start: np.ndarray
    finish: np.ndarray
    transfers: TransferTrace
    peak_memory: np.ndarray
    oom: bool
    graph: Graph
    cluster: Cluster
    placement: Placement
    dispatch: str = "priority"
    recomputation: Recomputation | None = None

    @property
    def device(self) -> np.ndarray:
        """``(n,)`` device of each node."""
        return self.placement.device

    @property
    def duration(self) -> np.ndarray:
        """``(n,)`` duration of each node (finish - start)."""
        return self.finish - self.start

    @cached_property
    def busy_time(self) -> np.ndarray:
        """``(D,)`` total compute time per device."""
        return np.bincount(self.device, weights=self.duration, minlength=self.cluster.num_devices)

    @cached_property
    def memory_excess(self) -> np.ndarray:
        """``(D,)`` bytes by which each device's peak exceeds its ``memory`` (0 where it
        fits)."""
        return np.maximum(self.peak_memory - self.cluster.memory, 0.0)

    @property
    def infeasibility(self) -> str | None:
        """Why this placement is infeasible (``oom``: the device whose peak exceeds its
        memory the most, by how much), or None when every device fits. An infeasible
        placement is a failure, never a makespan to rank."""
        if not self.oom:
            return None
        d = int(np.argmax(self.memory_excess))
        over = int((self.memory_excess > 0).sum())
        return (
            f"out of memory on device {d} ({self.cluster.devices[d].name}): peak "
            f"{self.peak_memory[d]:.6g} bytes, {self.memory_excess[d]:.6g} over its "
            f"{self.cluster.memory[d]:.6g}" + (f" ({over} devices over)" if over > 1 else "")
        )

    @property
    def utilization(self) -> np.ndarray:
        """``(D,)`` busy time / makespan (0 when the makespan is 0)."""
        if self.makespan <= 0:
            return np.zeros(self.cluster.num_devices)
        return self.busy_time / self.makespan

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: makespan, per-device utilisation, peak memory and its
        excess over the device's memory, OOM and why (:attr:`infeasibility`)."""
        names = [d.name for d in self.cluster.devices]
        return {
            "makespan": self.makespan,
            "oom": self.oom,
            "infeasible": self.infeasibility,
            "dispatch": self.dispatch,
            "num_transfers": len(self.transfers),
            "bytes_transferred": float(self.transfers.nbytes.sum()),
            "devices": [
                {
                    "name": names[d],
                    "nodes": int((self.device == d).sum()),
                    "busy": float(self.busy_time[d]),
                    "utilization": float(self.utilization[d]),
                    "peak_memory": float(self.peak_memory[d]),
                    "memory": float(self.cluster.memory[d]),
                    "excess": float(self.memory_excess[d]),
                }
                for d in range(self.cluster.num_devices)
            ],
        }


@dataclass(frozen=True, eq=False)
class BatchResult:
    """Outcome of :func:`simulate_batch`: ``makespan (B,)``, ``peak_memory (B, D)``
    (zeros when not computed) and ``oom (B,)``."""

    makespan: np.ndarray
    peak_memory: np.ndarray
    oom: np.ndarray


#: The factors of a noiseless call (an empty array: factor 1 for every node).
_NO_FACTOR = np.ones(0)
_NO_FACTOR.setflags(write=False)


#: The largest noise σ accepted. The factor ``exp(σz − σ²/2)`` keeps the mean at 1, but
#: its median is ``exp(−σ²/2)``: 0.61 at σ = 1, 1e-348 at σ = 40, where nearly every
#: compute time would vanish. Measured kernel-time spreads are a few percent.
MAX_NOISE = 1.0


def check_noise(noise: object) -> float:
    """``noise`` as a float, or ``ValueError`` naming it unless ``0 <= noise <=``
    :data:`MAX_NOISE`."""
    if isinstance(noise, bool) or not isinstance(noise, int | float | np.integer | np.floating):
        raise ValueError(f"noise: must be a number in [0, {MAX_NOISE:g}], got {noise!r}")
    value = float(noise)
    if not math.isfinite(value) or not 0 <= value <= MAX_NOISE:
        raise ValueError(
            f"noise: must be a number in [0, {MAX_NOISE:g}] (the sigma of a mean-preserving "
            f"log-normal factor on compute times), got {noise!r}"
        )
    return value


def _noise_factors(noise: Any, rng: RngLike, shape: tuple[int, ...]) -> np.ndarray:
    """Per-node compute factors; an empty last axis when ``noise == 0`` (factor 1)."""
    if noise == 0:
        return _NO_FACTOR if len(shape) == 1 else np.ones((*shape[:-1], 0))
    noise = check_noise(noise)
    if rng is None:
        raise ValueError(
            "rng: noise > 0 needs a seeded generator (np.random.Generator or an "
            "int seed), got None"
        )
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    z = gen.standard_normal(shape)
    return np.exp(noise * z - 0.5 * noise * noise)


def _check_dispatch(dispatch: str) -> bool:
    if dispatch not in ("priority", "fifo"):
        raise ValueError(f"dispatch: expected 'priority' or 'fifo', got {dispatch!r}")
    return dispatch == "fifo"


def _inputs(graph: Any, cluster: Any) -> tuple[Graph, Cluster]:
    g = graph if isinstance(graph, Graph) else load_graph(graph)
    c = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
    return g, c


def _static_arrays(g: Graph, c: Cluster) -> tuple[np.ndarray, ...]:
    """Every kernel input but the placement and the noise factors, packed by
    :func:`placegym.envs.sim._kernel.pack_static` (the durations of rule 1 use ``costs.py``'s
    profiled table)."""
    cptr, cidx = g.consumer_csr
    pptr, pidx = g.producer_csr
    return _kernel.pack_static(
        (g.out_bytes, g.param_bytes, g.flops, g.io_bytes, cptr, cidx, pptr, pidx, g.in_degree),
        (
            c.flops,
            c.mem_bandwidth,
            c.launch_overhead,
            c.pair_latency,
            c.pair_bandwidth,
            *cost_table(g, c),
        ),
        c.memory,
        (len(c.levels), c.pair_level) if c.links == "port" else None,
    )


_STATIC = IdentityCache(_static_arrays, size=16)
_LAST: list[tuple[Any, Any, Any]] = [(None, None, None)]  # (graph, cluster, arrays) last used


def _plan(g: Graph, c: Cluster) -> tuple[np.ndarray, ...]:
    """:func:`_static_arrays` of ``(g, c)``, kept per graph and cluster object (both are
    immutable): a call on the pair of the previous call finds them at once."""
    last = _LAST[0]  # one tuple, swapped whole: threads see a consistent entry
    if last[0] is g and last[1] is c:
        return last[2]
    arrays = _STATIC(g, c)
    _LAST[0] = (g, c, arrays)
    return arrays


def _prepare(
    graph, cluster, placement, noise, rng, dispatch
) -> tuple[Graph, Cluster, Placement, Recomputation | None, tuple[Any, ...]]:
    """Validated inputs of one placement: ``(g, c, p, recomputation, kernel arguments)``,
    ``g`` and ``p`` extended when ``p`` recomputes nodes."""
    g, c = _inputs(graph, cluster)
    p = placement if isinstance(placement, Placement) else load_placement(placement)
    p.check(g, c)
    fifo = _check_dispatch(dispatch)
    rc = None
    if p.recompute.size:
        rc = expand(g, c, p)
        g, p = rc.graph, rc.placement
    factor = _noise_factors(noise, rng, (g.num_nodes,))
    return g, c, p, rc, (*_plan(g, c), factor, p.device, p.rank, p.order, fifo)


def simulate(
    graph: Graph | Any,
    cluster: Cluster | Any,
    placement: Placement | Any,
    *,
    noise: float = 0.0,
    rng: RngLike = None,
    dispatch: Dispatch = "priority",
) -> Schedule:
    """Simulate ``placement`` of ``graph`` on ``cluster`` under the rules of this module.

    Args:
        graph: a :class:`Graph`, a dict or a JSON path.
        cluster: a :class:`Cluster`, a dict, a JSON path or a preset name.
        placement: a :class:`Placement`, a dict or a JSON path.
        noise: σ of the mean-preserving log-normal factor on compute times (0 = exact).
        rng: a ``numpy.random.Generator`` or an int seed; required when ``noise > 0``.
        dispatch: ``"priority"`` (lowest rank first) or ``"fifo"`` (earliest ready first).

    Returns:
        The :class:`Schedule` with makespan, per-node times, transfers and peak memory.

    Raises:
        ValueError: a bad argument or a placement that does not fit the graph or cluster.
    """
    g, c, p, rc, args = _prepare(graph, cluster, placement, noise, rng, dispatch)
    n, ne, k = g.num_nodes, g.num_edges, 2 * g.num_nodes + c.num_devices
    times, ints = np.empty(k + 3 * ne), np.empty(3 * ne, dtype=np.int64)
    makespan, ntr, oom = _kernel.simulate_one(*(*args, times, ints))
    if makespan < 0:  # pragma: no cover - a validated DAG always completes
        raise RuntimeError("simulation did not run every node")
    transfers = _frozen(
        TransferTrace,
        node=ints[:ntr],
        src=ints[ne : ne + ntr],
        dst=ints[2 * ne : 2 * ne + ntr],
        start=times[k : k + ntr],
        arrival=times[k + ne : k + ne + ntr],
        nbytes=times[k + 2 * ne : k + 2 * ne + ntr],
    )
    return _frozen(
        Schedule,
        makespan=makespan,
        start=times[:n],
        finish=times[n : 2 * n],
        transfers=transfers,
        peak_memory=times[2 * n : k],
        oom=oom,
        graph=g,
        cluster=c,
        placement=p,
        dispatch=dispatch,
        recomputation=rc,
    )


def _frozen(cls: type, **fields: Any) -> Any:
    """An instance of the frozen dataclass ``cls`` built without its ``__init__``, which
    sets each field through ``object.__setattr__`` (a fifth of a small graph's whole
    simulation); ``fields`` must name every field."""
    obj: Any = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def simulate_makespan(
    graph: Graph | Any,
    cluster: Cluster | Any,
    placement: Placement | Any,
    *,
    noise: float = 0.0,
    rng: RngLike = None,
    dispatch: Dispatch = "priority",
) -> float:
    """The makespan :func:`simulate` would report, without building the schedule, the
    transfer trace or the memory profile (the lean path for search loops)."""
    args = _prepare(graph, cluster, placement, noise, rng, dispatch)[4]
    makespan = _kernel.makespan_one(*args)
    if makespan < 0:  # pragma: no cover - a validated DAG always completes
        raise RuntimeError("simulation did not run every node")
    return float(makespan)


#: Rows per thread below which a batch is not split (thread hand-off costs ~10 µs).
MIN_ROWS_PER_THREAD = 4

_POOL: dict[str, Any] = {"pool": None, "workers": 0, "pid": 0}
_POOL_LOCK = threading.Lock()


def default_threads() -> int:
    """Threads :func:`simulate_batch` uses by default: ``PLACEGYM_THREADS`` if set, else
    the CPUs this process may run on."""
    env = os.environ.get("PLACEGYM_THREADS")
    if env:
        return max(1, int(env))
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def _pool(workers: int) -> ThreadPoolExecutor:
    """A shared pool of at least ``workers`` threads (a new one in a forked child, whose
    copy of the parent's pool has no threads). A pool that grows is replaced, never shut
    down: another thread may be submitting to it; its threads end once no caller holds
    it any more (the executor's own clean-up when it is collected)."""
    with _POOL_LOCK:
        if _POOL["pid"] != os.getpid() or _POOL["workers"] < workers:
            _POOL.update(
                pool=ThreadPoolExecutor(workers, thread_name_prefix="placegym-sim"),
                workers=workers,
                pid=os.getpid(),
            )
        return _POOL["pool"]


def _run_rows(g, c, devs, ords, factors, fifo, memory, threads):
    """Makespans and peaks of every row, the rows split into contiguous parts run on up
    to ``threads`` threads (the compiled kernel releases the GIL and checks each row; a
    bad row's makespan is NaN)."""
    b = len(devs)
    makespans = np.empty(b)
    peaks = np.zeros((b, c.num_devices))
    args = (_plan(g, c), devs, ords, factors, fifo, bool(memory))
    parts = max(1, min(threads, b // MIN_ROWS_PER_THREAD))
    bounds = [b * k // parts for k in range(parts + 1)]
    if parts == 1:
        _kernel.run_rows(*args, 0, b, makespans, peaks)
    else:
        pool = _pool(parts - 1)
        futures = [
            pool.submit(_kernel.run_rows, *args, lo, hi, makespans, peaks)
            for lo, hi in pairwise(bounds[1:])
        ]
        _kernel.run_rows(*args, 0, bounds[1], makespans, peaks)  # this thread's part
        for f in futures:
            f.result()
    return makespans, peaks


def _check_rows(devs: np.ndarray, ords: np.ndarray, c: Cluster) -> None:
    """Raise the ``ValueError`` naming the first bad device, else the first row of
    ``ords`` that is not a permutation (called when the kernel found a bad row)."""
    n = devs.shape[1]
    if devs.size and (devs.min() < 0 or devs.max() >= c.num_devices):
        b, i = np.argwhere((devs < 0) | (devs >= c.num_devices))[0]
        raise ValueError(
            f"devices[{b}][{i}]: device index out of range for cluster "
            f"{c.name!r} with {c.num_devices} devices, got {int(devs[b, i])}"
        )
    ranks = np.full_like(ords, -1)
    in_range = ords.size == 0 or (ords.min() >= 0 and ords.max() < n)
    if in_range:  # then a repeated node leaves another one without a rank
        np.put_along_axis(ranks, ords, np.broadcast_to(np.arange(n), ords.shape), axis=1)
    if (ranks < 0).any():
        b = int(np.flatnonzero((ranks < 0).any(axis=1))[0])
        raise ValueError(f"orders[{b}]: not a permutation of 0..{n - 1}")


def simulate_batch(
    graph: Graph | Any,
    cluster: Cluster | Any,
    devices: np.ndarray,
    orders: np.ndarray,
    *,
    noise: float = 0.0,
    rng: RngLike = None,
    dispatch: Dispatch = "priority",
    memory: bool = True,
    threads: int | None = None,
    recompute: Any = None,
) -> BatchResult:
    """Makespans of ``B`` placements of one graph in one compiled call, in parallel.

    Same rules and results as calling :func:`simulate` on each row, bit for bit, whatever
    the number of threads. With noise, the factors are ``rng.standard_normal((B, n))``:
    row ``i`` gets the draws the ``i``-th of ``B`` sequential :func:`simulate` calls on
    the same generator would get.

    Args:
        graph: as in :func:`simulate`.
        cluster: as in :func:`simulate`.
        devices: ``(B, n)`` device per node per placement.
        orders: ``(B, n)`` permutations (priority order) per placement.
        noise: as in :func:`simulate`.
        rng: as in :func:`simulate`.
        dispatch: as in :func:`simulate`.
        memory: also compute peak memory and OOM (slightly slower).
        threads: rows are split into up to this many contiguous parts run at once on
            as many threads (default :func:`default_threads`; 1 runs every row on the
            calling thread).
        recompute: node ids that every row recomputes (:mod:`placegym.envs.core.recompute`;
            default none). Each row then extends the graph by its own devices, so the
            rows are simulated one after the other on the calling thread, each as
            :func:`simulate` would (a bad row's error starts with ``row <i>:``).
    """
    g, c = _inputs(graph, cluster)
    devs = np.ascontiguousarray(devices, dtype=np.int64)
    ords = np.ascontiguousarray(orders, dtype=np.int64)
    n = g.num_nodes
    if devs.ndim != 2 or devs.shape[1] != n:
        raise ValueError(f"devices: expected shape (B, {n}), got {devs.shape}")
    if ords.shape != devs.shape:
        raise ValueError(f"orders: expected shape {devs.shape} like devices, got {ords.shape}")
    if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
        raise ValueError(f"threads: must be an integer >= 1, got {threads!r}")
    fifo = _check_dispatch(dispatch)
    if recompute is not None and np.size(recompute):
        return _batch_recompute(g, c, devs, ords, recompute, noise, rng, dispatch, memory)
    split = split_group(g, devs)
    if split is not None:
        b = split[0]
        raise ValueError(split_message(f"devices[{b}]", g, devs[b], *split[1:]))
    factors = _noise_factors(noise, rng, devs.shape)
    nthreads = default_threads() if threads is None else int(threads)
    makespans, peaks = _run_rows(g, c, devs, ords, factors, fifo, memory, nthreads)
    if np.isnan(makespans).any():  # the rows are checked in the kernel, in parallel
        _check_rows(devs, ords, c)
    oom = (peaks > c.memory).any(axis=1) if memory else np.zeros(len(devs), dtype=bool)
    return BatchResult(makespan=makespans, peak_memory=peaks, oom=oom)


def _batch_recompute(g, c, devs, ords, recompute, noise, rng, dispatch, memory) -> BatchResult:
    """:func:`simulate_batch`'s rows with a shared recompute set: one :func:`simulate`
    (or :func:`simulate_makespan`) call per row, drawing from one generator in turn."""
    gen = (
        rng if rng is None or isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    )
    makespans = np.empty(len(devs))
    peaks = np.zeros((len(devs), c.num_devices))
    for i in range(len(devs)):
        try:
            p = Placement(device=devs[i], order=ords[i], recompute=recompute)
            if memory:
                s = simulate(g, c, p, noise=noise, rng=gen, dispatch=dispatch)
                makespans[i], peaks[i] = s.makespan, s.peak_memory
            else:
                makespans[i] = simulate_makespan(g, c, p, noise=noise, rng=gen, dispatch=dispatch)
        except ValueError as e:
            raise ValueError(f"row {i}: {e}") from None
    oom = (peaks > c.memory).any(axis=1) if memory else np.zeros(len(devs), dtype=bool)
    return BatchResult(makespan=makespans, peak_memory=peaks, oom=oom)


def warmup() -> None:
    """Compile (or load from numba's on-disk cache) every kernel on a tiny problem."""
    g = Graph(flops=[1.0, 1.0], out_bytes=[1.0, 1.0], edges=[[0, 1]], name="warmup")
    c = Cluster(
        devices=(Device("d0", 1.0, 1.0), Device("d1", 1.0, 1.0)),
        levels=(Level("l0", 1.0),),
        name="warmup",
    )
    simulate(g, c, Placement(device=np.array([0, 1]), order=np.array([0, 1])))
    simulate_batch(g, c, np.array([[0, 1]]), np.array([[0, 1]]))
    simulate_makespan(g, c, Placement(device=np.array([0, 1]), order=np.array([0, 1])))
