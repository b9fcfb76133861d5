"""The GNN policy for SB3 / sb3-contrib: shapes, MaskablePPO training, BC, save/load."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks

import placegym.envs  # noqa: F401
from placegym.agents.nn.encoder import GraphInputs
from placegym.agents.sb3 import (
    NEG_LOGIT,
    GnnMaskablePolicy,
    GraphFeaturesExtractor,
    batch_graph_inputs,
    make_maskable_ppo,
)
from placegym.agents.sb3.bc import collect_demonstrations, greedy_makespans, pretrain
from placegym.teachers.wrappers import PlaceOnly, SelectOnly

# small batched GNN calls: one torch thread avoids oversubscribing shared cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


SMALL = {"policy_kwargs": {"features_extractor_kwargs": {"hidden": 16, "layers": 2}}}


def visited_obs(env, seed=0, steps=(0, 1, 7, 40)):
    """Observations after the given numbers of masked random steps (SEL and PLC)."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out = []
    for t in range(max(steps) + 1):
        if t in steps:
            out.append(obs)
        obs, *_, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    return out


def stack(frames):
    return {k: torch.as_tensor(np.stack([f[k] for f in frames])) for k in frames[0]}


def random_dag_frames():
    """Frames from two different random graphs (padding differs per graph)."""
    env = gym.make("placegym/RandomDAG-v0")
    return visited_obs(env, seed=0, steps=(0, 3)) + visited_obs(env, seed=5, steps=(2, 9))


def test_batched_inputs_match_per_graph_pointers():
    frames = random_dag_frames()
    g, batch = batch_graph_inputs(stack(frames))
    assert g.x.shape[1] == 13 and int(batch.num_graphs) == len(frames)
    for i, obs in enumerate(frames):
        single = GraphInputs.from_obs(obs)
        lo = int(batch.ptr[i])
        rows = slice(lo, int(batch.ptr[i + 1]))
        for got, want in ((g.down[rows], single.down), (g.up[rows], single.up)):
            torch.testing.assert_close(torch.where(got >= 0, got - lo, got), want)


def test_policy_shapes_padding_masks_and_batch_invariance():
    env = gym.make("placegym/RandomDAG-v0")
    frames = random_dag_frames()
    model = MaskablePPO(GnnMaskablePolicy, env, seed=0, device="cpu", **SMALL)
    policy = model.policy
    obs = stack(frames)
    b, a = len(frames), env.action_space.n
    feats = policy.features_extractor({k: v.float() for k, v in obs.items()})
    assert feats.shape == (b, policy.features_extractor.features_dim) == (b, 3 * 16 + 8)
    logits = policy.action_logits(obs)
    assert logits.shape == (b, a)
    legal = obs["action_mask"].bool()
    assert (logits[~legal] == NEG_LOGIT).all() and (logits[legal] > NEG_LOGIT / 2).all()
    for i, frame in enumerate(frames):  # a batch row equals that observation alone
        one = policy.action_logits(stack([frame]))
        torch.testing.assert_close(one[0], logits[i], rtol=1e-4, atol=1e-5)
    actions = torch.as_tensor([int(np.flatnonzero(f["action_mask"])[0]) for f in frames])
    values, logp, entropy = policy.evaluate_actions(obs, actions, legal.numpy())
    assert values.shape == (b, 1) and logp.shape == (b,) and entropy.shape == (b,)
    assert (logp <= 0).all() and (entropy >= 0).all()
    (values.sum() - logp.sum()).backward()
    assert all(p.grad is not None for p in policy.features_extractor.parameters())
    act, val, lp = policy(obs, action_masks=legal.numpy())
    assert act.shape == (b,) and val.shape == (b, 1) and lp.shape == (b,)
    assert legal[torch.arange(b), act].all()


def test_extractor_under_the_stock_policy_and_one_phase_wrappers():
    env = gym.make("placegym/ChainMM-v0")
    kw = {"features_extractor_class": GraphFeaturesExtractor}
    stock = MaskablePPO("MultiInputPolicy", env, policy_kwargs=kw, seed=0, device="cpu")
    obs, info = env.reset(seed=0)
    action, _ = stock.predict(obs, action_masks=info["action_mask"])
    assert info["action_mask"][int(action)]
    losses = pretrain(stock, env, episodes=1, dagger_rounds=1, epochs=1)  # BC on any policy
    assert len(losses) == 2 and np.isfinite(losses).all()
    for wrapper in (SelectOnly, PlaceOnly):
        wenv = wrapper(gym.make("placegym/ChainMM-v0"))
        model = MaskablePPO(GnnMaskablePolicy, wenv, seed=0, device="cpu", **SMALL)
        [makespan] = greedy_makespans(model.policy, wenv, seeds=[0])
        assert makespan > 0


