"""Episode boundaries of PlacementEnv: the step limit, what counts as an action, the mask
at an episode's end (vector autoreset), frame sizes, the text render, default keywords."""

import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import InvalidAction, ResetNeeded
from gymnasium.vector import AutoresetMode
from simcases import unit_cluster

import placegym.envs  # noqa: F401  (registers the ids)
from placegym.envs import ENV_IDS, REAL_ENV_IDS, PlacementEnv
from placegym.envs.mdp.env import STEP_LIMIT_FACTOR, step_limit
from placegym.envs.workloads import make_graph

#: A 6-node fork-join as a graph document (what gym.make(..., graph=dict) receives).
FORK = {
    "format": "placegym.graph/v1",
    "name": "fork",
    "nodes": [{"flops": 1e9, "out_bytes": 1e6}] * 6,
    "edges": [[0, 1], [0, 2], [0, 3], [0, 4], [1, 5], [2, 5], [3, 5], [4, 5]],
}
SOURCES = np.array([1, 0, 0, 0, 0, 0], dtype=bool)  # FORK's start-state mask


def illegal_until_the_end(env, action):
    """Step ``action`` (illegal in every state) until the episode ends; returns the count
    of steps and the last step's (terminated, truncated)."""
    env.reset(seed=0)
    for steps in range(1, 100_000):
        _, reward, terminated, truncated, info = env.step(action)
        assert reward == -1.0 and info["illegal_action"]
        if terminated or truncated:
            return steps, terminated, truncated
    raise AssertionError("the episode never ended")


# ------------------------------------------------------------------ step limit
def test_every_id_registers_its_step_limit():
    assert STEP_LIMIT_FACTOR == 4
    for env_id, kwargs in {**ENV_IDS, **REAL_ENV_IDS}.items():
        spec = gym.spec(env_id)
        if isinstance(kwargs.get("graph"), str):
            n = make_graph(kwargs["graph"]).num_nodes
            assert spec.max_episode_steps == 8 * n == step_limit(n), env_id
        elif "graph" in kwargs:  # a sampler: the limit of its largest graph
            assert spec.max_episode_steps == 8 * kwargs["max_nodes"], env_id
        else:  # the graph comes by keyword: the environment's own limit
            assert spec.max_episode_steps is None, env_id


def test_illegal_actions_end_in_truncation_at_the_limit():
    env = gym.make("placegym/ChainMM-v0")  # 84 nodes: 672 steps
    assert illegal_until_the_end(env, 83) == (672, False, True)
    with pytest.raises(ResetNeeded, match=r"truncated at its step limit \(672 steps\)"):
        env.step(0)
    # an id without a registered limit: the environment truncates by its graph's size
    env = gym.make("placegym/Placement-v0", graph=FORK, cluster=unit_cluster(2))
    assert env.spec.max_episode_steps is None
    assert illegal_until_the_end(env, 5) == (48, False, True)
    # the limit is per graph for samplers: RandomDAG's graphs have 64-160 nodes
    env = gym.make("placegym/RandomDAG-v0")
    steps, _, truncated = illegal_until_the_end(env, 159)
    assert truncated and steps == 8 * env.unwrapped.graph.num_nodes < 8 * 160


def test_step_limit_factor_and_legal_episodes():
    env = PlacementEnv(FORK, unit_cluster(2), step_limit_factor=1)  # exactly 2n steps
    obs, info = env.reset(seed=0)
    for _ in range(2 * 6):
        obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert terminated and not truncated  # a full legal episode is never truncated
    never = PlacementEnv(FORK, unit_cluster(2), step_limit_factor=None)
    never.reset(seed=0)
    assert all(not never.step(5)[3] for _ in range(1000))
    with pytest.raises(ValueError, match=r"step_limit_factor: expected an integer >= 1 or None"):
        PlacementEnv(FORK, unit_cluster(2), step_limit_factor=0)


