"""The PettingZoo AEC view: PettingZoo's own API and seed tests, turns, the shared
reward against the single-agent environment, illegal actions and the step limit."""

import numpy as np
import pytest

pettingzoo_test = pytest.importorskip("pettingzoo.test")

from placegym.envs import PlacementEnv  # noqa: E402
from placegym.envs.mdp.pettingzoo import env  # noqa: E402
from placegym.envs.workloads import make_graph  # noqa: E402


# api_test's advice (numpy observations, agent names like "player_0") does not fit two
# roles with Dict observations of different sizes; its assertions are what counts
@pytest.mark.filterwarnings("ignore::UserWarning:pettingzoo.test.api_test")
def test_passes_pettingzoo_api_and_seed_tests():
    pettingzoo_test.api_test(env(graph="chainmm", cluster="p100x4"), num_cycles=300)
    graphs = [make_graph("ffnn"), make_graph("random_dag", nodes=40, seed=3)]
    pettingzoo_test.api_test(env(graph=graphs, reward="nest"), num_cycles=300)
    pettingzoo_test.seed_test(lambda: env(graph="ffnn", noise=0.2), num_cycles=300)


def test_turns_and_shared_reward_match_the_single_agent_episode():
    aec = env(graph="ffnn", cluster="p100x4", reward="nest")
    single = PlacementEnv(graph="ffnn", cluster="p100x4", reward="nest")
    aec.reset(seed=3)
    single.reset(seed=3)
    rng = np.random.default_rng(0)
    returns = {"selector": 0.0, "placer": 0.0}
    single_return, turns = 0.0, []
    for agent in aec.agent_iter():
        obs, reward, terminated, truncated, info = aec.last()
        returns[agent] += reward
        if terminated or truncated:
            aec.step(None)
            continue
        assert obs["phase"][0] == (agent == "placer")
        mask = obs["action_mask"]
        assert len(mask) == aec.action_space(agent).n and mask.any()
        other = "placer" if agent == "selector" else "selector"
        assert not aec.observe(other)["action_mask"].any()
        action = int(rng.choice(np.flatnonzero(mask)))
        turns.append(agent)
        aec.step(action)
        single_return += single.step(action)[1]
    n = single.graph.num_nodes
    assert turns == ["selector", "placer"] * n
    assert returns["selector"] == pytest.approx(single_return)
    assert returns["placer"] == pytest.approx(single_return)
    assert aec.agents == []


def test_final_info_is_the_environments():
    aec = env(graph="chainmm")
    single = PlacementEnv(graph="chainmm")
    aec.reset(seed=1)
    single.reset(seed=1)
    while not aec.terminations["selector"]:
        action = int(np.flatnonzero(aec.observe(aec.agent_selection)["action_mask"])[0])
        aec.step(action)
        *_, info = single.step(action)
    for agent in ("selector", "placer"):
        assert aec.infos[agent]["makespan"] == info["makespan"]
        np.testing.assert_array_equal(aec.infos[agent]["placement"], info["placement"])
    start = info["action_mask"][: aec.env.max_nodes]  # the start state's, as PlacementEnv
    assert aec.infos["selector"]["action_mask"].tolist() == start.tolist()
    with pytest.raises(ValueError, match="only valid action is None"):
        aec.step(0)


def test_illegal_action_repeats_the_turn_with_a_shared_penalty():
    aec = env(graph="chainmm")
    aec.reset(seed=0)
    mask = aec.observe("selector")["action_mask"]
    aec.step(int(np.flatnonzero(mask == 0)[0]))
    assert aec.agent_selection == "selector"
    assert aec.rewards == {"selector": -1.0, "placer": -1.0}
    assert aec.infos["placer"]["illegal_action"]


def test_step_limit_truncates_both_agents():
    aec = env(graph="ffnn", step_limit_factor=1)
    aec.reset(seed=0)
    n = aec.env.graph.num_nodes
    for _ in range(2 * n):  # illegal every time: the limit is 2n steps
        aec.step(n)
    assert aec.truncations == {"selector": True, "placer": True}
    assert not any(aec.terminations.values())
    aec.step(None)
    aec.step(None)
    assert aec.agents == []
