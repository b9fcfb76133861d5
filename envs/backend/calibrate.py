"""Calibration: measure a machine through the real backend and write its cluster JSON.

Everything is measured through :class:`~placegym.envs.backend.executor.TorchExecutor`
itself, so per-node and per-copy overheads of the runtime are part of the figures:

- per device: FLOP/s from a chain of square matmuls (``2 m³`` FLOP each), memory
  bandwidth from a chain of large elementwise sums (3 × size bytes each), and the launch
  overhead: what the executor adds to every kernel beyond the kernel's own time
  (:func:`~placegym.envs.backend.probes.dispatch_overhead`);
- with ``graphs`` (``placegym calibrate --profile``): the cost of every distinct kernel
  of the graphs on every device kind, timed as the kernels run on CPU workers and alone
  on GPUs (:mod:`.profile`; ``profile_mode``), written as the
  cluster's ``profile``; every device names its ``kind``. The simulator then uses those
  costs instead of the roofline for those kernels (:mod:`placegym.envs.costs`);
- per ordered device pair: the bandwidth from the time of one copy alone (as a channel
  makes it) for several tensor sizes, and the latency from a chain of tiny kernels
  alternating between the two devices (:func:`~placegym.envs.backend.probes.hop_latency`:
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

:func:`rank_check` reports the Spearman rank correlation and the median relative error
of simulated vs measured makespans of random placements (``placegym calibrate --check``).
It refuses device sets that share hardware by construction
(:func:`~placegym.envs.backend.devices.shared_hardware`), whose contention the simulator
does not model, unless told to run anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placegym.envs.backend.devices import (
    VirtualDevice,
    device_kind,
    parse_devices,
    shared_hardware,
)
from placegym.envs.backend.executor import TorchExecutor
from placegym.envs.backend.probes import (
    chains,
    copy_times,
    dispatch_overhead,
    hop_latency,
    probe_size,
)
from placegym.envs.backend.profile import profile_with_costs
from placegym.envs.backend.run_costs import RunCosts
from placegym.envs.cluster import Cluster, Device, Level
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement

__all__ = ["RankCheck", "calibrate", "check_placements", "rank_check", "spearman"]


def _measure(graph: Graph, devices: str, device: np.ndarray, repeats: int):
    ex = TorchExecutor(graph, devices, warmup=1, repeats=repeats)
    return ex.run(Placement(device=device, order=np.arange(graph.num_nodes)))


def _device_rates(devices: str, d: int, size: int, repeats: int) -> tuple[float, float, float]:
    """(FLOP/s, bytes/s, launch overhead s) of device ``d``.

    FLOP/s and bytes/s come from kernel times, with the bytes the simulator counts for a
    sum (output + each distinct input once); the launch overhead is the executor's
    per-kernel cost (:func:`~placegym.envs.backend.probes.dispatch_overhead`).
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
            (:func:`~placegym.envs.backend.profile.profile_kernels`: ``auto``, ``run``
            or ``isolated``).
    """
    vds = parse_devices(devices)
    rates = [_device_rates(devices, d, size or probe_size(v), repeats) for d, v in enumerate(vds)]
    profile, costs = profile_with_costs(graphs, vds, mode=profile_mode) if graphs else (None, {})
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
        name=name or f"calibrated-{devices}",
        profile=profile,
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


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties)."""

    def ranks(a: np.ndarray) -> np.ndarray:
        order = np.argsort(a, kind="mergesort")
        r = np.empty(len(a))
        r[order] = np.arange(len(a))
        for val in np.unique(a):  # average ties
            idx = a == val
            r[idx] = r[idx].mean()
        return r

    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


@dataclass(frozen=True)
class RankCheck:
    """Simulated vs measured makespans of the same placements.

    Attributes:
        spearman: rank correlation of ``simulated`` and ``measured``.
        simulated, measured: ``(P,)`` makespans (s); measured ones are medians over the
            undisturbed runs of each placement (:func:`rank_check`).
        cpu_share: how undisturbed the CPU workers were during the measurements: the
            median over every timed run of
            :attr:`~placegym.envs.backend.executor.Measurement.cpu_share` (about 1 on
            an otherwise idle machine, NaN without CPU workers).
        runs: ``(P,)`` timed runs of each placement.
        disturbed: ``(P,)`` of those, runs whose share was below the quiet level (left
            out of the median while enough others were not).
    """

    spearman: float
    simulated: np.ndarray
    measured: np.ndarray
    cpu_share: float
    runs: np.ndarray
    disturbed: np.ndarray

    @property
    def relative_errors(self) -> np.ndarray:
        """``|simulated - measured| / measured`` per placement."""
        return np.abs(self.simulated - self.measured) / self.measured

    @property
    def median_relative_error(self) -> float:
        """The median of :attr:`relative_errors`."""
        return float(np.median(self.relative_errors))