def test_truncation_reaches_sb3_and_gymnasium_checks_pass():
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = gym.make("placegym/ChainMM-v0")
    assert isinstance(env, gym.wrappers.TimeLimit) and env.spec.max_episode_steps == 672
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)  # through TimeLimit and the other wrappers
    assert all("different from the unwrapped version" in str(w.message) for w in caught)
    venv = DummyVecEnv([lambda: PlacementEnv(FORK, unit_cluster(2), step_limit_factor=1)])
    venv.reset()
    steps = [venv.step(np.array([5])) for _ in range(12)]  # always illegal
    assert [bool(done[0]) for _, _, done, _ in steps] == [False] * 11 + [True]
    assert steps[-1][3][0]["TimeLimit.truncated"]


# ------------------------------------------------------------------ actions
@pytest.mark.parametrize("action", [0.0, 2.7, np.float32(0.0), "0", None, np.array([0])])
def test_non_integer_actions_are_illegal(action):
    env = PlacementEnv(FORK, unit_cluster(2))
    env.reset(seed=0)
    obs, reward, *_, info = env.step(action)
    assert reward == -1.0 and info["illegal_action"] and obs["phase"][0] == 0
    strict = PlacementEnv(FORK, unit_cluster(2), illegal_action="raise")
    strict.reset(seed=0)
    with pytest.raises(
        InvalidAction,
        match=rf"^phase 'select': action {re.escape(repr(action))} is illegal "
        r"\(not an integer\)$",
    ):
        strict.step(action)


@pytest.mark.parametrize("action", [0, np.int64(0), np.uint8(0), np.array(0)])
def test_integer_actions_of_any_kind_are_legal(action):
    env = PlacementEnv(FORK, unit_cluster(2))
    env.reset(seed=0)
    obs, reward, *_, info = env.step(action)
    assert reward == 0.0 and not info["illegal_action"] and obs["phase"][0] == 1


# ------------------------------------------------------------------ the mask at the end
def test_the_mask_at_the_end_is_the_start_states():
    env = gym.make("placegym/Placement-v0", graph=FORK, cluster=unit_cluster(2))
    obs, info = env.reset(seed=0)
    np.testing.assert_array_equal(info["action_mask"], SOURCES)
    terminated = False
    while not terminated:
        legal = np.flatnonzero(info["action_mask"])
        obs, _, terminated, _, info = env.step(int(legal[-1]))
    for mask in (info["action_mask"], obs["action_mask"], env.unwrapped.action_masks()):
        np.testing.assert_array_equal(mask.astype(bool), SOURCES)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_envs_run_the_readme_masked_loop_across_episodes(mode, autoreset):
    """The README's random masked loop on gym.make_vec: the mask returned with every
    observation, episode ends included, is that of the state the next action acts in."""
    envs = gym.make_vec(
        "placegym/Placement-v0",
        num_envs=2,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": autoreset},
        graph=FORK,
        cluster=unit_cluster(2),
    )
    obs, info = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(3 * 13):  # three episodes of 12 steps, plus next-step resets
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        obs, _, terminated, truncated, info = envs.step(actions)
        assert not truncated.any()
        np.testing.assert_array_equal(obs["action_mask"].astype(bool), info["action_mask"])
        for i in np.flatnonzero(terminated):
            ends += 1
            # next: a reset (next-step mode) or the new episode's start (same-step mode)
            np.testing.assert_array_equal(info["action_mask"][i], SOURCES)
            placed = obs["node_dynamic"][i][:, 0].sum()
            assert placed == (6 if autoreset == AutoresetMode.NEXT_STEP else 0)
    envs.close()
    assert ends >= 4


# ------------------------------------------------------------------ rendering
def test_rgb_frames_keep_one_size_across_episodes():
    env = gym.make("placegym/Placement-v0", graph=FORK, render_mode="rgb_array")
    obs, info = env.reset(seed=0)
    shapes = {env.render().shape}  # nothing placed
    terminated, step = False, 0
    while not terminated:
        legal = np.flatnonzero(info["action_mask"])
        step += 1
        obs, _, terminated, _, info = env.step(int(legal[step % len(legal)]))
        if step == 4:
            shapes.add(env.render().shape)  # a partial schedule, no transfer lanes
    shapes.add(env.render().shape)  # the final schedule
    assert env.unwrapped.schedule.transfers.src.size > 0  # ... with transfer lanes
    env.reset(seed=1)
    shapes.add(env.render().shape)
    assert shapes == {(505, 960, 3)}  # p100x4: 4 device lanes + room for 12 channels


