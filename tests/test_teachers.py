"""Teachers: valid placements everywhere, legal per-state answers, known optima by hand.

Hand-solved graphs run on :func:`simcases.unit_cluster` (1 FLOP/s devices, 1 B/s links,
no latency unless said): a node's duration is its flops, a transfer of b bytes takes b.
"""

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import Cluster, Device, Level, get_preset, list_presets, simulate
from placegym.envs.mdp.state import PlacementState, Timeline
from placegym.envs.workloads import ffnn
from placegym.teachers import get_teacher, list_teachers
from placegym.teachers._common import fits
from placegym.teachers.base import StepTeacher
from placegym.teachers.heft import heft_schedule

MINE = [
    "critical_path",
    "heft",
    "heft_rule",
    "heft_lookahead",
    "random",
    "round_robin",
    "single_device",
    "metis",
    "anneal",
]
# n * D base-rule completions per placement: checked on the small graphs only
LOOKAHEAD = ["lookahead"]
OTHERS = {"nest": "placegym.teachers.nest", "optimal": "placegym.teachers.optimal"}
CLUSTERS = ["p100x4", "v100x8", "h100-2x8"]


# ---------------------------------------------------------------- hand-solved graphs
def fork_join():
    """0 -> {1, 2} -> 3, flops 1, 4, 4, 1, every output 1 byte; optimum 7 on 2 devices.

    Both branches on one device: 1 + 4 + 4 + 1 = 10. Branches apart: the one away from 0
    starts at 1 + 1 = 2 and ends at 6; the join waits for the other branch's output to
    cross too (it ends at 5, arrives at 6), so it runs [6, 7] on the far device (on 0's
    device it would wait for the arrival at 7 and end at 8). Neither branch with 0: both
    start >= 2, end >= 6, join ends >= 8. Optimum 7: heavy branch on the other device,
    join there.
    """
    return graph([1, 4, 4, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[1, 1, 1, 1])


def costly_fork_join():
    """Same shape, flops 1, 3, 3, 1, outputs 10 bytes; optimum 8 (everything on one device).

    Every node descends from 0, so any node off 0's device waits for a 10 s transfer and
    the run lasts >= 1 + 10 + 1 = 12; on one device it is the serial sum 8.
    """
    return graph([1, 3, 3, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[10] * 4)


def independent():
    """Six independent nodes of flops 3, 3, 2, 2, 1, 1 on 2 devices: optimum 6 = 12 / 2,
    reached by longest-first list scheduling ({3, 2, 1} on each device)."""
    return graph([3, 3, 2, 2, 1, 1], [])


def slow_fast():
    """A chain 0 -> 1 -> 2 of 4 FLOP each, 1-byte outputs, on devices of 1 and 2 FLOP/s.

    Each node takes >= 2 s (on the fast device), so 6 is a lower bound, met by putting the
    whole chain on the fast device 1.
    """
    return graph([4, 4, 4], [[0, 1], [1, 2]], out_bytes=[1, 1, 1])


def slow_fast_cluster():
    devs = (Device("slow", flops=1.0, memory=1e18), Device("fast", flops=2.0, memory=1e18))
    return Cluster(devices=devs, levels=(Level("net", 1.0, 0.0),), name="slow-fast")


def two_clusters():
    """Two diamonds {0..3} and {4..7} whose edges carry 100 bytes, joined by the single
    1-byte edge 3 -> 4; every node 1 FLOP. Cutting that edge is the balanced min cut."""
    edges = [[0, 1], [0, 2], [1, 3], [2, 3], [3, 4], [4, 5], [4, 6], [5, 7], [6, 7]]
    return graph([1.0] * 8, edges, out_bytes=[100, 100, 100, 1, 100, 100, 100, 100])


def tight_memory():
    """A 4-node chain, 5 param bytes per node, on two devices of 10 bytes: at most two
    nodes per device (outputs are empty, so params are the whole footprint)."""
    return graph([1, 1, 1, 1], [[0, 1], [1, 2], [2, 3]], param_bytes=[5, 5, 5, 5])


HAND = {
    "fork_join": fork_join,
    "costly_fork_join": costly_fork_join,
    "independent": independent,
    "two_clusters": two_clusters,
}


def teacher(name):
    if name in OTHERS:
        pytest.importorskip(OTHERS[name])
    if name == "optimal":  # the hand graphs are tiny: allow the 8- and 16-device presets
        return get_teacher(name, max_devices=16)
    return get_teacher(name)


def check_valid(p, g, c):
    assert p.device.shape == (g.num_nodes,)
    assert ((p.device >= 0) & (p.device < c.num_devices)).all()
    assert sorted(p.order.tolist()) == list(range(g.num_nodes))
    p.check(g, c)


def is_topological(g, order):
    pos = np.empty(g.num_nodes, dtype=np.int64)
    pos[order] = np.arange(g.num_nodes)
    return bool((pos[g.edges[:, 0]] < pos[g.edges[:, 1]]).all()) if g.num_edges else True


# ---------------------------------------------------------------- validity everywhere
def test_registry_names_are_provided():
    for name in MINE + LOOKAHEAD:
        assert name in list_teachers()
        assert get_teacher(name).name == name


@pytest.mark.parametrize("cname", CLUSTERS)
@pytest.mark.parametrize("name", MINE)
def test_valid_placement_on_ffnn(name, cname):
    g, c = ffnn(), get_preset(cname)
    p = teacher(name).place(g, c)
    check_valid(p, g, c)
    assert np.isfinite(simulate(g, c, p).makespan)
    if name != "anneal":  # anneal's priority swaps may leave topological order
        assert is_topological(g, p.order)


@pytest.mark.parametrize("cname", CLUSTERS)
@pytest.mark.parametrize("name", MINE + LOOKAHEAD + list(OTHERS))
def test_valid_placement_on_hand_graphs(name, cname):
    t, c = teacher(name), get_preset(cname)
    for build in [*HAND.values(), slow_fast, tight_memory]:
        g = build()
        check_valid(t.place(g, c), g, c)


@pytest.mark.parametrize("name", MINE + LOOKAHEAD)
def test_tiny_and_degenerate_graphs(name):
    t = teacher(name)
    for g, c in [
        (graph([], []), unit_cluster(2)),
        (graph([2.0], []), unit_cluster(4)),  # fewer nodes than devices
        (graph([1.0, 2.0], [[0, 1]]), unit_cluster(3)),
        (fork_join(), unit_cluster(1)),  # one device
    ]:
        p = t.place(g, c)
        check_valid(p, g, c)
        if c.num_devices == 1 and g.num_nodes:
            assert simulate(g, c, p).makespan == 10.0  # the serial sum


@pytest.mark.parametrize("name", MINE)
def test_deterministic(name):
    g, c = ffnn(), get_preset("v100x8")
    a, b = get_teacher(name).place(g, c), get_teacher(name).place(g, c)
    assert a.device.tolist() == b.device.tolist()
    assert a.order.tolist() == b.order.tolist()


# ---------------------------------------------------------------- known optima
@pytest.mark.parametrize("name", ["critical_path", "heft"])
@pytest.mark.parametrize(
    ("build", "optimum"), [(fork_join, 7.0), (costly_fork_join, 8.0), (independent, 6.0)]
)
def test_list_schedulers_reach_the_optimum(name, build, optimum):
    g, c = build(), unit_cluster(2)
    assert simulate(g, c, get_teacher(name).place(g, c)).makespan == optimum


def test_fork_join_puts_the_heavy_branch_apart():
    g, c = fork_join(), unit_cluster(2)
    for name in ["critical_path", "heft"]:
        dev = get_teacher(name).place(g, c).device
        assert dev[1] != dev[2]  # the two heavy branches run in parallel
        assert dev[3] == dev[2] != dev[0]  # the join follows the far branch


def test_costly_communication_keeps_one_device():
    g, c = costly_fork_join(), unit_cluster(2)
    for name in ["critical_path", "heft", "anneal"]:
        assert len(set(get_teacher(name).place(g, c).device.tolist())) == 1


def test_heft_and_single_device_use_the_fast_device():
    g, c = slow_fast(), slow_fast_cluster()
    for name in ["heft", "single_device", "anneal"]:
        p = get_teacher(name).place(g, c)
        assert p.device.tolist() == [1, 1, 1]
        assert simulate(g, c, p).makespan == 6.0


def test_heft_inserts_into_idle_gaps():
    # 0 (2 FLOP, 1-byte output) feeds 1 and 2 (3 FLOP each); 3 is an independent 1-FLOP
    # source. b-levels: 0: 2 + 1 + 3 = 6, 1 and 2: 3, 3: 1, so HEFT takes 0, 1, 2, 3.
    # 0 -> d0 [0, 2]; 1 -> d0 [2, 5] (d1 would end at 2 + 1 + 3 = 6); 2 -> d1 [3, 6]
    # (d0: [5, 8]), leaving d1 idle over [0, 3]; 3 fits there: start 0 on d1 (d0: [5, 6]).
    g = graph([2, 3, 3, 1], [[0, 1], [0, 2]], out_bytes=[1, 0, 0, 0])
    c = unit_cluster(2)
    dev, start, finish = heft_schedule(g, c)
    assert dev.tolist() == [0, 0, 1, 1]
    assert start.tolist() == [0.0, 2.0, 3.0, 0.0]
    assert finish.tolist() == [2.0, 5.0, 6.0, 1.0]
    p = get_teacher("heft").place(g, c)
    assert p.order.tolist() == [0, 3, 1, 2]  # by planned start, rank order on ties
    s = simulate(g, c, p)
    assert s.makespan == 6.0 and s.start.tolist() == start.tolist()


@pytest.mark.parametrize("seed", [0, 1])
def test_heft_on_many_identical_devices_is_its_rule_over_every_device(seed):
    """32 identical devices: most devices tie on every bound, and HEFT's device search
    stops early; its device map is still the rule's minimum of (finish, index) over all."""
    from placegym.envs.workloads import make_graph

    g = make_graph("random_dag", nodes=80, seed=seed)
    c = unit_cluster(32, bandwidth=1e10, latency=1e-4, flops=1e11)
    assert get_teacher("heft_rule").place(g, c).device.tolist() == heft_schedule(g, c)[0].tolist()


def test_insertion_start_follows_heft_state_by_state():
    # the graph of test_heft_inserts_into_idle_gaps, played through PlacementState
    g = graph([2, 3, 3, 1], [[0, 1], [0, 2]], out_bytes=[1, 0, 0, 0])
    c = unit_cluster(2)
    s = PlacementState(g, c)
    for v, d in [(0, 0), (1, 0), (2, 1)]:
        s.select(v)
        s.place(d)
    s.select(3)
    assert s.insertion_start().tolist() == [5.0, 0.0]  # the idle gap [0, 3] of d1
    assert s.earliest_start().tolist() == [5.0, 6.0]  # the list schedule appends
    twin = s.copy()
    s.place(1)
    assert twin.insertion_start().tolist() == [5.0, 0.0]  # copies are independent
    assert s.insertion_start(3).tolist() == [5.0, 1.0]  # node 3 now occupies [0, 1]
    assert get_teacher("heft_rule").place(g, c).device.tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("cname", CLUSTERS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heft_rule_is_hefts_device_map(cname, seed):
    from placegym.envs.workloads import make_graph

    g, c = make_graph("random_dag", nodes=60, seed=seed), get_preset(cname)
    rule = get_teacher("heft_rule")
    assert rule.place(g, c).device.tolist() == heft_schedule(g, c)[0].tolist()
    s = PlacementState(g, c)  # from a state off HEFT's path, HEFT's rule on its own schedule
    s.select(int(rule.select_actions(s)[0]))
    s.place(c.num_devices - 1)
    s.select(int(rule.select_actions(s)[0]))
    finish = s.insertion_start() + s.costs.duration[s.selected]
    assert rule.place_actions(s).tolist() == np.flatnonzero(finish == finish.min()).tolist()


def test_lookahead_sees_the_cost_of_outputs():
    # 0 -> {1, 2} -> 3, flops 1, 2, 2, 1; 1 and 2 send 3 bytes (3 s across), 0 sends none.
    # HEFT's rule puts 2 where it finishes first (d1 at 3, not d0 at 5) and the join then
    # waits for a 3 s transfer: 7. All on one device is the serial sum 6.
    g = graph([1, 2, 2, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[0, 3, 3, 0])
    c = unit_cluster(2)
    assert simulate(g, c, get_teacher("heft_rule").place(g, c)).makespan == 7.0
    look = get_teacher("lookahead")
    s = PlacementState(g, c)
    s.select(0)
    assert look.place_actions(s).tolist() == [0, 1]  # both completions take 7
    s.place(0)
    s.select(1)
    s.place(0)
    s.select(2)
    legal, makespan = look.completion_makespans(s)
    assert legal.tolist() == [0, 1] and makespan.tolist() == [6.0, 7.0]
    assert look.place_actions(s).tolist() == [0]
    assert get_teacher("lookahead", rtol=0.2).place_actions(s).tolist() == [0, 1]  # 7 <= 7.2
    assert get_teacher("lookahead", rtol=0.1).place_actions(s).tolist() == [0]
    assert get_teacher("lookahead", rtol=0.2).place(g, c).device.tolist() == [0] * 4  # exact
    p = look.place(g, c)
    assert simulate(g, c, p).makespan == 6.0 and p.device.tolist() == [0, 0, 0, 0]
    # 2 for node 0's answer, 2 + 2 for node 2 (completion_makespans does not cache), and 4
    # for place (nodes 1 and 3; the answers for nodes 0 and 2 are cached)
    assert look.calls == 2 + 2 + 2 + 2 + 2
    assert get_teacher("lookahead", base="critical_path").place(g, c).device.tolist() == [0] * 4


@pytest.mark.parametrize("base", ["heft_rule", "critical_path"])
@pytest.mark.parametrize("cname", ["p100x4", "v100x8"])
@pytest.mark.parametrize("seed", [0, 1])
def test_lookahead_is_never_slower_than_its_base(base, cname, seed):
    from placegym.envs.workloads import make_graph

    g, c = make_graph("random_dag", nodes=30, seed=seed), get_preset(cname)
    look = get_teacher("lookahead", base=base)
    s = PlacementState(g, c)
    best = np.inf
    while not s.done:  # the best completion's makespan never rises along the rollout
        s.select(int(look.select_actions(s)[0]))
        legal, makespan = look.completion_makespans(s)
        assert makespan.min() <= best
        best = makespan.min()
        s.place(int(look.place_actions(s)[0]))
    p = s.to_placement()
    assert simulate(g, c, p).makespan == best
    assert p.device.tolist() == look.place(g, c).device.tolist()
    assert best <= simulate(g, c, get_teacher(base).place(g, c)).makespan


def test_lookahead_base_is_validated():
    with pytest.raises(ValueError, match=r"base: expected a step teacher.*'heft'"):
        get_teacher("lookahead", base="heft")
    with pytest.raises(ValueError, match="base: expected a rule other than 'lookahead'"):
        get_teacher("lookahead", base="lookahead")
    with pytest.raises(ValueError, match=r"rtol: expected a margin >= 0, got -0\.1"):
        get_teacher("lookahead", rtol=-0.1)


def test_heft_timeline_gaps():
    line = Timeline()
    line.insert(0.0, 1.0)
    line.insert(5.0, 6.0)
    assert line.earliest_fit(0.0, 2.0) == 1.0  # [1, 3] fits before 5
    assert line.earliest_fit(0.0, 4.0) == 1.0  # [1, 5] fits exactly
    assert line.earliest_fit(0.0, 4.5) == 6.0  # too long: after the last interval
    assert line.earliest_fit(5.5, 1.0) == 6.0  # ready inside a busy interval
    assert line.earliest_fit(7.0, 1.0) == 7.0  # ready after everything


def test_metis_separates_two_clusters():
    g, c = two_clusters(), unit_cluster(2)
    dev = get_teacher("metis").place(g, c).device
    assert len(set(dev[:4].tolist())) == 1
    assert len(set(dev[4:].tolist())) == 1
    assert dev[0] != dev[4]


def test_metis_gives_heavier_parts_to_faster_devices():
    # Two disconnected chains, one 3x heavier; on slow/fast devices the heavy one goes fast.
    g = graph([3, 3, 3, 1, 1, 1], [[0, 1], [1, 2], [3, 4], [4, 5]], out_bytes=[1] * 6)
    dev = get_teacher("metis").place(g, slow_fast_cluster()).device
    assert np.bincount(dev, weights=g.flops, minlength=2)[1] >= 6


def test_metis_seed_is_validated():
    with pytest.raises(ValueError, match="seed: must be an integer >= 0, got -1"):
        get_teacher("metis", seed=-1)


# ---------------------------------------------------------------- memory rule
def mask_ok(g, c, p):
    used = np.zeros(c.num_devices)
    for v in p.order.tolist():
        if not fits(used, g.param_bytes[v], c.memory)[p.device[v]]:
            return False
        used[p.device[v]] += g.param_bytes[v]
    return True


@pytest.mark.parametrize("name", MINE + LOOKAHEAD)
def test_plans_respect_the_memory_rule(name):
    g, c = tight_memory(), unit_cluster(2, memory=10.0)
    p = get_teacher(name).place(g, c)
    assert mask_ok(g, c, p)
    assert not simulate(g, c, p).oom
    assert np.bincount(p.device, minlength=2).tolist() == [2, 2]


# ---------------------------------------------------------------- per-state answers
def drive(t, g, c):
    """Roll out ``t``'s per-state answers (first of each set), checking each is legal."""
    s = PlacementState(g, c)
    while not s.done:
        sel = t.select_actions(s)
        assert len(sel) > 0 and s.select_mask()[sel].all()
        assert list(sel) == sorted(set(sel.tolist()))
        s.select(int(sel[0]))
        plc = t.place_actions(s)
        assert len(plc) > 0 and s.place_mask()[plc].all()
        assert list(plc) == sorted(set(plc.tolist()))
        s.place(int(plc[0]))
    return s.to_placement()


@pytest.mark.parametrize("name", MINE + LOOKAHEAD)
def test_per_state_answers_are_legal(name):
    t = get_teacher(name)
    cases = [(ffnn(), get_preset("p100x4")), (tight_memory(), unit_cluster(2, memory=10.0))]
    cases += [(build(), unit_cluster(3)) for build in HAND.values()]
    for g, c in cases:
        p, q = t.place(g, c), drive(t, g, c)
        if isinstance(t, StepTeacher) or (name != "random" and is_topological(g, p.order)):
            # the rollout of a plan with a topological order is the plan itself
            assert q.device.tolist() == p.device.tolist()
            assert q.order.tolist() == p.order.tolist()


@pytest.mark.parametrize("name", MINE)
def test_per_state_answers_off_the_plan(name):
    # States the teacher would not reach itself: answers stay legal and non-empty.
    g, c = ffnn(), get_preset("v100x8")
    t, s = get_teacher(name), PlacementState(g, c)
    rng = np.random.default_rng(0)
    while not s.done:
        assert len(t.select_actions(s)) > 0
        s.select(int(rng.choice(s.frontier())))
        plc = t.place_actions(s)
        assert len(plc) > 0 and s.place_mask()[plc].all()
        s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))


def test_critical_path_tie_sets():
    g, c = fork_join(), unit_cluster(2)
    t, s = get_teacher("critical_path"), PlacementState(g, c)
    assert t.select_actions(s).tolist() == [0]
    s.select(0)
    assert t.place_actions(s).tolist() == [0, 1]  # both devices idle: a tie
    s.place(1)
    assert t.select_actions(s).tolist() == [1, 2]  # equal b-levels
    s.select(2)
    assert t.place_actions(s).tolist() == [1]  # on device 0 it waits for the input


def test_critical_path_wrong_phase_raises():
    g, c = fork_join(), unit_cluster(2)
    t, s = get_teacher("critical_path"), PlacementState(g, c)
    with pytest.raises(ValueError, match="phase is 'select'"):
        t.place_actions(s)
    s.select(0)
    with pytest.raises(ValueError, match="no frontier node"):
        t.select_actions(s)


def test_random_answers_are_the_uniform_support():
    g, c = fork_join(), unit_cluster(3)
    t, s = get_teacher("random"), PlacementState(g, c)
    assert t.select_actions(s).tolist() == [0]
    s.select(0)
    assert t.place_actions(s).tolist() == [0, 1, 2]
    s.place(0)
    assert t.select_actions(s).tolist() == [1, 2]


def test_random_is_seeded():
    g, c = ffnn(), get_preset("p100x4")
    a = get_teacher("random", seed=3).place(g, c)
    b = get_teacher("random", seed=3).place(g, c)
    d = get_teacher("random", seed=4).place(g, c)
    assert a.device.tolist() == b.device.tolist() and a.order.tolist() == b.order.tolist()
    assert a.device.tolist() != d.device.tolist()
    assert is_topological(g, a.order)
    with pytest.raises(ValueError, match="seed: must be an integer >= 0, got 'x'"):
        get_teacher("random", seed="x")


def test_round_robin_cycles_devices_in_topological_order():
    g, c = ffnn(), get_preset("p100x4")
    p = get_teacher("round_robin").place(g, c)
    assert p.order.tolist() == g.topological_order.tolist()
    assert p.device[p.order].tolist() == [i % 4 for i in range(g.num_nodes)]


def test_single_device_picks_the_fastest():
    g, c = ffnn(), get_preset("p100x4")
    p = get_teacher("single_device").place(g, c)
    assert set(p.device.tolist()) == {0}
    assert simulate(g, c, p).makespan == pytest.approx(simulate(g, c, p).busy_time[0])


@pytest.mark.parametrize("preset", [name for name, _ in list_presets()])
def test_every_teacher_on_every_workload_and_preset(preset):
    from placegym.envs.workloads import WORKLOADS, make_graph

    cluster = get_preset(preset)
    for workload in WORKLOADS:
        g = make_graph(workload)
        for name in (
            "critical_path",
            "heft",
            "nest",
            "anneal",
            "random",
            "round_robin",
            "single_device",
            "metis",
        ):
            teacher = get_teacher(name, budget=300) if name == "anneal" else get_teacher(name)
            p = teacher.place(g, cluster)
            p.check(g, cluster)
            assert simulate(g, cluster, p).makespan > 0, (workload, name)
