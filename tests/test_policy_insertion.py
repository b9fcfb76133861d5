"""PolicyConfig.insertion: PLC reads HEFT's insertion-based rule per device."""

import numpy as np
import pytest
import torch
from dagger import imitate
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.decoder import best_of_samples
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.features import insertion_features
from placegym.agents.doppler.inputs import graph_inputs, plc_devices
from placegym.envs import PlacementEnv, load_cluster
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher


def gap_state():
    """The graph of test_heft_inserts_into_idle_gaps with nodes 0, 1, 2 placed as HEFT
    places them and node 3 selected: device 1 is idle over [0, 3]."""
    g = graph([2, 3, 3, 1], [[0, 1], [0, 2]], out_bytes=[1, 0, 0, 0])
    s = PlacementState(g, unit_cluster(2))
    for v, d in [(0, 0), (1, 0), (2, 1)]:
        s.select(v)
        s.place(d)
    s.select(3)
    return s


def test_insertion_features_on_a_hand_solved_state():
    x = insertion_features(gap_state(), scale=2.0)
    assert x.dtype == np.float32 and x.shape == (2, 3)
    # starts 5 and 0, finishes 6 and 1: device 1 leads by 0 and is HEFT's choice
    assert x.tolist() == [[2.5, 2.5, 0.0], [0.0, 0.0, 1.0]]


def test_plc_devices_adds_the_columns_only_with_insertion():
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    env = PlacementEnv(g, c)
    obs, _ = env.reset(seed=0)
    plain = graph_inputs(DopplerPolicy(PolicyConfig(hidden=8)), obs, g, c)
    with_ins = graph_inputs(DopplerPolicy(PolicyConfig(hidden=8, insertion=True)), obs, g, c)
    assert plain.scale is None and with_ins.scale == pytest.approx(env.unwrapped.time_unit)
    state = env.unwrapped.state
    state.select(int(state.frontier()[0]))
    dev = np.zeros((4, 7), np.float32)
    assert plc_devices(plain, state, dev).shape == (4, 7)
    out = plc_devices(with_ins, state, dev)
    assert out.shape == (4, 10)
    np.testing.assert_array_equal(out[:, 7:], insertion_features(state, with_ins.scale))


def test_insertion_policy_plays_deterministic_episodes_and_search_decodes_them(one_torch_thread):
    torch.manual_seed(0)
    pol = DopplerPolicy(PolicyConfig(hidden=16, layers=2, insertion=True, rules=True)).eval()
    g, c = make_graph("llama_block"), load_cluster("v100x8")
    runs = [
        play_episodes(pol, [PlacementEnv(g, c)], [s], rng=np.random.default_rng(s), greedy=True)[0]
        for s in (0, 7)
    ]
    assert runs[0].plc_dev.shape[-1] == 10
    assert np.array_equal(runs[0].plc_action, runs[1].plc_action)
    envs = [PlacementEnv(g, c) for _ in range(4)]
    records = play_episodes(pol, envs, [3] * 4, rng=np.random.default_rng(3))
    _, makespan = best_of_samples(pol, g, c, 4, 3)  # the search's decoder, same episodes
    assert makespan == min(r.makespan for r in records)


def test_imitating_heft_rule_reaches_its_gap_filling_placement(one_torch_thread):
    """On the gap graph node 3 goes into device 1's idle gap under HEFT's rule, where the
    list-schedule estimate of the observation puts it on device 0 (start 5 vs 6): with the
    insertion features, imitation makes the greedy policy place as heft_rule does."""
    torch.manual_seed(0)
    s = gap_state()
    g, c = s.graph, s.cluster
    teacher = get_teacher("heft_rule")
    assert get_teacher("critical_path").place_actions(s).tolist() == [0]
    assert teacher.place_actions(s).tolist() == [1]
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2, insertion=True))
    imitate(policy, g, c, teacher)
    rng = np.random.default_rng(0)
    [greedy] = play_episodes(policy, [PlacementEnv(g, c)], [0], rng=rng, greedy=True)
    assert greedy.info["placement"].tolist() == teacher.place(g, c).device.tolist()
