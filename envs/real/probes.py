"""Timed probes of a device set through the executor: dispatch overhead, copies, shared
hardware, and per-node prediction error.

- :func:`dispatch_overhead`: what the runtime adds to every kernel. A chain of tiny
  kernels runs on one device; the overhead is its time per node minus the kernel's own
  time measured alone (:func:`~placegym.envs.real.profile.time_kernel`). Calibration
  uses it as the device's ``launch_overhead``; ``make bench`` reports it.
- :func:`copy_times`, :func:`hop_latency`: a channel's cost. The time of one copy alone
  for several sizes gives its bandwidth; a chain of tiny kernels alternating between two
  devices against the same chain on one gives what each dependency between them adds
  (wake-ups and a tiny copy): the latency.
- :func:`measure_sharing`: whether virtual devices share hardware. Each device runs a
  chain of matmuls alone, then all devices run theirs at once; a device whose work takes
  more than ``threshold`` × longer when all are busy shares hardware with the others
  (streams of one GPU slow down about k-fold; CPU workers on free cores barely).
- :func:`node_times`, :func:`node_errors`: measured vs simulated time of every node of a
  graph run on one device, node after node.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.real.devices import VirtualDevice, open_stream, parse_devices
from placegym.envs.real.executor import TorchExecutor, copy_side, copy_tensor
from placegym.envs.real.profile import time_kernel

__all__ = [
    "Sharing",
    "copy_times",
    "dispatch_overhead",
    "hop_latency",
    "measure_sharing",
    "node_errors",
    "node_times",
    "probe_size",
]


def probe_size(device: VirtualDevice) -> int:
    """Side of the probe matmuls: a millisecond or so of work on the device."""
    return 2048 if device.is_cuda else 256


def chains(sizes: list[int], length: int, kind: str = "matmul") -> Graph:
    """One chain per entry of ``sizes``: an input of ``size × size`` then ``length``
    dependent kernels (square matmuls by a resident weight, or sums ``x + x``)."""
    from placegym.envs.core.specs import GraphBuilder

    b = GraphBuilder()
    for size in sizes:
        shape = [size, size]
        x = b.input(shape)
        for _ in range(length):
            if kind == "matmul":
                x = b.einsum("ik,kj->ij", [{"node": x}, {"param": shape}], shape, 0, [shape] * 2)
            else:
                x = b.add("sum", flops=size * size, shape=shape, layer=0, args=[{"node": x}] * 2)
    return b.build(f"probe-{kind}")


def dispatch_overhead(devices: str, d: int, *, count: int = 200, repeats: int = 5) -> float:
    """Seconds the executor adds to each kernel on device ``d`` (module docstring); >= 0."""
    g = chains([4], count, "sum")
    ex = TorchExecutor(g, devices, warmup=1, repeats=repeats)
    m = ex.run(Placement(device=np.full(g.num_nodes, d), order=np.arange(g.num_nodes)))
    per_node = m.makespan / g.num_nodes
    device = ex.devices[d]
    own = time_kernel(g, ex.kernels, 1, device, open_stream(device, compute=True), repeats=25)
    return max(0.0, per_node - float(np.median(own)))


def copy_times(
    src: VirtualDevice, dst: VirtualDevice, sizes: Sequence[int], *, repeats: int = 5
) -> np.ndarray:
    """``(len(sizes),)`` median seconds of one copy of a ``size × size`` float32 tensor
    from ``src`` to ``dst``, alone, the way a channel makes it
    (:func:`~placegym.envs.real.executor.copy_tensor`)."""
    import torch

    stream = open_stream(copy_side(src, dst), compute=False)
    out = np.empty(len(sizes))
    for i, size in enumerate(sizes):
        x = torch.randn(size, size).to(src.torch_device)
        _synchronize(src)
        times = []
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            for r in range(repeats + 1):
                t = time.perf_counter()
                copy_tensor(x, dst, stream)
                if r:  # the first is a warm-up
                    times.append(time.perf_counter() - t)
        out[i] = np.median(times)
    return out


def hop_latency(devices: str, a: int, b: int, *, count: int = 64, repeats: int = 5) -> float:
    """Seconds a dependency between devices ``a`` and ``b`` adds beyond the copy's bytes:
    a chain of tiny kernels alternating between them against the same chain on ``a``
    alone, per hop (the channel's wake-up, a tiny copy, the consumer's wake-up)."""
    g = chains([4], count, "sum")
    ex = TorchExecutor(g, devices, warmup=1, repeats=repeats)
    order = np.arange(g.num_nodes)
    local = ex.run(Placement(device=np.full(g.num_nodes, a), order=order)).makespan
    hops = ex.run(Placement(device=np.where(order % 2 == 0, a, b), order=order)).makespan
    return max(0.0, (hops - local) / (g.num_nodes - 1))


@dataclass(frozen=True)
class Sharing:
    """Probe times of each device alone and while every device is busy.

    Attributes:
        names: the devices.
        alone, together: ``(k,)`` seconds of each device's probe work.
        threshold: slowdown above which a device counts as sharing hardware.
    """

    names: list[str]
    alone: np.ndarray
    together: np.ndarray
    threshold: float = 1.5

    @property
    def slowdown(self) -> np.ndarray:
        """``(k,)`` together / alone."""
        return self.together / self.alone

    @property
    def shared(self) -> list[str]:
        """Devices that slow down by more than ``threshold`` when all are busy."""
        return [n for n, s in zip(self.names, self.slowdown, strict=True) if s > self.threshold]

    @property
    def parallel_speedup(self) -> float:
        """Sum of the alone times over the longest all-busy time: how many devices' work
        gets done at once (``k`` for ``k`` independent alike devices, about 1 for streams
        of one GPU)."""
        return float(self.alone.sum() / self.together.max())

    def lines(self) -> list[str]:
        """A human summary: per-device slowdown, then the verdict."""
        out = [
            f"  {n:<12} alone {a * 1e3:8.2f} ms   all busy {t * 1e3:8.2f} ms   {s:5.2f}x"
            for n, a, t, s in zip(
                self.names, self.alone, self.together, self.slowdown, strict=True
            )
        ]
        k = len(self.names)
        verdict = (
            f"shared hardware: {', '.join(self.shared)} slow down more than "
            f"{self.threshold}x when all devices are busy (parallel speedup "
            f"{self.parallel_speedup:.2f} of {k}): not independent devices (they share "
            f"hardware with each other or, on a busy machine, with other processes)"
            if self.shared
            else f"independent: parallel speedup {self.parallel_speedup:.2f} of {k}"
        )
        return [*out, verdict]


def measure_sharing(
    devices: str, *, length: int = 8, repeats: int = 9, threshold: float = 1.5
) -> Sharing:
    """Time each device's probe chain alone, then all at once (module docstring).

    The two are interleaved, ``repeats`` rounds of each device alone and all together,
    and each counts with its shortest round: other load only lengthens a round, and on a
    shared virtual machine a burst of it lasts several rounds. On this project's 2-core
    machine, idle, probes of ``cpu#2`` taking the median of 3-15 rounds, first alone
    then together, read a slowdown of 1.7-2.1 in 4 of 36 and called the workers shared;
    with the shortest of 9 interleaved rounds the largest slowdown in 24 probes was
    1.39 (none shared), and with a training process beside them 12 of 24 were flagged.
    """
    vds = parse_devices(devices)
    sizes = [probe_size(d) for d in vds]
    solo = []
    for d, size in enumerate(sizes):
        g = chains([size], length)
        p = Placement(device=np.full(g.num_nodes, d), order=np.arange(g.num_nodes))
        solo.append((TorchExecutor(g, devices, warmup=0, repeats=1), p))
    g = chains(sizes, length)
    dev = np.repeat(np.arange(len(vds)), length + 1)
    p = Placement(device=dev, order=np.arange(g.num_nodes))
    ex = TorchExecutor(g, devices, warmup=0, repeats=1)
    alone = np.full(len(vds), np.inf)
    together = np.full(len(vds), np.inf)
    for r in range(repeats + 1):
        times = [ex_d.run(p_d).makespan for ex_d, p_d in solo]
        m = ex.run(p)
        if r == 0:  # warm-up
            continue
        alone = np.minimum(alone, times)
        spans = [m.finish[dev == d].max() - m.start[dev == d].min() for d in range(len(vds))]
        together = np.minimum(together, spans)
    return Sharing([d.name for d in vds], alone, together, threshold=threshold)


def node_times(
    graph: Graph, devices: str, *, device: int = 0, repeats: int = 3
) -> tuple[Placement, np.ndarray]:
    """The placement of every node on ``device`` in topological order and each node's
    measured time in it: from its start to the next node's start (NaN for the last)."""
    n = graph.num_nodes
    p = Placement(device=np.full(n, device), order=graph.topological_order.copy())
    m = TorchExecutor(graph, devices, warmup=1, repeats=repeats).run(p)
    order = np.argsort(m.start, kind="stable")
    measured = np.full(n, np.nan)
    measured[order[:-1]] = np.diff(m.start[order])
    return p, measured


def node_errors(
    graph: Graph, cluster: Cluster, placement: Placement, measured: np.ndarray
) -> np.ndarray:
    """``|simulated - measured| / measured`` per node of :func:`node_times` (the last
    node left out): the simulated duration is the kernel plus the launch overhead."""
    from placegym.envs.sim.simulator import simulate

    keep = np.isfinite(measured)
    sim = simulate(graph, cluster, placement).duration
    return np.abs(sim[keep] - measured[keep]) / measured[keep]


def _synchronize(device: VirtualDevice) -> None:
    if device.is_cuda:
        import torch

        torch.cuda.synchronize(device.index)
