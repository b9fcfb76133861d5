"""Profiled kernel costs: every distinct kernel of some graphs, timed per device kind.

For each device kind (:func:`~placegym.envs.real.devices.device_kind`) and each
distinct kernel signature (:func:`placegym.envs.core.costs.kernel_signature`) of the graphs,
the cost is a median of measured durations. Two ways to measure (``mode``):

- ``"isolated"``: the kernel runs alone on the first device of the kind, on random
  operands of its shapes: ``warmup`` untimed calls, then ``repeats`` timed calls.
- ``"run"``: each graph is executed by the backend on the devices of the kind, in turn
  with its nodes dealt round-robin over all of them in topological order (every device
  busy at once; two executions in three) and with all of them on one device (the others
  idle; one in three) (:func:`profile_placements`): ``warmup`` untimed executions of
  each, then timed ones until there are ``repeats`` of them and ``seconds`` have
  passed; the cost is the median over the timed executions and over the nodes with that
  signature of the kernel's span as the executor records it. The kernels then meet the
  caches, the memory allocator and the other devices' load that they meet in a run. On
  CPU workers of this project's 2-core machine, at FFNN / 2, an elementwise kernel
  reading tensors produced a few kernels earlier took 2.2-3.3x its isolated time, a
  matmul 1.1-1.4x; and a kernel takes 6-9% longer while the other worker runs (18% at
  FFNN / 4: the workers share caches, memory bandwidth and the interpreter). The
  simulator's durations do not depend on what else runs, so the profile mixes the two
  cases. The mix is fitted: over calibrations of FFNN / 2 on two CPU workers followed
  by rank checks of placements from balanced to all on one device, the measured
  makespans came out 5% shorter than the simulated ones on average with every
  execution round-robin (7 calibrations), 5% longer with half of them on one device (4);
  two in three round-robin centres them.

``mode="auto"`` (the default) is ``"run"`` on CPU workers and ``"isolated"`` on GPUs.

- On a GPU each call is timed with CUDA events on the device's compute stream (a
  partition's green-context stream for ``cuda:i%N``): device time, without the host's
  launch and synchronisation cost, which calibration fits as the launch overhead. The
  calls are queued behind a short GPU sleep, so the host's launch latency does not leave
  gaps between the events.
- On CPU workers each call is timed with ``perf_counter`` under the workers' torch
  thread count: the same span the executor records for a node.

The result, ``{kind: {signature: seconds}}``, is a cluster's ``profile``
(:mod:`placegym.envs.core.costs`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from placegym.envs.core.costs import signatures
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.real.devices import VirtualDevice, device_kind, open_stream, parse_devices
from placegym.envs.real.kernels import Kernel, build_kernels, make_tensors
from placegym.envs.real.run_costs import RunCosts, run_costs

if TYPE_CHECKING:
    from placegym.envs.real.executor import Measurement

__all__ = [
    "PROFILE_MODES",
    "kernel_medians",
    "profile_from_runs",
    "profile_in_run",
    "profile_kernels",
    "profile_placements",
    "profile_with_costs",
    "time_kernel",
    "timed_in_runs",
]

#: How kernels are timed (module docstring).
PROFILE_MODES = ("auto", "run", "isolated")

#: Least seconds of timed executions of each graph in mode ``"run"`` (beyond
#: ``repeats`` executions). On this project's 2-core virtual machine, idle, the cores'
#: speed varies by about 12% from one execution to the next and drifts by 4-9% between
#: stretches of 10 s: kernel costs timed over 10 s were off the level of the next 45 s by
#: 4.4% (standard deviation; at most 12%), over 30 s by 2.2% (at most 4.5%).
#: ``placegym calibrate`` times for 30 s.
RUN_SECONDS = 10.0

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
    seconds: float = RUN_SECONDS,
    threads: int = 1,
    seed: int = 0,
    mode: str = "auto",
) -> dict[str, dict[str, float]]:
    """``{kind: {signature: median seconds}}`` for every device kind of ``devices`` and
    every distinct kernel of ``graphs`` (module docstring; ``mode``: ``"auto"``,
    ``"run"`` or ``"isolated"``; in runs, timed executions continue until ``repeats``
    of them and ``seconds`` have passed)."""
    return profile_with_costs(
        graphs,
        devices,
        warmup=warmup,
        repeats=repeats,
        seconds=seconds,
        threads=threads,
        seed=seed,
        mode=mode,
    )[0]


def profile_with_costs(
    graphs: Sequence[Graph],
    devices: str | Sequence[VirtualDevice],
    *,
    warmup: int = 2,
    repeats: int = 7,
    seconds: float = RUN_SECONDS,
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
        if timed_in_runs(devs[0], mode):
            out[kind], costs[kind] = _profile_runs(
                graphs, devs, warmup, (repeats, seconds), seed, threads
            )
        else:
            out[kind] = _profile_isolated(graphs, devs[0], warmup, repeats, threads, seed)
    return out, costs


def timed_in_runs(device: VirtualDevice, mode: str) -> bool:
    """Whether ``mode`` times the kernels of ``device``'s kind in runs (module
    docstring: ``"auto"`` does on CPU workers)."""
    return mode == "run" or (mode == "auto" and not device.is_cuda)


def profile_in_run(
    graphs: Sequence[Graph],
    devices: Sequence[VirtualDevice],
    *,
    warmup: int = 2,
    repeats: int = 7,
    seconds: float = RUN_SECONDS,
    seed: int = 0,
    threads: int = 1,
) -> dict[str, float]:
    """``{signature: median seconds}`` of the kernels of ``graphs`` as they run on
    ``devices`` (one kind), each graph executed with its nodes dealt round-robin over the
    devices in topological order, at least ``repeats`` times and for ``seconds`` (module
    docstring, ``mode="run"``)."""
    return _profile_runs(graphs, devices, warmup, (repeats, seconds), seed, threads)[0]


def _profile_runs(
    graphs: Sequence[Graph],
    devices: Sequence[VirtualDevice],
    warmup: int,
    least: tuple[int, float],
    seed: int,
    threads: int,
) -> tuple[dict[str, float], RunCosts]:
    """:func:`profile_in_run` and the :class:`.RunCosts` of the same executions (device
    indices in them are positions in ``devices``)."""
    from placegym.envs.real.executor import TorchExecutor

    timed = []
    for g in graphs:
        ex = TorchExecutor(g, devices, threads=threads, warmup=0, repeats=1, seed=seed)
        placements = profile_placements(g, len(devices))
        for p in placements * warmup:
            ex.run(p)
        runs: list[tuple[Graph, Placement, Measurement]] = []
        t0 = time.perf_counter()
        while len(runs) < least[0] or time.perf_counter() - t0 < least[1]:
            p = placements[len(runs) % len(placements)]
            runs.append((g, p, ex.run(p)))
        timed += runs
    return profile_from_runs(timed)


def profile_from_runs(
    runs: Sequence[tuple[Graph, Placement, Measurement]],
) -> tuple[dict[str, float], RunCosts]:
    """``{signature: median seconds}`` of the kernels in timed executions (each a graph,
    a placement and the measurement of one execution), and their :class:`.RunCosts`."""
    return kernel_medians(runs), run_costs(runs)


def kernel_medians(
    runs: Sequence[tuple[Graph, Placement, Measurement]],
) -> dict[str, float]:
    """``{signature: median seconds}`` of the kernels in timed executions (as for
    :func:`profile_from_runs`), over executions and over the nodes of each signature."""
    spans: dict[str, list[float]] = {}
    for g, _, m in runs:
        took = (m.finish - m.start).tolist()
        for v, sig in enumerate(signatures(g)):
            if sig is not None:
                spans.setdefault(sig, []).append(took[v])
    return {sig: float(np.median(ts)) for sig, ts in spans.items()}


def profile_placements(graph: Graph, devices: int) -> list[Placement]:
    """The placements of ``graph`` that mode ``"run"`` times, in turn: twice the nodes
    dealt round-robin over the ``devices`` in topological order (every device busy,
    copies between them after nearly every node), then all nodes on one device; once
    for each device (module docstring)."""
    order = graph.topological_order.copy()
    dealt = np.empty(graph.num_nodes, dtype=np.int64)
    dealt[order] = np.arange(graph.num_nodes) % devices
    both = Placement(device=dealt, order=order)
    if devices == 1:
        return [both]
    out = []
    for d in range(devices):
        out += [both, both, Placement(device=np.full(graph.num_nodes, d), order=order)]
    return out


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
    from placegym.envs.real.executor import BackendError

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
