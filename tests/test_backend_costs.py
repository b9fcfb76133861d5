"""The runtime's costs read from timelines, the host-memory setting, the check placements."""

import numpy as np
import pytest

from placegym.envs import Placement
from placegym.envs.core.graph import Graph
from placegym.envs.real.calibrate import calibrate
from placegym.envs.real.check import check_placements
from placegym.envs.real.executor import Measurement, TorchExecutor, keep_host_memory
from placegym.envs.real.kernels import scale_graph
from placegym.envs.real.profile import profile_placements
from placegym.envs.real.run_costs import run_costs
from placegym.envs.workloads import make_graph


def fork() -> Graph:
    """0 -> 1 (same device), 0 -> 2 and 1 -> 3 (other device), 3 after 2 there."""
    edges = [(0, 1), (0, 2), (1, 3)]
    return Graph(flops=[1, 1, 1, 1], out_bytes=[100, 200, 100, 100], edges=edges)


def test_run_costs_read_the_simulators_terms_off_a_timeline():
    g = fork()
    p = Placement(device=np.array([0, 0, 1, 1]), order=np.arange(4))
    # node 0 [0, 1]; node 1 [1.1, 2] (ready at 1: launch gap 0.1); copy 0 -> dev 1 from 1.05
    # to 1.3, node 2 starts 1.35 (wake 0.05); copy 1 -> dev 1 from 2.0 to 2.5 (service 0.5),
    # node 3 starts 2.52 (wake 0.02)
    m = Measurement(
        makespan=3.0,
        makespans=np.array([3.0]),
        start=np.array([0.0, 1.1, 1.35, 2.52]),
        finish=np.array([1.0, 2.0, 2.3, 3.0]),
        transfers=np.array([[0, 0, 1, 1.05, 1.3], [1, 0, 1, 2.0, 2.5]]),
    )
    rc = run_costs([(g, p, m)])
    assert rc.launch == pytest.approx(0.1)
    assert rc.wake == pytest.approx(0.035)
    np.testing.assert_allclose(rc.copies, [[0, 1, 100, 0.3], [0, 1, 200, 0.5]])
    # median of service - bytes / bandwidth, plus wake - launch
    assert rc.latency(0, 1, 1000.0) == pytest.approx(np.median([0.2, 0.3]) + 0.035 - 0.1)
    assert np.isnan(rc.latency(1, 0, 1000.0))
    empty = run_costs([])
    assert np.isnan(empty.launch) and np.isnan(empty.wake) and empty.copies.shape == (0, 4)


def test_run_costs_of_a_real_execution_are_positive_and_calibration_uses_them():
    g = scale_graph(make_graph("ffnn"), 8)
    order = g.topological_order.copy()
    p = Placement(device=order % 2, order=order)
    ex = TorchExecutor(g, "cpu#2", warmup=1, repeats=1)
    rc = run_costs([(g, p, ex.run(p)) for _ in range(2)])
    assert 0 < rc.launch < 0.05 and 0 < rc.wake < 0.05
    assert len(rc.copies) and (rc.copies[:, 3] > 0).all()
    c = calibrate("cpu#2", graphs=[g], size=64, copy_sizes=(16, 64), repeats=1, profile_seconds=0)
    assert c.launch_overhead[0] == c.launch_overhead[1] > 0  # one in-run figure per kind


def test_host_memory_is_kept_for_reuse():
    import resource

    import torch

    if not keep_host_memory():
        pytest.skip("not glibc")

    def run():  # 40 MiB of 1 MiB tensors alive at once, then freed: an execution's outputs
        xs = [torch.empty(2**18).fill_(1.0) for _ in range(40)]
        del xs

    run()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        run()
    # reused memory: no page faults (glibc's defaults return the freed memory to the
    # system and fault about 10,000 pages back in over these five runs)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 2000


def test_check_placements_spread_from_balanced_to_one_device():
    g = scale_graph(make_graph("ffnn"), 8)
    n = g.num_nodes
    for devices in (2, 3):
        ps = check_placements(g, devices, 20, seed=3)
        top = np.sort([np.bincount(p.device, minlength=devices).max() / n for p in ps])
        lo = 1 / devices + (1 - 1 / devices) * np.arange(20) / 20
        hi = lo + (1 - 1 / devices) / 20
        assert (top >= lo - 1 / n).all()  # one device has the stratum's share, to rounding
        if devices == 2:  # ... and it is the largest
            assert (top <= hi + 1 / n).all()
        assert all((p.order == g.topological_order).all() for p in ps)
    same = zip(check_placements(g, 2, 20, 3), check_placements(g, 2, 20, 3), strict=True)
    assert all((a.device == b.device).all() for a, b in same)
    other = zip(check_placements(g, 2, 20, 3), check_placements(g, 2, 20, 4), strict=True)
    assert any((a.device != b.device).any() for a, b in other)


def test_disturbed_runs_are_those_well_below_the_placements_best_share():
    from placegym.envs.real.check import _undisturbed

    # a placement's undisturbed runs share its copies' cost: the best share sets the bar
    assert _undisturbed([0.95, 0.80, 0.90, 0.86], 0.9).tolist() == [True, False, True, True]
    assert _undisturbed([0.70, 0.62], 0.9).tolist() == [True, False]
    assert _undisturbed([float("nan")] * 3, 0.9).all()  # no scheduler statistics


def test_profile_placements_alternate_every_device_busy_and_each_device_alone():
    g = scale_graph(make_graph("ffnn"), 8)
    order = g.topological_order
    dealt = np.empty(g.num_nodes, dtype=np.int64)
    dealt[order] = np.arange(g.num_nodes) % 2
    ps = profile_placements(g, 2)
    want = [dealt, dealt, np.zeros(g.num_nodes), dealt, dealt, np.ones(g.num_nodes)]
    assert [p.device.tolist() for p in ps] == [w.tolist() for w in want]
    assert all((p.order == order).all() for p in ps)
    (only,) = profile_placements(g, 1)
    assert (only.device == 0).all()
