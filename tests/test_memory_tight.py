"""Memory-tight instances (envs/workloads/memory.py) and the memory-tight-v0 suite: groups,
memories that bind with every duration unchanged, and a feasibility certificate for
every instance."""

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import load_cluster, simulate
from placegym.envs.analysis.levels import durations_on
from placegym.envs.analysis.memory import fit_resident
from placegym.envs.suites import get_suite
from placegym.envs.workloads import make_graph
from placegym.envs.workloads.memory import add_groups, tighten


def test_groups_join_adjacent_resident_nodes_up_to_the_size_seeded():
    g = make_graph("random_dag", nodes=96, seed=0)
    a, b = add_groups(g, size=3, seed=4), add_groups(g, size=3, seed=4)
    np.testing.assert_array_equal(a.group, b.group)
    assert not np.array_equal(a.group, add_groups(g, size=3, seed=5).group)
    edges = {tuple(e) for e in g.edges.tolist()}
    for nodes in a.groups.values():
        assert 2 <= len(nodes) <= 3 and (g.param_bytes[nodes] > 0).all()
        # connected through edges inside the group
        seen, todo = {int(nodes[0])}, [int(nodes[0])]
        while todo:
            u = todo.pop()
            for v in nodes.tolist():
                if v not in seen and ((u, v) in edges or (v, u) in edges):
                    seen.add(v)
                    todo.append(v)
        assert seen == set(nodes.tolist())
    assert list(a.groups) == list(range(len(a.groups)))
    with pytest.raises(ValueError, match="size: must be >= 2, got 1"):
        add_groups(g, size=1)
    with pytest.raises(ValueError, match=r"share: must be in \[0, 1\], got 2"):
        add_groups(g, share=2)


def test_tighten_fills_memory_to_the_share_and_keeps_every_duration():
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    tg, tc = tighten(g, c, resident=0.7, ratios=(1.0, 2.0))
    assert tc.name == "p100x4-mem0.7-r1-2"
    np.testing.assert_array_equal(tc.memory, c.memory * [1, 2, 1, 2])
    assert tg.param_bytes.sum() / tc.memory.sum() == pytest.approx(0.7)
    np.testing.assert_allclose(durations_on(tg, tc), durations_on(g, c), rtol=1e-12)
    with pytest.raises(ValueError, match=r"resident: must be in \(0, 1\], got 1.5"):
        tighten(g, c, resident=1.5)
    with pytest.raises(ValueError, match="ratios: expected positive numbers"):
        tighten(g, c, resident=0.5, ratios=(1.0, 0.0))
    with pytest.raises(ValueError, match="has no resident bytes"):
        tighten(graph([1.0], []), unit_cluster(2), resident=0.5)


def test_fit_resident_spreads_groups_and_nodes_and_says_when_nothing_fits():
    g = add_groups(make_graph("random_dag", nodes=64, seed=1), size=3)
    tg, tc = tighten(g, load_cluster("v100x8"), resident=0.8)
    p = fit_resident(tg, tc)
    assert p is not None
    p.check(tg, tc)  # no split group
    used = np.bincount(p.device, weights=tg.param_bytes, minlength=tc.num_devices)
    assert (used <= tc.memory).all()
    small = graph([1.0, 1.0], [], param_bytes=[3.0, 3.0])
    assert fit_resident(small, unit_cluster(2, memory=2.0)) is None


def test_every_memory_tight_instance_binds_and_has_a_feasible_certificate():
    suite = get_suite("memory-tight-v0")
    assert {len(suite.splits[s]) for s in ("train", "test")} == {12}
    devices, shares, grouped = set(), set(), 0
    for inst in suite.instances():
        share = inst.graph.param_bytes.sum() / inst.cluster.memory.sum()
        assert 0.5 - 1e-9 <= share <= 0.9 + 1e-9
        shares.add(round(share, 2))
        devices.add(inst.cluster.num_devices)
        grouped += bool(inst.graph.groups)
        p = fit_resident(inst.graph, inst.cluster)
        assert p is not None and not simulate(inst.graph, inst.cluster, p).oom, inst.id
        # memory binds: everything on one device is over memory
        one = np.zeros(inst.graph.num_nodes, dtype=np.int64)
        assert inst.graph.param_bytes.sum() > inst.cluster.memory.max()
        assert simulate(inst.graph, inst.cluster, p.__class__(one, p.order)).oom
    assert devices == {4, 8, 16} and shares >= {0.5, 0.9} and grouped >= 12
    assert any(len(set(i.cluster.memory.tolist())) > 1 for i in suite.instances("test"))
