"""Cost-sensitive imitation of the lookahead teacher: regrets recorded per PLC step, the
policy's expected regret scored, and a greedy policy that learns the lookahead's choice."""

import numpy as np
import pytest
import torch
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.scoring import score
from placegym.envs import PlacementEnv
from placegym.teachers import get_teacher
from placegym.train.losses import regret_loss


def outputs_graph():
    """0 -> {1, 2} -> 3; 1 and 2 send 3 bytes (3 s across): heft_rule 7, all on one device 6
    (tests/test_teachers.py::test_lookahead_sees_the_cost_of_outputs)."""
    return graph([1, 2, 2, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[0, 3, 3, 0])


def play(policy, teacher, n, greedy=False, prob=1.0, seed=0):
    g, c = outputs_graph(), unit_cluster(2)
    envs = [PlacementEnv(g, c) for _ in range(n)]
    return play_episodes(
        policy,
        envs,
        list(range(n)),
        rng=np.random.default_rng(seed),
        greedy=greedy,
        teacher=teacher,
        teacher_prob=prob,
        record_teacher=True,
    )


def test_regrets_are_recorded_and_scored(one_torch_thread):
    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    look = get_teacher("lookahead")
    (rec,) = play(policy, look, 1, prob=0.0)
    assert rec.plc_regret is not None and rec.plc_regret.shape == (4, 2)
    assert (rec.plc_regret >= 0).all() and (rec.plc_regret.min(axis=1) == 0).all()
    (sc,) = score(policy, [rec])
    assert sc.plc_regret is not None and sc.plc_regret.shape == (4,)
    # by hand: the policy's PLC probabilities times the recorded regrets
    probs = (sc.logp.view(-1, 2)[:, 1].exp()).detach().numpy()  # of the taken devices
    taken = rec.plc_regret[np.arange(4), rec.plc_action]
    other = rec.plc_regret[np.arange(4), 1 - rec.plc_action]
    expected = probs * taken + (1 - probs) * other
    np.testing.assert_allclose(sc.plc_regret.detach().numpy(), expected, rtol=1e-6)
    assert regret_loss([sc]).item() == pytest.approx(expected.mean(), rel=1e-6)


def test_regret_loss_needs_a_teacher_that_prices_devices(one_torch_thread):
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    (rec,) = play(policy, get_teacher("heft_rule"), 1)
    assert rec.plc_regret is None
    with pytest.raises(ValueError, match="regret_loss: episodes must be recorded with a teacher"):
        regret_loss(score(policy, [rec]))


@pytest.mark.parametrize(
    ("kwargs", "metric"),
    [
        ({"regret_coef": 10.0}, "losses/regret"),
        ({"price_coef": 10.0, "price_temperature": 0.05}, "losses/price"),
    ],
)
def test_cost_sensitive_imitation_learns_the_lookahead_placement(one_torch_thread, kwargs, metric):
    """Expected regret, or the prices as dense targets, beside the tie sets."""
    from placegym.envs import simulate
    from placegym.train.imitation import epsilon, imitation_update
    from placegym.train.optim import make_optimizer

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    look = get_teacher("lookahead")
    opt, _ = make_optimizer(policy.parameters(), 1e-2, "constant", 30, 1.0)
    for update in range(30):
        records = play(policy, look, 4, prob=epsilon(update, 30, 1.0, 0.0, 0.5), seed=update)
        metrics = imitation_update(policy, opt, records, 1.0, **kwargs)
    assert metric in metrics
    (greedy,) = play(policy, look, 1, greedy=True, prob=0.0)
    g, c = outputs_graph(), unit_cluster(2)
    assert greedy.makespan == 6.0 == simulate(g, c, look.place(g, c)).makespan


def test_regret_coef_is_validated():
    from placegym.train.config import config_from_dict

    with pytest.raises(ValueError, match=r"phase1\.regret_coef: must be >= 0, got -1"):
        config_from_dict({"phase1": {"regret_coef": -1.0}})


def test_price_targets_are_the_boltzmann_distribution_of_the_prices(one_torch_thread):
    from placegym.train.losses import price_loss

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    (rec,) = play(policy, get_teacher("lookahead"), 1, prob=0.0)
    t = 0.1
    (sc,) = score(policy, [rec], price_temperature=t)
    # by hand, on the 2 devices (both legal here): q = softmax(-regret / t), -Σ q log π
    assert rec.plc_mask.all()
    p_taken = sc.logp.view(-1, 2)[:, 1].exp().detach().numpy()
    pi = np.where(
        np.arange(2)[None, :] == rec.plc_action[:, None], p_taken[:, None], 1 - p_taken[:, None]
    )
    q = np.exp(-rec.plc_regret / t)
    q /= q.sum(axis=1, keepdims=True)
    expected = -(q * np.log(pi)).sum(axis=1)
    np.testing.assert_allclose(sc.plc_price_ce.detach().numpy(), expected, rtol=1e-5)
    assert price_loss([sc]).item() == pytest.approx(expected.mean(), rel=1e-5)
    (plain,) = score(policy, [rec])  # no temperature: no price term
    with pytest.raises(ValueError, match="price_loss: episodes must be recorded"):
        price_loss([plain])


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [("price_coef", -1.0, "must be >= 0"), ("price_temperature", 0.0, "must be > 0")],
)
def test_price_options_are_validated(key, value, match):
    from placegym.train.config import config_from_dict

    with pytest.raises(ValueError, match=rf"phase1\.{key}: {match}"):
        config_from_dict({"phase1": {key: value}})


