"""Phase I imitation and phase II RL on tiny hand-made problems with obvious answers."""

import dataclasses

import numpy as np
import pytest
import torch
from dagger import imitate
from simcases import fork_join, graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import EpisodeRecord, frontier_logits, play_episodes
from placegym.agents.doppler.inputs import graph_inputs
from placegym.agents.doppler.scoring import score
from placegym.envs import PlacementEnv, simulate
from placegym.teachers import get_teacher
from placegym.train.config import RLConfig
from placegym.train.evaluate import evaluate_policy
from placegym.train.imitation import teacher_agreement
from placegym.train.optim import make_optimizer
from placegym.train.rl import group_advantages, rl_update


def independent(n=6):
    """n independent unit nodes on two devices: the best split is n/2 per device."""
    return graph([1.0] * n, [])


def test_imitation_lowers_the_loss_and_reaches_the_teachers_makespan():
    torch.manual_seed(0)
    g, cluster = fork_join(), unit_cluster(2)
    teacher = get_teacher("critical_path")
    target = simulate(g, cluster, teacher.place(g, cluster)).makespan
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=2))
    losses, records = imitate(policy, g, cluster, teacher, updates=60, episodes=8)
    assert np.mean(losses[-5:]) < 0.25 * np.mean(losses[:5])
    assert teacher_agreement(records) > 0.9
    res = evaluate_policy(policy, g, cluster, k=4, seed=0)
    assert res.greedy <= target * (1 + 1e-9)


def _train_rl(algo: str, updates: int) -> tuple[float, float]:
    torch.manual_seed(0)
    g, cluster = independent(6), unit_cluster(2)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=1))
    cfg = RLConfig(
        algo=algo,
        lr=1e-2,
        lr_schedule="constant",
        entropy_coef=0.0,
        ppo_epochs=3,
        ppo_minibatches=2,
    )
    opt, _ = make_optimizer(policy.parameters(), cfg.lr, "constant", updates, 1.0)
    envs = [PlacementEnv(g, cluster) for _ in range(16)]
    rng = np.random.default_rng(1)
    returns = []
    for _ in range(updates):
        records = play_episodes(policy, envs, list(range(16)), rng=rng)
        returns.append(np.mean([r.ret for r in records]))
        rl_update(policy, opt, records, [0] * 16, cfg, rng)
    return float(np.mean(returns[:3])), float(np.mean(returns[-3:]))


@pytest.mark.parametrize("algo", ["reinforce", "ppo"])
def test_rl_improves_the_mean_return_on_a_tiny_problem(algo):
    first, last = _train_rl(algo, 25)
    # random placements of 6 unit nodes on 2 devices average about -0.4 against the
    # optimal split (the critical-path reference); learning closes most of that gap
    assert first < -0.2
    assert last > first + 0.15
    assert last > -0.12


