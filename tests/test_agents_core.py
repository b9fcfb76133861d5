"""GNN layers, the dual policy and its batched episodes."""

import dataclasses

import numpy as np
import pytest
import torch

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import placed_dtype, play_episodes
from placegym.agents.doppler.features import sel_pairs
from placegym.agents.doppler.scoring import score, segment_log_softmax
from placegym.agents.nn import CriticalPathPool, DAGConv, critical_path_pointers
from placegym.agents.nn.encoder import GraphEncoder, GraphInputs
from placegym.envs import PlacementEnv
from placegym.teachers import get_teacher


def random_dag(n=12, p=0.3, seed=0):
    rng = np.random.default_rng(seed)
    edges = np.array([(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p])
    return edges.reshape(-1, 2)


def test_dag_conv_shapes_repr_and_permutation_equivariance():
    torch.manual_seed(0)
    conv = DAGConv(16, edge_dim=2)
    assert repr(conv) == "DAGConv(16, edge_dim=2)"
    n = 12
    edges = torch.from_numpy(random_dag(n).T.copy())
    x, e = torch.randn(n, 16), torch.randn(edges.shape[1], 2)
    out = conv(x, edges, e)
    assert out.shape == (n, 16)
    perm = torch.randperm(n)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(n)
    out_p = conv(x[perm], inv[edges], e)
    torch.testing.assert_close(out_p, out[perm], rtol=1e-5, atol=1e-5)
    conv.reset_parameters()
    assert conv(x, edges, e).shape == (n, 16)


def test_critical_path_pool_matches_walking_the_path():
    n = 15
    edges = random_dag(n, seed=3)
    rng = np.random.default_rng(1)
    key = rng.random(n)
    nxt, prv = critical_path_pointers(edges, key, key, n)
    for u, v in edges:  # the pointer is the best consumer / producer
        assert key[nxt[u]] >= key[v]
        assert key[prv[v]] >= key[u]
    h = torch.randn(n, 4)
    pooled = CriticalPathPool()(h, torch.from_numpy(nxt))
    for v in range(n):
        path, u = [], v
        while u >= 0:
            path.append(u)
            u = nxt[u]
        torch.testing.assert_close(pooled[v], h[path].mean(0))


def test_segment_log_softmax():
    x = torch.tensor([1.0, 2.0, 3.0, 0.5, -1.0])
    seg = torch.tensor([0, 1, 0, 1, 1])
    out = segment_log_softmax(x, seg, 2)
    torch.testing.assert_close(out[[0, 2]], torch.log_softmax(x[[0, 2]], 0))
    torch.testing.assert_close(out[[1, 3, 4]], torch.log_softmax(x[[1, 3, 4]], 0))


def test_encoder_runs_on_any_graph_size():
    enc = GraphEncoder(hidden=8, layers=2)
    for name in ("ffnn", "chainmm"):
        env = PlacementEnv(name, "p100x4")
        obs, _ = env.reset(seed=0)
        g = GraphInputs.from_obs(obs)
        h, cp = enc(g)
        assert h.shape == (g.num_nodes, 8) and cp.shape == (g.num_nodes, 16)


@pytest.mark.parametrize("cluster", ["p100x4", "v100x8"])
def test_episodes_are_seeded_and_scores_match(cluster):
    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    envs = [PlacementEnv("ffnn", cluster) for _ in range(3)]
    a = play_episodes(policy, envs, [0, 1, 2], rng=np.random.default_rng(5))
    b = play_episodes(policy, envs, [0, 1, 2], rng=np.random.default_rng(5))
    assert [r.makespan for r in a] == [r.makespan for r in b]
    assert len({r.makespan for r in a}) > 1
    for r in a:
        assert len(r.sel_action) == 128 and r.rewards.shape == (256,)
        assert r.ret == pytest.approx(
            (r.info["reference_makespan"] - r.makespan) / r.info["reference_makespan"]
        )
    lean = play_episodes(policy, envs, [0, 1, 2], rng=np.random.default_rng(5), keep_inputs=False)
    for r, q in zip(a, lean):  # the same episodes, only the last steps' inputs kept
        assert q.makespan == r.makespan and (q.plc_action == r.plc_action).all()
        assert q.sel_mask.shape == (1, 128) and q.plc_placed.shape == (1, 128)
        assert q.sel_rows.shape == (q.sel_mask.sum(), 6) and q.sel_ready.shape[0] == len(
            q.sel_rows
        )
    scores = score(policy, a)
    for s in scores:
        assert s.logp.shape == (256,) and (s.logp <= 1e-6).all()
        assert (s.entropy >= -1e-6).all()
    (-scores[0].logp.sum()).backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def test_records_keep_the_frontier_pairs_of_the_states_they_replay():
    """A record's SEL pairs are those of the states' whole node_dynamic (replayed from
    its actions), bit for bit, and its compact plc_placed scores as int64 would."""
    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=1, rules=True, siblings=True))
    envs = [PlacementEnv("llama_block", "p100x4") for _ in range(2)]
    records = play_episodes(policy, envs, [0, 1], rng=np.random.default_rng(3))
    for r in records:
        env = PlacementEnv("llama_block", "p100x4")
        obs, _ = env.reset(seed=0)
        n, dense, placed = len(r.sel_action), [], []
        for v, d in zip(r.sel_action, r.plc_action):
            dense.append(obs["node_dynamic"][:n].copy())
            obs, *_ = env.step(int(v))
            placed.append(env.unwrapped.state.device.copy())
            obs, *_ = env.step(int(d))
        step, node = (torch.from_numpy(x) for x in np.nonzero(r.sel_mask))
        want = sel_pairs(r.graph, torch.from_numpy(np.stack(dense)), step, node)
        assert r.sel_rows.dtype == np.float32 and r.sel_ready.dtype == np.float32
        assert (r.sel_rows == want.rows.numpy()).all() and (
            r.sel_ready == want.ready.numpy()
        ).all()
        assert r.plc_placed.dtype == np.int8 and (r.plc_placed == np.stack(placed)).all()
    wide = [dataclasses.replace(r, plc_placed=r.plc_placed.astype(np.int64)) for r in records]
    with torch.no_grad():
        for a, b in zip(score(policy, records), score(policy, wide)):
            assert torch.equal(a.logp, b.logp) and torch.equal(a.entropy, b.entropy)