@pytest.mark.parametrize("cells", [None, 1], ids=["by-graph", "by-episode"])
def test_imitation_update_by_graph_gives_the_whole_batch_gradient(
    one_torch_thread, cells, monkeypatch
):
    """Back-propagated one group at a time (a graph's records, or each record alone at
    ``BACKWARD_CELLS=1``), weighted by steps: the gradient and the metrics of the loss
    over all records at once (records of two graphs, 4 and 6 nodes)."""
    import placegym.agents.doppler.scoring as scoring
    from placegym.train.imitation import imitation_update
    from placegym.train.losses import imitation_loss, price_loss

    if cells is not None:
        monkeypatch.setattr(scoring, "BACKWARD_CELLS", cells)

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    look = get_teacher("lookahead")
    c = unit_cluster(2)
    other = graph([1, 2, 1, 3, 1, 1], [[0, 1], [0, 2], [1, 3], [2, 4], [3, 5], [4, 5]])
    first = outputs_graph()
    envs = [PlacementEnv(g, c) for g in (first, first, other)]  # two episodes of one graph
    records = play_episodes(
        policy, envs, [0, 1, 2], rng=np.random.default_rng(0), teacher=look,
        teacher_prob=0.5, record_teacher=True,
    )  # fmt: skip
    scores = score(policy, records, price_temperature=0.1)
    whole = imitation_loss(scores) + 2.0 * regret_loss(scores) + 3.0 * price_loss(scores)
    expected = torch.autograd.grad(whole, list(policy.parameters()), allow_unused=True)
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    metrics = imitation_update(
        policy, opt, records, 0.0, regret_coef=2.0, price_coef=3.0, price_temperature=0.1
    )
    for p, g in zip(policy.parameters(), expected):
        if g is None:
            assert p.grad is None or not p.grad.any()
        else:
            torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)
    assert metrics["losses/imitation"] == pytest.approx(imitation_loss(scores).item(), rel=1e-6)
    assert metrics["losses/regret"] == pytest.approx(regret_loss(scores).item(), rel=1e-6)
    assert metrics["losses/price"] == pytest.approx(price_loss(scores).item(), rel=1e-6)


def test_scoring_by_checkpointed_chunks_gives_the_same_values_and_gradients(
    one_torch_thread, monkeypatch
):
    """Past SEL_CHUNK pairs the SEL head runs by recomputed chunks: same scores, same
    gradients as in one piece."""
    import placegym.agents.doppler.scoring as scoring

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    g = graph([1] * 8, [[0, i] for i in range(1, 7)] + [[i, 7] for i in range(1, 7)])
    records = play_episodes(
        policy, [PlacementEnv(g, c) for c in [unit_cluster(2)] * 2], [0, 1],
        rng=np.random.default_rng(0), teacher=get_teacher("heft_rule"), record_teacher=True,
    )  # fmt: skip
    pairs = sum(int(r.sel_mask.sum()) for r in records)

    def run():
        scores = score(policy, records)
        loss = torch.cat([s.logp for s in scores]).sum()
        return loss.item(), torch.autograd.grad(loss, list(policy.sel_tail.parameters()))

    whole, whole_grad = run()
    monkeypatch.setattr(scoring, "SEL_CHUNK", 5)
    assert pairs > 2 * scoring.SEL_CHUNK  # three chunks at least
    chunked, chunked_grad = run()
    assert chunked == pytest.approx(whole, rel=1e-6)
    for a, b in zip(chunked_grad, whole_grad):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
