"""Compact observations: the per-graph keys once per episode, the same dynamic keys as full
observations step for step, in single and vector environments."""

import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env
from test_vector_env import compare

from placegym.envs import PlacementEnv
from placegym.envs.mdp.observation import GRAPH_KEYS
from placegym.envs.workloads import make_graph


def test_compact_steps_match_full_ones_and_the_graph_part_is_unpadded():
    graphs = [make_graph("ffnn"), make_graph("random_dag", nodes=40, seed=3)]
    full, compact = PlacementEnv(graph=graphs), PlacementEnv(graph=graphs, observation="compact")
    assert set(compact.observation_space.spaces) == set(full.observation_space.spaces) - set(
        GRAPH_KEYS
    )
    with pytest.raises(ResetNeeded, match="graph_observation: call reset"):
        compact.graph_observation()
    rng = np.random.default_rng(0)
    for seed in range(3):
        fo, fi = full.reset(seed=seed)
        co, _ = compact.reset(seed=seed)
        g = compact.unwrapped.graph
        part = compact.graph_observation()
        assert part["node_static"].shape == (g.num_nodes, 7)
        assert part["edge_index"].shape == (2, g.num_edges)
        for key, value in part.items():
            pad = fo[key][:, : g.num_edges] if key == "edge_index" else fo[key][: len(value)]
            np.testing.assert_array_equal(value, pad, err_msg=key)
        done = False
        while not done:
            assert co.keys() == set(fo) - set(GRAPH_KEYS)
            for key, value in co.items():
                np.testing.assert_array_equal(value, fo[key], err_msg=key)
            assert compact.observation_space.contains(co)
            a = int(rng.choice(np.flatnonzero(fi["action_mask"])))
            fo, fr, done, _, fi = full.step(a)
            co, cr, cdone, _, _ = compact.step(a)
            assert (cr, cdone) == (fr, done)


def test_compact_passes_the_env_checker_and_the_vector_env_matches():
    check_env(PlacementEnv(graph="ffnn", observation="compact"), skip_render_check=True)
    assert compare(300, graph="chainmm", observation="compact") >= 1


def test_bad_observation_mode():
    with pytest.raises(ValueError, match="observation: expected 'full' or 'compact', got 'x'"):
        PlacementEnv(graph="ffnn", observation="x")