def test_steps_join_what_a_list_of_the_steps_would():
    from placegym.agents.doppler._steps import Steps

    rng = np.random.default_rng(0)
    fixed, ragged = Steps(5), Steps(5, ragged=True)
    rows = [rng.random((k, 3)).astype(np.float32) for k in (2, 0, 40, 1, 7)]
    for i, r in enumerate(rows):
        x = np.full(4, i, dtype=np.int8)
        fixed.append(x)
        x[:] = -9  # appended as a copy
        ragged.append(r)
        assert (fixed[-1] == i).all() and np.array_equal(ragged[-1], r)
    assert len(fixed) == len(ragged) == 5
    assert np.array_equal(ragged[2], rows[2]) and np.array_equal(fixed[-5], fixed[0])
    with pytest.raises(IndexError, match="step 5 of 5 kept"):
        fixed[5]
    with pytest.raises(ValueError, match="all 5 expected steps are recorded"):
        fixed.append(np.zeros(4, dtype=np.int8))
    joined = fixed.joined()
    assert joined.dtype == np.int8 and np.array_equal(
        joined, np.repeat(np.arange(5), 4).reshape(5, 4)
    )
    assert np.array_equal(ragged.joined(), np.concatenate(rows))
    short = Steps(10)
    short.append(np.ones(2))
    assert short.joined().shape == (1, 2)  # unused rows trimmed
    cast = Steps(2, dtype=np.int8)
    cast.append(np.array([-1, 5], dtype=np.int64))
    assert cast[-1].dtype == np.int8 and cast.joined().tolist() == [[-1, 5]]
    last = Steps(10, keep=False, ragged=True)
    for r in rows:
        last.append(r)
    assert len(last) == 1 and np.array_equal(last.joined(), rows[-1])
    with pytest.raises(ValueError, match="need at least one array to join"):
        Steps(3).joined()


