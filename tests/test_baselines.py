"""Placeto- and GDP-style baselines through the DOPPLER episodes / score loop."""

import numpy as np
import pytest
import torch
from simcases import graph, unit_cluster

from placegym.agents.doppler.baselines import (
    BaselineConfig,
    GdpPolicy,
    PlacetoPolicy,
    make_baseline,
)
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.scoring import score
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs import PlacementEnv
from placegym.teachers import get_teacher

NAMES = ["placeto", "gdp"]


# small batched GNN calls: one torch thread avoids oversubscribing shared cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def small(name, **kw):
    torch.manual_seed(0)
    return make_baseline(name, BaselineConfig(hidden=16, layers=2, max_devices=8, **kw))


def topological_first_order(graph_, sel_mask):
    pos = np.empty(graph_.num_nodes, dtype=np.int64)
    pos[graph_.topological_order] = np.arange(graph_.num_nodes)
    return np.array([np.flatnonzero(m)[np.argmin(pos[np.flatnonzero(m)])] for m in sel_mask])


@pytest.mark.parametrize("name", NAMES)
def test_episodes_and_score_shapes_fixed_order_and_gradients(name):
    policy = small(name)
    envs = [PlacementEnv("chainmm", "p100x4") for _ in range(3)]
    recs = play_episodes(policy, envs, [0, 1, 2], rng=np.random.default_rng(0))
    n = envs[0].graph.num_nodes
    for r in recs:
        assert r.sel_action.shape == (n,) and r.plc_action.shape == (n,)
        assert r.rewards.shape == (2 * n,) and np.isfinite(r.makespan)
        np.testing.assert_array_equal(
            r.sel_action, topological_first_order(envs[0].graph, r.sel_mask)
        )
    assert len({tuple(r.plc_action) for r in recs}) > 1  # sampled devices differ
    scores = score(policy, recs)
    for s in scores:
        assert s.logp.shape == s.entropy.shape == (2 * n,) and s.teacher_logp is None
        assert (s.logp[0::2] == 0).all() and (s.entropy[0::2] == 0).all()
        assert (s.logp[1::2] < 0).all() and (s.entropy[1::2] > 0).all()
    (-torch.stack([s.logp.sum() for s in scores]).sum()).backward()
    for p in policy.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert sum(float(p.grad.abs().sum()) for p in policy.parameters()) > 0


@pytest.mark.parametrize("name", NAMES)
def test_seeded_determinism(name):
    env = PlacementEnv("chainmm", "p100x4")
    runs = []
    for _ in range(2):
        policy = small(name)
        [rec] = play_episodes(policy, [env], [0], rng=np.random.default_rng(7))
        runs.append((rec.makespan, rec.plc_action.copy(), score(policy, [rec])[0].logp))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    torch.testing.assert_close(runs[0][2], runs[1][2])


def test_placeto_recomputes_embeddings_from_the_placement_and_gdp_does_not():
    env = PlacementEnv("chainmm", "p100x4")
    obs, _ = env.reset(seed=0)
    g = GraphInputs.from_obs(obs)
    n = g.num_nodes
    node = torch.tensor([5, 5])
    placed = torch.full((2, n), -1)
    placed[1, :5] = 3  # the second state has nodes 0..4 on device 3
    dev = torch.zeros(2, 4, 7)
    with torch.no_grad():
        placeto, gdp = small("placeto"), small("gdp")
        a = placeto.plc_logits(placeto.encode(g), node, placed, dev)
        b = gdp.plc_logits(gdp.encode(g), node, placed, dev)
    assert a.shape == b.shape == (2, 4)
    assert not torch.allclose(a[0], a[1])
    torch.testing.assert_close(b[0], b[1])
    # chunked scoring gives the same logits
    chunked = small("placeto", chunk_nodes=n)
    with torch.no_grad():
        torch.testing.assert_close(chunked.plc_logits(chunked.encode(g), node, placed, dev), a)


@pytest.mark.parametrize("name", NAMES)
def test_teacher_roll_in_scores_only_placements(name):
    policy = small(name)
    env = PlacementEnv("chainmm", "p100x4")
    [rec] = play_episodes(
        policy,
        [env],
        [0],
        rng=np.random.default_rng(0),
        teacher=get_teacher("critical_path"),
        teacher_prob=1.0,
        record_teacher=True,
    )
    n = env.graph.num_nodes
    np.testing.assert_array_equal(rec.sel_action, topological_first_order(env.graph, rec.sel_mask))
    assert rec.plc_teacher[np.arange(n), rec.plc_action].all()
    [s] = score(policy, [rec])
    assert (s.teacher_logp[0::2] == 0).all()
    assert (s.teacher_logp[1::2] >= s.logp[1::2] - 1e-6).all()


def test_errors():
    env = PlacementEnv("chainmm", "v100x8")
    policy = make_baseline("gdp", BaselineConfig(hidden=8, layers=1, max_devices=4))
    with pytest.raises(
        ValueError, match="GdpPolicy: the cluster has 8 devices, more than max_devices=4"
    ):
        play_episodes(policy, [env], [0], rng=np.random.default_rng(0))
    placeto = make_baseline("placeto", BaselineConfig(hidden=8, layers=1, max_devices=4))
    g = GraphInputs.from_obs(env.reset(seed=0)[0])
    placed = torch.full((1, g.num_nodes), 7)  # a state that already uses device 7
    with pytest.raises(ValueError, match="PlacetoPolicy: the cluster has 8 devices"):
        placeto.plc_logits(placeto.encode(g), torch.tensor([0]), placed, torch.zeros(1, 8, 7))
    with pytest.raises(ValueError, match="baseline: unknown name 'hdp'"):
        make_baseline("hdp")
    with pytest.raises(NotImplementedError, match="learns_selection = False"):
        PlacetoPolicy().sel_scores(None, torch.zeros(1), torch.zeros(1, 6))


def two_chains_envs(k):
    """Two chains 0 -> 1 and 2 -> 3 of unit work whose edges cost 10 across devices:
    each chain on its own device (makespan 2) is optimal; a split chain costs >= 12."""
    g = graph([1.0] * 4, [(0, 1), (2, 3)], out_bytes=[10.0, 0.0, 10.0, 0.0])
    cluster = unit_cluster(2, bandwidth=1.0)
    return [PlacementEnv(g, cluster) for _ in range(k)]


def mean_return(policy, envs, seed):
    recs = play_episodes(policy, envs, list(range(len(envs))), rng=np.random.default_rng(seed))
    return float(np.mean([r.ret for r in recs]))


@pytest.mark.parametrize("cls", [PlacetoPolicy, GdpPolicy])
def test_a_few_reinforce_updates_improve_the_mean_return(cls):
    torch.manual_seed(0)
    policy = cls(BaselineConfig(hidden=16, layers=2, max_devices=2))
    envs, evaluation = two_chains_envs(16), two_chains_envs(64)
    before = mean_return(policy, evaluation, seed=100)
    assert evaluation[0].reference_makespan == pytest.approx(2.0)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    for _ in range(25):
        recs = play_episodes(policy, envs, list(range(16)), rng=rng)
        ret = torch.tensor([r.ret for r in recs])
        logp = torch.stack([s.logp.sum() for s in score(policy, recs)])
        loss = -((ret - ret.mean()) * logp).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = mean_return(policy, evaluation, seed=100)
    assert before < -2.5  # a random placement splits a chain most of the time
    assert after > before + 1.5
