"""The real backend on a CUDA GPU (marked ``gpu``; skipped without one)."""

import numpy as np
import pytest

from placegym.envs import Placement
from placegym.envs.backend import TorchExecutor, scale_graph
from placegym.envs.backend.calibrate import calibrate, rank_check
from placegym.envs.workloads import make_graph

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_streams_of_one_gpu_execute_and_agree_with_cpu():
    g = scale_graph(make_graph("ffnn"), 4)
    p = Placement(device=np.arange(g.num_nodes) % 4, order=g.topological_order.copy())
    gpu = TorchExecutor(g, "cuda:0#4", warmup=1, repeats=3)
    cpu = TorchExecutor(g, "cpu#4", warmup=0, repeats=1)
    for a, b in zip(gpu.outputs(p), cpu.outputs(p), strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-3, atol=1e-3)
    m = gpu.run(p)
    assert m.makespan > 0 and len(m.transfers) > 0


def test_gpu_calibration_ranks_placements():
    c = calibrate("cuda:0#4")
    rho, _, _ = rank_check(make_graph("ffnn"), c, "cuda:0#4", placements=20)
    print(f"\nSpearman on cuda:0#4: {rho:.3f}")
    assert rho >= 0.8
