"""The fortified lookahead (LookaheadTeacher(starts=...)): an incumbent seeded by the
starting placements keeps the rollout from ever ending slower than any of them, and a
policy with PolicyConfig.price_starts reads its prices."""

import itertools

import numpy as np
import pytest
import torch
from dagger import imitate
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.features import prices_with
from placegym.agents.doppler.inputs import graph_inputs
from placegym.agents.doppler.search import SearchConfig, check_budget, policy_search
from placegym.envs import PlacementEnv, load_cluster, simulate
from placegym.envs.analysis.ccr import scale_to_ccr
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher
from placegym.teachers.lookahead import LookaheadTeacher, sel_order

STARTS = ("critical_path", "heft", "nest", "metis", "round_robin", "single_device")


def makespan(g, c, placement) -> float:
    return simulate(g, c, placement).makespan


def in_rule_order(g, c, name: str) -> Placement:
    """``name``'s device map in heft_rule's selection order (a fortified start)."""
    order = get_teacher("heft_rule").place(g, c).order
    return Placement(device=get_teacher(name).place(g, c).device, order=order)


def comm_heavy():
    """ffnn at CCR 10 on doppler-unit-4: NEST's layer stages beat the plain lookahead."""
    c = load_cluster("doppler-unit-4")
    return scale_to_ccr(make_graph("ffnn"), c, 10.0), c


#: Graphs and clusters the rollout properties are checked on: (graph maker, cluster, CCR).
GRAPHS = [
    (lambda: make_graph("random_dag", nodes=40, seed=1), "p100x4", None),
    (lambda: make_graph("random_dag", nodes=40, seed=2), "v100x8", 4.0),
    (lambda: make_graph("chainmm"), "doppler-unit-4", 10.0),
    (lambda: make_graph("llama_block"), "p100x4", 1.0),
]


def walk(look, g, c) -> tuple[float, list[float]]:
    """Roll ``look`` out taking a device of least price: the placement's makespan and the
    least price of each PLC state."""
    state, prices = PlacementState(g, c), []
    while not state.done:
        state.select(int(look.select_actions(state)[0]))
        cost = look.place_costs(state)
        prices.append(cost.min())
        state.place(int(np.argmin(cost)))
    return makespan(g, c, state.to_placement()), prices


def test_fortified_lookahead_keeps_the_start_the_plain_one_misses():
    g, c = comm_heavy()
    starts = {t: makespan(g, c, get_teacher(t).place(g, c)) for t in STARTS}
    plain = makespan(g, c, get_teacher("lookahead").place(g, c))
    look = get_teacher("fortified_lookahead")
    assert look.starts == STARTS and look.name == "fortified_lookahead"
    fortified = makespan(g, c, look.place(g, c))
    assert plain > 1.5 * min(starts.values())  # the rule's completions miss the stages
    assert fortified <= min(starts.values())  # here NEST's stages in either order
    assert fortified <= min(makespan(g, c, in_rule_order(g, c, t)) for t in STARTS)
    assert look.calls <= g.num_nodes * c.num_devices + len(STARTS) + 1


@pytest.mark.parametrize("make, cname, ccr", GRAPHS)
def test_fortified_lookahead_is_never_slower_than_a_start_or_its_base(make, cname, ccr):
    c = load_cluster(cname)
    g = make() if ccr is None else scale_to_ccr(make(), c, ccr)
    look = LookaheadTeacher(starts=("nest", "metis", "single_device"))
    best = makespan(g, c, look.place(g, c))
    assert best <= makespan(g, c, get_teacher("heft_rule").place(g, c))
    assert best <= makespan(g, c, get_teacher("lookahead").place(g, c)) * 1.5  # sanity
    for t in ("nest", "metis", "single_device"):
        assert best <= makespan(g, c, in_rule_order(g, c, t)), t
    # the least price never rises along the rollout, and its last one is the placement's
    walked, prices = walk(look, g, c)
    assert walked == best
    assert all(b <= a for a, b in itertools.pairwise(prices))
    assert prices[-1] == best