def _record(rewards) -> EpisodeRecord:
    r = np.asarray(rewards, dtype=np.float64)
    empty = np.zeros((len(r) // 2, 1))
    return EpisodeRecord(
        graph=None,
        sel_mask=empty,
        sel_rows=empty,
        sel_ready=empty,
        sel_action=empty,
        plc_node=empty,
        plc_placed=empty,
        plc_dev=empty,
        plc_mask=empty,
        plc_action=empty,
        rewards=r,
        from_teacher=np.zeros(len(r), bool),
        info={"makespan": 1.0},
    )


def test_group_advantages_terminal_and_reward_to_go():
    recs = [_record([0, 0, 0, 1.0]), _record([0, 0, 0, 0.0]), _record([0, 0.5, 0, 0.0])]
    with pytest.raises(ValueError, match="group 8 has one episode"):
        group_advantages(recs, [7, 7, 8], reward_to_go=False, normalize=False)
    adv = group_advantages(recs[:2], [7, 7], reward_to_go=False, normalize=False)
    np.testing.assert_allclose(adv[0].numpy(), [0.5] * 4)
    np.testing.assert_allclose(adv[1].numpy(), [-0.5] * 4)
    adv = group_advantages([recs[0], recs[2]], [0, 0], reward_to_go=True, normalize=False)
    # reward-to-go: [1, 1, 1, 1] and [0.5, 0.5, 0, 0]; baseline = their per-step mean
    np.testing.assert_allclose(adv[0].numpy(), [0.25, 0.25, 0.5, 0.5])
    np.testing.assert_allclose(adv[1].numpy(), [-0.25, -0.25, -0.5, -0.5])
    adv = group_advantages([recs[0], recs[2]], [0, 0], reward_to_go=True, normalize=True)
    assert float(torch.cat(adv).std(unbiased=False)) == pytest.approx(1.0, rel=1e-5)
    with pytest.raises(ValueError, match="mixes episode lengths"):
        group_advantages([recs[0], _record([0, 1.0])], [0, 0], reward_to_go=False, normalize=False)


def test_group_advantages_against_a_baseline_episode():
    recs = [_record([0, 0, 0, 1.0]), _record([0, 0, 0, 0.0]), _record([0, 0.5, 0, 0.0])]
    greedy = {7: _record([0, 0, 0, 0.25]), 8: _record([0, 0, 0.5, 0.0])}
    # one episode of a group is enough when the group has its baseline episode
    adv = group_advantages(recs, [7, 7, 8], reward_to_go=False, normalize=False, baselines=greedy)
    np.testing.assert_allclose(adv[0].numpy(), [0.75] * 4)
    np.testing.assert_allclose(adv[1].numpy(), [-0.25] * 4)
    np.testing.assert_allclose(adv[2].numpy(), [0.0] * 4)  # returns 0.5 = 0.5
    # reward-to-go: [0.5, 0.5, 0, 0] against the baseline's [0.5, 0.5, 0.5, 0]
    adv = group_advantages([recs[2]], [8], reward_to_go=True, normalize=False, baselines=greedy)
    np.testing.assert_allclose(adv[0].numpy(), [0.0, 0.0, -0.5, 0.0])
    # per group: each graph's advantages over their own spread (group 7: 0.75, -0.25)
    recs2 = [*recs, _record([0, 0, 0, 40.0])]
    adv = group_advantages(
        recs2, [7, 7, 8, 8], reward_to_go=False, normalize=True, baselines=greedy, per_group=True
    )
    np.testing.assert_allclose(adv[0].numpy(), [1.5] * 4, rtol=1e-6)  # 0.75 / 0.5
    np.testing.assert_allclose(adv[1].numpy(), [-0.5] * 4, rtol=1e-6)
    np.testing.assert_allclose(adv[2].numpy(), [0.0] * 4, atol=1e-12)
    np.testing.assert_allclose(adv[3].numpy(), [2.0] * 4, rtol=1e-6)  # 39.5 / 19.75
    with pytest.raises(ValueError, match="group 8 has no baseline episode"):
        group_advantages(
            recs, [7, 7, 8], reward_to_go=False, normalize=False, baselines={7: greedy[7]}
        )
    with pytest.raises(ValueError, match="mixes episode lengths"):
        group_advantages(
            recs[:1], [7], reward_to_go=False, normalize=False, baselines={7: _record([0, 1.0])}
        )


def test_tempered_sampling_and_scoring_agree():
    """Episodes sampled at a temperature are drawn from softmax(logits / T), and score()
    at that T gives their log-probabilities: at T = 1 the draws are the untempered ones,
    and as T falls the samples become the greedy episode (whose log-probability at a low
    T is near 0)."""
    torch.manual_seed(0)
    # distinct durations and device speeds: no two actions tie for the greedy choice
    g = graph(
        [1.0, 2.3, 1.7, 3.1, 0.9],
        [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)],
        out_bytes=[0.3, 0.7, 0.2, 0.5, 0.1],
    )
    unit = unit_cluster(2)
    cluster = dataclasses.replace(
        unit, devices=(unit.devices[0], dataclasses.replace(unit.devices[1], flops=1.7))
    )
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=1))
    env = PlacementEnv(g, cluster)

    def actions(recs):
        return [(r.sel_action.tolist(), r.plc_action.tolist()) for r in recs]

    plain = play_episodes(policy, [env], [0], rng=np.random.default_rng(3))
    at_one = play_episodes(policy, [env], [0], rng=np.random.default_rng(3), temperature=1.0)
    assert actions(plain) == actions(at_one)
    greedy = play_episodes(policy, [env], [0], rng=np.random.default_rng(0), greedy=True)
    cold = play_episodes(
        policy, [PlacementEnv(g, cluster) for _ in range(8)], list(range(8)),
        rng=np.random.default_rng(1), temperature=1e-4,
    )  # fmt: skip
    assert all(a == actions(greedy)[0] for a in actions(cold))
    with torch.no_grad():
        cold_logp = score(policy, cold[:1], temperature=1e-4)[0].logp
        warm_logp = score(policy, cold[:1])[0].logp
        half = score(policy, cold[:1], temperature=0.5)[0]
    assert float(cold_logp.sum()) == pytest.approx(0.0, abs=1e-4)
    assert float(warm_logp.sum()) < float(half.logp.sum()) < 0.0
    # at T the log-probabilities are those of softmax(logits / T): log π_T(a) = z_a / T - lse
    obs, _ = env.reset(seed=0)
    inputs = graph_inputs(policy, obs, g, cluster)
    frontier = np.flatnonzero(cold[0].sel_mask[0])
    with torch.no_grad():
        dyn = obs["node_dynamic"][None, : g.num_nodes]  # the first SEL state's
        z = frontier_logits(policy, inputs, policy.encode(inputs), dyn, [frontier])
    want = torch.log_softmax(torch.from_numpy(z[0]) / 0.5, 0)
    taken = int(np.flatnonzero(frontier == cold[0].sel_action[0])[0])
    assert float(half.logp[0]) == pytest.approx(float(want[taken]), abs=1e-5)


