"""Greedy episodes are a pure function of (weights, graph, cluster): no seed, no batch
effect, and a fixed tie rule."""

import numpy as np
import pytest
import torch
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import GREEDY_TIE_TOL, greedy_pick, play_episodes
from placegym.envs import PlacementEnv
from placegym.envs.workloads import make_graph


def _placement(record) -> tuple[list[int], list[int]]:
    return record.info["placement"].tolist(), record.info["order"].tolist()


def test_greedy_pick_rule():
    keys = np.array([3.0, 1.0, 2.0, 0.0])
    assert greedy_pick(np.array([0.0, 1.0, 0.5, 0.9]), keys) == 1  # one maximum
    tied = np.array([1.0, 1.0 - GREEDY_TIE_TOL / 2, 1.0, 0.0])
    assert greedy_pick(tied, keys) == 1  # within the tolerance: smallest key among 0, 1, 2
    assert greedy_pick(np.ones(3), np.zeros(3)) == 0  # equal keys: first index


def test_greedy_pick_refuses_nan_and_empty_logits():
    with pytest.raises(ValueError, match=r"logits: no largest logit among \[0\.5, nan\]"):
        greedy_pick(np.array([0.5, np.nan], dtype=np.float32), np.zeros(2))
    with pytest.raises(ValueError, match="logits: no largest logit"):
        greedy_pick(np.zeros(0), np.zeros(0))
    assert greedy_pick(np.full(3, -np.inf), np.array([2.0, 1.0, 3.0])) == 1  # all masked


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_greedy_pick_is_the_numpy_rule_in_the_logits_precision(dtype):
    """The compiled pick against the rule written with numpy, on logits drawn with many
    near-ties (steps of a tenth of the tolerance) and keys with repeats."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        k = int(rng.integers(1, 12))
        base = dtype(rng.normal() * 10)
        logits = (base - rng.integers(0, 25, size=k) * dtype(GREEDY_TIE_TOL / 10)).astype(dtype)
        keys = rng.integers(0, 4, size=k).astype(rng.choice([np.float32, np.float64]))
        tied = np.flatnonzero(logits >= logits.max() - GREEDY_TIE_TOL)
        assert greedy_pick(logits, keys) == int(tied[np.argmin(keys[tied])])


def test_greedy_ignores_seed_and_batch_composition(one_torch_thread):
    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2)).eval()
    ffnn, chainmm = make_graph("ffnn"), make_graph("chainmm")
    alone = play_episodes(
        policy, [PlacementEnv(ffnn, "p100x4")], [0], rng=np.random.default_rng(0), greedy=True
    )
    mixed = play_episodes(
        policy,
        [PlacementEnv(g, "p100x4") for g in (chainmm, ffnn, ffnn, chainmm)],
        [7, 8, 9, 10],
        rng=np.random.default_rng(123),
        greedy=True,
    )
    assert _placement(mixed[1]) == _placement(alone[0])
    assert _placement(mixed[2]) == _placement(alone[0])
    assert _placement(mixed[0]) == _placement(mixed[3])
    assert mixed[1].makespan == alone[0].makespan
    # sampling stays seeded and is not greedy
    a, b = (
        play_episodes(policy, [PlacementEnv(ffnn, "p100x4")], [0], rng=np.random.default_rng(s))
        for s in (1, 1)
    )
    assert _placement(a[0]) == _placement(b[0]) != _placement(alone[0])


def test_greedy_ties_go_by_b_level_then_id_and_earliest_start_then_index():
    # sources 0 (1 FLOP), 1 and 2 (3 FLOP each) feed 3; unit devices, free transfers
    g = graph([1.0, 3.0, 3.0, 1.0], [[0, 3], [1, 3], [2, 3]])
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1)).eval()
    with torch.no_grad():  # every logit 0: every choice is a tie
        for layer in (policy.sel_tail[-1], policy.plc_head[1][-1]):
            layer.weight.zero_()
            layer.bias.zero_()
    env = PlacementEnv(g, unit_cluster(3))
    runs = [
        play_episodes(policy, [env], [s], rng=np.random.default_rng(s), greedy=True)[0]
        for s in (0, 1)
    ]
    for r in runs:
        # SEL: 1 and 2 tie on b-level 4 (1 wins by id), then 2, then 0, then 3.
        # PLC: 1 -> device 0; 2 -> device 1 (device 0 busy until 3); 0 -> device 2;
        # 3: inputs on devices 0 and 1 at 3 (free transfers), device 2 free at 1, so every
        # device can start it at 3 and the smallest index wins.
        assert r.info["order"].tolist() == [1, 2, 0, 3]
        assert r.info["placement"].tolist() == [2, 0, 1, 0]
        assert r.makespan == pytest.approx(4.0)
