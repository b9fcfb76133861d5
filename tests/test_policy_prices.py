"""PolicyConfig.prices: PLC reads each device's price under the lookahead teacher (the
simulated makespan of heft_rule's completion with the selected node there)."""

import numpy as np
import pytest
import torch
from dagger import imitate
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.features import price_features
from placegym.agents.doppler.inputs import graph_inputs, plc_devices
from placegym.agents.doppler.search import SearchConfig, policy_search
from placegym.envs import PlacementEnv, load_cluster, simulate
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher


def outputs_graph():
    """test_lookahead_sees_the_cost_of_outputs's graph: heft_rule 7, all on one device 6."""
    return graph([1, 2, 2, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[0, 3, 3, 0])


def test_price_features_on_a_hand_solved_state():
    g, c = outputs_graph(), unit_cluster(2)
    s = PlacementState(g, c)
    for v, d in [(0, 0), (1, 0)]:
        s.select(v)
        s.place(d)
    s.select(2)
    x = price_features(s, scale=2.0)
    # completions take 6 (node 2 on device 0) and 7 (device 1): device 0 is the least
    assert x.dtype == np.float32 and x.shape == (2, 2)
    assert x.tolist() == [[0.0, 1.0], [0.5, 0.0]]


def test_price_features_price_every_legal_device_as_the_lookahead():
    g, c = make_graph("random_dag", nodes=30, seed=3), load_cluster("v100x8")
    look = get_teacher("lookahead")
    s = PlacementState(g, c)
    rng = np.random.default_rng(0)
    for _ in range(12):
        s.select(int(rng.choice(s.frontier())))
        s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
    s.select(int(s.frontier()[0]))
    _, makespan = look.completion_makespans(s)
    x = price_features(s, scale=3.0)
    lead = (makespan - makespan.min()) / 3.0
    np.testing.assert_allclose(x[:, 0], lead.astype(np.float32))
    assert np.flatnonzero(x[:, 1]).tolist() == look.place_actions(s).tolist()


def test_plc_devices_adds_the_columns_only_with_prices():
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    env = PlacementEnv(g, c)
    obs, _ = env.reset(seed=0)
    both = DopplerPolicy(PolicyConfig(hidden=8, insertion=True, prices=True))
    inputs = graph_inputs(both, obs, g, c)
    assert inputs.price_scale == pytest.approx(env.unwrapped.time_unit)
    state = env.unwrapped.state
    state.select(int(state.frontier()[0]))
    out = plc_devices(inputs, state, np.zeros((4, 7), np.float32))
    assert out.shape == (4, 12)
    np.testing.assert_array_equal(out[:, 10:], price_features(state, inputs.price_scale))
    only = graph_inputs(DopplerPolicy(PolicyConfig(hidden=8, prices=True)), obs, g, c)
    assert only.scale is None and plc_devices(only, state, np.zeros((4, 7))).shape == (4, 9)


def test_search_counts_a_priced_policys_prices_in_its_budget():
    """The greedy pass of a priced policy prices n * D completions: they are counted in
    the budget and the curve, the best of them is a candidate, and the rest of the budget
    anneals (no beam, samples or policy windows, which would price more states)."""
    g, c = make_graph("random_dag", nodes=20, seed=4), load_cluster("p100x4")
    n_d = g.num_nodes * c.num_devices
    pol = DopplerPolicy(PolicyConfig(hidden=8, prices=True))
    with pytest.raises(ValueError, match=rf"budget: .* expected a budget >= {n_d + 1}, got 10"):
        policy_search(pol, g, c, SearchConfig(budget=10))
    res = policy_search(pol, g, c, SearchConfig(budget=n_d + 200, starts=()), seed=3)
    assert res.calls == n_d + 200
    assert res.stages["greedy"] in (n_d, n_d + 1)  # + 1 unless a completion was the greedy
    assert "beam" not in res.stages and "samples" not in res.stages
    assert sum(res.stages.values()) == res.calls  # greedy, improve
    # the first D calls are the completions of the first PLC state: heft_rule's own
    # placement among them, so the curve is at heft_rule's makespan or below by then
    heft_rule = simulate(g, c, get_teacher("heft_rule").place(g, c)).makespan
    assert np.isfinite(res.curve).all() and res.curve[c.num_devices - 1] <= heft_rule
    assert res.greedy == simulate(g, c, greedy_placement(pol, g, c)).makespan
    assert res.makespan == res.curve[-1] <= min(res.greedy, res.curve[n_d - 1])
    # with the heuristic starts (the default) they come first, then the greedy pass
    started = policy_search(pol, g, c, SearchConfig(budget=n_d + 200), seed=3)
    assert list(started.stages) == ["starts", "greedy", "improve", "repair"]
    assert started.stages["starts"] == 5 and started.greedy == res.greedy
    assert simulate(g, c, res.placement).makespan == res.makespan
    again = policy_search(pol, g, c, SearchConfig(budget=n_d + 200, starts=()), seed=3)
    np.testing.assert_array_equal(again.curve, res.curve)  # the budget is the search's own


def greedy_placement(policy, g, c):
    from placegym.envs.core.placement import Placement

    [rec] = play_episodes(
        policy, [PlacementEnv(g, c)], [0], rng=np.random.default_rng(0), greedy=True
    )
    order = rec.sel_action
    return Placement(device=np.asarray(rec.info["placement"]), order=order)


def test_imitating_the_lookahead_with_its_prices_reaches_its_placement(one_torch_thread):
    """On the outputs graph heft_rule spreads the branches (7) and the lookahead keeps
    them on one device (6); with the prices as inputs the greedy policy learns the
    lookahead's placement."""
    torch.manual_seed(0)
    g, c = outputs_graph(), unit_cluster(2)
    teacher = get_teacher("lookahead")
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2, prices=True))
    imitate(policy, g, c, teacher)
    runs = [
        play_episodes(
            policy, [PlacementEnv(g, c)], [s], rng=np.random.default_rng(s), greedy=True
        )[0]
        for s in (0, 5)
    ]
    assert runs[0].plc_dev.shape[-1] == 9
    assert runs[0].info["placement"].tolist() == runs[1].info["placement"].tolist()
    # node 0 sends nothing, so nodes 1-3 together on either device are the lookahead's
    # tie set (both price 6); heft_rule's own placement takes 7
    devices = runs[0].info["placement"].tolist()
    assert devices[1] == devices[2] == devices[3] and runs[0].makespan == 6.0
    assert simulate(g, c, get_teacher("heft_rule").place(g, c)).makespan == 7.0


