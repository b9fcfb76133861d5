"""Calibration: measure a machine through the real backend and write its cluster JSON.

Everything is measured through :class:`~placegym.envs.real.executor.TorchExecutor`
itself, so per-node and per-copy overheads of the runtime are part of the figures:

- per device: FLOP/s from a chain of square matmuls (``2 m³`` FLOP each), memory
  bandwidth from a chain of large elementwise sums (3 × size bytes each), and the launch
  overhead: what the executor adds to every kernel beyond the kernel's own time
  (:func:`~placegym.envs.real.probes.dispatch_overhead`);
- with ``graphs`` (``placegym calibrate --profile``): the cost of every distinct kernel
  of the graphs on every device kind, timed as the kernels run on CPU workers and alone
  on GPUs (:mod:`.profile`; ``profile_mode``), written as the
  cluster's ``profile``; every device names its ``kind``. The simulator then uses those
  costs instead of the roofline for those kernels (:mod:`placegym.envs.core.costs`);
- per ordered device pair: the bandwidth from the time of one copy alone (as a channel
  makes it) for several tensor sizes, and the latency from a chain of tiny kernels
  alternating between the two devices (:func:`~placegym.envs.real.probes.hop_latency`:
  what a dependency across devices adds, wake-ups included), so a transfer takes
  ``latency + bytes / bandwidth`` as in the simulator;
- with kernels profiled in runs (CPU workers, :mod:`.profile`), the launch overhead of
  those devices and the latency between them are read off the profiling executions
  instead (:mod:`.run_costs`): the dispatcher's gap between consecutive kernels, and a
  copy's time on its channel plus its consumer's wake-up, as they are while the devices
  are busy together (the probes measure them with one device busy: in a run on CPU
  workers a copy thread or a waking worker may have to wait for the core the other
  worker holds);
- pairs are grouped into levels by bandwidth (sorted, split where consecutive
  bandwidths differ by more than ``level_gap``), written as a ``level_matrix``.

How well the fitted cluster predicts the devices is checked in :mod:`.check`
(``placegym calibrate --check``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placegym.envs.core.cluster import Cluster, Device, Level
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.real.devices import VirtualDevice, device_kind, parse_devices
from placegym.envs.real.executor import TorchExecutor
from placegym.envs.real.probes import (
    chains,
    copy_times,
    dispatch_overhead,
    hop_latency,
    probe_size,
)
from placegym.envs.real.profile import RUN_SECONDS, profile_with_costs
from placegym.envs.real.run_costs import RunCosts

__all__ = ["Probes", "calibrate", "fit_cluster", "probe_devices"]


def _measure(graph: Graph, devices: str, device: np.ndarray, repeats: int):
    ex = TorchExecutor(graph, devices, warmup=1, repeats=repeats)
    return ex.run(Placement(device=device, order=np.arange(graph.num_nodes)))


def _device_rates(devices: str, d: int, size: int, repeats: int) -> tuple[float, float, float]:
    """(FLOP/s, bytes/s, launch overhead s) of device ``d``.

    FLOP/s and bytes/s come from kernel times, with the bytes the simulator counts for a
    sum (output + each distinct input once); the launch overhead is the executor's
    per-kernel cost (:func:`~placegym.envs.real.probes.dispatch_overhead`).
    """
    launch = dispatch_overhead(devices, d, count=32, repeats=repeats)
    mm = chains([size] * 6, 1, "matmul")
    m = _measure(mm, devices, np.full(mm.num_nodes, d), repeats)
    flops = 2.0 * size**3 / max(float(np.median((m.finish - m.start)[1::2])), 1e-9)
    big = 4 * size
    add = chains([big] * 6, 1, "sum")
    m = _measure(add, devices, np.full(add.num_nodes, d), repeats)
    bandwidth = 2.0 * big * big * 4 / max(float(np.median((m.finish - m.start)[1::2])), 1e-9)
    return flops, bandwidth, launch


def _pair_bandwidth(src: VirtualDevice, dst: VirtualDevice, sizes, repeats: int) -> float:
    """Bytes/s of copies ``src -> dst``: the inverse slope of copy time over bytes."""
    nbytes = 4.0 * np.asarray(sizes, dtype=np.float64) ** 2
    times = copy_times(src, dst, sizes, repeats=repeats)
    slope = np.polyfit(nbytes, times, 1)[0] if len(set(sizes)) > 1 else 0.0
    return float(1.0 / slope) if slope > 0 else float(nbytes.max() / times.max())


def _copy_sizes(src: VirtualDevice, dst: VirtualDevice) -> tuple[int, ...]:
    """Sides of the square tensors sent over a channel: larger when a GPU is involved."""
    return (256, 1024, 2048, 4096) if src.is_cuda or dst.is_cuda else (64, 256, 512, 1024)


def calibrate(
    devices: str = "cpu#2",
    *,
    graphs: Sequence[Graph] = (),
    size: int | None = None,
    copy_sizes: tuple[int, ...] | None = None,
    repeats: int = 5,
    level_gap: float = 0.25,
    memory: float | None = None,
    name: str | None = None,
    profile_mode: str = "auto",
    profile_seconds: float = RUN_SECONDS,
) -> Cluster:
    """Measure ``devices`` and return the fitted :class:`Cluster` (module docstring).

    Args:
        devices: the backend devices (``cpu#k``, ``cuda:i``, ``cuda:i#k``, ``cuda:i%N``,
            comma lists).
        graphs: profile every distinct kernel of these graphs on every device kind.
        size: side of the calibration matmuls (elementwise sums use 4× it); default 256
            on CPU workers, 2048 on GPUs.
        copy_sizes: sides of the square tensors sent between devices (default: 64-1024
            between CPU workers, 256-4096 when a GPU is involved).
        repeats: timed runs per measurement.
        level_gap: relative bandwidth difference under which device pairs share a level.
        memory: bytes per device (default: the GPU's memory, or host RAM, shared by the
            virtual devices on it).
        name: the cluster's name (default ``calibrated-<devices>``).
        profile_mode: how ``graphs``' kernels are timed
            (:func:`~placegym.envs.real.profile.profile_kernels`: ``auto``, ``run``
            or ``isolated``).
        profile_seconds: least seconds of timed executions of each graph when its
            kernels are timed in runs.
    """
    probes = probe_devices(devices, size=size, copy_sizes=copy_sizes, repeats=repeats)
    profile, costs = (
        profile_with_costs(graphs, probes.devices, mode=profile_mode, seconds=profile_seconds)
        if graphs
        else (None, {})
    )
    return fit_cluster(probes, profile, costs, level_gap=level_gap, memory=memory, name=name)


@dataclass(frozen=True)
class Probes:
    """What :func:`calibrate` measures besides kernel costs (module docstring).

    Attributes:
        spec: the device spec; devices: the parsed devices.
        rates: per device ``(FLOP/s, bytes/s, launch overhead s)``.
        latency, bandwidth: ``(D, D)`` per ordered pair (s, bytes/s).
    """

    spec: str
    devices: list[VirtualDevice]
    rates: list[tuple[float, float, float]]
    latency: np.ndarray
    bandwidth: np.ndarray


def probe_devices(
    devices: str,
    *,
    size: int | None = None,
    copy_sizes: tuple[int, ...] | None = None,
    repeats: int = 5,
) -> Probes:
    """The :class:`Probes` of ``devices`` (arguments as for :func:`calibrate`)."""
    vds = parse_devices(devices)
    rates = [_device_rates(devices, d, size or probe_size(v), repeats) for d, v in enumerate(vds)]
    k = len(vds)
    lat = np.zeros((k, k))
    bw = np.full((k, k), np.inf)
    for a in range(k):
        for b in range(k):
            if a < b:  # a dependency's round trip a -> b -> a measures both directions
                lat[a, b] = lat[b, a] = hop_latency(devices, a, b, repeats=repeats)
            if a != b:
                sizes = copy_sizes or _copy_sizes(vds[a], vds[b])
                bw[a, b] = _pair_bandwidth(vds[a], vds[b], sizes, repeats)
    return Probes(devices, vds, rates, lat, bw)


def fit_cluster(
    probes: Probes,
    profile: dict[str, dict[str, float]] | None,
    costs: dict[str, RunCosts],
    *,
    level_gap: float = 0.25,
    memory: float | None = None,
    name: str | None = None,
) -> Cluster:
    """The cluster of ``probes``, kernel costs ``profile`` (None: the roofline) and the
    run ``costs`` of the kinds profiled in runs, which replace the probes' launch
    overheads and latencies there (arguments as for :func:`calibrate`)."""
    vds, k = probes.devices, len(probes.devices)
    rates, lat, bw = list(probes.rates), probes.latency.copy(), probes.bandwidth
    for kind, run in costs.items():
        of_kind = [d for d, v in enumerate(vds) if device_kind(v) == kind]
        _fit_run_costs(of_kind, run, rates, lat, bw)
    levels, matrix = _group_levels(lat, bw, level_gap)
    depth = len(levels) - 1
    mem = _default_memory(vds) if memory is None else [float(memory)] * k
    devs = tuple(
        Device(
            v.name,
            flops=f,
            memory=mv,
            mem_bandwidth=m,
            launch_overhead=o,
            path=(0,) * depth,
            kind=device_kind(v),
        )
        for v, (f, m, o), mv in zip(vds, rates, mem, strict=True)
    )
    return Cluster(
        devices=devs,
        levels=levels,
        level_matrix=matrix if k > 1 else None,
        name=name or f"calibrated-{probes.spec}",
        profile=profile or None,
    )


def _fit_run_costs(
    of_kind: list[int], run: RunCosts, rates: list, lat: np.ndarray, bw: np.ndarray
) -> None:
    """Launch overheads and latencies of the devices ``of_kind`` (one kind, profiled in
    runs) as their executions showed them (:mod:`.run_costs`), in place of the probes'."""
    if np.isfinite(run.launch):
        for d in of_kind:
            rates[d] = (*rates[d][:2], run.launch)
    for i, a in enumerate(of_kind):
        for j, b in enumerate(of_kind):
            fitted = run.latency(i, j, bw[a, b]) if a != b else float("nan")
            if np.isfinite(fitted):
                lat[a, b] = fitted


