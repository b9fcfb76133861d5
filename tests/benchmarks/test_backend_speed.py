"""Real-backend dispatch overhead (``make bench``): what the executor adds to each kernel.

A chain of tiny kernels (``x + x`` on 4 × 4 floats) runs on one device, and on every
device at once (one chain each); the overhead per kernel is the time per node minus the
kernel's own time measured alone in the same run (the baseline). Target: <= 20 µs per
kernel on one CPU worker (``cuda:0`` and ``cuda:0,cpu#2`` are measured when a GPU is
present).
"""

import numpy as np
import pytest
import torch

from placegym.envs import Placement
from placegym.envs.real import TorchExecutor
from placegym.envs.real.devices import open_stream
from placegym.envs.real.probes import chains
from placegym.envs.real.profile import time_kernel

pytestmark = pytest.mark.benchmark

COUNT = 400


def overhead(devices: str, k: int) -> tuple[float, float]:
    """Mean overhead per kernel with ``k`` chains, one per device, running at once, and
    the CPU workers' ``cpu_share`` during the runs."""
    g = chains([4] * k, COUNT, "sum")
    ex = TorchExecutor(g, devices, warmup=1, repeats=7)
    dev = np.repeat(np.arange(k), COUNT + 1)
    m = ex.run(Placement(device=dev, order=np.arange(g.num_nodes)))
    per_node = [
        (m.finish[dev == d].max() - m.start[dev == d].min()) / (COUNT + 1) for d in range(k)
    ]
    own = [
        np.median(time_kernel(g, ex.kernels, 1, v, open_stream(v, compute=True), repeats=50))
        for v in ex.devices
    ]
    return float(np.mean(np.array(per_node) - np.array(own))), m.cpu_share


def test_dispatch_overhead_per_kernel():
    """Printed per device set; the 20 µs target is asserted on one CPU worker when the
    worker had its core (``cpu_share`` >= 0.9): on a loaded machine the figure measures
    the wait for a CPU, and the table says so."""
    torch.set_num_threads(1)
    g = chains([4], 1, "sum")
    ex = TorchExecutor(g, "cpu", warmup=0, repeats=1)
    own = float(np.median(time_kernel(g, ex.kernels, 1, ex.devices[0], repeats=200)))
    rows = [("cpu#1", "one device", *overhead("cpu#1", 1))]
    rows.append(("cpu#2", "both busy", *overhead("cpu#2", 2)))
    if torch.cuda.is_available():
        rows.append(("cuda:0", "one device", *overhead("cuda:0", 1)))
        rows.append(("cuda:0,cpu#2", "all busy", *overhead("cuda:0,cpu#2", 3)))
    print("\n\nexecutor dispatch overhead per kernel (chains of 4x4 sums)")
    print("| devices | load | overhead per kernel | x the kernel alone | cpu_share |")
    print("|---|---|---|---|---|")
    for devices, load, t, share in rows:
        print(f"| {devices} | {load} | **{t * 1e6:.1f} µs** | {t / own:.1f}x | {share:.2f} |")
    print(f"(a 4x4 sum alone on a CPU worker: {own * 1e6:.1f} µs)")
    _, _, t, share = rows[0]
    if share < 0.9:
        pytest.skip(f"machine busy (cpu_share {share:.2f}): {t * 1e6:.1f} µs per kernel")
    assert t <= 20e-6, f"{t * 1e6:.1f} µs per kernel on one CPU worker"