def test_sel_pick_marks_the_node_heft_rule_selects():
    from placegym.agents.doppler.features import sel_pick

    g, c = make_graph("ffnn"), load_cluster("v100x8")  # identical layers: b-level ties
    env = PlacementEnv(g, c)
    obs, _ = env.reset(seed=0)
    pol = DopplerPolicy(PolicyConfig(hidden=8, prices=True))
    inputs = graph_inputs(pol, obs, g, c)
    rule, look = get_teacher("heft_rule"), get_teacher("lookahead")
    s = PlacementState(g, c)
    rng = np.random.default_rng(1)
    states, steps, nodes, tied_sets = [], [], [], 0
    for k in range(40):
        frontier = s.frontier()
        steps.append(np.full(len(frontier), k))
        nodes.append(frontier)
        states.append(int(rule.select_actions(s)[0]))
        tied_sets += len(rule.select_actions(s)) > 1
        assert look.select_actions(s).tolist() == states[-1:]
        s.select(int(rng.choice(frontier)))
        s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
    assert tied_sets > 5  # the first of a tie set is what is tested
    step, node = torch.from_numpy(np.concatenate(steps)), torch.from_numpy(np.concatenate(nodes))
    pick = sel_pick(inputs, step, node)[:, 0].numpy()
    for k in range(40):
        assert node[step == k][pick[step.numpy() == k] == 1].tolist() == [states[k]]


