"""Environment speed (``make bench``): steps/s of a masked random policy on
placegym/LlamaLayer-v0 next to CartPole-v1 in the same run, both through gym.make, and the
native vector environment next to Gymnasium's sync vector environment.

Targets: >= 30% of CartPole's steps/s; the native vector env >= 10x sync at B = 64.
"""

import time

import gymnasium as gym
import numpy as np
import pytest
from benchmarks.timing import load_note

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


def vector_steps_per_cpu_second(env, seconds: float) -> float:
    """Aggregate steps per CPU second of a masked uniform random policy."""
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, t = 0, time.process_time()
    while time.process_time() - t < seconds:
        mask = obs["action_mask"]
        obs, *_ = env.step((rng.random(mask.shape) * mask).argmax(axis=1))
        steps += len(mask)
    return steps / (time.process_time() - t)


def test_native_vector_env_vs_sync_at_64_envs():
    """Target: the native vector env >= 10x the aggregate steps/s of
    ``gym.make_vec(..., "sync")`` (same-step autoreset, like the native one) at B = 64."""
    rows, ratios = [], []
    for env_id in ("placegym/FFNN-v0", "placegym/LlamaLayer-v0"):
        sync = gym.make_vec(
            env_id,
            num_envs=64,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
        native = gym.make_vec(env_id, num_envs=64, vectorization_mode="vector_entry_point")
        best = {"sync": 0.0, "native": 0.0}
        for _ in range(3):  # interleaved rounds
            best["sync"] = max(best["sync"], vector_steps_per_cpu_second(sync, 2.0))
            best["native"] = max(best["native"], vector_steps_per_cpu_second(native, 2.0))
        ratios.append(best["native"] / best["sync"])
        rows.append(
            f"| {env_id} | {best['sync']:,.0f} | {best['native']:,.0f} | **{ratios[-1]:.1f}x** |"
        )
    print(f"\n\nvector environments, B = 64, masked random policy ({load_note()})")
    print("aggregate steps per CPU second, best of 3 interleaved rounds; target >= 10x sync")
    print("| env | make_vec sync | make_vec vector_entry_point | ratio |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    assert min(ratios) >= 10, f"the native vector env is only {min(ratios):.1f}x sync"