@pytest.mark.parametrize("random_selection", [False, True])
def test_the_incumbent_is_a_function_of_the_state(random_selection):
    """Replayed by a fresh teacher from the empty state, a state's incumbent is the one
    the walk reached; it extends the state's decisions; off the teacher's selections
    too. Selecting as the teacher does, the next node is the incumbent's and its device
    is priced at the incumbent's makespan."""
    g, c = comm_heavy()
    walked = LookaheadTeacher(starts=STARTS)
    state, rng = PlacementState(g, c), np.random.default_rng(0)
    for _ in range(9):  # random legal devices
        pick = walked.select_actions(state)[0]
        state.select(int(rng.choice(state.frontier()) if random_selection else pick))
        walked.place_costs(state)
        state.place(int(rng.choice(np.flatnonzero(state.place_mask()))))
    inc = walked.incumbent(state)
    fresh = LookaheadTeacher(starts=STARTS).incumbent(state)
    np.testing.assert_array_equal(inc.device, fresh.device)
    np.testing.assert_array_equal(inc.order, fresh.order)
    assert inc.makespan == fresh.makespan
    k = state.num_placed
    assert inc.order[:k].tolist() == state.order[:k]
    placed = np.asarray(state.order[:k])
    np.testing.assert_array_equal(inc.device[placed], state.device[placed])
    assert makespan(g, c, Placement(device=inc.device, order=inc.order)) == inc.makespan
    if not random_selection:
        v = int(walked.select_actions(state)[0])
        assert v == inc.order[k]
        state.select(v)
        assert walked.place_costs(state)[inc.device[v]] == inc.makespan


def test_a_start_that_exceeds_memory_does_not_seed_the_incumbent(monkeypatch):
    """a, b -> c, 1-byte outputs over a 0.1 B/s link, 4-byte params on a and b; devices
    hold 7 bytes. All on one device takes 3 but does not fit; round_robin's split fits
    and takes 12."""
    from placegym.teachers.simple import SingleDeviceTeacher

    g = graph([1, 1, 1], [[0, 2], [1, 2]], out_bytes=[1, 1, 0], param_bytes=[4, 4, 0])
    c = unit_cluster(2, memory=7.0, bandwidth=0.1)
    # a start placer that ignores memory: everything on device 0
    monkeypatch.setattr(
        SingleDeviceTeacher, "place", lambda self, g, c: Placement(np.zeros(3, int), np.arange(3))
    )
    one, split = (in_rule_order(g, c, t) for t in ("single_device", "round_robin"))
    assert simulate(g, c, one).oom and makespan(g, c, one) == 3.0
    assert not simulate(g, c, split).oom and makespan(g, c, split) == 12.0
    look = LookaheadTeacher(starts=("single_device", "round_robin"))
    assert look.incumbent(PlacementState(g, c)).makespan == 12.0
    placed = simulate(g, c, look.place(g, c))
    assert not placed.oom and placed.makespan <= 12.0


def test_starts_are_validated():
    with pytest.raises(ValueError, match=r"starts: .* got 'nope'"):
        LookaheadTeacher(starts=("nope",))
    with pytest.raises(ValueError, match=r"starts: .* got 'lookahead'"):
        LookaheadTeacher(starts=("lookahead",))
    with pytest.raises(ValueError, match=r"starts: .* got 'fortified_lookahead'"):
        LookaheadTeacher(starts=("nest", "fortified_lookahead"))
    with pytest.raises(ValueError, match="price_starts: needs prices"):
        PolicyConfig(price_starts=("nest",))
    with pytest.raises(ValueError, match=r"price_starts: .* got \['nest', 'nest'\]"):
        PolicyConfig(prices=True, price_starts=("nest", "nest"))
    with pytest.raises(ValueError, match="not fortified"):
        get_teacher("lookahead").incumbent(PlacementState(*comm_heavy()))


def test_a_fortified_policy_reads_the_fortified_prices():
    """Its price features are the fortified teacher's prices (one cache with the
    teacher), and the teacher-driven episode keeps the incumbent."""
    g, c = comm_heavy()
    pol = DopplerPolicy(PolicyConfig(hidden=8, prices=True, price_starts=STARTS))
    teacher = LookaheadTeacher(starts=STARTS)
    assert prices_with(teacher, pol) is teacher
    assert prices_with(get_teacher("lookahead"), pol) is not None  # its own pricer instead
    assert prices_with(teacher, DopplerPolicy(PolicyConfig(hidden=8, prices=True))) is None
    [rec] = play_episodes(
        pol,
        [PlacementEnv(g, c)],
        [0],
        rng=np.random.default_rng(0),
        teacher=teacher,
        teacher_prob=1.0,
        record_teacher=True,
    )
    assert rec.makespan <= min(makespan(g, c, in_rule_order(g, c, t)) for t in STARTS)
    state = PlacementState(g, c)
    for k in range(g.num_nodes):
        state.select(int(rec.sel_action[k]))
        lead = teacher.place_costs(state) - teacher.place_costs(state).min()
        legal = rec.plc_mask[k]
        scale = graph_inputs(pol, PlacementEnv(g, c).reset(seed=0)[0], g, c).price_scale
        np.testing.assert_allclose(
            rec.plc_dev[k][legal, -2], np.minimum(lead[legal] / scale, 1e6).astype(np.float32)
        )
        state.place(int(rec.plc_action[k]))
        if k == 5:
            break