def test_ansi_render_says_done_and_truncated():
    env = PlacementEnv(FORK, unit_cluster(2), render_mode="ansi", step_limit_factor=1)
    obs, info = env.reset(seed=0)
    assert env.render().splitlines()[0] == "fork on unit: 0/6 placed, phase SELECT"
    terminated = False
    while not terminated:
        obs, _, terminated, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert env.render().splitlines()[0] == "fork on unit: 6/6 placed, done"
    env.reset(seed=0)
    for _ in range(12):
        env.step(5)
    assert env.render().splitlines()[0] == (
        "fork on unit: 0/6 placed, truncated at the step limit (12 steps)"
    )


def test_the_first_frame_is_an_empty_chart_on_the_episodes_time_scale():
    from placegym.envs.mdp.render import frame_figure
    from placegym.envs.sim.gantt import format_time

    env = PlacementEnv(FORK, "p100x4", render_mode="rgb_array")
    env.reset(seed=0)
    ref = env.reference_makespan
    assert 1e-4 < ref < 1e-3  # drawn in µs
    ax = frame_figure(env).axes[0]
    assert ax.get_title() == "fork on p100x4: nothing placed yet"
    assert ax.get_xlabel() == "time (µs)"
    assert ax.get_xlim()[1] == pytest.approx(ref * 1e6 * 1.01)
    env.step(0)
    env.step(1)  # node 0 on gpu1
    ax = frame_figure(env).axes[0]
    placed = env.state.est_finish[0]
    assert ax.get_title() == (
        f"fork on p100x4: 1/6 placed, estimated makespan {format_time(placed)}"
    )
    assert env.render().std() > 0


def test_ansi_render_in_plc_shows_the_selected_node_and_its_legal_devices():
    env = PlacementEnv(FORK, unit_cluster(2), render_mode="ansi")
    env.reset(seed=0)
    assert env.render().splitlines()[-1] == "  frontier: [0]"
    env.step(0)  # SEL node 0: the frontier is empty until it is placed
    lines = env.render().splitlines()
    assert lines[0] == "fork on unit: 0/6 placed, phase PLACE (node 0 selected)"
    assert lines[-2:] == ["  node 0: legal devices d0 d1", "  frontier: []"]
    env.step(1)
    assert env.render().splitlines()[-1] == "  frontier: [1, 2, 3, 4]"


# ------------------------------------------------------------------ defaults
def test_real_env_defaults_agree(monkeypatch):
    """placegym/Real-v0 without keywords: its cluster is calibrated on its devices."""
    from placegym.envs.real import calibrate as calibration

    calls = []

    def fake_calibrate(devices, **kw):
        calls.append(devices)
        return unit_cluster(2)

    monkeypatch.setattr(calibration, "calibrate", fake_calibrate)
    env = gym.make("placegym/Real-v0")
    assert calls == ["cpu#2"] and env.unwrapped.cluster.num_devices == 2
    assert PlacementEnv().cluster.name == "p100x4"  # the simulator's default stays


def test_graph_documents_are_accepted_like_load_graph_does(tmp_path):
    from pathlib import Path

    from placegym.envs import load_graph

    env = gym.make("placegym/Placement-v0", graph=FORK)
    assert env.unwrapped.source.graphs[0].num_edges == 8
    path = tmp_path / "fork.json"
    load_graph(FORK).save(path)
    both = PlacementEnv([FORK, Path(path), load_graph(FORK)], "p100x4")
    assert [g.num_nodes for g in both.source.graphs] == [6, 6, 6]
    with pytest.raises(ValueError, match=r"^graph: format: missing field \(expected "):
        gym.make("placegym/Placement-v0", graph={"nodes": []})
    with pytest.raises(ValueError, match=r"^graph: nodes\[0\]\.flops: must be >= 0, got -1$"):
        PlacementEnv({**FORK, "nodes": [{"flops": -1, "out_bytes": 0}], "edges": []})
    with pytest.raises(ValueError, match=r"^graph: expected a Graph, a graph document"):
        PlacementEnv(3)