def test_the_lookahead_teacher_prices_its_labelled_states_once():
    """With the lookahead over heft_rule as teacher, the PLC prices come from the teacher's
    own cache: each state is priced once (no second pricer), the features unchanged."""
    from placegym.agents.doppler import features as features_module
    from placegym.teachers.lookahead import LookaheadTeacher

    g, c = make_graph("random_dag", nodes=24, seed=2), load_cluster("p100x4")
    policy = DopplerPolicy(PolicyConfig(hidden=8, prices=True))
    teacher = LookaheadTeacher()
    assert features_module.prices_with(teacher) is teacher
    assert features_module.prices_with(LookaheadTeacher(cache_size=0)) is None
    assert features_module.prices_with(LookaheadTeacher("critical_path")) is None
    features_module._pricer.cache_clear()
    [rec] = play_episodes(
        policy,
        [PlacementEnv(g, c)],
        [0],
        rng=np.random.default_rng(0),
        teacher=teacher,
        teacher_prob=1.0,
        record_teacher=True,
    )
    assert features_module._pricer.cache_info().currsize == 0  # never built
    # one completion per legal device per PLC state (no memory pressure: all legal)
    assert teacher.calls == g.num_nodes * c.num_devices
    # the same features a fresh pricer computes, state by state
    fresh = LookaheadTeacher()
    s = PlacementState(g, c)
    scale = graph_inputs(policy, PlacementEnv(g, c).reset(seed=0)[0], g, c).price_scale
    for k in range(g.num_nodes):
        s.select(int(rec.sel_action[k]))
        np.testing.assert_array_equal(rec.plc_dev[k, :, -2:], price_features(s, scale, fresh))
        s.place(int(rec.plc_action[k]))
    with pytest.raises(ValueError, match=r"pricer: expected a lookahead over 'heft_rule'"):
        price_features(s, 1.0, LookaheadTeacher("critical_path"))


def test_search_counts_but_does_not_keep_unchecked_completions_under_memory_pressure():
    """Where some placement could exceed a device's memory, a pricer's completions (whose
    memory is not checked) count in the budget but are not candidates."""
    from placegym.agents.doppler.search import _Calls

    g, c = make_graph("random_dag", nodes=6, seed=0), load_cluster("p100x4")
    devs, ords = np.zeros((3, 6), np.int64), np.tile(g.topological_order, (3, 1))
    calls = _Calls(g, c, budget=10)
    calls.memory = True
    calls.record(devs, ords, np.array([3.0, 2.0, 1.0]))
    assert calls.curve == [np.inf] * 3 and calls.best is None and calls.left == 7
    calls.memory = False
    calls.record(devs, ords, np.array([3.0, 2.0, 1.0]))
    assert calls.curve[3:] == [3.0, 2.0, 1.0] and calls.best[1] == 1.0


def test_benchmarks_refuse_a_search_budget_below_the_greedy_pass_before_any_cell():
    from placegym.agents.doppler.search import PolicySearch
    from placegym.envs.suites import get_suite
    from placegym.train.harness.bench import BenchConfig, run_benchmark
    from placegym.train.harness.suite_bench import run_suite

    pol = DopplerPolicy(PolicyConfig(hidden=8, prices=True))
    placer = PolicySearch(pol, SearchConfig(budget=300), name="agent-search300")
    placed = []
    teacher = get_teacher("heft")

    def spy(graph, cluster, seed):  # runs first: a cell before the search's
        placed.append(graph.name)
        return teacher.place(graph, cluster)

    extra = {"spy": spy, placer.name: placer}
    cfg = BenchConfig(teachers=("critical_path",), workloads=("ffnn",), extra_placers=extra)
    # ffnn has 128 nodes: 128 * 4 = 512 priced completions on p100x4
    with pytest.raises(
        ValueError, match=r"'ffnn-3x2x4' \(128 nodes\) on 'p100x4' .* >= 513, got 300"
    ):
        run_benchmark(cfg, progress=False)
    with pytest.raises(ValueError, match=r"expected a budget >= \d+, got 300"):
        run_suite(get_suite("workloads-v0"), "test", ["critical_path"], extra_placers=extra)
    assert placed == []  # refused before any cell ran


def test_checkpoints_with_the_old_field_names_still_load():
    """Checkpoints saved before the rename store ``rollout`` / ``rollout_starts`` in their
    ``policy_config``: they load as ``prices`` / ``price_starts``, with their weights."""
    import dataclasses

    from placegym.train.checkpoint import policy_from_checkpoint

    torch.manual_seed(0)
    pol = DopplerPolicy(PolicyConfig(hidden=8, prices=True, price_starts=("nest", "metis")))
    old = dataclasses.asdict(pol.config)
    old["rollout"], old["rollout_starts"] = old.pop("prices"), list(old.pop("price_starts"))
    loaded = policy_from_checkpoint({"policy_config": old, "policy": pol.state_dict()})
    assert loaded.config == pol.config
    assert all(torch.equal(a, b) for a, b in zip(loaded.parameters(), pol.parameters()))
    with pytest.raises(ValueError, match="rollout: renamed prices, got both"):
        PolicyConfig.from_dict({"rollout": True, "prices": True})
