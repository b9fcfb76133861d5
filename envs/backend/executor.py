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
``clone``; torch releases the GIL inside kernels, so workers run in parallel),
``cuda:i`` / ``cuda:i#k`` run on GPU
streams (each worker and copy thread has its own stream and synchronises it, so
decisions are taken on completed work). Every worker and copy thread sets its own torch
intra-op thread count (``threads``). Times are host wall-clock (``perf_counter``).

Each :meth:`TorchExecutor.run` does ``warmup`` untimed and ``repeats`` timed executions and
reports the median makespan with the per-node times of that run.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from placegym.envs.backend.devices import VirtualDevice, parse_devices
from placegym.envs.backend.kernels import Kernel, build_kernels, param_seed
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement

__all__ = ["Measurement", "TorchExecutor"]


@dataclass(frozen=True)
class Measurement:
    """A timed execution: the median ``makespan`` (s) over ``makespans`` (every repeat),
    and of the median run (s from its start): ``start`` / ``finish`` ``(n,)`` per node and
    ``transfers`` ``(k, 5)`` rows ``(node, src, dst, start, arrival)`` per copy."""

    makespan: float
    makespans: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    transfers: np.ndarray


class BackendError(RuntimeError):
    """A kernel or copy failed; the message names the node and the device."""


