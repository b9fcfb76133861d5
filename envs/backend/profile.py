"""Profiled kernel costs: every distinct kernel of some graphs, timed per device kind.

For each device kind (:func:`~placegym.envs.backend.devices.device_kind`) and each
distinct kernel signature (:func:`placegym.envs.costs.kernel_signature`) of the graphs,
the cost is a median of measured durations. Two ways to measure (``mode``):

- ``"isolated"``: the kernel runs alone on the first device of the kind, on random
  operands of its shapes: ``warmup`` untimed calls, then ``repeats`` timed calls.
- ``"run"``: each graph is executed by the backend on all devices of the kind (nodes
  dealt round-robin in topological order, so the devices run at once), ``warmup``
  untimed and ``repeats`` timed executions; the cost is the median over the timed
  executions and over the nodes with that signature of the kernel's span as the
  executor records it. The kernels then meet the caches, the memory allocator and the
  other devices' load that they meet in a run: on CPU workers an elementwise kernel
  reading a tensor produced a few kernels earlier, and allocating its output afresh,
  took 4-6x its isolated time on this project's 2-core machine, a matmul 1.1-1.7x.

``mode="auto"`` (the default) is ``"run"`` on CPU workers and ``"isolated"`` on GPUs.

- On a GPU each call is timed with CUDA events on the device's compute stream (a
  partition's green-context stream for ``cuda:i%N``): device time, without the host's
  launch and synchronisation cost, which calibration fits as the launch overhead. The
  calls are queued behind a short GPU sleep, so the host's launch latency does not leave
  gaps between the events.
- On CPU workers each call is timed with ``perf_counter`` under the workers' torch
  thread count: the same span the executor records for a node.

The result, ``{kind: {signature: seconds}}``, is a cluster's ``profile``
(:mod:`placegym.envs.costs`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import numpy as np

from placegym.envs.backend.devices import VirtualDevice, device_kind, open_stream, parse_devices
from placegym.envs.backend.kernels import Kernel, build_kernels, make_tensors
from placegym.envs.backend.run_costs import RunCosts, run_costs
from placegym.envs.costs import signatures
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement

__all__ = [
    "PROFILE_MODES",
    "profile_in_run",
    "profile_kernels",
    "profile_with_costs",
    "time_kernel",
]

#: How kernels are timed (module docstring).
PROFILE_MODES = ("auto", "run", "isolated")

#: GPU clock cycles of the sleep queued before the timed calls (about 2-5 ms).
SLEEP_CYCLES = 5_000_000


def distinct_kernels(graphs: Iterable[Graph]) -> dict[str, tuple[Graph, list[Kernel], int]]:
    """The first ``(graph, kernels, node)`` of every kernel signature of ``graphs``."""
    out: dict[str, tuple[Graph, list[Kernel], int]] = {}
    for g in graphs:
        kernels = build_kernels(g)
        for v, sig in enumerate(signatures(g)):
            if sig is not None and sig not in out:
                out[sig] = (g, kernels, v)
    return out


def profile_kernels(
    graphs: Sequence[Graph],
    devices: str | Sequence[VirtualDevice],
    *,
    warmup: int = 2,
    repeats: int = 7,
    threads: int = 1,
    seed: int = 0,
    mode: str = "auto",
) -> dict[str, dict[str, float]]:
    """``{kind: {signature: median seconds}}`` for every device kind of ``devices`` and
    every distinct kernel of ``graphs`` (module docstring; ``mode``: ``"auto"``,
    ``"run"`` or ``"isolated"``)."""
    return profile_with_costs(
        graphs, devices, warmup=warmup, repeats=repeats, threads=threads, seed=seed, mode=mode
    )[0]


def profile_with_costs(
    graphs: Sequence[Graph],
    devices: str | Sequence[VirtualDevice],
    *,
    warmup: int = 2,
    repeats: int = 7,
    threads: int = 1,
    seed: int = 0,
    mode: str = "auto",
) -> tuple[dict[str, dict[str, float]], dict[str, RunCosts]]:
    """:func:`profile_kernels`, and the runtime's costs (:class:`.RunCosts`) read from
    the profiling executions of every kind profiled in runs."""
    if repeats < 1 or warmup < 0:
        raise ValueError(
            f"repeats, warmup: need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}"
        )
    if mode not in PROFILE_MODES:
        raise ValueError(f"mode: expected one of {', '.join(PROFILE_MODES)}, got {mode!r}")
    vds = parse_devices(devices) if isinstance(devices, str) else list(devices)
    of_kind: dict[str, list[VirtualDevice]] = {}
    for d in vds:
        of_kind.setdefault(device_kind(d), []).append(d)
    out: dict[str, dict[str, float]] = {}
    costs: dict[str, RunCosts] = {}
    for kind, devs in of_kind.items():
        in_run = mode == "run" or (mode == "auto" and not devs[0].is_cuda)
        if in_run:
            out[kind], costs[kind] = _profile_runs(graphs, devs, warmup, repeats, seed, threads)
        else:
            out[kind] = _profile_isolated(graphs, devs[0], warmup, repeats, threads, seed)
    return out, costs


def profile_in_run(
    graphs: Sequence[Graph],
    devices: Sequence[VirtualDevice],
    *,
    warmup: int = 2,
    repeats: int = 7,
    seed: int = 0,
    threads: int = 1,
) -> dict[str, float]:
    """``{signature: median seconds}`` of the kernels of ``graphs`` as they run on
    ``devices`` (one kind), each graph executed with its nodes dealt round-robin over the
    devices in topological order (module docstring, ``mode="run"``)."""
    return _profile_runs(graphs, devices, warmup, repeats, seed, threads)[0]


def _profile_runs(
    graphs: Sequence[Graph],
    devices: Sequence[VirtualDevice],
    warmup: int,
    repeats: int,
    seed: int,
    threads: int,
) -> tuple[dict[str, float], RunCosts]:
    """:func:`profile_in_run` and the :class:`.RunCosts` of the same executions (device
    indices in them are positions in ``devices``)."""
    from placegym.envs.backend.executor import TorchExecutor

    spans: dict[str, list[np.ndarray]] = {}
    timed = []
    for g in graphs:
        order = g.topological_order.copy()
        device = np.empty(g.num_nodes, dtype=np.int64)
        device[order] = np.arange(g.num_nodes) % len(devices)
        ex = TorchExecutor(g, devices, threads=threads, warmup=0, repeats=1, seed=seed)
        placement = Placement(device=device, order=order)
        for _ in range(warmup):
            ex.run(placement)
        runs = [ex.run(placement) for _ in range(repeats)]
        timed += [(g, placement, m) for m in runs]
        took = np.stack([m.finish - m.start for m in runs])  # (repeats, nodes)
        for v, sig in enumerate(signatures(g)):
            if sig is not None:
                spans.setdefault(sig, []).append(took[:, v])
    kernels = {sig: float(np.median(np.concatenate(ts))) for sig, ts in spans.items()}
    return kernels, run_costs(timed)


def _profile_isolated(
    graphs: Sequence[Graph],
    dev: VirtualDevice,
    warmup: int,
    repeats: int,
    threads: int,
    seed: int,
) -> dict[str, float]:
    """``{signature: median seconds}`` of every distinct kernel run alone on ``dev``."""
    kernels = distinct_kernels(graphs)
    stream = open_stream(dev, compute=True)
    return {
        sig: float(
            np.median(
                time_kernel(
                    g,
                    ks,
                    v,
                    dev,
                    stream,
                    warmup=warmup,
                    repeats=repeats,
                    seed=seed,
                    threads=threads,
                )
            )
        )
        for sig, (g, ks, v) in kernels.items()
    }


def _operands(graph: Graph, kernels: list[Kernel], v: int, device: str, seed: int) -> list:
    """Random producer outputs of ``v``'s shapes, in the spec's ``args`` order (a producer
    named twice is one tensor)."""
    import torch

    gen = torch.Generator().manual_seed(seed + v)
    made: dict[int, object] = {}
    out = []
    for a in graph.spec[v].get("args", []):
        if "node" in a:
            u = int(a["node"])
            if u not in made:
                k = kernels[u]
                made[u] = torch.randn(k.out_shape, generator=gen).to(
                    dtype=getattr(torch, k.dtype), device=device
                )
            out.append(made[u])
    return out


def time_kernel(
    graph: Graph,
    kernels: list[Kernel],
    v: int,
    device: VirtualDevice,
    stream=None,
    *,
    warmup: int = 2,
    repeats: int = 7,
    seed: int = 0,
    threads: int = 1,
) -> np.ndarray:
    """``(repeats,)`` seconds of node ``v``'s kernel run alone on ``device`` (module
    docstring); ``stream`` is the device's compute stream (None on the CPU)."""
    from placegym.envs.backend.executor import BackendError

    k = kernels[v]
    try:
        params, data = make_tensors(k, seed, device.torch_device)
        inputs = _operands(graph, kernels, v, device.torch_device, seed)
        if stream is None:
            return _time_on_cpu(lambda: k.fn(inputs, params, data), warmup, repeats, threads)
        return _time_on_gpu(lambda: k.fn(inputs, params, data), stream, warmup, repeats)
    except RuntimeError as e:  # e.g. CUDA out of memory
        raise BackendError(f"profiling node {v} ({k.kind}) on {device.name}: {e}") from None


def _time_on_cpu(call, warmup: int, repeats: int, threads: int) -> np.ndarray:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(warmup):
            call()
        times = np.empty(repeats)
        for i in range(repeats):
            t = time.perf_counter()
            call()
            times[i] = time.perf_counter() - t
        return times
    finally:
        torch.set_num_threads(before)


def _time_on_gpu(call, stream, warmup: int, repeats: int) -> np.ndarray:
    import torch

    with torch.cuda.stream(stream):
        for _ in range(warmup):
            call()
    stream.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
    with torch.cuda.stream(stream):
        if hasattr(torch.cuda, "_sleep"):  # keep the GPU busy while the calls are queued
            torch.cuda._sleep(SLEEP_CYCLES)
        events[0].record(stream)
        for i in range(repeats):
            call()
            events[i + 1].record(stream)
    stream.synchronize()
    return np.array([events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(repeats)])
