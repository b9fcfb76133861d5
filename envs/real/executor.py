"""Work-conserving execution of a placed graph with torch (the real backend, DESIGN §6).

Semantics follow the simulator (DESIGN §3) with real kernels and real copies:

- one dispatcher thread per device: whenever it is idle and holds ready nodes it runs
  the ready node of lowest rank (priority order), to completion;
- one copy thread per ordered device pair used by the placement (a FIFO channel): when a
  node finishes, one copy of its output goes to each other device hosting a consumer
  (producers in finishing order, destinations ascending) and, once there, serves all of
  them; copies overlap with compute;
- a node is ready when every producer's output is on its device.

Devices (:mod:`.devices`): ``cpu#k`` runs ``k`` worker threads on host memory (a copy is a
``clone``; torch releases the GIL inside kernels, so workers run in parallel); ``cuda:i``,
``cuda:i#k`` and ``cuda:i%N`` run on GPU streams: each worker and copy thread makes its
own stream current once and synchronises it after each kernel or copy, so decisions are
taken on completed work. A copy between a GPU and a CPU worker is a real host↔device copy
on the GPU side's stream. Every worker and copy thread sets its own torch intra-op thread
count (``threads``). Times are host wall-clock (``perf_counter``).

Host memory on CPU workers (:func:`keep_host_memory`): torch allocates CPU tensors with
the C library's ``malloc``, which by default hands tensors of more than 128 KiB out as
fresh ``mmap`` ed pages and returns them to the system when freed, so every kernel output
is page-faulted in as it is first written (about 19,000 faults per execution of FFNN / 2,
a fault per 4 KiB of output, serialised on the process's memory map when two workers
fault at once). A GPU has no such cost: torch's caching allocator reuses device memory.
With CPU workers the executor sets glibc to keep freed memory for reuse instead (the
same for every execution after the first), so a kernel's time is its own work.

Dispatch cost: the threads share one lock, but each waits on its own condition and is
woken only when its own queue changes (a worker when one of its nodes becomes ready, a
channel when it has a copy to make), and a worker whose next node is ready goes on
without sleeping; everything that depends only on the graph or the placement is computed
once per executor or placement, not per node.

Each :meth:`TorchExecutor.run` does ``warmup`` untimed and ``repeats`` timed executions and
reports the median makespan with the per-node times of that run.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.real.devices import VirtualDevice, open_stream, parse_devices
from placegym.envs.real.kernels import Kernel, build_kernels, make_tensors

__all__ = [
    "BackendError",
    "Measurement",
    "TorchExecutor",
    "copy_side",
    "copy_tensor",
    "keep_host_memory",
]


@dataclass(frozen=True)
class Measurement:
    """A timed execution: the median ``makespan`` (s) over ``makespans`` (every repeat),
    and of the median run (s from its start): ``start`` / ``finish`` ``(n,)`` per node and
    ``transfers`` ``(k, 5)`` rows ``(node, src, dst, start, arrival)`` per copy.

    ``cpu_share`` is how undisturbed the CPU workers were: of the time their threads were
    ready to run, the share they ran (Linux scheduler statistics; over every timed
    repeat). About 1 on an otherwise idle machine with a core per worker; on a busy one
    the workers wait for a CPU and wall times grow: the share says by how much. NaN
    without CPU workers or scheduler statistics.
    """

    makespan: float
    makespans: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    transfers: np.ndarray
    cpu_share: float = float("nan")


class BackendError(RuntimeError):
    """A kernel or copy failed; the message names the node and the device."""


class TorchExecutor:
    """Runs placements of one graph on real devices (see the module docstring).

    Args:
        graph: the graph; every node's ``spec`` must be executable (use
            :func:`~placegym.envs.real.kernels.scale_graph` to shrink it first).
        devices: a device spec such as ``"cpu#2"``, ``"cuda:0,cpu#2"`` or ``"cuda:0#4"``,
            or the parsed devices.
        threads: torch intra-op threads of each worker (1 suits ``cpu#k`` on k cores).
        warmup: untimed executions per :meth:`run`.
        repeats: timed executions per :meth:`run`.
        seed: seed of the input data and parameters.
        timeout: seconds after which a stuck execution raises.
    """

    def __init__(
        self,
        graph: Graph,
        devices: str | Sequence[VirtualDevice] = "cpu#2",
        *,
        threads: int = 1,
        warmup: int = 1,
        repeats: int = 3,
        seed: int = 0,
        timeout: float = 600.0,
    ) -> None:
        import torch

        if repeats < 1 or warmup < 0:
            raise ValueError(
                f"repeats, warmup: need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}"
            )
        self.graph = graph
        self.devices: list[VirtualDevice] = (
            parse_devices(devices) if isinstance(devices, str) else list(devices)
        )
        self.kernels: list[Kernel] = build_kernels(graph)
        self.warmup, self.repeats, self.seed, self.timeout = warmup, repeats, seed, timeout
        self.threads = threads
        torch.set_num_threads(threads)
        if any(not d.is_cuda for d in self.devices):
            keep_host_memory()
        self._streams: dict[str, object] = {}
        self._tensors: dict[tuple[int, str], tuple[list, object]] = {}
        cptr, cidx = graph.consumer_csr
        #: per node: its consumers, and its producers in the spec's ``args`` order
        self.consumers = [cidx[cptr[v] : cptr[v + 1]].tolist() for v in range(graph.num_nodes)]
        self.args_of = [
            [int(a["node"]) for a in graph.spec[v].get("args", []) if "node" in a]
            for v in range(graph.num_nodes)
        ]

    @property
    def num_devices(self) -> int:
        """Number of backend devices."""
        return len(self.devices)

    # ------------------------------------------------------------------ data
    def _materialise(self, v: int, device: VirtualDevice):
        """Params (and an input node's data) of ``v`` on ``device``, built once."""
        key = (v, device.torch_device)
        if key not in self._tensors:
            k = self.kernels[v]
            try:
                self._tensors[key] = make_tensors(k, self.seed, device.torch_device)
            except RuntimeError as e:  # e.g. CUDA out of memory
                raise BackendError(
                    f"node {v} ({k.kind}) on {device.name}: cannot allocate its tensors: {e}"
                ) from None
        return self._tensors[key]

    def _stream(self, name: str, device: VirtualDevice, *, compute: bool = False):
        """The named stream of a worker or channel (created once; None on a CPU)."""
        if not device.is_cuda:
            return None
        if name not in self._streams:
            self._streams[name] = open_stream(device, compute=compute)
        return self._streams[name]

    # ------------------------------------------------------------------ running
    def outputs(self, placement: Placement) -> list:
        """Execute ``placement`` once and return every node's output tensor (on its
        device). The values do not depend on the placement: a way to check the kernels."""
        plan = self._prepare(placement)
        run = _Run(self, plan)
        run.execute()
        return [run.out[(v, d)] for v, d in enumerate(plan.dev)]

    def run(self, placement: Placement) -> Measurement:
        """Execute ``placement`` ``warmup + repeats`` times; see :class:`Measurement`."""
        plan = self._prepare(placement)
        runs = [_Run(self, plan) for _ in range(self.warmup + self.repeats)]
        times = []
        for r in runs:
            times.append(r.execute())
            r.out.clear()  # one run's tensors at a time (GPU-size graphs are large)
        spans = np.array(times[self.warmup :])
        mid = int(np.argsort(spans)[len(spans) // 2])
        best = runs[self.warmup + mid]
        timed = runs[self.warmup :]
        wall = sum(sum(r.cpu_wall) for r in timed)
        return Measurement(
            makespan=float(spans[mid]),
            makespans=spans,
            start=np.array(best.start, dtype=np.float64),
            finish=np.array(best.finish, dtype=np.float64),
            transfers=np.array(best.transfers, dtype=np.float64).reshape(-1, 5),
            cpu_share=sum(sum(r.cpu_time) for r in timed) / wall if wall > 0 else float("nan"),
        )

    def _prepare(self, placement: Placement) -> _Plan:
        placement.check(self.graph)
        if placement.num_nodes and placement.device.max() >= self.num_devices:
            i = int(np.argmax(placement.device >= self.num_devices))
            raise ValueError(
                f"device[{i}]: device index out of range for {self.num_devices} "
                f"backend devices, got {int(placement.device[i])}"
            )
        for v, d in enumerate(placement.device.tolist()):
            self._materialise(v, self.devices[d])
        plan = _Plan(self, placement)
        for d, device in enumerate(self.devices):
            plan.compute_streams.append(self._stream(f"compute{d}", device, compute=True))
        for a, b in plan.channels:
            src, dst = self.devices[a], self.devices[b]
            streams = [self._stream(f"copy{a}-{b}", copy_side(src, dst))]
            if src.is_cuda and dst.is_cuda and src.index != dst.index:
                # between GPUs torch copies on the source's current stream: one per channel,
                # so channels out of one GPU do not queue on its default stream
                streams.append(self._stream(f"copy{a}-{b}-src", src))
            plan.copy_streams[(a, b)] = streams
        _synchronize_gpus(self.devices)
        return plan


def _synchronize_gpus(devices: list[VirtualDevice]) -> None:
    import torch

    for gpu in sorted({d.index for d in devices if d.is_cuda}):
        torch.cuda.synchronize(gpu)


class _Plan:
    """What a placement fixes for every run: devices, ranks, where outputs go."""

    def __init__(self, ex: TorchExecutor, placement: Placement) -> None:
        self.dev = dev = placement.device.tolist()
        self.rank = placement.rank.tolist()
        n = len(dev)
        #: per node: consumers by device, and the other devices its output is sent to
        self.consumers_on: list[dict[int, list[int]]] = [{} for _ in range(n)]
        for v in range(n):
            for c in ex.consumers[v]:
                self.consumers_on[v].setdefault(dev[c], []).append(c)
        self.remote = [sorted(set(self.consumers_on[v]) - {dev[v]}) for v in range(n)]
        self.channels = sorted({(dev[v], b) for v in range(n) for b in self.remote[v]})
        self.sources = [v for v in range(n) if not ex.graph.in_degree[v]]
        #: streams of the workers (by device) and of the channels (by pair: the copying
        #: side's, then the source GPU's between two GPUs); None on CPUs
        self.compute_streams: list[Any] = []
        self.copy_streams: dict[tuple[int, int], list[Any]] = {}


class _Run:
    """One execution: dispatcher and channel threads sharing one lock, each waiting on
    its own condition."""

    def __init__(self, ex: TorchExecutor, plan: _Plan) -> None:
        self.ex, self.plan = ex, plan
        n = len(plan.dev)
        self.n = n
        self.missing = ex.graph.in_degree.tolist()
        self.lock = threading.Lock()
        self.wake = [threading.Condition(self.lock) for _ in ex.devices]
        self.ready: list[list[tuple[int, int]]] = [[] for _ in ex.devices]
        self.queues: dict[tuple[int, int], deque[int]] = {ab: deque() for ab in plan.channels}
        self.wake_channel = {ab: threading.Condition(self.lock) for ab in plan.channels}
        self.out: dict[tuple[int, int], object] = {}  # (node, device) -> tensor
        self.start = [float("nan")] * n
        self.finish = [float("nan")] * n
        self.transfers: list[tuple[int, int, int, float, float]] = []
        # per CPU worker over the run: time on a CPU and time ready to run (s)
        self.cpu_time = [0.0] * len(ex.devices)
        self.cpu_wall = [0.0] * len(ex.devices)
        self.done = 0
        self.stop = n == 0
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._started = threading.Event()
        for v in plan.sources:
            heapq.heappush(self.ready[plan.dev[v]], (plan.rank[v], v))

    def execute(self) -> float:
        """Run once; returns the makespan (times are kept on the instance)."""
        threads = [
            threading.Thread(target=self._guard, args=(self._worker, d), daemon=True)
            for d in range(len(self.ex.devices))
        ]
        threads += [
            threading.Thread(target=self._guard, args=(self._channel, ab), daemon=True)
            for ab in self.plan.channels
        ]
        self.go = threading.Barrier(len(threads) + 1)
        for t in threads:
            t.start()
        self.go.wait()  # every thread is up: the clock starts now
        self.t0 = time.perf_counter()
        self._started.set()
        if self.n and not self.finished.wait(timeout=self.ex.timeout):
            self._fail(BackendError(f"execution timed out after {self.ex.timeout} s"))
        for t in threads:
            t.join(timeout=1.0)
        if self.error is not None:
            raise self.error
        return max(self.finish) if self.n else 0.0

    def _guard(self, fn, arg) -> None:
        import torch

        # OpenMP's thread count is per thread: set it in every worker, or a new thread
        # falls back to one OpenMP thread per core and oversubscribes the machine.
        torch.set_num_threads(self.ex.threads)
        self.go.wait()
        self._started.wait()
        try:
            fn(arg)
        except BaseException as e:
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        with self.lock:
            self.error = self.error or e
            self._stop_all()

    def _stop_all(self) -> None:
        """Every thread leaves its loop (called with the lock held)."""
        self.stop = True
        for cv in [*self.wake, *self.wake_channel.values()]:
            cv.notify()
        self.finished.set()

    def _wait(self, items, wake: threading.Condition) -> bool:
        """Wait (lock held) until ``items`` is not empty or the run stops; False if it
        stopped."""
        while not items and not self.stop:
            wake.wait()
        return not self.stop

    @contextlib.contextmanager
    def _unlocked(self):
        """Release the lock for the body (a kernel or a copy), then take it back."""
        self.lock.release()
        try:
            yield
        finally:
            self.lock.acquire()

    def _worker(self, d: int) -> None:
        ex, plan = self.ex, self.plan
        device = ex.devices[d]
        stream = plan.compute_streams[d]
        _use_stream(stream)
        heap, wake, out = self.ready[d], self.wake[d], self.out
        before = None if stream is not None else _scheduler_times()
        with self.lock:
            while self._wait(heap, wake):
                _, v = heapq.heappop(heap)
                inputs = [out[(u, d)] for u in ex.args_of[v]]
                with self._unlocked():
                    y = self._compute(v, device, stream, inputs)
                out[(v, d)] = y
                self.done += 1
                for b in plan.remote[v]:
                    self.queues[(d, b)].append(v)
                    self.wake_channel[(d, b)].notify()
                self._arrive(v, d)
                if self.done == self.n:
                    self._stop_all()
            after = _scheduler_times()
            if before is not None and after is not None:
                self.cpu_time[d], self.cpu_wall[d] = after[0] - before[0], after[1] - before[1]

    def _compute(self, v: int, device: VirtualDevice, stream, inputs):
        k = self.ex.kernels[v]
        params, data = self.ex._tensors[(v, device.torch_device)]
        t = time.perf_counter()
        try:
            y = k.fn(inputs, params, data)
            if stream is not None:
                stream.synchronize()
        except RuntimeError as e:
            raise BackendError(f"node {v} ({k.kind}) on {device.name}: {e}") from None
        self.start[v], self.finish[v] = t - self.t0, time.perf_counter() - self.t0
        return y

    def _arrive(self, v: int, d: int) -> None:
        """``v``'s output is now on device ``d``: consumers there may become ready.
        Called with the lock held."""
        became_ready = False
        for c in self.plan.consumers_on[v].get(d, ()):
            self.missing[c] -= 1
            if self.missing[c] == 0:
                heapq.heappush(self.ready[d], (self.plan.rank[c], c))
                became_ready = True
        if became_ready:
            self.wake[d].notify()

    def _channel(self, ab: tuple[int, int]) -> None:
        a, b = ab
        src, dst = self.ex.devices[a], self.ex.devices[b]
        stream, *source = self.plan.copy_streams[ab]
        for s in [*source, stream]:
            _use_stream(s)
        queue, wake, out = self.queues[ab], self.wake_channel[ab], self.out
        with self.lock:
            while self._wait(queue, wake):
                v = queue.popleft()
                x = out[(v, a)]
                with self._unlocked():
                    t = time.perf_counter()
                    try:
                        y = copy_tensor(x, dst, stream)
                    except RuntimeError as e:
                        raise BackendError(
                            f"copy of node {v}'s output from {src.name} to {dst.name}: {e}"
                        ) from None
                    arrival = time.perf_counter()
                self.transfers.append((v, a, b, t - self.t0, arrival - self.t0))
                out[(v, b)] = y
                self._arrive(v, b)


def copy_side(src: VirtualDevice, dst: VirtualDevice) -> VirtualDevice:
    """The device whose stream makes copies ``src -> dst``: the GPU side of a host↔device
    copy, the destination between two GPUs (or two CPU workers: no stream)."""
    return src if src.is_cuda and not dst.is_cuda else dst


def copy_tensor(x, dst: VirtualDevice, stream):
    """``x`` copied to ``dst``: a ``clone`` between CPU workers, else a copy on ``stream``
    (the GPU side's: host↔device or device↔device), synchronised."""
    if stream is None:
        return x.clone()
    y = x.to(dst.torch_device, copy=True, non_blocking=True)
    stream.synchronize()
    return y


def keep_host_memory() -> bool:
    """Make the C library keep freed host memory for reuse, as torch's caching allocator
    does on a GPU (module docstring): glibc's ``mallopt`` with ``M_MMAP_THRESHOLD`` (no
    ``mmap`` per tensor) and ``M_TRIM_THRESHOLD`` (no return of freed memory to the
    system) at their largest. Process-wide and lasting: memory freed by the process stays
    with it for reuse. Returns whether it took effect (False without glibc)."""
    global _HOST_MEMORY_KEPT
    if _HOST_MEMORY_KEPT is None:
        import ctypes
        import ctypes.util

        try:
            mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
        except (AttributeError, OSError, TypeError):  # not glibc
            _HOST_MEMORY_KEPT = False
        else:
            # the 64-bit maximum of each (glibc's HEAP_MAX_SIZE / 2, and INT_MAX)
            _HOST_MEMORY_KEPT = bool(
                mallopt(_M_MMAP_THRESHOLD, 32 * 2**20) and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
            )
    return _HOST_MEMORY_KEPT


#: glibc's ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HOST_MEMORY_KEPT: bool | None = None


def _scheduler_times() -> tuple[float, float] | None:
    """This thread's time on a CPU and time ready to run (on a CPU or waiting for one),
    in seconds, from Linux's scheduler statistics; None where there are none."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            ran, waited = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return None
    return ran * 1e-9, (ran + waited) * 1e-9


def _use_stream(stream) -> None:
    """Make ``stream`` this thread's current stream on its GPU (torch's current stream
    is per thread), so kernels and copies issued by the thread go to it."""
    if stream is not None:
        import torch

        torch.cuda.set_stream(stream)