def test_imitating_the_fortified_lookahead_reaches_its_placement(one_torch_thread):
    torch.manual_seed(0)
    g, c = comm_heavy()
    teacher = LookaheadTeacher(starts=STARTS)
    target = makespan(g, c, teacher.place(g, c))
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2, prices=True, price_starts=STARTS))
    imitate(policy, g, c, teacher, updates=30)
    [rec] = play_episodes(
        policy, [PlacementEnv(g, c)], [3], rng=np.random.default_rng(3), greedy=True
    )
    assert rec.makespan == target


def test_search_budget_counts_the_fortified_starts():
    g, c = make_graph("random_dag", nodes=12, seed=4), load_cluster("p100x4")
    pol = DopplerPolicy(PolicyConfig(hidden=8, prices=True, price_starts=("nest", "metis")))
    need = g.num_nodes * c.num_devices + 3 + 1  # + heft_rule's and the two starts
    with pytest.raises(ValueError, match=rf"expected a budget >= {need}, got {need - 1}"):
        check_budget(pol, g, c, need - 1)
    res = policy_search(pol, g, c, SearchConfig(budget=need + 50, starts=()), seed=0)
    assert res.calls == need + 50
    best = min(makespan(g, c, get_teacher(t).place(g, c)) for t in ("nest", "metis", "heft_rule"))
    assert res.makespan <= best


def test_a_replayed_state_keeps_what_states_in_flight_need(monkeypatch):
    # a state whose ancestors were never priced is replayed from the empty state; with
    # small caches the replay must not drop the rows another episode's next state needs
    from placegym.envs import get_preset
    from placegym.envs.mdp.state import PlacementState
    from placegym.envs.workloads import make_graph
    from placegym.teachers import lookahead
    from placegym.teachers.lookahead import FortifiedLookaheadTeacher

    monkeypatch.setattr(lookahead, "_ROWS", 6)
    monkeypatch.setattr(lookahead, "_INCUMBENTS", 6)
    g, c = make_graph("random_dag", nodes=40, seed=3), get_preset("p100x4")
    t = FortifiedLookaheadTeacher(cache_size=0)
    a = PlacementState(g, c)
    for _ in range(3):  # an episode in flight, priced state by state
        a.select(int(t.select_actions(a)[0]))
        a.place(int(t.place_actions(a)[0]))
    a.select(int(t.select_actions(a)[0]))
    t.place_actions(a)
    rows, incs = t._rows(g, c), t._incumbents(g, c)
    mine = t._key(a)
    b = PlacementState(g, c)  # another, 25 steps deep, never priced on the way
    rng = np.random.default_rng(0)
    for _ in range(25):
        b.select(int(rng.choice(b.frontier())))
        b.place(int(rng.choice(np.flatnonzero(b.place_mask()))))
    b.select(int(b.frontier()[0]))
    calls = t.calls
    t.place_actions(b)
    assert t.calls - calls > 25 * 3  # it was replayed, pricing each state on the way
    assert mine in rows and len(rows) <= 6 and len(incs) <= 6
    # and the result is the same as without the replay's bookkeeping
    fresh = FortifiedLookaheadTeacher(cache_size=0)
    assert fresh.place_actions(b).tolist() == t.place_actions(b).tolist()


# ---------------------------------------------------------------------- follow
def test_sel_order_keeps_a_topological_order_and_repairs_another():
    # 0 -> 2, 1 -> 2, 2 -> 3
    g = graph([1, 1, 1, 1], [[0, 2], [1, 2], [2, 3]])
    assert sel_order(g, np.array([1, 0, 2, 3])).tolist() == [1, 0, 2, 3]
    # 2 ranked before its producer 1: it waits for 1, the rest keep their ranks
    assert sel_order(g, np.array([0, 2, 1, 3])).tolist() == [0, 1, 2, 3]
    assert sel_order(g, np.array([3, 2, 1, 0])).tolist() == [1, 0, 2, 3]