def test_placed_dtype_is_the_smallest_that_holds_the_devices():
    assert [placed_dtype(d) for d in (1, 128, 129, 32768, 32769)] == [
        np.int8,
        np.int8,
        np.int16,
        np.int16,
        np.int32,
    ]


def test_teacher_roll_in_and_tie_sets():
    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=1))
    env = PlacementEnv("ffnn", "p100x4")
    cp = get_teacher("critical_path")
    [rec] = play_episodes(
        policy,
        [env],
        [0],
        rng=np.random.default_rng(0),
        teacher=cp,
        teacher_prob=1.0,
        record_teacher=True,
    )
    assert rec.from_teacher.all()
    assert rec.sel_teacher[np.arange(128), rec.sel_action].all()
    assert rec.plc_teacher[np.arange(128), rec.plc_action].all()
    [s] = score(policy, [rec])
    assert (s.teacher_logp >= s.logp - 1e-6).all()
    [greedy] = play_episodes(policy, [env], [0], rng=np.random.default_rng(0), greedy=True)
    assert not greedy.from_teacher.any()


def test_sibling_share_by_hand():
    from simcases import graph, unit_cluster

    from placegym.agents.doppler.features import sibling_share

    # nodes 0, 1, 2 feed 3; 4 feeds 5. Output sizes 4, 2, 6 (normalised by the largest).
    g = graph([1, 1, 1, 1, 1, 1], [[0, 3], [1, 3], [2, 3], [4, 5]], out_bytes=[4, 2, 6, 1, 1, 0])
    obs, _ = PlacementEnv(g, unit_cluster(2)).reset(seed=0)
    gi = GraphInputs.from_obs(obs)
    ptr, idx, w = gi.siblings
    assert idx[ptr[0] : ptr[1]].tolist() == [1, 2]
    assert w[ptr[0] : ptr[1]].tolist() == pytest.approx([2 / 6, 1.0])
    assert ptr[4] == ptr[5]  # node 4 has no siblings
    placed = torch.tensor([[-1, 1, -1, -1, -1, -1], [-1, 1, 0, -1, -1, -1]])
    share = sibling_share(gi, torch.tensor([0, 0]), placed, 2)
    torch.testing.assert_close(share, torch.tensor([[0.0, 0.25], [0.75, 0.25]]))
    none = sibling_share(gi, torch.tensor([4, 4]), placed, 2)
    assert none.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert sibling_share(None, torch.tensor([0]), placed[:1], 2).tolist() == [[0.0, 0.0]]


def test_hint_share_by_hand():
    from placegym.agents.doppler.hints import HINT_FEATURES, hint_share

    # one hint: nodes 0, 1, 2 in group 5, nodes 3, 4 in group 7; 2 devices
    groups = torch.tensor([[5], [5], [5], [7], [7]])
    placed = torch.tensor([[0, 1, -1, 0, -1], [-1, -1, -1, -1, -1]])  # state 0, state 1
    x = hint_share(groups, torch.tensor([2, 4]), placed, 2, 1)
    assert x.shape == (2, 2, HINT_FEATURES)
    # node 2: mates 0 (dev 0) and 1 (dev 1); dev 0 also holds 3 (another group)
    torch.testing.assert_close(x[0], torch.tensor([[0.5, 0.5, 1.0], [0.5, 0.0, 1.0]]))
    assert x[1].tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]  # nothing placed
    assert hint_share(None, torch.tensor([2]), placed[:1], 2, 2).shape == (1, 2, 2 * HINT_FEATURES)
    assert hint_share(groups, torch.tensor([2]), placed[:1], 2, 0).shape == (1, 2, 0)
    with pytest.raises(ValueError, match="placed: devices must be below d=2, got 2"):
        hint_share(groups, torch.tensor([2]), torch.tensor([[0, 2, -1, -1, -1]]), 2, 1)


