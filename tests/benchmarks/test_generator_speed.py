"""Generator and NEST planning speed (``make bench``): the wall-clock limits that the
default tests leave out (they check the same outputs for correctness).

Targets: every workload generator builds a 10,000-node graph in under 10 s (about 0.1 s
on a quiet machine); NEST plans FFNN on the 64-device preset in under 10 s and a
4,640-node FFNN on the 1024-device presets in under 60 s.
"""

from __future__ import annotations

import time

import pytest
from benchmarks.timing import load_note
from test_workloads import TEN_K  # the sizes the default tests check

from placegym.envs import load_cluster, simulate
from placegym.envs.workloads import WORKLOADS, ffnn, make_graph
from placegym.teachers.nest import NestTeacher

pytestmark = pytest.mark.benchmark


def test_generators_reach_10k_nodes_quickly():
    assert set(TEN_K) == set(WORKLOADS)
    print(f"\n\n10,000-node graphs ({load_note()})")
    print("| workload | nodes | edges | s |\n|---|---|---|---|")
    slow = []
    for name, params in TEN_K.items():
        t0 = time.perf_counter()
        g = make_graph(name, **params)
        secs = time.perf_counter() - t0
        print(f"| {name} | {g.num_nodes} | {g.num_edges} | {secs:.3f} |")
        assert g.num_nodes >= 10_000
        if secs >= 10.0:
            slow.append(f"{name} {secs:.1f} s")
    assert not slow, f"generators slower than 10 s: {slow}"


@pytest.mark.parametrize(
    ("preset", "nodes", "limit"),
    [
        ("tpuv4-fattree-64", None, 10.0),
        ("tpuv4-fattree-1024", 4640, 60.0),
        ("h100-spineleaf-1024", 4640, 60.0),
    ],
)
def test_nest_plans_large_clusters_quickly(preset, nodes, limit):
    # 4640 nodes: 16 layers of 4 x 8 blocks
    g = ffnn() if nodes is None else ffnn(dims=(4096,) * 17, batch_blocks=4, feature_blocks=8)
    c = load_cluster(preset)
    t0 = time.perf_counter()
    p = NestTeacher().plan(g, c)
    elapsed = time.perf_counter() - t0
    print(f"\nnest on {preset}, {g.num_nodes} nodes: {elapsed:.2f} s (limit {limit:.0f} s)")
    p.check(g, c)
    assert not simulate(g, c, p).oom
    assert elapsed <= limit
