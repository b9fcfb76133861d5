"""MaskablePPO (sb3-contrib) with a plain MultiInputPolicy through the public API."""

import warnings

import gymnasium as gym
import numpy as np

import placegym.envs  # noqa: F401


def test_maskable_ppo_trains_2048_steps_and_its_greedy_episode_takes_only_legal_actions():
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    env = gym.make("placegym/FFNN-v0", illegal_action="raise")  # a masked-out action fails
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning left unhandled
        model = MaskablePPO(
            "MultiInputPolicy",
            env,
            n_steps=512,
            batch_size=128,
            n_epochs=2,
            seed=0,
            verbose=0,
            device="cpu",
        )
        model.learn(total_timesteps=2048)
    obs, _ = env.reset(seed=1)
    done = False
    while not done:
        action, _ = model.predict(obs, action_masks=get_action_masks(env), deterministic=True)
        obs, _, done, _, info = env.step(action)
    assert np.isfinite(info["makespan"]) and info["makespan"] > 0
