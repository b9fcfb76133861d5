"""HEFT's lookahead variant (``heft_lookahead``) and its one-step estimate
(:func:`~placegym.teachers.heft.successor_finish`), solved by hand on
:func:`simcases.unit_cluster` (1 FLOP/s devices, 1 B/s links: a node's duration is its
flops, a transfer of b bytes takes b)."""

import numpy as np
import pytest
import torch
from dagger import imitate
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.features import successor_features
from placegym.agents.doppler.inputs import graph_inputs, plc_devices
from placegym.envs import PlacementEnv, get_preset, simulate
from placegym.envs.analysis.levels import durations_on
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim import _kernel
from placegym.envs.sim import simulator as sim
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher
from placegym.teachers._successor_kernel import _least
from placegym.teachers.heft import successor_finish, successor_tail


def join():
    """p1, p2 (flops 2, outputs 5 bytes) -> q (flops 1) on 2 devices.

    HEFT puts p1 on d0 and p2 on d1 (it finishes at 2 there, 4 behind p1), so q waits
    for a 5 s transfer: [7, 8]. With p2 behind p1 on d0, q runs at once: [4, 5].
    """
    return graph([2, 2, 1], [[0, 2], [1, 2]], out_bytes=[5, 5, 0])


def test_successor_finish_by_hand():
    g, c = join(), unit_cluster(2)
    s = PlacementState(g, c)
    s.select(0)
    s.place(0)
    s.select(1)
    # on d0: p2 ends at 4 and q follows at once, [4, 5] (on d1 it would wait for both
    # transfers: 4 + 5 + 1); on d1: p2 ends at 2 and q ends at 2 + 5 + 1 = 8 anywhere
    assert successor_finish(s, successor_tail(g, c)).tolist() == [5.0, 8.0]
    s.place(1)
    s.select(2)  # a sink: its own insertion-based finish
    assert successor_finish(s, successor_tail(g, c)).tolist() == [8.0, 8.0]


def test_lookahead_keeps_the_join_with_its_producers():
    g, c = join(), unit_cluster(2)
    heft = get_teacher("heft").place(g, c)
    hla = get_teacher("heft_lookahead").place(g, c)
    assert heft.device.tolist() == [0, 1, 0]
    assert hla.device.tolist() == [0, 0, 0]
    assert simulate(g, c, heft).makespan == pytest.approx(8.0)
    assert simulate(g, c, hla).makespan == pytest.approx(5.0)


def test_the_tail_counts_the_path_after_the_successor():
    g = make_graph("random_dag", nodes=40, seed=3)
    c = get_preset("v100x8")
    tail = successor_tail(g, c)
    teacher = get_teacher("heft_lookahead")
    # b-level less the node's mean compute: 0 at a sink, the rest of the path elsewhere
    sinks = np.flatnonzero(np.diff(g.consumer_csr[0]) == 0)
    assert np.allclose(tail[sinks], 0.0)
    assert np.all(tail >= -1e-12)
    assert np.allclose(teacher.b_level(g, c) - tail, durations_on(g, c).mean(axis=1))


@pytest.mark.parametrize("seed", [0, 1])
def test_fewer_devices_tried_never_lower_the_estimate(seed):
    g, c = make_graph("random_dag", nodes=50, seed=seed), get_preset("v100x8")
    tail = successor_tail(g, c)
    rule = get_teacher("heft_lookahead")
    s = PlacementState(g, c)
    rng = np.random.default_rng(seed)
    while not s.done:
        s.select(int(rule.select_actions(s)[0]))
        full = successor_finish(s, tail)
        assert np.array_equal(successor_finish(s, tail, width=c.num_devices), full)
        for width in (1, 3):
            assert np.all(successor_finish(s, tail, width=width) >= full)
        s.place(int(rng.integers(c.num_devices)))


def test_places_without_a_simulator_call_where_memory_cannot_bind(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("simulator called")

    for name in ("simulate", "simulate_batch", "simulate_makespan"):
        monkeypatch.setattr(sim, name, refuse)
    for name in ("simulate_one", "makespan_one", "run_rows"):
        monkeypatch.setattr(_kernel, name, refuse)
    g, c = make_graph("random_dag", nodes=60, seed=0), get_preset("tpuv4-fattree-64")
    p = get_teacher("heft_lookahead").place(g, c)
    assert p.device.shape == (60,) and p.device.min() >= 0 and p.device.max() < 64


def test_successors_need_insertion():
    with pytest.raises(ValueError, match="successors: needs insertion"):
        PolicyConfig(successors=True)


def test_plc_devices_add_the_successor_columns():
    g, c = join(), unit_cluster(2)
    env = PlacementEnv(g, c)
    obs, _ = env.reset(seed=0)
    policy = DopplerPolicy(PolicyConfig(hidden=8, insertion=True, successors=True))
    inputs = graph_inputs(policy, obs, g, c)
    assert inputs.successor_scale == pytest.approx(env.unwrapped.time_unit)
    state = env.unwrapped.state
    for v, d in [(0, 0), (1, None)]:
        state.select(v)
        if d is not None:
            state.place(d)
    out = plc_devices(inputs, state, np.zeros((2, 7), np.float32))
    assert out.shape == (2, 7 + 3 + 2)
    # successor finishes 5 and 8 (test_successor_finish_by_hand): d1 leads by 3
    lead = 3.0 / inputs.successor_scale
    np.testing.assert_allclose(out[:, 10:], [[0.0, 1.0], [lead, 0.0]], rtol=1e-6)
    np.testing.assert_array_equal(out[:, 10:], successor_features(state, inputs.successor_scale))


def test_imitating_heft_lookahead_keeps_the_join_with_its_producers(one_torch_thread):
    """With the successor columns, imitation makes the greedy policy place the join as
    heft_lookahead does, where HEFT's own rule (the insertion columns) splits it."""
    torch.manual_seed(0)
    g, c = join(), unit_cluster(2)
    teacher = get_teacher("heft_lookahead")
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2, insertion=True, successors=True))
    imitate(policy, g, c, teacher)
    rng = np.random.default_rng(0)
    [greedy] = play_episodes(policy, [PlacementEnv(g, c)], [0], rng=rng, greedy=True)
    assert greedy.info["placement"].tolist() == [0, 0, 0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_candidates_are_a_stable_argsorts_first(seed):
    key = np.random.default_rng(seed).integers(0, 6, 50).astype(np.float64)  # many ties
    for width in (1, 4, 9):
        idx, val = np.empty(width, dtype=np.int64), np.empty(width)
        _least(key, width, idx, val)
        assert sorted(idx.tolist()) == sorted(np.argsort(key, kind="stable")[:width].tolist())
