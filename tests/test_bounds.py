"""Lower bounds: hand-solved graphs, below the proven optimum on small random instances
(comm-heavy, heterogeneous, with latencies), below every placer on workload graphs."""

import numpy as np
import pytest

from placegym.envs import Cluster, Device, Graph, Level, Placement, load_cluster, simulate
from placegym.envs.analysis.bounds import SLACK, lower_bound, min_transfer_times
from placegym.envs.analysis.ccr import scale_to_ccr
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher
from placegym.teachers.optimal import solve


def unit_cluster(d: int, latency: float = 0.0) -> Cluster:
    dev = Device("u", flops=1.0, memory=1e18)
    return Cluster.homogeneous(dev, d, [Level("l", 1.0, latency)] * 3, name=f"unit{d}")


def fork_join(comm: float) -> Graph:
    """a -> b, c -> d; every node 1 s on a unit device, every output ``comm`` bytes."""
    return Graph(flops=[1.0] * 4, out_bytes=[comm] * 4, edges=[[0, 1], [0, 2], [1, 3], [2, 3]])


def test_fork_join_hand_solved():
    # Free communication: b and c in parallel, 3 s; that is also the optimum.
    lb = lower_bound(fork_join(0.0), unit_cluster(2))
    assert lb.free_comm_path == lb.path == 3.0 and lb.work == 2.0
    assert lb.value == pytest.approx(3.0 * (1 - SLACK), rel=0, abs=1e-15)
    # Transfers of 10 s: splitting b and c costs 1 + 10 + 1 + 10 + 1; one device takes 4 s,
    # the optimum. Free communication only proves 3 s, the heads and tails prove 4 s.
    lb = lower_bound(fork_join(10.0), unit_cluster(2))
    assert lb.free_comm_path == 3.0 and lb.path == 4.0 and lb.kind == "path"
    assert solve(fork_join(10.0), unit_cluster(2)).makespan == 4.0
    # With 0.5 s transfers: b, c split, 1 + 0.5 + 1 + 0.5 + 1 = 4 vs 4 on one device
    lb = lower_bound(fork_join(0.5), unit_cluster(2))
    assert lb.path == 3.5  # d starts >= 2.5: b and c both local take 1 + 2, else 2 + 0.5
    assert solve(fork_join(0.5), unit_cluster(2)).makespan >= lb.value


def test_one_device_is_exact():
    g = make_graph("ffnn")
    p100 = load_cluster("p100x4")
    c = Cluster.homogeneous(p100.devices[0], 1, p100.levels)
    p = Placement(device=np.zeros(g.num_nodes, dtype=int), order=g.topological_order)
    makespan = simulate(g, c, p).makespan
    lb = lower_bound(g, c)
    assert lb.work == pytest.approx(makespan, rel=1e-12) and lb.value <= makespan
    assert np.isinf(min_transfer_times(g, c)).all()


def hetero() -> Cluster:
    devs = (
        Device(
            "fast", flops=2e12, memory=1e12, mem_bandwidth=2e12, launch_overhead=2e-6, path=(0,)
        ),
        Device(
            "slow", flops=1e12, memory=1e12, mem_bandwidth=1e12, launch_overhead=5e-6, path=(0,)
        ),
        Device("far", flops=1.5e12, memory=1e12, launch_overhead=1e-6, path=(1,)),
    )
    levels = (Level("near", 2e10, 3e-6), Level("far", 5e9, 2e-5))
    return Cluster(devices=devs, levels=levels, name="hetero")


CASES = [(seed, c, r) for seed in range(6) for c in ("p100x4", "hetero", "unit") for r in (1, 10)]


@pytest.mark.parametrize(("seed", "cluster", "ratio"), CASES)
def test_below_the_proven_optimum(seed, cluster, ratio):
    c = {"hetero": hetero(), "unit": unit_cluster(3, latency=0.3)}.get(cluster)
    c = c or load_cluster(cluster)
    g = make_graph("random_dag", nodes=7 + seed % 3, width=3, seed=seed, rows=64, dim=256)
    g = scale_to_ccr(g, c, ratio)
    opt = solve(g, c)
    assert opt.proven
    lb = lower_bound(g, c)
    assert lb.value <= opt.makespan, (lb, opt.makespan)
    assert lb.path >= lb.free_comm_path


def test_tighter_than_the_simple_bounds_when_communication_dominates():
    gains = []
    for seed in range(6):
        g = make_graph("random_dag", nodes=9, width=3, seed=seed, rows=64, dim=256)
        g = scale_to_ccr(g, load_cluster("doppler-unit-4"), 10)
        lb = lower_bound(g, load_cluster("doppler-unit-4"))
        gains.append(lb.path / max(lb.work, lb.free_comm_path))
    assert min(gains) >= 1.0 and max(gains) > 1.2


@pytest.mark.parametrize("workload", ["chainmm", "ffnn", "llama_block", "moe"])
@pytest.mark.parametrize("cluster", ["p100x4", "v100x8", "doppler-unit-4"])
def test_below_every_placer(workload, cluster):
    c = load_cluster(cluster)
    g = scale_to_ccr(make_graph(workload), c, 4)
    lb = lower_bound(g, c)
    for name in ("critical_path", "heft", "nest", "random", "round_robin"):
        p = get_teacher(name).place(g, c)
        for dispatch in ("priority", "fifo"):
            assert lb.value <= simulate(g, c, p, dispatch=dispatch).makespan, name


def test_empty_graph():
    g = Graph(flops=[], out_bytes=[], edges=[])
    assert lower_bound(g, load_cluster("p100x4")).value == 0.0
