"""The real backend on a CUDA GPU (marked ``gpu``; skipped without one).

``make gpu-check`` runs these after :mod:`placegym.train.machine.gpu_check`. Targets (issue
figures): per-node median prediction error <= 10% on ``cuda:0`` at GPU size with
profiled costs; Spearman >= 0.9 on ``cuda:0,cpu#2``.
"""

import numpy as np
import pytest

from placegym.envs import Placement
from placegym.envs.real import TorchExecutor, scale_graph
from placegym.envs.real.calibrate import calibrate
from placegym.envs.real.check import calibrate_and_check, rank_check
from placegym.envs.real.probes import chains, measure_sharing, node_errors, node_times
from placegym.envs.workloads import make_graph

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def agree(devices: str, g, p) -> None:
    cpu = TorchExecutor(g, "cpu", warmup=0, repeats=1)
    ref = cpu.outputs(Placement(device=np.zeros(g.num_nodes), order=g.topological_order.copy()))
    got = TorchExecutor(g, devices, warmup=0, repeats=1).outputs(p)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-3, atol=1e-3)


def test_streams_of_one_gpu_execute_and_agree_with_cpu():
    g = scale_graph(make_graph("ffnn"), 4)
    p = Placement(device=np.arange(g.num_nodes) % 4, order=g.topological_order.copy())
    agree("cuda:0#4", g, p)
    m = TorchExecutor(g, "cuda:0#4", warmup=1, repeats=3).run(p)
    assert m.makespan > 0 and len(m.transfers) > 0 and np.isnan(m.cpu_share)


def test_gpu_with_cpu_workers_copies_between_host_and_device():
    g = scale_graph(make_graph("ffnn"), 4)
    rng = np.random.default_rng(0)
    p = Placement(device=rng.integers(0, 3, g.num_nodes), order=g.topological_order.copy())
    agree("cuda:0,cpu#2", g, p)
    ex = TorchExecutor(g, "cuda:0,cpu#2", warmup=1, repeats=3)
    out = ex.outputs(p)
    assert all(out[v].is_cuda == (p.device[v] == 0) for v in range(g.num_nodes))
    m = ex.run(p)
    pairs = {(int(a), int(b)) for a, b in m.transfers[:, 1:3]}
    assert {(0, 1), (1, 0)} <= pairs  # device -> host and host -> device copies
    assert 0 < m.cpu_share <= 1.1


def test_profiled_gpu_predicts_each_node_at_gpu_size():
    g = scale_graph(make_graph("ffnn"), 0.25)
    c = calibrate("cuda:0", graphs=[g])
    p, measured = node_times(g, "cuda:0")
    err = node_errors(g, c, p, measured)
    print(f"\nper-node median error on cuda:0 at scale 0.25: {np.median(err):.1%}")
    assert np.median(err) <= 0.10


def test_gpu_with_cpu_workers_ranks_placements():
    g = scale_graph(make_graph("ffnn"), 2)
    _, res = calibrate_and_check(g, "cuda:0,cpu#2", placements=20)
    print(
        f"\ncuda:0,cpu#2: Spearman {res.spearman:.3f}, median relative error "
        f"{res.median_relative_error:.1%}, cpu share {res.cpu_share:.2f}"
    )
    assert res.spearman >= 0.9


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs several GPUs")
def test_several_gpus_rank_placements():
    devices = ",".join(f"cuda:{i}" for i in range(torch.cuda.device_count()))
    g = scale_graph(make_graph("ffnn"), 0.25)
    res = rank_check(g, calibrate(devices, graphs=[g]), devices, placements=20)
    print(f"\n{devices}: Spearman {res.spearman:.3f}")
    assert res.spearman >= 0.9


def test_streams_of_one_gpu_are_found_shared_and_refused():
    sh = measure_sharing("cuda:0#4")
    print("\n" + "\n".join(sh.lines()))
    assert sh.shared == sh.names
    g = scale_graph(make_graph("ffnn"), 4)
    c = calibrate("cuda:0#4", size=256, repeats=1)
    with pytest.raises(ValueError, match=r"are not independent devices \(cuda:0#0, cuda:0#1"):
        rank_check(g, c, "cuda:0#4")


def test_sm_partition_is_a_smaller_gpu():
    from placegym.envs.real.devices import open_stream, parse_devices

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    part = f"cuda:0%{max(8, sms // 4 // 8 * 8)}"
    try:
        open_stream(parse_devices(part)[0], compute=True)
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"no green contexts here: {e}")
    g = chains([4096], 4)
    p = Placement(device=np.zeros(g.num_nodes), order=np.arange(g.num_nodes))
    whole = TorchExecutor(g, "cuda:0", repeats=3).run(p).makespan
    small = TorchExecutor(g, part, repeats=3).run(p).makespan
    print(f"\n4 matmuls of 4096: cuda:0 {whole * 1e3:.2f} ms, {part} {small * 1e3:.2f} ms")
    assert small > 2 * whole
    tiny = chains([256], 2)
    agree(part, tiny, Placement(device=np.zeros(tiny.num_nodes), order=np.arange(tiny.num_nodes)))