def _one_hot_hint_share(groups, node, placed, d):
    """The one-hot formulation of ``hint_share`` (``(S, n, D)`` and ``(S, n, K)`` arrays)."""
    onehot = (placed.unsqueeze(-1) == torch.arange(d)).float()
    mates = (groups.unsqueeze(0) == groups[node].unsqueeze(1)).float()
    on_dev = torch.einsum("snk,snd->sdk", mates, onehot)
    count = onehot.sum(dim=1).unsqueeze(-1)
    total = on_dev.sum(dim=1, keepdim=True)
    share = on_dev / total.clamp(min=1)
    foreign = (count - on_dev) / count.clamp(min=1)
    has = (total > 0).float().expand(-1, d, -1)
    return torch.stack([share, foreign, has], dim=-1).reshape(len(node), d, -1)


def test_hint_share_is_the_one_hot_formulation_bit_for_bit():
    from placegym.agents.doppler.hints import hint_share

    gen = torch.Generator().manual_seed(3)
    n, d, k, s = 40, 5, 3, 30
    groups = torch.randint(0, 4, (n, k), generator=gen)
    node = torch.randint(0, n, (s,), generator=gen)
    placed = torch.randint(-1, d, (s, n), generator=gen)
    placed[torch.arange(s), node] = -1  # a state's node is not placed yet
    assert torch.equal(
        hint_share(groups, node, placed, d, k), _one_hot_hint_share(groups, node, placed, d)
    )


def test_policy_with_hints_runs_and_rejects_search_teachers():
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1, hints=["nest", "metis"]))
    assert policy.config.hints == ("nest", "metis")
    env = PlacementEnv("chainmm", "p100x4")
    [rec] = play_episodes(policy, [env], [0], rng=np.random.default_rng(0))
    assert rec.graph.groups.shape == (env.graph.num_nodes, 2)
    [s] = score(policy, [rec])
    assert torch.isfinite(s.logp).all()
    with pytest.raises(ValueError, match="hints: expected distinct single-pass teachers"):
        PolicyConfig(hints=("anneal",))


def test_node_positions_by_hand():
    from placegym.agents.nn.encoder import node_positions

    # depths: 0, 0, 1, 2, 0 (node 3 is reached by 0 -> 2 -> 3)
    edges = np.array([[0, 2], [1, 2], [2, 3], [0, 3], [4, 3]])
    pos = node_positions(edges, 5)
    assert pos[:, 0].tolist() == [0.0, 0.0, 0.5, 1.0, 0.0]
    assert pos[:, 1].tolist() == [0.0, 0.5, 0.0, 0.0, 1.0]  # 0, 1, 4 share depth 0
    assert node_positions(np.zeros((0, 2), dtype=np.int64), 2).tolist() == [[0, 0], [0, 1]]
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1, positions=True))
    [rec] = play_episodes(
        policy, [PlacementEnv("ffnn", "p100x4")], [0], rng=np.random.default_rng(0)
    )
    assert torch.isfinite(score(policy, [rec])[0].logp).all()


def test_device_affinity_by_hand():
    from placegym.agents.doppler.features import device_affinity
    from placegym.agents.doppler.policy import Encoding

    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]])  # query of nodes 0, 1, 2
    k = torch.tensor([[1.0, 1.0], [0.0, 2.0], [3.0, 0.0]])
    enc = Encoding(q, q, q, q, query=q, key=k)
    placed = torch.tensor([[0, 0, -1], [-1, -1, -1]])  # nodes 0, 1 on device 0 | nothing
    onehot = torch.zeros(2, 3, 3).scatter_(2, (placed + 1).unsqueeze(-1), 1.0)[:, :, 1:]
    x = device_affinity(enc, torch.tensor([2, 2]), onehot)
    # node 2: q = (2, 0); k0 . q = 2, k1 . q = 0, scaled by 1/sqrt(2)
    s = 2**0.5
    torch.testing.assert_close(x[0], torch.tensor([[2 / s, 1 / s], [0.0, 0.0]]))
    assert x[1].tolist() == [[0.0, 0.0], [0.0, 0.0]]
    no = Encoding(q, q, q, q)
    assert device_affinity(no, torch.tensor([2]), onehot[:1]).shape == (1, 2, 0)


