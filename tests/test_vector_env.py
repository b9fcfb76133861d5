"""The native vector environment: same trajectories as single environments with
same-step autoreset, registration through ``gym.make_vec``, bad input."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import InvalidAction
from gymnasium.wrappers import TimeLimit

import placegym.envs  # noqa: F401
from placegym.envs import ENV_IDS, Cluster, Device, Level, PlacementEnv
from placegym.envs.mdp.vector import PlacementVectorEnv
from placegym.envs.workloads import make_graph


def singles_like(b: int, seed: int, max_episode_steps: int | None, **kw):
    envs = [PlacementEnv(**kw) for _ in range(b)]
    if max_episode_steps is not None:
        envs = [TimeLimit(e, max_episode_steps) for e in envs]
    first = [e.reset(seed=seed + i) for i, e in enumerate(envs)]
    return envs, first


def assert_obs_equal(batch: dict, i: int, single: dict) -> None:
    assert batch.keys() == single.keys()
    for key, value in single.items():
        np.testing.assert_array_equal(batch[key][i], value, err_msg=key)
        assert batch[key][i].dtype == value.dtype, key


def compare(steps: int, b: int = 3, seed: int = 7, illegal: float = 0.1, max_steps=None, **kw):
    """Step the vector env and ``b`` single envs with the same random actions (mostly
    legal); every output must be equal. Returns the number of finished episodes."""
    venv = PlacementVectorEnv(b, max_episode_steps=max_steps, **kw)
    envs, first = singles_like(b, seed, max_steps, **kw)
    obs, info = venv.reset(seed=seed)
    for i, (o, inf) in enumerate(first):
        assert_obs_equal(obs, i, o)
        np.testing.assert_array_equal(info["action_mask"][i], inf["action_mask"])
    rng = np.random.default_rng(seed)
    finished = 0
    for _ in range(steps):
        mask = venv.action_masks()
        acts = np.array(
            [
                rng.integers(venv.single_action_space.n)
                if rng.random() < illegal
                else rng.choice(np.flatnonzero(m))
                for m in mask
            ]
        )
        obs, rew, term, trunc, info = venv.step(acts)
        for i, env in enumerate(envs):
            o, r, te, tr, inf = env.step(int(acts[i]))
            assert rew[i] == r and term[i] == te and trunc[i] == tr
            assert info["illegal_action"][i] == inf["illegal_action"]
            if te or tr:
                finished += 1
                assert info["_final_obs"][i] and info["_final_info"][i]
                assert_obs_equal({k: v[None] for k, v in info["final_obs"][i].items()}, 0, o)
                final = info["final_info"]
                for key in ("makespan", "reference_makespan", "oom") if te else ():
                    assert final[key][i] == inf[key], key
                if te:
                    np.testing.assert_array_equal(final["placement"][i], inf["placement"])
                    np.testing.assert_array_equal(final["order"][i], inf["order"])
                    np.testing.assert_array_equal(final["peak_memory"][i], inf["peak_memory"])
                o, inf = env.reset()
            assert_obs_equal(obs, i, o)
            np.testing.assert_array_equal(info["action_mask"][i], inf["action_mask"])
            np.testing.assert_array_equal(obs["action_mask"][i], inf["action_mask"])
            assert info["phase"][i] == inf["phase"]
        assert venv.observation_space.contains(obs)
    return finished


def test_same_trajectories_as_single_envs_fixed_graph():
    assert compare(700, graph="chainmm", cluster="p100x4") >= 3


def test_same_trajectories_with_a_sampler_nest_reward_and_noise():
    kw = ENV_IDS["placegym/RandomDAG-v0"]
    assert compare(500, **kw, reward="nest", shaping_gamma=0.97, noise=0.2) >= 3


def test_same_trajectories_with_graph_lists_memory_limits_and_time_limit():
    small = Cluster(
        devices=tuple(Device(f"d{i}", 1e12, 4e7, 1e11, 1e-6, (i // 2,)) for i in range(4)),
        levels=(Level("l0", 1e10, 1e-6), Level("l1", 1e9, 1e-5)),
        name="tight",
    )
    graphs = [make_graph("ffnn"), make_graph("random_dag", nodes=40, seed=3)]
    assert compare(600, graph=graphs, cluster=small, reward="makespan", max_steps=60) >= 5
    assert compare(300, graph=graphs, cluster=small, dispatch="fifo", memory_mask=False) >= 1


def test_same_trajectories_at_the_environments_own_step_limit():
    graphs = [make_graph("ffnn"), make_graph("random_dag", nodes=40, seed=3)]
    assert compare(600, graph=graphs, illegal=0.6, step_limit_factor=1) >= 5


def test_final_infos_of_graphs_of_different_sizes_in_one_step():
    venv = PlacementVectorEnv(3, **ENV_IDS["placegym/RandomDAG-v0"])
    infos = venv._add_info({}, {"final_info": {"placement": np.zeros(4, int), "oom": False}}, 0)
    infos = venv._add_info(infos, {"final_info": {"placement": np.ones(6, int), "oom": True}}, 2)
    final = infos["final_info"]
    assert final["placement"].dtype == object and final["placement"][1] is None
    assert final["placement"][0].tolist() == [0] * 4 and final["placement"][2].tolist() == [1] * 6
    assert final["oom"].tolist() == [False, False, True] and final["_oom"].tolist() == [1, 0, 1]


def test_make_vec_returns_the_native_env_for_every_simulated_id():
    for env_id in ENV_IDS:
        venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point")
        assert isinstance(venv.unwrapped, PlacementVectorEnv)
        obs, info = venv.reset(seed=0)
        assert obs["action_mask"].shape == (2, venv.single_action_space.n)
        assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
        venv.close()


def test_illegal_action_raise_and_bad_input():
    venv = PlacementVectorEnv(2, graph="chainmm", illegal_action="raise")
    venv.reset(seed=0)
    with pytest.raises(InvalidAction, match=r"environment 0, phase 'select': action 83"):
        venv.step(np.array([83, int(np.flatnonzero(venv.action_masks()[1])[0])]))
    with pytest.raises(ValueError, match=r"actions: expected 2 integers \(shape \(2,\)\)"):
        venv.step(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"num_envs: must be an integer >= 1, got 0"):
        PlacementVectorEnv(0)
    with pytest.raises(ValueError, match=r"backend: the vector environment supports only"):
        PlacementVectorEnv(2, backend="torch")
    with pytest.raises(ValueError, match=r"seed: expected 2 seeds"):
        venv.reset(seed=[1, 2, 3])
