"""SelectOnly / PlaceOnly: one-phase views of the environment."""

import numpy as np
import pytest

from placegym.envs import PlacementEnv, simulate
from placegym.envs.core.placement import Placement
from placegym.teachers import get_teacher
from placegym.teachers.wrappers import PlaceOnly, SelectOnly


def play(env, seed=0):
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    steps, total = 0, 0.0
    while True:
        assert obs["action_mask"].shape == (env.action_space.n,)
        assert env.observation_space.contains(obs)
        legal = np.flatnonzero(env.action_masks())
        obs, r, term, trunc, info = env.step(int(rng.choice(legal)))
        total += r
        steps += 1
        if term:
            return steps, total, info


def test_select_only_lets_the_placer_place():
    base = PlacementEnv("ffnn", "p100x4")
    env = SelectOnly(base, placer="critical_path")
    assert env.action_space.n == 128
    steps, total, info = play(env)
    assert steps == 128
    s = simulate(base.graph, base.cluster, Placement(info["placement"], info["order"]))
    assert info["makespan"] == s.makespan
    assert total == pytest.approx(
        (info["reference_makespan"] - s.makespan) / info["reference_makespan"]
    )


def test_place_only_lets_the_selector_select():
    base = PlacementEnv("ffnn", "p100x4")
    env = PlaceOnly(base, selector=get_teacher("critical_path"))
    assert env.action_space.n == 4
    obs, _ = env.reset(seed=0)
    assert obs["phase"][0] == 1
    steps, _, info = play(env)
    assert steps == 128
    # the selector's order is the critical_path order: highest b-level first among the
    # frontier, so the teacher placing too reproduces the teacher exactly
    both = PlaceOnly(PlacementEnv("ffnn", "p100x4"), selector="critical_path")
    both.reset(seed=0)
    cp = get_teacher("critical_path")
    while True:
        d = int(cp.place_actions(both.unwrapped.state)[0])
        *_, term, _, info = both.step(d)
        if term:
            break
    assert info["makespan"] == pytest.approx(info["reference_makespan"])


def test_wrapper_passes_illegal_actions_through():
    env = SelectOnly(PlacementEnv("ffnn", "p100x4"))
    env.reset(seed=0)
    illegal = int(np.flatnonzero(~env.action_masks())[0])
    _, r, term, _, info = env.step(illegal)
    assert (r, term, info["illegal_action"]) == (-1.0, False, True)
    assert env.unwrapped.state.phase == "select"