def test_placed_sums_equal_the_one_hot_product():
    from placegym.agents.doppler.features import placed_sums

    gen = torch.Generator().manual_seed(0)
    placed = torch.randint(-1, 5, (3, 40), generator=gen)
    values = torch.randn(40, 8, generator=gen)
    sums, count = placed_sums(placed, values, 5)
    onehot = torch.zeros(3, 40, 6).scatter_(2, (placed + 1).unsqueeze(-1), 1.0)[:, :, 1:]
    torch.testing.assert_close(sums, torch.einsum("snd,nh->sdh", onehot, values))
    assert count.tolist() == onehot.sum(dim=1).tolist()


def test_sample_rows_pick_what_sample_index_picks():
    """The episode player's vectorised sampling draws, row by row, exactly the entry that the
    one-row sampler draws from the legal logits with the same uniform draw."""
    from placegym.agents.doppler.episodes import sample_index, sample_rows

    gen = np.random.default_rng(0)
    for _ in range(300):
        b, width = gen.integers(1, 40), gen.integers(1, 12)
        logits = (gen.standard_normal((b, width)) * gen.choice([0.1, 3, 60])).astype(np.float32)
        logits[gen.random((b, width)) < 0.2] = 0.5  # exact ties
        legal = gen.random((b, width)) < 0.6
        legal[np.arange(b), gen.integers(0, width, b)] = True
        seeds = gen.integers(2**31, size=b)
        draws = [np.random.default_rng(s).random() for s in seeds]
        picks = sample_rows(logits, legal, draws)
        for row, mask, s, pick in zip(logits, legal, seeds, picks):
            ids = np.flatnonzero(mask)
            assert ids[sample_index(row[ids], np.random.default_rng(s))] == pick
    # a draw whose mass rounds to the total takes the last legal entry, as one row does
    logits = np.array([[0.0, 0.0, -200.0, 0.0]], dtype=np.float32)
    assert sample_rows(logits, np.array([[True, True, True, False]]), [1 - 2**-53]).tolist() == [2]


def test_env_pool_envs_are_compact_share_the_reference_and_play_the_same_episodes():
    from placegym.envs import load_cluster
    from placegym.envs.mdp.reward import SharedReference
    from placegym.envs.workloads import chainmm
    from placegym.train.evaluate import EnvPool

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1))
    cluster = load_cluster("p100x4")
    pool = EnvPool(reward="relative")
    g = chainmm()
    pooled = pool.get(g, cluster, 2)
    assert pool.get(g, cluster, 2) == pooled and pool.env_kwargs == {"reward": "relative"}
    assert all(e.compact and isinstance(e.reference, SharedReference) for e in pooled)
    assert pooled[0].reference is pooled[1].reference
    full = [PlacementEnv(g, cluster) for _ in range(2)]
    a = play_episodes(
        policy, pooled, [0, 1], rng=np.random.default_rng(2), graph_cache=pool.graph_cache
    )
    b = play_episodes(policy, full, [0, 1], rng=np.random.default_rng(2))
    for x, y in zip(a, b):
        assert x.info["reference_makespan"] == y.info["reference_makespan"]
        assert (x.plc_action == y.plc_action).all() and (x.sel_action == y.sel_action).all()
        assert (x.sel_rows == y.sel_rows).all() and (x.sel_ready == y.sel_ready).all()
        assert (x.plc_dev == y.plc_dev).all()


