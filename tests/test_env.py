"""PlacementEnv: the MDP of DESIGN §4, checked on every registered id."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import InvalidAction
from simcases import graph, unit_cluster

import placegym.envs  # noqa: F401  (registers the ids)
from placegym.envs import ENV_IDS, Graph, PlacementEnv, simulate
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.observation import batch_to_pyg, obs_to_pyg

IDS = list(ENV_IDS)


def masked_rollout(env, seed, *, rng_seed=0, max_steps=100_000):
    """Play a masked random policy; returns the trajectory (obs, reward, info per step)."""
    rng = np.random.default_rng(rng_seed)
    obs, info = env.reset(seed=seed)
    traj = [(obs, 0.0, info)]
    for _ in range(max_steps):
        legal = np.flatnonzero(info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(legal)))
        traj.append((obs, reward, info))
        if terminated or truncated:
            break
    return traj


def assert_same_obs(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def assert_same_info(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_check_env(env_id):
    import warnings

    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped, skip_render_check=True)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_check_env(env_id):
    import warnings

    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped, warn=True)
    # Graph observations are 2-D by nature (nodes x features); SB3 flattens them in its
    # MultiInputPolicy and placegym's GNN extractor reads them as a graph. That shape
    # notice is the only warning allowed.
    unexpected = [str(w.message) for w in caught if "unconventional shape" not in str(w.message)]
    assert unexpected == []


@pytest.mark.parametrize("env_id", IDS)
def test_masked_episode_invariants(env_id):
    env = gym.make(env_id)
    traj = masked_rollout(env, seed=3)
    base = env.unwrapped
    n = base.graph.num_nodes
    assert len(traj) == 2 * n + 1
    for i, (obs, _, info) in enumerate(traj):
        assert env.observation_space.contains(obs), f"step {i}: observation out of space"
        np.testing.assert_array_equal(obs["action_mask"].astype(bool), info["action_mask"])
        if i < len(traj) - 1:
            assert info["action_mask"].any(), f"step {i}: empty mask before the end"
            assert obs["phase"][0] == i % 2
    final = traj[-1][2]
    placement = Placement(device=final["placement"], order=final["order"])
    s = simulate(base.graph, base.cluster, placement)
    assert final["makespan"] == s.makespan
    np.testing.assert_array_equal(final["peak_memory"], s.peak_memory)
    assert final["reference_makespan"] > 0
    ret = sum(r for _, r, _ in traj)
    assert ret == pytest.approx(
        (final["reference_makespan"] - s.makespan) / final["reference_makespan"]
    )


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_episode(env_id):
    a = masked_rollout(gym.make(env_id), seed=11, rng_seed=5)
    b = masked_rollout(gym.make(env_id), seed=11, rng_seed=5)
    assert len(a) == len(b)
    for (oa, ra, ia), (ob, rb, ib) in zip(a, b):
        assert_same_obs(oa, ob)
        assert ra == rb
        assert_same_info(ia, ib)


def test_random_dag_draws_a_new_graph_per_reset_reproducibly():
    env = gym.make("placegym/RandomDAG-v0")
    sizes = []
    for seed in (0, 1, 2, 3):
        env.reset(seed=seed)
        sizes.append(env.unwrapped.graph.num_nodes)
    assert len(set(sizes)) > 1
    env.reset(seed=2)
    assert env.unwrapped.graph.num_nodes == sizes[2]


@pytest.mark.parametrize("env_id", ["placegym/FFNN-v0", "placegym/RandomDAG-v0"])
def test_pickle_midway_continues_identically(env_id):
    env = gym.make(env_id)
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(7):
        env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(9):
        a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
        o1, r1, t1, _, i1 = env.step(a)
        o2, r2, t2, _, i2 = clone.step(a)
        assert_same_obs(o1, o2)
        assert (r1, t1) == (r2, t2)


def test_illegal_action_penalize_and_raise():
    env = PlacementEnv("ffnn", "p100x4")
    obs, info = env.reset(seed=0)
    illegal = int(np.flatnonzero(~info["action_mask"])[0])
    obs2, reward, term, trunc, info2 = env.step(illegal)
    assert (reward, term, trunc, info2["illegal_action"]) == (-1.0, False, False, True)
    assert_same_obs(obs, obs2)
    assert env.state.num_placed == 0 and env.state.phase == "select"
    strict = PlacementEnv("ffnn", "p100x4", illegal_action="raise")
    strict.reset(seed=0)
    with pytest.raises(InvalidAction, match=r"phase 'select': action 8 is illegal \(8 legal"):
        strict.step(8)
    strict.step(0)
    with pytest.raises(InvalidAction, match=r"phase 'place': action 4 is illegal \(4 legal"):
        strict.step(4)


def test_memory_mask_in_place_phase():
    g = graph([1, 1, 1], [], param_bytes=[6, 6, 20])
    env = PlacementEnv(g, unit_cluster(2, memory=10))
    env.reset(seed=0)
    for a in (0, 0, 1):
        env.step(a)
    assert env.action_masks()[:2].tolist() == [False, True]
    env.step(1)
    env.step(2)
    assert env.action_masks()[:2].tolist() == [True, True]  # fits nowhere: nothing masked
    *_, info = env.step(0)
    assert info["oom"]
    free = PlacementEnv(g, unit_cluster(2, memory=10), memory_mask=False)
    free.reset(seed=0)
    free.step(0)
    free.step(0)
    free.step(1)
    assert free.action_masks()[:2].tolist() == [True, True]


def test_rewards_relative_and_makespan_by_hand():
    # two independent nodes of 1 s: critical_path splits them (T_ref = 1); both on one
    # device take 2 s.
    g = graph([1, 1], [])
    for kind, expected in (("relative", -1.0), ("makespan", -2.0)):
        env = PlacementEnv(g, unit_cluster(2), reward=kind)
        env.reset(seed=0)
        rewards = [env.step(a)[1] for a in (0, 0, 1, 0)]
        assert rewards[:3] == [0.0, 0.0, 0.0]
        assert rewards[3] == expected


def test_sizes_and_sources():
    g1 = graph([1, 1, 1], [[0, 1]])
    g2 = graph([1, 1], [])
    env = PlacementEnv([g1, g2], unit_cluster(2))
    assert (env.max_nodes, env.max_edges, env.action_space.n) == (3, 1, 3)
    seen = {env.reset(seed=s)[0]["node_mask"].sum() for s in range(10)}
    assert seen == {2, 3}
    with pytest.raises(
        ValueError,
        match=r"graph 'graph' has 3 nodes and 1 edges, more than "
        r"max_nodes=2 / max_edges=4",
    ):
        PlacementEnv(g1, unit_cluster(2), max_nodes=2, max_edges=4).reset(seed=0)
    with pytest.raises(
        ValueError,
        match=r"max_nodes, max_edges: required when graph is a "
        r"sampler",
    ):
        PlacementEnv(lambda rng: g1, unit_cluster(2))
    with pytest.raises(ValueError, match=r"reward: expected one of relative, makespan, nest"):
        PlacementEnv(g1, unit_cluster(2), reward="speed")
    assert PlacementEnv("ffnn", "p100x4", graph_params={"batch_blocks": 1}).max_nodes == 64


def test_render_modes():
    env = PlacementEnv("ffnn", "p100x4", render_mode="ansi")
    env.reset(seed=0)
    env.step(0)
    text = env.render()
    assert "0/128 placed, phase PLACE (node 0 selected)" in text
    img_env = PlacementEnv("ffnn", "p100x4", render_mode="rgb_array")
    traj_env = img_env
    traj_env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(10):
        traj_env.step(int(rng.choice(np.flatnonzero(traj_env.action_masks()))))
    partial = traj_env.render()
    assert partial.ndim == 3 and partial.shape[2] == 3 and partial.dtype == np.uint8
    masked_rollout(traj_env, seed=0)
    final = traj_env.render()
    assert final.shape[2] == 3 and final.std() > 0


def test_obs_to_pyg_and_batch():
    import torch

    env = PlacementEnv(
        [graph([1, 1, 1], [[0, 1], [1, 2]]), graph([1, 2], [[0, 1]])], unit_cluster(2)
    )
    obs_a, _ = env.reset(seed=0)
    obs_b, _ = env.reset(seed=1)
    while obs_b["node_mask"].sum() == obs_a["node_mask"].sum():
        obs_b, _ = env.reset()
    data = obs_to_pyg(obs_a)
    na = int(obs_a["node_mask"].sum())
    assert data.num_nodes == na and data.edge_index.dtype == torch.long
    assert data.x.shape == (na, 13)
    # as SB3 passes it: float tensors with a batch dim
    as_sb3 = {k: torch.as_tensor(v, dtype=torch.float32)[None] for k, v in obs_a.items()}
    assert torch.equal(obs_to_pyg(as_sb3).edge_index, data.edge_index)
    batch = batch_to_pyg({k: np.stack([obs_a[k], obs_b[k]]) for k in obs_a})
    nb = int(obs_b["node_mask"].sum())
    assert batch.num_graphs == 2 and batch.num_nodes == na + nb
    assert batch.batch.tolist() == [0] * na + [1] * nb
    assert batch.ptr.tolist() == [0, na, na + nb]
    eb = obs_to_pyg(obs_b).edge_index
    assert torch.equal(batch.edge_index, torch.cat([data.edge_index, eb + na], dim=1))


def test_vector_envs_sync_and_async_same_step_autoreset():
    from gymnasium.vector import AutoresetMode

    for mode in ("sync", "async"):
        envs = gym.make_vec(
            "placegym/FFNN-v0",
            num_envs=2,
            vectorization_mode=mode,
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )
        obs, info = envs.reset(seed=0)
        rng = np.random.default_rng(0)
        finished = 0
        for _ in range(2 * 128 + 3):
            masks = info["action_mask"]
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
            obs, reward, term, trunc, info = envs.step(actions)
            finished += int(term.sum())
            # same-step autoreset: the returned observation already starts a new episode
            for i in np.flatnonzero(term):
                assert obs["node_dynamic"][i][:, 0].sum() == 0
                assert "final_info" in info
        envs.close()
        assert finished == 2


def test_sb3_subproc_vec_env():
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    # forkserver workers start fresh: the "module:id" form imports placegym.envs there
    venv = make_vec_env(
        "placegym.envs:placegym/FFNN-v0", n_envs=2, vec_env_cls=SubprocVecEnv, seed=0
    )
    obs = venv.reset()
    assert obs["node_static"].shape == (2, 128, 7)
    masks = np.stack(venv.env_method("action_masks"))
    actions = np.array([np.flatnonzero(m)[0] for m in masks])
    obs, rewards, dones, infos = venv.step(actions)
    assert obs["phase"].tolist() == [[1], [1]]
    venv.close()


def test_empty_graph_is_rejected_clearly():
    with pytest.raises(ValueError, match=r"max_nodes: must be >= 1, got 0"):
        PlacementEnv(Graph(flops=[], out_bytes=[], edges=[]), unit_cluster(1))


@pytest.mark.parametrize(
    "env_id",
    ["placegym/FFNN-v0", "placegym/MoE-v0", "placegym/LlamaLayer-2x8-v0", "placegym/RandomDAG-v0"],
)
def test_nest_shaping_telescopes_to_the_relative_return(env_id):
    from placegym.teachers.nest import nest_cost

    rel = masked_rollout(gym.make(env_id), seed=5, rng_seed=9)
    env = gym.make(env_id, reward="nest")
    rng = np.random.default_rng(9)
    obs, info = env.reset(seed=5)
    base = env.unwrapped
    rewards = []
    while True:
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, term, _, info = env.step(a)
        rewards.append(r)
        if term:
            break
        expected = nest_cost(base.graph, base.cluster, base.state.device)
        assert base.potential.cost() == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert len(rewards) == len(rel) - 1
    assert sum(rewards) == pytest.approx(sum(r for _, r, _ in rel), abs=1e-9)
    assert rewards[-1] != rel[-1][1]  # the last step also removes Φ(s_{T-1})
    assert sum(1 for r in rewards[1:-1:2] if r != 0) >= len(rewards) // 4  # dense credit
    assert all(r == 0 for r in rewards[:-1:2])  # SEL steps leave the assignment unchanged


def test_nest_shaping_with_discount():
    g = graph([1, 1], [[0, 1]], out_bytes=[2, 0])
    env = PlacementEnv(g, unit_cluster(2), reward="nest", shaping_gamma=0.5)
    env.reset(seed=0)
    t_ref = env.reference_makespan
    r = [env.step(a)[1] for a in (0, 0, 1, 1)]
    phi1 = -1.0 / t_ref  # node 0 on device 0: load 1, no cut edge yet
    assert r[0] == 0.0
    assert r[1] == pytest.approx(0.5 * phi1)
    assert r[2] == pytest.approx(0.5 * phi1 - phi1)  # SEL: γΦ(s) − Φ(s)
    makespan = 1 + 2 + 1  # node 1 on device 1 waits for the 2-byte transfer
    assert r[3] == pytest.approx(0.0 - phi1 + (t_ref - makespan) / t_ref)


TEACHERS = [
    "critical_path",
    "heft",
    "nest",
    "anneal",
    "random",
    "round_robin",
    "single_device",
    "metis",
]


def teacher_for(name):
    from placegym.teachers import get_teacher

    return get_teacher(name, budget=300) if name == "anneal" else get_teacher(name)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("name", TEACHERS)
def test_every_teacher_drives_every_id_with_legal_actions(env_id, name):
    env = gym.make(env_id, illegal_action="raise")
    teacher = teacher_for(name)
    obs, info = env.reset(seed=1)
    base = env.unwrapped
    while True:
        state = base.state
        acts = (
            teacher.select_actions(state)
            if state.phase == "select"
            else teacher.place_actions(state)
        )
        assert len(acts) >= 1 and info["action_mask"][acts].all()
        obs, _, term, _, info = env.step(int(acts[0]))
        if term:
            break
    placement = Placement(device=info["placement"], order=info["order"])
    assert info["makespan"] == simulate(base.graph, base.cluster, placement).makespan
    if name in ("critical_path",):
        assert info["makespan"] == pytest.approx(info["reference_makespan"])


def test_optimal_teacher_drives_a_small_graph():
    pytest.importorskip("placegym.teachers.optimal")
    from placegym.teachers import get_teacher

    g = graph([1, 2, 3, 1, 2], [[0, 1], [0, 2], [1, 3], [2, 3], [3, 4]], out_bytes=[1] * 5)
    env = gym.make(
        "placegym/Placement-v0", graph=g, cluster=unit_cluster(2), illegal_action="raise"
    )
    teacher = get_teacher("optimal")
    obs, info = env.reset(seed=0)
    while True:
        state = env.unwrapped.state
        acts = (
            teacher.select_actions(state)
            if state.phase == "select"
            else teacher.place_actions(state)
        )
        obs, _, term, _, info = env.step(int(acts[0]))
        if term:
            break
    best = simulate(g, unit_cluster(2), teacher.place(g, unit_cluster(2))).makespan
    assert info["makespan"] == pytest.approx(best)


def test_shared_reference_places_each_graph_once_for_every_env():
    from placegym.envs.mdp.reward import SharedReference
    from placegym.teachers import get_teacher

    class Counting:
        def __init__(self):
            self.calls, self.teacher = 0, get_teacher("critical_path")

        def place(self, graph, cluster):
            self.calls += 1
            return self.teacher.place(graph, cluster)

    counting = Counting()
    shared = SharedReference(counting)
    g = graph([1, 2, 3], [[0, 1], [0, 2]], out_bytes=[4, 0, 0])
    c = unit_cluster(2)
    envs = [PlacementEnv(g, c, reference=shared) for _ in range(3)]
    alone = PlacementEnv(g, c)
    for env in [*envs, alone]:
        env.reset(seed=0)
    assert counting.calls == 1
    assert {env.reference_makespan for env in envs} == {alone.reference_makespan}
    assert repr(shared).startswith("SharedReference(")