def test_follow_needs_a_fortified_lookahead():
    with pytest.raises(ValueError, match="follow: needs a fortified lookahead"):
        LookaheadTeacher(follow=True)
    with pytest.raises(ValueError, match="price_follow: needs price_starts"):
        PolicyConfig(prices=True, price_follow=True)
    assert "follow=True" in repr(LookaheadTeacher(starts=("nest",), follow=True))


def moe_on_p100x4():
    """memory-tight-v0's moe-8x2x4-s0@p100x4-mem0.9: HEFT's device map is heft_rule's,
    and HEFT's own priorities (planned starts) run it faster than heft_rule's (b-level)."""
    from placegym.envs.suites import get_suite

    inst = get_suite("memory-tight-v0").instance("moe-8x2x4-s0@p100x4-mem0.9")
    return inst.graph, inst.cluster


def test_following_keeps_a_start_whose_priorities_the_rule_order_loses():
    g, c = moe_on_p100x4()
    heft = get_teacher("heft").place(g, c)
    assert makespan(g, c, in_rule_order(g, c, "heft")) > makespan(g, c, heft)
    plain = makespan(g, c, LookaheadTeacher(starts=STARTS).place(g, c))
    look = LookaheadTeacher(starts=STARTS, follow=True)
    followed = simulate(g, c, look.place(g, c))
    assert plain > makespan(g, c, heft)  # the fortified rollout in rule order loses it
    assert not followed.oom
    assert followed.makespan <= min(
        makespan(g, c, p)
        for p in (get_teacher(t).place(g, c) for t in STARTS)
        if not simulate(g, c, p).oom
    )


@pytest.mark.parametrize("make, cname, ccr", GRAPHS)
def test_following_is_never_slower_than_a_start_as_it_is(make, cname, ccr):
    c = load_cluster(cname)
    g = make() if ccr is None else scale_to_ccr(make(), c, ccr)
    best, prices = walk(LookaheadTeacher(starts=STARTS, follow=True), g, c)
    assert all(b <= a for a, b in itertools.pairwise(prices))
    assert prices[-1] == best
    assert best <= makespan(g, c, get_teacher("heft_rule").place(g, c))
    for t in STARTS:
        p = get_teacher(t).place(g, c)
        as_is = Placement(device=p.device, order=sel_order(g, p.order))
        assert best <= makespan(g, c, as_is), t


def test_a_following_policy_reads_the_pricers_pick(one_torch_thread):
    """Its SEL pick is the following teacher's next node, recorded with the episode;
    imitation reaches the teacher's placement, and the decoder's greedy pass is the
    episode's."""
    from placegym.agents.doppler.decoder import Decoder
    from placegym.agents.doppler.features import new_pricer

    torch.manual_seed(0)
    g, c = comm_heavy()
    teacher = LookaheadTeacher(starts=STARTS, follow=True)
    target = makespan(g, c, teacher.place(g, c))
    config = PolicyConfig(hidden=16, layers=2, prices=True, price_starts=STARTS, price_follow=True)
    policy = DopplerPolicy(config)
    assert prices_with(teacher, policy) is teacher
    assert prices_with(LookaheadTeacher(starts=STARTS), policy) is not None
    assert new_pricer(policy).follow
    _, records = imitate(policy, g, c, teacher, updates=30)
    rec = records[0]
    assert rec.sel_pick is not None and len(rec.sel_pick) == g.num_nodes
    state = PlacementState(g, c)
    for k in range(6):  # the recorded picks are the teacher's next nodes
        assert rec.sel_pick[k] == teacher.select_actions(state)[0]
        state.select(int(rec.sel_action[k]))
        state.place(int(rec.plc_action[k]))
    [rec] = play_episodes(
        policy, [PlacementEnv(g, c)], [3], rng=np.random.default_rng(3), greedy=True
    )
    assert rec.makespan == target
    decoded = Decoder(policy, g, c).greedy()
    assert makespan(g, c, decoded) == target


def test_search_budget_counts_the_following_picks():
    g, c = make_graph("random_dag", nodes=12, seed=4), load_cluster("p100x4")
    config = PolicyConfig(hidden=8, prices=True, price_starts=STARTS, price_follow=True)
    pol = DopplerPolicy(config)
    # n * D completions, heft_rule's and the six starts, one pick a node, the pass
    need = g.num_nodes * c.num_devices + len(STARTS) + 1 + g.num_nodes + 1
    with pytest.raises(ValueError, match=rf"expected a budget >= {need}, got {need - 1}"):
        check_budget(pol, g, c, need - 1)
    res = policy_search(pol, g, c, SearchConfig(budget=need, starts=()), seed=0)
    assert res.calls == need and res.stages["greedy"] <= need
