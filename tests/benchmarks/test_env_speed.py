"""Environment speed (``make bench``): steps/s of a masked random policy on
placegym/LlamaLayer-v0 next to CartPole-v1 in the same run, both through gym.make.

Target: >= 30% of CartPole's steps/s.
"""

import time

import gymnasium as gym
import numpy as np
import pytest

import placegym.envs  # noqa: F401

pytestmark = pytest.mark.benchmark


def steps_per_second(env_id: str, steps: int, masked: bool) -> float:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    t = time.perf_counter()
    for _ in range(steps):
        if masked:
            legal = np.flatnonzero(info["action_mask"])
            action = legal[rng.integers(len(legal))]
        else:
            action = env.action_space.sample()
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            _, info = env.reset()
    return steps / (time.perf_counter() - t)


def test_env_steps_per_second_vs_cartpole():
    best = {"CartPole-v1": 0.0, "placegym/LlamaLayer-v0": 0.0, "placegym/FFNN-v0": 0.0}
    for _ in range(3):  # best of three, interleaved
        best["CartPole-v1"] = max(
            best["CartPole-v1"], steps_per_second("CartPole-v1", 60_000, masked=False)
        )
        for env_id in ("placegym/LlamaLayer-v0", "placegym/FFNN-v0"):
            best[env_id] = max(best[env_id], steps_per_second(env_id, 30_000, masked=True))
    cart = best["CartPole-v1"]
    print("\n\nenvironment speed (best of 3, through gym.make, random / masked random policy)")
    print("| env | steps/s | vs CartPole-v1 |")
    print("|---|---|---|")
    for env_id, sps in best.items():
        print(f"| {env_id} | {sps:,.0f} | {sps / cart:.1%} |")
    ratio = best["placegym/LlamaLayer-v0"] / cart
    assert ratio >= 0.30, f"LlamaLayer-v0 runs at {ratio:.1%} of CartPole's steps/s"