class TorchExecutor:
    """Runs placements of one graph on real devices (see the module docstring).

    Args:
        graph: the graph; every node's ``spec`` must be executable (use
            :func:`~placegym.envs.backend.kernels.scale_graph` to shrink it first).
        devices: a device spec such as ``"cpu#2"`` or ``"cuda:0#4"``.
        threads: torch intra-op threads of each worker (1 suits ``cpu#k`` on k cores).
        warmup, repeats: untimed and timed executions per :meth:`run`.
        seed: seed of the input data and parameters.
        timeout: seconds after which a stuck execution raises.
    """

    def __init__(
        self,
        graph: Graph,
        devices: str = "cpu#2",
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
        self.devices: list[VirtualDevice] = parse_devices(devices)
        self.kernels: list[Kernel] = build_kernels(graph)
        self.warmup, self.repeats, self.seed, self.timeout = warmup, repeats, seed, timeout
        self.threads = threads
        torch.set_num_threads(threads)
        self._streams: dict[str, object] = {}
        self._tensors: dict[tuple[int, str], tuple[list, object]] = {}

    @property
    def num_devices(self) -> int:
        """Number of backend devices."""
        return len(self.devices)

    # ------------------------------------------------------------------ data
    def _materialise(self, v: int, device: VirtualDevice):
        """Params (and an input node's data) of ``v`` on ``device``, built once."""
        import torch

        key = (v, device.torch_device)
        if key not in self._tensors:
            k = self.kernels[v]
            dtype = getattr(torch, k.dtype)
            gen = torch.Generator().manual_seed(param_seed(self.seed, v))
            try:
                params = [
                    (torch.randn(s, generator=gen) / max(1, s[0]) ** 0.5).to(
                        dtype=dtype, device=device.torch_device
                    )
                    for s in k.param_shapes
                ]
                data = (
                    torch.randn(k.out_shape, generator=gen).to(
                        dtype=dtype, device=device.torch_device
                    )
                    if k.kind == "input"
                    else None
                )
            except RuntimeError as e:  # e.g. CUDA out of memory
                raise BackendError(
                    f"node {v} ({k.kind}) on {device.name}: cannot allocate its tensors: {e}"
                ) from None
            self._tensors[key] = (params, data)
        return self._tensors[key]

    def _stream(self, name: str, device: VirtualDevice):
        import torch

        if not device.is_cuda:
            return None
        if name not in self._streams:
            self._streams[name] = torch.cuda.Stream(device=device.torch_device)
        return self._streams[name]

    # ------------------------------------------------------------------ running
    def outputs(self, placement: Placement) -> list:
        """Execute ``placement`` once and return every node's output tensor (on its
        device). The values do not depend on the placement: a way to check the kernels."""
        self._prepare(placement)
        run = _Run(self, placement)
        run.execute()
        return [run.out[(v, d)] for v, d in enumerate(placement.device.tolist())]

    def run(self, placement: Placement) -> Measurement:
        """Execute ``placement`` ``warmup + repeats`` times; see :class:`Measurement`."""
        self._prepare(placement)
        runs = [_Run(self, placement) for _ in range(self.warmup + self.repeats)]
        spans = np.array([r.execute() for r in runs][self.warmup :])
        mid = int(np.argsort(spans)[len(spans) // 2])
        best = runs[self.warmup + mid]
        return Measurement(
            makespan=float(spans[mid]),
            makespans=spans,
            start=best.start,
            finish=best.finish,
            transfers=np.array(best.transfers, dtype=np.float64).reshape(-1, 5),
        )

    def _prepare(self, placement: Placement) -> None:
        placement.check(self.graph)
        if placement.num_nodes and placement.device.max() >= self.num_devices:
            i = int(np.argmax(placement.device >= self.num_devices))
            raise ValueError(
                f"device[{i}]: device index out of range for {self.num_devices} "
                f"backend devices, got {int(placement.device[i])}"
            )
        for v, d in enumerate(placement.device.tolist()):
            self._materialise(v, self.devices[d])


class _Run:
    """One execution: dispatcher and channel threads sharing one condition variable."""

    def __init__(self, ex: TorchExecutor, placement: Placement) -> None:
        self.ex, self.g = ex, ex.graph
        self.dev = placement.device.tolist()
        self.rank = placement.rank.tolist()
        n = self.g.num_nodes
        self.missing = self.g.in_degree.tolist()
        self.ready: list[list[tuple[int, int]]] = [[] for _ in ex.devices]
        self.out: dict[tuple[int, int], object] = {}  # (node, device) -> tensor
        self.channels: dict[tuple[int, int], deque] = {}
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.done = 0
        self.transfers: list[tuple[int, int, int, float, float]] = []
        self.started = threading.Event()
        self.error: BaseException | None = None
        self.cv = threading.Condition()
        cons = self.g.consumer_csr
        self.consumers = [cons[1][cons[0][v] : cons[0][v + 1]].tolist() for v in range(n)]
        for v in range(n):
            for c in self.consumers[v]:
                if self.dev[c] != self.dev[v]:
                    self.channels.setdefault((self.dev[v], self.dev[c]), deque())
            if self.missing[v] == 0:
                heapq.heappush(self.ready[self.dev[v]], (self.rank[v], v))

    def execute(self) -> float:
        """Run once; returns the makespan (times are kept on the instance)."""
        threads = [
            threading.Thread(target=self._guard, args=(self._worker, d), daemon=True)
            for d in range(len(self.ex.devices))
        ]
        threads += [
            threading.Thread(target=self._guard, args=(self._channel, ab), daemon=True)
            for ab in self.channels
        ]
        self.go = threading.Barrier(len(threads) + 1)
        for t in threads:
            t.start()
        self.go.wait()  # every thread is up: the clock starts now
        self.t0 = time.perf_counter()
        self.started.set()
        deadline = self.t0 + self.ex.timeout
        with self.cv:
            while self.done < self.g.num_nodes and self.error is None:
                if not self.cv.wait(timeout=max(0.0, deadline - time.perf_counter())):
                    self.error = BackendError(f"execution timed out after {self.ex.timeout} s")
            self.cv.notify_all()
        for t in threads:
            t.join(timeout=1.0)
        if self.error is not None:
            raise self.error
        return float(np.nanmax(self.finish)) if self.g.num_nodes else 0.0

    def _guard(self, fn, arg) -> None:
        import torch

        # OpenMP's thread count is per thread: set it in every worker, or a new thread
        # falls back to one OpenMP thread per core and oversubscribes the machine.
        torch.set_num_threads(self.ex.threads)
        self.go.wait()
        self.started.wait()
        try:
            fn(arg)
        except BaseException as e:
            with self.cv:
                self.error = self.error or e
                self.cv.notify_all()

    def _finished(self) -> bool:
        return self.done >= self.g.num_nodes or self.error is not None

    def _worker(self, d: int) -> None:
        device = self.ex.devices[d]
        stream = self.ex._stream(f"compute{d}", device)
        while True:
            with self.cv:
                while not self.ready[d] and not self._finished():
                    self.cv.wait()
                if self._finished():
                    return
                _, v = heapq.heappop(self.ready[d])
                inputs = [self.out[(u, d)] for u in self.g.predecessors(v).tolist()]
            y = self._compute(v, device, stream, inputs)
            with self.cv:
                self.out[(v, d)] = y
                self.done += 1
                remote = sorted({self.dev[c] for c in self.consumers[v]} - {d})
                for b in remote:
                    self.channels[(d, b)].append(v)
                self._arrive(v, d)
                self.cv.notify_all()

    def _compute(self, v: int, device: VirtualDevice, stream, inputs):
        import torch

        k = self.ex.kernels[v]
        params, data = self.ex._materialise(v, device)
        ordered = self._ordered_inputs(v, inputs)
        t = time.perf_counter()
        try:
            if stream is not None:
                with torch.cuda.stream(stream):
                    y = k.fn(ordered, params, data)
                stream.synchronize()
            else:
                y = k.fn(ordered, params, data)
        except RuntimeError as e:
            raise BackendError(f"node {v} ({k.kind}) on {device.name}: {e}") from None
        self.start[v], self.finish[v] = t - self.t0, time.perf_counter() - self.t0
        return y

    def _ordered_inputs(self, v: int, inputs: list) -> list:
        """Producer outputs in the spec's ``args`` order (inputs come in id order)."""
        by_id = dict(zip(self.g.predecessors(v).tolist(), inputs, strict=True))
        return [by_id[a["node"]] for a in self.g.spec[v].get("args", []) if "node" in a]

    def _arrive(self, v: int, d: int) -> None:
        """``v``'s output is now on device ``d``: consumers there may become ready.
        Called with the lock held."""
        for c in self.consumers[v]:
            if self.dev[c] == d:
                self.missing[c] -= 1
                if self.missing[c] == 0:
                    heapq.heappush(self.ready[d], (self.rank[c], c))

    def _channel(self, ab: tuple[int, int]) -> None:
        a, b = ab
        src_dev, dst_dev = self.ex.devices[a], self.ex.devices[b]
        stream = self._copy_stream(ab, dst_dev)
        queue = self.channels[ab]
        while True:
            with self.cv:
                while not queue and not self._finished():
                    self.cv.wait()
                if self._finished():
                    return
                v = queue.popleft()
                x = self.out[(v, a)]
            t = time.perf_counter()
            y = self._copy(x, v, src_dev, dst_dev, stream)
            arrival = time.perf_counter()
            with self.cv:
                self.transfers.append((v, a, b, t - self.t0, arrival - self.t0))
                self.out[(v, b)] = y
                self._arrive(v, b)
                self.cv.notify_all()

    def _copy_stream(self, ab: tuple[int, int], dst: VirtualDevice):
        return self.ex._stream(f"copy{ab[0]}-{ab[1]}", dst)

    def _copy(self, x, v: int, src: VirtualDevice, dst: VirtualDevice, stream):
        import torch

        try:
            if stream is None:
                return x.clone()
            with torch.cuda.stream(stream):
                y = x.to(dst.torch_device, copy=True, non_blocking=True)
            stream.synchronize()
            return y
        except RuntimeError as e:
            raise BackendError(
                f"copy of node {v}'s output from {src.name} to {dst.name}: {e}"
            ) from None
