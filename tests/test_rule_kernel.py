"""The compiled rule completions equal :func:`placegym.teachers.base.complete` exactly.

The lookahead teacher completes a state once per legal device with a compiled copy of
``heft_rule`` or ``critical_path`` (:mod:`placegym.teachers._rule_kernel`). Here each
compiled completion is compared, device for device and rank for rank, with the same
completion through :class:`~placegym.envs.mdp.state.PlacementState`, from states reached by
random legal actions: random DAGs on presets, integer-valued graphs where ties in b-level,
finish and insertion gaps are everywhere, zero-duration nodes, and clusters whose memory
forbids devices (or every device, when the mask lifts); and tied graphs with co-location
groups on clusters so tight that the rule chooses among devices with room.
"""

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import get_preset, simulate
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import make_graph
from placegym.envs.workloads.memory import add_groups
from placegym.teachers import get_teacher
from placegym.teachers._completions import compiled_completions as _compiled_completions
from placegym.teachers.base import complete
from placegym.teachers.lookahead import LookaheadTeacher

KINDS = {"heft_rule": 0, "critical_path": 1}


def tied_graph(rng, n=40):
    """Integer flops (some 0) and bytes on a random DAG: many exact ties."""
    edges = [[u, v] for v in range(1, n) for u in range(v) if rng.random() < 0.12]
    flops = rng.integers(0, 4, n).astype(float)
    out = rng.integers(0, 3, n).astype(float)
    params = rng.integers(0, 4, n).astype(float)
    return graph(flops.tolist(), edges, out_bytes=out.tolist(), param_bytes=params.tolist())


def random_state(g, c, rng, steps, memory_mask=True):
    """A PLC state after ``steps`` random legal placements."""
    s = PlacementState(g, c, memory_mask=memory_mask)
    for _ in range(steps):
        s.select(int(rng.choice(s.frontier())))
        s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
    s.select(int(rng.choice(s.frontier())))
    return s


def check_state(s, base):
    rule = get_teacher(base)
    legal = np.flatnonzero(s.place_mask())
    devices, orders = _compiled_completions(s, legal, KINDS[base], rule)
    assert devices.shape == orders.shape == (len(legal), s.graph.num_nodes)
    for i, d in enumerate(legal.tolist()):
        t = s.copy()
        t.place(d)
        done = complete(t, rule)
        assert devices[i].tolist() == done.device.tolist(), (base, d)
        assert orders[i].tolist() == done.order, (base, d)


@pytest.mark.parametrize("base", sorted(KINDS))
@pytest.mark.parametrize("cname", ["p100x4", "v100x8", "h100-2x8"])
def test_compiled_completion_equals_the_rule_on_random_dags(base, cname):
    c = get_preset(cname)
    for seed in range(3):
        g = make_graph("random_dag", nodes=50, seed=seed)
        rng = np.random.default_rng(seed)
        for steps in (0, 1, 17, 49):
            check_state(random_state(g, c, rng, steps), base)


@pytest.mark.parametrize("base", sorted(KINDS))
@pytest.mark.parametrize("memory", [1e18, 6.0, 2.0])
@pytest.mark.parametrize("mask", [True, False])
def test_compiled_completion_equals_the_rule_with_ties_and_memory(base, memory, mask):
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        g = tied_graph(rng)
        c = unit_cluster(3, latency=0.5, memory=memory)
        for steps in (0, 5, 39):
            check_state(random_state(g, c, rng, steps, memory_mask=mask), base)


@pytest.mark.parametrize("base", sorted(KINDS))
def test_compiled_completion_equals_the_rule_with_groups_and_room(base):
    rooms = 0
    for seed in range(12):
        rng = np.random.default_rng(200 + seed)
        g = add_groups(tied_graph(rng, n=30), size=3, share=0.6, seed=seed)
        total = float(g.param_bytes.sum())
        # resident bytes 40-60% of the memory: the plain rollouts overflow, and mostly
        # a reserve for live tensors makes them fit (the rule then has a room)
        c = unit_cluster(3, latency=0.5, memory=total / 3 / rng.uniform(0.4, 0.6))
        rooms += get_teacher(base).room(g, c) is not None
        for steps in (0, 4, 15, 29):
            check_state(random_state(g, c, rng, steps), base)
    assert rooms >= 3  # the room path runs, not only the plain rule


@pytest.mark.parametrize("base", sorted(KINDS))
def test_lookahead_places_the_same_compiled_or_not(base):
    g, c = make_graph("random_dag", nodes=40, seed=7), get_preset("v100x8")
    fast, slow = LookaheadTeacher(base), LookaheadTeacher(base, compiled=False)
    assert fast._kind is not None and slow._kind is None
    a, b = fast.place(g, c), slow.place(g, c)
    assert a.device.tolist() == b.device.tolist() and a.order.tolist() == b.order.tolist()
    assert fast.calls == slow.calls
    assert simulate(g, c, a).makespan <= simulate(g, c, get_teacher(base).place(g, c)).makespan


def test_the_kernel_ties_as_the_teachers_do():
    # compiled code keeps its own copy (numba's disk cache is per file)
    from placegym.teachers import _rule_kernel, base

    assert _rule_kernel.TIE_RTOL == base.TIE_RTOL


@pytest.mark.parametrize("base", ["critical_path", "heft_rule"])
@pytest.mark.parametrize(
    "case",
    ["random_dag@v100x8", "tied@unit3", "memory-tight-v0/moe-8x2x4-s0@v100x8-mem0.7-r1-2"],
)
def test_the_rules_rollout_is_the_python_rollout(base, case):
    """critical_path and heft_rule roll their rule out with the compiled kernel after the
    first step (and under memory pressure in their room): the placement of the rule
    stepped through PlacementState, recompute set and repair included."""
    from placegym.envs.suites import get_suite

    if case.startswith("memory-tight"):
        suite, _, inst_id = case.partition("/")
        inst = get_suite(suite).instance(inst_id)
        g, c = inst.graph, inst.cluster
    elif case.startswith("tied"):
        g, c = tied_graph(np.random.default_rng(3)), unit_cluster(3)
    else:
        g, c = make_graph("random_dag", nodes=120, seed=4), get_preset("v100x8")
    fast = get_teacher(base)
    slow = type(f"Python_{base}", (type(fast),), {"compiled_rule": None})()
    a, b = fast.place(g, c), slow.place(g, c)
    assert a.device.tolist() == b.device.tolist()
    assert a.order.tolist() == b.order.tolist()
    assert a.recompute.tolist() == b.recompute.tolist()