def check_placements(graph: Graph, devices: int, count: int, seed: int) -> list[Placement]:
    """``count`` random placements of ``graph`` on ``devices`` devices, in topological
    order, whose makespans span the range from balanced to all on one device.

    Placement ``i`` gives one device (drawn uniformly) the share
    ``m_i = 1/D + (1 - 1/D) (i + u_i) / count`` of the nodes, ``u_i ~ U(0, 1)``, and the
    other devices the rest in shares drawn from ``Dirichlet(1)``; then the nodes are dealt
    to the devices in those shares (rounded), in random order. The largest share is
    stratified: the placements spread evenly from balanced to lopsided, which sets their
    makespans apart (with shares drawn from ``Dirichlet(1)`` outright and every node's
    device drawn from them, two devices' placements bunch by chance, and placements whose
    makespans differ by less than the measurement's noise are ranked by the noise).
    Seeded by ``seed`` alone; nothing is chosen by its outcome.
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        top = 1 / devices + (1 - 1 / devices) * (i + rng.random()) / max(count, 1)
        w = np.zeros(devices)
        j = int(rng.integers(devices))
        w[j] = top
        rest = [k for k in range(devices) if k != j]
        if rest:
            w[rest] = (1 - top) * rng.dirichlet(np.ones(len(rest)))
        dev = _deal(w, graph.num_nodes, rng)
        out.append(Placement(device=dev, order=graph.topological_order.copy()))
    return out


def _deal(shares: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(n,)`` devices in random order, device ``k`` on ``shares[k] * n`` nodes (rounded
    by largest remainder)."""
    want = shares / shares.sum() * n
    counts = np.floor(want).astype(np.int64)
    counts[np.argsort(counts - want)[: n - counts.sum()]] += 1
    dev = np.repeat(np.arange(len(shares)), counts)
    rng.shuffle(dev)
    return dev


def rank_check(
    graph: Graph,
    cluster: Cluster,
    devices: str,
    *,
    placements: int = 20,
    seed: int = 0,
    repeats: int = 15,
    quiet: float = 0.9,
    allow_shared: bool = False,
) -> RankCheck:
    """Spearman and errors of simulated vs measured makespans of the
    :func:`check_placements` of ``graph``.

    Measurements are interleaved to cancel drift (the machine warming up, other load):
    one untimed round over all placements, then ``repeats`` timed rounds, each running
    every placement once. A run is *disturbed* when its CPU workers ran less than
    ``quiet`` of the time they were ready to run (another process had their core;
    :attr:`~placegym.envs.backend.executor.Measurement.cpu_share`); each placement with
    disturbed runs is run again, up to ``repeats`` more times, until it has ``repeats``
    undisturbed ones. Its measured makespan is the median of its undisturbed runs, or of
    all its runs when fewer than half of them are undisturbed (the machine stayed busy:
    :attr:`RankCheck.cpu_share` says so). Many rounds are needed on a virtual machine:
    on this project's 2-core VM, idle, one run of a placement of FFNN / 2 varies by
    about 10% (the cores' speed varies from second to second), so a median of 5 runs
    still misorders placements whose makespans differ by less than 5%.

    Raises:
        ValueError: ``devices`` share hardware by construction (streams or partitions of
            one GPU, more CPU workers than cores) and ``allow_shared`` is False: their
            contention is not in the simulator, so no correlation can be expected.
    """
    from placegym.envs.simulator import simulate

    notes = shared_hardware(parse_devices(devices))
    if notes and not allow_shared:
        raise ValueError(
            f"devices: {devices!r} are not independent devices ({notes[0]}); a rank check "
            f"on them measures contention the simulator does not model. Use several GPUs "
            f"('cuda:0,cuda:1'), CPU workers ('cpu#2') or a GPU with CPU workers "
            f"('cuda:0,cpu#2'), or allow shared devices explicitly"
        )
    if repeats < 1:
        raise ValueError(f"repeats: need at least 1 timed round, got {repeats}")
    ex = TorchExecutor(graph, devices, warmup=0, repeats=1)
    chosen = check_placements(graph, cluster.num_devices, placements, seed)
    sim = np.array([simulate(graph, cluster, p).makespan for p in chosen])
    times, shares = _measure_rounds(ex, chosen, repeats, quiet)
    real, disturbed = np.empty(len(chosen)), np.empty(len(chosen), dtype=np.int64)
    for i, (t, sh) in enumerate(zip(times, shares, strict=True)):
        calm = ~(sh < quiet)  # NaN (no scheduler statistics) counts as undisturbed
        real[i] = np.median(t[calm] if 2 * calm.sum() >= len(t) else t)
        disturbed[i] = len(t) - calm.sum()
    every = np.concatenate(shares)
    share = float(np.median(every[np.isfinite(every)])) if np.isfinite(every).any() else np.nan
    runs = np.array([len(t) for t in times])
    return RankCheck(spearman(sim, real), sim, real, share, runs, disturbed)


def _measure_rounds(ex: TorchExecutor, chosen: list[Placement], rounds: int, quiet: float):
    """Per placement: ``(runs,)`` makespans and CPU shares of its timed runs (see
    :func:`rank_check`: interleaved rounds, then disturbed runs made up)."""
    for p in chosen:  # untimed
        ex.run(p)
    times: list[list[float]] = [[] for _ in chosen]
    shares: list[list[float]] = [[] for _ in chosen]

    def run(i: int) -> None:
        m = ex.run(chosen[i])
        times[i].append(m.makespan)
        shares[i].append(m.cpu_share)

    for _ in range(rounds):
        for i in range(len(chosen)):
            run(i)
    for _ in range(rounds):
        short = [i for i, sh in enumerate(shares) if sum(not x < quiet for x in sh) < rounds]
        if not short:
            break
        for i in short:
            run(i)
    return [np.array(t) for t in times], [np.array(s) for s in shares]
