"""Real-backend dispatch overhead (``make bench``): what the executor adds to each kernel.

A chain of tiny kernels (``x + x`` on 4 × 4 floats) runs on one device, and on every
device at once (one chain each); the overhead per kernel is the time per node minus the
kernel's own time measured alone in the same run (the baseline). Target: <= 20 µs per
kernel on one CPU worker (and on a GPU, where ``cuda:0`` is measured when present).
"""

import numpy as np
import pytest
import torch

from placegym.envs import Placement
from placegym.envs.backend import TorchExecutor
from placegym.envs.backend.devices import open_stream
from placegym.envs.backend.probes import chains, dispatch_overhead
from placegym.envs.backend.profile import time_kernel

pytestmark = pytest.mark.benchmark

COUNT = 400


def concurrent_overhead(devices: str, k: int) -> float:
    """Mean overhead per kernel with ``k`` chains, one per device, running at once."""
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
    return float(np.mean(np.array(per_node) - np.array(own)))


def test_dispatch_overhead_per_kernel():
    torch.set_num_threads(1)
    g = chains([4], 1, "sum")
    ex = TorchExecutor(g, "cpu", warmup=0, repeats=1)
    own = float(np.median(time_kernel(g, ex.kernels, 1, ex.devices[0], repeats=200)))
    rows = [("cpu#1", "one device", dispatch_overhead("cpu#1", 0, count=COUNT, repeats=7))]
    rows.append(("cpu#2", "both busy", concurrent_overhead("cpu#2", 2)))
    if torch.cuda.is_available():
        rows.append(("cuda:0", "one device", dispatch_overhead("cuda:0", 0, count=COUNT)))
        rows.append(("cuda:0,cpu#2", "all busy", concurrent_overhead("cuda:0,cpu#2", 3)))
    print("\n\nexecutor dispatch overhead per kernel (chains of 4x4 sums)")
    print("| devices | load | overhead per kernel | x the kernel alone |")
    print("|---|---|---|---|")
    for devices, load, t in rows:
        print(f"| {devices} | {load} | **{t * 1e6:.1f} µs** | {t / own:.1f}x |")
    print(f"(a 4x4 sum alone on a CPU worker: {own * 1e6:.1f} µs)")
    assert rows[0][2] <= 20e-6, f"{rows[0][2] * 1e6:.1f} µs per kernel on one CPU worker"