def _default_memory(vds: list[VirtualDevice]) -> list[float]:
    """Per device: its GPU's memory, or host RAM, split among the virtual devices on it."""
    share = {d.torch_device: sum(e.torch_device == d.torch_device for e in vds) for d in vds}
    out = []
    for d in vds:
        if d.is_cuda:
            import torch

            total = float(torch.cuda.get_device_properties(d.index).total_memory)
        else:
            import psutil

            total = float(psutil.virtual_memory().total)
        out.append(total / share[d.torch_device])
    return out


def _group_levels(lat: np.ndarray, bw: np.ndarray, gap: float):
    """Levels from pair bandwidths: fastest first, a new level where bandwidth drops by
    more than ``gap``; each level's figures are the means of its pairs."""
    k = lat.shape[0]
    pairs = [(a, b) for a in range(k) for b in range(k) if a != b]
    if not pairs:
        return (Level("local", 1e12, 0.0),), None
    order = sorted(pairs, key=lambda p: -bw[p])
    groups: list[list[tuple[int, int]]] = [[order[0]]]
    for p in order[1:]:
        prev = groups[-1][-1]
        if bw[p] < bw[prev] * (1 - gap):
            groups.append([p])
        else:
            groups[-1].append(p)
    matrix = np.zeros((k, k), dtype=np.int64)
    levels = []
    for i, grp in enumerate(groups):
        for p in grp:
            matrix[p] = i
        levels.append(
            Level(
                f"level{i}",
                float(np.mean([bw[p] for p in grp])),
                float(np.mean([lat[p] for p in grp])),
            )
        )
    return tuple(levels), matrix.tolist()