def test_maskable_ppo_trains_without_warnings_and_respects_masks():
    env = gym.make("placegym/FFNN-v0", illegal_action="raise")  # a masked-out action fails
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = make_maskable_ppo(env, n_steps=512, batch_size=128, n_epochs=2, **SMALL)
        model.learn(total_timesteps=2048)
    assert model.num_timesteps == 2048
    obs, _ = env.reset(seed=1)
    done = False
    while not done:  # without action masks: the policy reads obs["action_mask"] itself
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, _, info = env.step(action)
    assert np.isfinite(info["makespan"]) and info["makespan"] > 0
    obs, _ = env.reset(seed=2)
    action, _ = model.predict(obs, action_masks=get_action_masks(env))
    assert env.unwrapped.action_masks()[int(action)]


def test_bc_pretraining_matches_the_teacher_on_ffnn():
    model = make_maskable_ppo("placegym/FFNN-v0", seed=1)
    before = greedy_makespans(model.policy, "placegym/FFNN-v0")[0]
    losses = pretrain(model, "placegym/FFNN-v0", seed=1)  # one teacher episode, 2 epochs
    assert losses[-1] < 0.5 * losses[0]
    env = gym.make("placegym/FFNN-v0")
    [after] = greedy_makespans(model.policy, env, seeds=[0])
    reference = env.unwrapped.reference_makespan  # the critical_path teacher's makespan
    assert before > 1.5 * reference
    assert after <= 1.05 * reference


def test_dagger_roll_in_labels_policy_states():
    env = gym.make("placegym/ChainMM-v0")
    model = MaskablePPO(GnnMaskablePolicy, env, seed=0, device="cpu", **SMALL)
    a = collect_demonstrations(env, episodes=1, seed=3, policy=model.policy, beta=0.0)
    b = collect_demonstrations(env, episodes=1, seed=3, policy=model.policy, beta=0.0)
    n = env.unwrapped.graph.num_nodes
    assert len(a) == 2 * n and a.ties.shape == (2 * n, env.action_space.n)
    assert (a.ties <= a.obs["action_mask"].astype(bool)).all() and a.ties.any(axis=1).all()
    np.testing.assert_array_equal(a.obs["node_dynamic"], b.obs["node_dynamic"])
    assert a.returns[0] == pytest.approx(a.returns[-1])  # terminal reward, gamma = 1


def test_separate_critic_extractor():
    env = gym.make("placegym/ChainMM-v0")
    kw = {"share_features_extractor": False, **SMALL["policy_kwargs"]}
    model = make_maskable_ppo(env, n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=kw)
    assert model.policy.vf_features_extractor is not model.policy.pi_features_extractor
    model.learn(total_timesteps=64)
    obs = stack(visited_obs(env, steps=(0, 5)))
    dist, values = model.policy.distribution_and_values(obs)
    torch.testing.assert_close(values, model.policy.predict_values(obs))


def test_save_and_load_round_trip(tmp_path):
    env = gym.make("placegym/ChainMM-v0")
    model = make_maskable_ppo(env, n_steps=64, batch_size=32, n_epochs=1, **SMALL)
    model.learn(total_timesteps=64)
    model.save(tmp_path / "gnn_ppo")
    loaded = MaskablePPO.load(tmp_path / "gnn_ppo", device="cpu")
    assert isinstance(loaded.policy, GnnMaskablePolicy)
    obs = stack(visited_obs(env, steps=(0, 5)))
    with torch.no_grad():
        torch.testing.assert_close(
            loaded.policy.action_logits(obs), model.policy.action_logits(obs)
        )
    np.testing.assert_array_equal(
        greedy_makespans(loaded.policy, env, seeds=[0]),
        greedy_makespans(model.policy, env, seeds=[0]),
    )


def test_subproc_vec_env():
    model = make_maskable_ppo(
        "placegym/ChainMM-v0", n_envs=2, vec_env="subproc", n_steps=64, batch_size=64, **SMALL
    )
    try:
        model.learn(total_timesteps=128)
        assert model.num_timesteps == 128
    finally:
        model.get_env().close()


def test_make_maskable_ppo_rejects_unknown_vec_env():
    with pytest.raises(ValueError, match="vec_env: expected 'dummy' or 'subproc', got 'ray'"):
        make_maskable_ppo("placegym/ChainMM-v0", vec_env="ray")