def test_self_critical_rl_improves_on_a_tiny_problem():
    """baseline: greedy (the greedy episode's return as baseline) at a temperature: the
    greedy pass itself reaches the optimum of the fork-join (from 0.3 below it)."""
    torch.manual_seed(0)
    g, cluster = fork_join(), unit_cluster(2)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=1))
    cfg = RLConfig(
        lr=1e-2, lr_schedule="constant", entropy_coef=0.0, baseline="greedy", temperature=0.7
    )
    opt, _ = make_optimizer(policy.parameters(), cfg.lr, "constant", 30, 1.0)
    envs = [PlacementEnv(g, cluster) for _ in range(8)]
    rng = np.random.default_rng(1)
    greedy_returns = []
    for _ in range(30):
        base = play_episodes(policy, envs[:1], [0], rng=rng, greedy=True)[0]
        greedy_returns.append(base.ret)
        records = play_episodes(policy, envs, list(range(8)), rng=rng, temperature=0.7)
        rl_update(policy, opt, records, [0] * 8, cfg, rng, baselines={0: base})
    assert greedy_returns[0] < -0.2
    # the critical-path reference is optimal here: return 0 is the optimum
    assert greedy_returns[-5:] == pytest.approx([0.0] * 5, abs=1e-9)


def test_nest_shaped_reward_to_go_sums_to_the_relative_return():
    g, cluster = fork_join(), unit_cluster(2)
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1))
    envs = [PlacementEnv(g, cluster, reward="nest") for _ in range(2)]
    recs = play_episodes(policy, envs, [0, 1], rng=np.random.default_rng(0))
    for r in recs:
        assert r.ret == pytest.approx(1 - r.makespan / r.info["reference_makespan"])


def test_sel_context_reads_producer_finish_times():
    from placegym.agents.doppler.features import sel_context
    from placegym.agents.nn.encoder import GraphInputs

    # 0 -> 2, 1 -> 2, 1 -> 3; edge comm times 0.1, 0.2, 0.3
    g = GraphInputs(
        x=torch.zeros(4, 7),
        edge_index=torch.tensor([[0, 1, 1], [2, 2, 3]]),
        edge_attr=torch.tensor([[0.1, 0.0], [0.2, 0.0], [0.3, 0.0]]),
        down=torch.full((4,), -1),
        up=torch.full((4,), -1),
    )
    dyn = torch.zeros(2, 4, 6)
    dyn[0, 0, 5], dyn[0, 1, 5] = 0.5, 0.25  # state 0: nodes 0, 1 finish at 0.5, 0.25
    dyn[1, 1, 5] = 0.25  # state 1: only node 1 placed; its consumer 3 is ready
    step, node = torch.tensor([0, 0, 1]), torch.tensor([2, 3, 3])
    out = sel_context(g, dyn, step, node)
    expected = [
        [0.5 - 0.5, max(0.5 + 0.1, 0.25 + 0.2) - 0.5, 0.5 - 0.25],
        [0.25 - 0.5, 0.25 + 0.3 - 0.5, 0.0],
        [0.0, 0.25 + 0.3 - 0.25, 0.0],
    ]
    torch.testing.assert_close(out, torch.tensor(expected))