@pytest.mark.parametrize("graph,cluster", [("llama_block", "p100x4"), ("chainmm", "v100x8")])
def test_rule_features_mark_the_critical_path_teachers_tie_sets(graph, cluster):
    from placegym.agents.doppler.features import plc_rules, sel_rules

    teacher = get_teacher("critical_path")
    env = PlacementEnv(graph, cluster)
    obs, _ = env.reset(seed=0)
    g = GraphInputs.from_obs(obs)
    checked = [0, 0]
    done = False
    while not done:
        state = env.unwrapped.state
        if obs["phase"][0] == 0:
            frontier = torch.from_numpy(np.flatnonzero(obs["action_mask"][: g.num_nodes]))
            flags = sel_rules(g, torch.zeros_like(frontier), frontier)
            assert (flags[:, 0] >= 0).all()
            expected = teacher.select_actions(state).tolist()
            assert frontier[flags[:, 1] > 0].tolist() == expected
            action = expected[-1]
        else:
            flags = plc_rules(torch.from_numpy(obs["device"]).unsqueeze(0))[0, :, 0]
            expected = teacher.place_actions(state).tolist()
            legal = obs["action_mask"][: len(flags)] > 0
            assert np.flatnonzero((flags.numpy() > 0) & legal).tolist() == expected
            action = expected[-1]
        checked[int(obs["phase"][0])] += 1
        obs, _, done, _, _ = env.step(action)
    assert min(checked) == env.unwrapped.graph.num_nodes


def test_rules_policy_reads_the_rule_features():
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1, rules=True))
    assert (
        policy.sel_dynamic.in_features
        == DopplerPolicy(PolicyConfig(hidden=8)).sel_dynamic.in_features + 2
    )
    [rec] = play_episodes(
        policy, [PlacementEnv("ffnn", "p100x4")], [0], rng=np.random.default_rng(0)
    )
    sc = score(policy, [rec])[0]
    assert torch.isfinite(sc.logp).all()


def test_hint_quality_is_the_log_makespan_over_the_best_hint():
    from placegym.agents.doppler.hints import hint_placements, hint_quality
    from placegym.envs import get_preset, simulate
    from placegym.envs.workloads import ffnn

    g, c = ffnn(), get_preset("v100x8")
    placements = hint_placements(g, c, ("critical_path", "heft"))
    cp, heft = (simulate(g, c, p).makespan for p in placements)
    q = hint_quality(g, c, placements)
    assert q.dtype == np.float32
    np.testing.assert_allclose(q, [np.log(cp / heft), 0.0], rtol=1e-6)
    assert hint_quality(g, c, []).shape == (0,)


def test_hint_quality_policy_reads_the_quality():
    cfg = PolicyConfig(hidden=8, layers=1, hints=["critical_path", "heft"], hint_quality=True)
    policy = DopplerPolicy(cfg)
    base = DopplerPolicy(PolicyConfig(hidden=8, layers=1, hints=["critical_path", "heft"]))
    assert policy.plc_head[0].in_features == base.plc_head[0].in_features + 4 + 3
    env = PlacementEnv("ffnn", "v100x8")
    [rec] = play_episodes(policy, [env], [0], rng=np.random.default_rng(0))
    assert rec.graph.quality.shape == (2,) and float(rec.graph.quality.min()) == 0.0
    assert float(rec.graph.quality[0]) > 0.2  # critical_path is 30% slower here
    assert torch.isfinite(score(policy, [rec])[0].logp).all()
    enc = policy.encode(rec.graph)
    node, placed = torch.tensor([0]), torch.full((1, env.graph.num_nodes), -1)
    dev = torch.rand(1, 8, 7, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = policy.plc_logits(enc, node, placed, dev)
        enc.graph = dataclasses.replace(rec.graph, quality=torch.zeros(2))
        b = policy.plc_logits(enc, node, placed, dev)
    assert not torch.equal(a, b)
    with pytest.raises(ValueError, match="hint_quality: needs hints"):
        PolicyConfig(hint_quality=True)


def test_best_hint_features_are_those_of_the_first_best_hint():
    from placegym.agents.doppler.features import best_hint_share

    shares = torch.arange(2 * 3 * 9, dtype=torch.float32).reshape(2, 3, 9)  # 3 hints
    g = GraphInputs(
        x=torch.zeros(2, 7),
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        edge_attr=torch.zeros(0, 2),
        down=torch.full((2,), -1),
        up=torch.full((2,), -1),
        quality=torch.tensor([0.1, 0.0, 0.0]),
    )
    assert torch.equal(best_hint_share(g, shares), shares[..., 3:6])
    no_quality = dataclasses.replace(g, quality=None)
    assert torch.equal(best_hint_share(no_quality, shares), torch.zeros(2, 3, 3))
