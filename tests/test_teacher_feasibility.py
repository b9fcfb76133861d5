"""Every teacher keeps co-location groups whole and, where its rule can reach one, returns
a feasible placement (simulated peak within every device's memory) on memory-tight
instances with groups; the baselines that may be infeasible say so.

Instances: seeded random DAGs (groups of a weight's users: ``add_groups``) and
forward/backward graphs (each resident forward node grouped with its backward node), on
preset and hand-built clusters of 4-16 devices, some with memories of several sizes,
with resident bytes 50-90% of the cluster's memory (``tighten``); an instance is kept
only when the worst-fit certificate (``fit_resident``) simulates feasible.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import Cluster, Device, Graph, Level, Placement, load_cluster, simulate
from placegym.envs.analysis.memory import fit_resident, memory_may_bind, units
from placegym.envs.core.placement import split_group
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim.simulator import simulate_batch
from placegym.envs.workloads import make_graph
from placegym.envs.workloads.memory import add_groups, tighten
from placegym.teachers import get_teacher
from placegym.teachers._completions import compiled_completions as _compiled_completions
from placegym.teachers._memory import (
    make_feasible,
    oom_price,
    priced_makespans,
)
from placegym.teachers.anneal import anneal
from placegym.teachers.anneal_moves import hold_groups, move_problem
from placegym.teachers.base import complete
from placegym.teachers.canonical_plan import CanonicalPlanTeacher
from placegym.teachers.metis import metis_parts
from placegym.teachers.nest import NestTeacher
from placegym.teachers.optimal import solve

LEVELS = (Level("node", 1.2e10, 5e-6), Level("rack", 1.25e10, 1e-5), Level("spine", 6.25e9, 2e-5))


def own_cluster(rng: np.random.Generator, count: int) -> Cluster:
    """``count`` devices alike in compute, of memories of several sizes, 2 or 4 a node."""
    per_node = int(rng.choice([2, 4]))
    sizes = rng.choice([1.0, 1.5, 2.0, 3.0], size=count)
    devs = tuple(
        Device(
            f"g{i}",
            flops=9.3e12,
            memory=16e9 * float(sizes[i]),
            mem_bandwidth=7.32e11,
            launch_overhead=5e-6,
            path=(0, i // per_node),
        )
        for i in range(count)
    )
    return Cluster(devices=devs, levels=LEVELS, name=f"own{count}")


def forward_backward(rng: np.random.Generator, n: int) -> Graph:
    """A random forward DAG of ``n`` nodes and its backward pass (node ``v + n`` after
    ``v`` and after the backward nodes of ``v``'s consumers); each forward node with
    params is grouped with its backward node (they share the weight)."""
    fwd = make_graph("random_dag", nodes=n, width=4, seed=int(rng.integers(1 << 30)))
    edges = fwd.edges.tolist()
    edges += [[v, v + n] for v in range(n)]
    edges += [[c + n, u + n] for u, c in fwd.edges.tolist()]
    group = np.full(2 * n, -1)
    heavy = np.flatnonzero(fwd.param_bytes > 0)
    group[heavy] = group[heavy + n] = np.arange(len(heavy))
    return Graph(
        flops=np.concatenate([fwd.flops, 2 * fwd.flops]),
        out_bytes=np.concatenate([fwd.out_bytes, fwd.out_bytes]),
        param_bytes=np.concatenate([fwd.param_bytes, np.zeros(n)]),
        edges=edges,
        group=group,
        name=f"fwd-bwd-{n}",
    )


@functools.cache
def instances() -> tuple[tuple[Graph, Cluster], ...]:
    """Memory-tight instances with groups whose certificate is feasible (module doc)."""
    rng = np.random.default_rng(2024)
    out: list[tuple[Graph, Cluster]] = []
    plans = [
        ("p100x4", "dag", (1.0, 2.0)),
        ("v100x8", "dag", (1.0,)),
        ("own6", "fwd", (1.0,)),
        ("h100-2x8", "dag", (1.0, 2.0)),
        ("own4", "dag", (1.0,)),
        ("p100x4", "fwd", (1.0,)),
        ("own8", "dag", (1.0,)),
        ("v100x8", "fwd", (1.0, 2.0)),
        ("own5", "fwd", (1.0,)),
        ("p100x4", "dag", (1.0,)),
        ("own12", "dag", (1.0,)),
        ("h100-2x8", "fwd", (1.0,)),
        ("own7", "fwd", (1.0,)),
        ("v100x8", "dag", (1.0, 2.0)),
    ]
    for preset, kind, ratios in plans:
        for _ in range(20):  # draw until the certificate is feasible
            if preset.startswith("own"):
                cluster = own_cluster(rng, int(preset[3:]))
            else:
                cluster = load_cluster(preset)
            if kind == "dag":
                g = make_graph(
                    "random_dag",
                    nodes=int(rng.integers(24, 64)),
                    width=int(rng.integers(3, 6)),
                    seed=int(rng.integers(1 << 30)),
                )
                g = add_groups(
                    g, size=int(rng.integers(2, 5)), share=0.7, seed=int(rng.integers(99))
                )
            else:
                g = forward_backward(rng, int(rng.integers(12, 28)))
            resident = float(rng.uniform(0.5, 0.9))
            g, c = tighten(g, cluster, resident=resident, ratios=ratios)
            cert = fit_resident(g, c)
            if cert is not None and not simulate(g, c, cert).oom:
                out.append((g, c))
                break
    return tuple(out)


def check_feasible(g: Graph, c: Cluster, p: Placement, who: str) -> None:
    assert split_group(g, p.device[None]) is None, who
    s = simulate(g, c, p)
    assert not s.oom, f"{who} on {g.name}@{c.name}: {s.infeasibility}"


def test_the_instances_bind_and_have_groups():
    insts = instances()
    assert len(insts) >= 13
    sizes = {c.num_devices for _, c in insts}
    assert min(sizes) == 4 and max(sizes) == 16
    assert any(len(set(c.memory.tolist())) > 1 for _, c in insts)
    for g, c in insts:
        assert g.groups and memory_may_bind(g, c)
        share = g.param_bytes.sum() / c.memory.sum()
        assert 0.5 - 1e-9 <= share <= 0.9 + 1e-9
        # everything on one device is over memory
        one = Placement(device=np.zeros(g.num_nodes, dtype=np.int64), order=g.topological_order)
        assert simulate(g, c, one).oom


FAST = {
    "critical_path": {},
    "heft": {},
    "heft_rule": {},
    "nest": {},
    "metis": {},
    "anneal": {"budget": 150},
    "device_anneal": {"budget": 240, "restarts": 2},
    "best_list": {},
}


@pytest.mark.parametrize("name", sorted(FAST))
def test_teachers_are_feasible_where_a_certificate_is(name):
    for g, c in instances():
        t = get_teacher(name, **FAST[name])
        check_feasible(g, c, t.place(g, c), name)
        assert t.infeasibility(g, c) is None


@pytest.mark.parametrize("name", ["lookahead", "fortified_lookahead"])
def test_lookaheads_are_feasible_where_a_certificate_is(name):
    for g, c in instances():
        check_feasible(g, c, get_teacher(name).place(g, c), name)


def test_the_rules_need_their_room_and_repairs_somewhere():
    # the plain rules would be over memory on some instances: the tests above bite
    insts = instances()
    cp, hr = get_teacher("critical_path"), get_teacher("heft_rule")
    assert any(cp.room(g, c) is not None for g, c in insts)
    assert any(hr.room(g, c) is not None for g, c in insts)
    nest = NestTeacher()
    repaired = 0
    for g, c in insts:
        nest.place(g, c)
        repaired += nest.last_result.repaired
        if nest.last_result.mode == "fits":  # the model bounds the simulator's peak
            assert not nest.last_result.repaired
        assert split_group(g, nest.solve(g, c).device[None]) is None  # the DP's own plan
    assert repaired < len(insts)


@pytest.mark.parametrize("name", ["single_device", "round_robin", "random"])
def test_baselines_never_split_and_say_when_infeasible(name):
    said = 0
    for g, c in instances():
        t = get_teacher(name)
        p = t.place(g, c)
        assert split_group(g, p.device[None]) is None
        s = simulate(g, c, p)
        assert t.last_infeasibility == s.infeasibility
        assert t.infeasibility(g, c) == s.infeasibility
        said += s.oom
    if name == "single_device":
        assert said > 0  # it spills by resident bytes only: over memory somewhere


# ---------------------------------------------------------------------- no pressure
def test_without_pressure_nothing_changes():
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    assert not memory_may_bind(g, c)
    p = get_teacher("heft").place(g, c)
    assert make_feasible(g, c, p) is p
    assert get_teacher("critical_path").room(g, c) is None
    assert get_teacher("round_robin").infeasibility(g, c) is None


# ---------------------------------------------------------------------- pieces
def test_make_feasible_moves_whole_groups_off_devices_over_memory():
    g, c = instances()[0]
    units_ = units(g)
    heavy = int(np.argmax(units_.nbytes))
    dev = np.zeros(g.num_nodes, dtype=np.int64)  # everything on device 0: over memory
    dev[units_.members[heavy]] = 1
    bad = Placement(device=dev, order=g.topological_order)
    assert simulate(g, c, bad).oom
    fixed = make_feasible(g, c, bad)
    check_feasible(g, c, fixed, "make_feasible")


def test_anneal_moves_keep_groups_and_never_trade_feasible_for_oom():
    g, c = instances()[1]
    p = move_problem(g, c)
    rng = np.random.default_rng(0)
    old = fit_resident(g, c).device
    for v in np.flatnonzero(g.group >= 0)[:10].tolist():
        dev = old.copy()
        dev[v] = (dev[v] + 1) % c.num_devices
        hold_groups(p, dev, old)
        assert split_group(g, dev[None]) is None and dev[v] != old[v]
    start = [get_teacher("round_robin").place(g, c), fit_resident(g, c)]
    res = anneal(g, c, start, budget=200, seed=int(rng.integers(9)))
    assert res.feasible
    check_feasible(g, c, res.placement, "anneal")
    # only infeasible starts: the repair of the best one starts the search
    over = Placement(device=np.zeros(g.num_nodes, dtype=np.int64), order=g.topological_order)
    res = anneal(g, c, [over], budget=60)
    assert res.feasible
    check_feasible(g, c, res.placement, "anneal from an OOM start")


def test_prices_put_every_feasible_placement_first():
    g, c = instances()[0]
    cert, over = fit_resident(g, c), np.zeros(g.num_nodes, dtype=np.int64)
    devices = np.stack([cert.device, over])
    orders = np.stack([cert.order, cert.order])
    price = priced_makespans(g, c, devices, orders)
    ms = simulate_batch(g, c, devices, orders).makespan
    assert price[0] == ms[0] and price[1] == oom_price(g, c, ms[1]) > price[0]
    assert oom_price(g, c, 0.0) >= simulate(g, c, cert).makespan  # the serial bound


def test_metis_contracts_groups():
    g, c = instances()[1]
    part = metis_parts(g, c, c.num_devices)
    assert split_group(g, part[None]) is None


@pytest.mark.parametrize("base", ["heft_rule", "critical_path"])
def test_the_kernel_completes_as_the_rule_with_groups_and_room(base):
    # the compiled completion keeps groups and the rule's room exactly as
    # PlacementState does, from the first state and from states of random legal actions
    rule, kind, rooms = get_teacher(base), {"heft_rule": 0, "critical_path": 1}[base], 0
    for i, (g, c) in enumerate(instances()):
        rooms += rule.room(g, c) is not None
        rng = np.random.default_rng(i)
        for steps in (0, 3, g.num_nodes // 2):
            s = PlacementState(g, c)
            for _ in range(steps):
                s.select(int(rng.choice(s.frontier())))
                s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
            s.select(int(s.frontier()[0]) if steps == 0 else int(rng.choice(s.frontier())))
            legal = np.flatnonzero(s.place_mask())
            devices, orders = _compiled_completions(s, legal, kind, rule)
            for j, d in enumerate(legal.tolist()):
                t = s.copy()
                t.place(d)
                done = complete(t, rule)
                assert devices[j].tolist() == done.device.tolist(), (i, steps, d)
                assert orders[j].tolist() == done.order, (i, steps, d)
                assert split_group(g, devices[j][None]) is None
    assert rooms >= 5  # the room path is exercised, not only the plain rule


def test_canonical_plan_keeps_a_feasible_plan_against_oom_offers():
    g, c = instances()[0]
    t = CanonicalPlanTeacher(get_teacher("heft"))
    plan = t.place(g, c)
    over = Placement(device=np.zeros(g.num_nodes, dtype=np.int64), order=plan.order)
    assert not t.offer(g, c, over, 0.0)  # faster, but over memory
    assert t.place(g, c) is plan


def test_optimal_keeps_groups_and_with_memory_fits_resident_bytes():
    # brute force over every device map (groups whole; resident bytes fit) and order
    g = Graph(
        flops=[1.0, 2.0, 1.0, 3.0, 1.0],
        out_bytes=[1.0, 0.0, 1.0, 1.0, 0.0],
        param_bytes=[2.0, 1.0, 0.0, 2.0, 1.0],
        edges=[(0, 1), (0, 2), (2, 3), (1, 4), (3, 4)],
        group=[0, -1, -1, 0, -1],
    )
    c = unit_cluster(2, latency=0.5, memory=4.0)
    n, nd = g.num_nodes, c.num_devices
    orders = np.array(list(itertools.permutations(range(n))))
    devs = np.array(list(itertools.product(range(nd), repeat=n)))
    whole = devs[:, 0] == devs[:, 3]
    used = np.stack([np.bincount(d, weights=g.param_bytes, minlength=nd) for d in devs])
    fits = (used <= 4.0).all(axis=1)
    found = []
    for memory, keep in ((False, whole), (True, whole & fits)):
        res = solve(g, c, memory=memory)
        res.placement.check(g, c)
        rows = devs[keep]
        best = simulate_batch(
            g, c, np.repeat(rows, len(orders), axis=0), np.tile(orders, (len(rows), 1))
        ).makespan.min()
        assert res.makespan == best
        found.append(res.placement.device)
    assert not fits[int(np.flatnonzero((devs == found[0]).all(axis=1))[0])]  # it binds
    assert fits[int(np.flatnonzero((devs == found[1]).all(axis=1))[0])]


def test_tight_hand_graph_fits_for_every_rule():
    # 4 nodes of 5 bytes, two devices of 10: two per device, whatever the order
    g = graph([1, 1, 1, 1], [[0, 1], [1, 2], [2, 3]], param_bytes=[5, 5, 5, 5])
    c = unit_cluster(2, memory=10.0)
    for name in ("critical_path", "heft", "heft_rule", "nest", "metis", "lookahead"):
        check_feasible(g, c, get_teacher(name).place(g, c), name)


def test_metis_says_nothing_on_a_partition_it_cannot_balance(capfd):
    from placegym.envs.suites import get_suite

    inst = get_suite("published-v0").instance("latency-operator-bert_l-3_inference")
    get_teacher("metis").place(inst.graph, inst.cluster)  # one group outweighs a part
    out, err = capfd.readouterr()
    assert out == "" and err == ""