@pytest.mark.parametrize("cells", [None, 1], ids=["by-graph", "by-episode"])
@pytest.mark.parametrize("algo", ["reinforce", "ppo"])
def test_rl_steps_by_graph_give_the_whole_batch_gradient(algo, cells, monkeypatch):
    """REINFORCE and a PPO step back-propagate one group of episodes at a time (a graph's,
    or each episode alone at ``BACKWARD_CELLS=1``): the gradient and the loss metrics of
    the whole batch's loss (episodes of two graphs, 3 and 1 of them, with the
    self-imitation term on the scored episodes)."""
    import placegym.agents.doppler.scoring as scoring
    from placegym.train.losses import ImitationTerm, imitation_loss, mean_steps
    from placegym.train.rl import _ppo_step, reinforce_update

    if cells is not None:
        monkeypatch.setattr(scoring, "BACKWARD_CELLS", cells)

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=16, layers=1))
    c = unit_cluster(2)
    big, small = independent(6), fork_join()
    envs = [PlacementEnv(g, c) for g in (big, small, big, big)]
    records = play_episodes(
        policy, envs, [0, 1, 2, 3], rng=np.random.default_rng(0),
        teacher=get_teacher("critical_path"), record_teacher=True,
    )  # fmt: skip
    adv = [torch.full((len(r.rewards),), a) for r, a in zip(records, (0.5, -1.0, 2.0, -0.3))]
    cfg = RLConfig(algo=algo, entropy_coef=0.1, max_grad_norm=0.0, temperature=0.7)
    term = ImitationTerm(coef=0.5)
    scores = score(policy, records, temperature=0.7)
    old = [s.logp.detach() + 0.05 * (i + 1) for i, s in enumerate(scores)]  # ratios ≠ 1
    if algo == "ppo":
        lo, hi = 1 - cfg.ppo_clip, 1 + cfg.ppo_clip
        ratio = [torch.exp(s.logp - o) for s, o in zip(scores, old)]
        surr = [torch.minimum(r * a, r.clamp(lo, hi) * a) for r, a in zip(ratio, adv)]
        policy_loss = -mean_steps(surr)
    else:
        policy_loss = -mean_steps([s.logp * a for s, a in zip(scores, adv)])
    entropy = mean_steps([s.entropy for s in scores])
    whole = policy_loss - 0.1 * entropy + 0.5 * imitation_loss(scores)
    expected = torch.autograd.grad(whole, list(policy.parameters()), allow_unused=True)
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    if algo == "ppo":
        mb = np.array([3, 0, 1, 2])
        metrics = _ppo_step(policy, opt, records, adv, old, mb, cfg, term)
    else:
        metrics = reinforce_update(policy, opt, records, adv, cfg, term)
        assert metrics["losses/self_imitation"] == pytest.approx(
            imitation_loss(scores).item(), rel=1e-5
        )
    for p, g in zip(policy.parameters(), expected):
        if g is None:
            assert p.grad is None or not p.grad.any()
        else:
            torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)
    assert metrics["losses/policy"] == pytest.approx(policy_loss.item(), rel=1e-5)
    assert metrics["losses/entropy"] == pytest.approx(entropy.item(), rel=1e-5)
    for a, b in zip(scoring.score_by_group(policy, records, 0.7), scores):  # PPO's old ones
        assert not a.logp.requires_grad
        torch.testing.assert_close(a.logp, b.logp.detach(), rtol=1e-6, atol=1e-7)


def test_graph_groups_split_a_graphs_records_by_scored_cells():
    from types import SimpleNamespace

    from placegym.agents.doppler.scoring import graph_groups, scored_cells

    a, b = object(), object()

    def rec(g, pairs, states, devices):
        return SimpleNamespace(
            graph=g, sel_rows=np.zeros((pairs, 6)), plc_mask=np.zeros((states, devices), bool)
        )

    records = [rec(a, 10, 2, 1), rec(b, 5, 1, 1), rec(a, 10, 2, 1), rec(a, 30, 2, 1)]
    assert [scored_cells(r) for r in records] == [26, 13, 26, 46]
    assert graph_groups(records) == [[0, 2, 3], [1]]
    assert graph_groups(records, 52) == [[0, 2], [3], [1]]
    assert graph_groups(records, 1) == [[0], [2], [3], [1]]
