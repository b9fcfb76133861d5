"""The compiled per-state inputs of the dual policy (placegym.agents.doppler._kernels) against the
plain torch formulations they replace, kept here as oracles: equal bits, forward and
gradient, so that training gives the same weights with either."""

import numpy as np
import pytest
import torch

import placegym.agents.doppler.features as features_module
import placegym.agents.doppler.inputs as inputs_module
from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.features import placed_sums, sel_context, sibling_share
from placegym.agents.doppler.scoring import score
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs import PlacementEnv


# ---------------------------------------------------------------- oracles (torch ops)
def placed_sums_oracle(placed, values, d):
    s = placed.shape[0]
    st, v = torch.nonzero(placed >= 0, as_tuple=True)
    flat = st * d + placed[st, v]
    sums = torch.zeros(s * d, values.shape[-1], dtype=values.dtype).index_add(0, flat, values[v])
    count = torch.bincount(flat, minlength=s * d).to(values.dtype)
    return sums.view(s, d, -1), count.view(s, d)


def sibling_share_oracle(g, node, placed, d, dtype=torch.float32):
    s = placed.shape[0]
    if g is None or g.siblings is None:
        return torch.zeros(s, d, dtype=dtype)
    ptr, idx, weight = g.siblings
    counts = ptr[node + 1] - ptr[node]
    step = torch.repeat_interleave(torch.arange(s), counts)
    first = torch.repeat_interleave(ptr[node], counts)
    offset = torch.arange(int(counts.sum())) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts
    )
    entry = first + offset
    w = weight[entry].to(dtype)
    where = placed[step, idx[entry]]
    on = where >= 0
    share = torch.zeros(s * d, dtype=dtype).index_add_(0, step[on] * d + where[on], w[on])
    total = torch.zeros(s, dtype=dtype).index_add_(0, step, w)
    return share.view(s, d) / total.clamp(min=1e-12).unsqueeze(-1)


def sel_context_oracle(g, dyn, step, node):
    est = dyn[..., 5]
    src, dst = g.edge_index
    index = dst.unsqueeze(0).expand(est.shape[0], -1)
    sent = est[:, src]
    zero = torch.zeros_like(est)
    local = zero.scatter_reduce(1, index, sent, reduce="amax", include_self=True)
    remote = zero.scatter_reduce(
        1, index, sent + g.edge_attr[:, 0], reduce="amax", include_self=True
    )
    now = est.max(dim=1).values[step] if est.shape[1] else torch.zeros(len(step))
    ready = local[step, node]
    first = torch.full((est.shape[0],), torch.inf, dtype=est.dtype)
    first = first.scatter_reduce(0, step, ready, reduce="amin", include_self=True)
    return torch.stack([ready - now, remote[step, node] - now, ready - first[step]], dim=-1)


# ---------------------------------------------------------------- random states
def nested_states(s, n, d, gen):
    """``(s, n)`` placements as along an episode: state k has k nodes placed (mod n+1),
    in one random order, on random devices."""
    order = torch.randperm(n, generator=gen)
    placed = torch.full((s, n), -1, dtype=torch.int64)
    for k in range(s):
        first = order[: k % (n + 1)]
        placed[k, first] = torch.randint(0, d, (len(first),), generator=gen)
    return placed


def graph_inputs(n, seed):
    """A random DAG's policy inputs (features in [0, 1), some edges)."""
    rng = np.random.default_rng(seed)
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 3 / n]
    obs = {
        "node_static": rng.random((n, 7)).astype(np.float32),
        "edge_index": np.array(edges, dtype=np.int64).reshape(-1, 2).T,
        "edge_attr": rng.random((len(edges), 2)).astype(np.float32),
        "node_mask": np.ones(n, np.int8),
        "edge_mask": np.ones(len(edges), np.int8),
    }
    return GraphInputs.from_obs(obs)


def equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_placed_sums_and_gradient_equal_index_add(dtype, one_torch_thread):
    gen = torch.Generator().manual_seed(1)
    for s, n, d, h in [(1, 1, 1, 1), (300, 57, 3, 33), (64, 128, 4, 64), (5, 0, 2, 3)]:
        placed = nested_states(s, n, d, gen)
        grad = torch.randn(s, d, h, generator=gen, dtype=dtype) * 1e3
        got, want = [], []
        for fn, out in ((placed_sums, got), (placed_sums_oracle, want)):
            values = torch.randn(n, h, generator=torch.Generator().manual_seed(2), dtype=dtype)
            values.requires_grad_()
            sums, count = fn(placed, values, d)
            (g,) = torch.autograd.grad(sums, values, grad)
            out += [sums.detach(), count, g]
        assert all(equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sibling_share_equals_index_add(dtype, one_torch_thread):
    gen = torch.Generator().manual_seed(3)
    for n, s, d in [(1, 2, 2), (40, 200, 3), (128, 64, 8)]:
        g = graph_inputs(n, seed=n)
        placed = nested_states(s, n, d, gen)
        node = torch.randint(0, n, (s,), generator=gen)
        got = sibling_share(g, node, placed, d, dtype)
        assert equal(got, sibling_share_oracle(g, node, placed, d, dtype))
    assert equal(sibling_share(None, node, placed, d), torch.zeros(s, d))


def test_sel_context_equals_scatter_max():
    gen = torch.Generator().manual_seed(4)
    for n, s in [(1, 1), (40, 50), (128, 16)]:
        g = graph_inputs(n, seed=n + 1)
        dyn = torch.rand(s, n, 6, generator=gen)
        dyn[..., 5] *= torch.rand(s, n, generator=gen) < 0.6  # unplaced nodes: 0
        pairs = torch.rand(s, n, generator=gen) < 0.3
        pairs[0, 0] = True
        step, node = torch.nonzero(pairs, as_tuple=True)
        got = sel_context(g, dyn, step, node)
        assert equal(got, sel_context_oracle(g, dyn, step, node))


def test_scores_and_gradients_equal_with_the_oracles(monkeypatch, one_torch_thread):
    """Scoring real episodes (the PPO update's work) gives the same log-probabilities,
    entropies and parameter gradients with the kernels as with the torch ops, and the
    episodes played with the torch ops record the same readiness and placements."""
    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    envs = [PlacementEnv("ffnn", "p100x4") for _ in range(3)]
    records = play_episodes(policy, envs, [0, 1, 2], rng=np.random.default_rng(5))

    def scored():
        policy.zero_grad()
        scores = score(policy, records)
        loss = torch.stack([s.logp.mean() - 0.1 * s.entropy.mean() for s in scores]).mean()
        loss.backward()
        grads = [p.grad.clone() for p in policy.parameters()]
        return [t.detach() for s in scores for t in (s.logp, s.entropy)] + grads

    fast = scored()
    monkeypatch.setattr(inputs_module, "placed_sums", placed_sums_oracle)
    monkeypatch.setattr(inputs_module, "sibling_share", sibling_share_oracle)
    slow = scored()
    assert all(equal(a, b) for a, b in zip(fast, slow))
    monkeypatch.setattr(features_module, "sel_context", sel_context_oracle)  # read in play
    slow_records = play_episodes(policy, envs, [0, 1, 2], rng=np.random.default_rng(5))
    assert [r.info["placement"].tolist() for r in slow_records] == [
        r.info["placement"].tolist() for r in records
    ]
    assert all((a.sel_ready == b.sel_ready).all() for a, b in zip(records, slow_records))


def test_kernels_reject_out_of_range_states():
    placed = torch.tensor([[0, 2, -1]])
    with pytest.raises(ValueError, match=r"placed: devices must be below 2, got 2"):
        placed_sums(placed, torch.zeros(3, 4), 2)
    g = graph_inputs(3, seed=0)
    with pytest.raises(ValueError, match=r"node: ids must lie in \[0, 3\), got \[3, 3\]"):
        sibling_share(g, torch.tensor([3]), torch.tensor([[0, 1, -1]]), 2)
    with pytest.raises(ValueError, match=r"step, node: pairs must index dyn of shape \(1, 3, 6\)"):
        sel_context(g, torch.zeros(1, 3, 6), torch.tensor([0]), torch.tensor([3]))
