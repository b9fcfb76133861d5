"""Inference-time search with the dual policy: budget, anytime curve, determinism."""

import numpy as np
import pytest
import torch

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.decoder import Decoder
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.search import PolicySearch, SearchConfig, policy_search
from placegym.envs import PlacementEnv, load_cluster, simulate
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher


@pytest.fixture
def policy(one_torch_thread):
    torch.manual_seed(0)
    return DopplerPolicy(PolicyConfig(hidden=16, layers=2)).eval()


def test_budget_curve_and_stages(policy):
    g, c = make_graph("chainmm"), load_cluster("p100x4")
    res = policy_search(policy, g, c, SearchConfig(budget=120, beam=4, samples=8), seed=3)
    assert res.calls == 120 == sum(res.stages.values())
    assert list(res.stages) == ["starts", "greedy", "beam", "samples", "improve", "repair"]
    assert res.stages["repair"] == 0  # memory cannot bind
    assert res.stages["starts"] == 5 and res.stages["greedy"] == 1
    assert res.stages["beam"] <= 4 and res.stages["samples"] <= 8
    assert (np.diff(res.curve) <= 0).all()
    assert res.curve[-1] == res.makespan == simulate(g, c, res.placement).makespan
    assert res.makespan < res.greedy  # the search improved on the greedy placement
    [greedy] = play_episodes(
        policy, [PlacementEnv(g, c)], [0], rng=np.random.default_rng(0), greedy=True
    )
    assert res.greedy == greedy.makespan and res.curve[5] == min(res.greedy, res.curve[4])
    alone = policy_search(policy, g, c, SearchConfig(budget=10, starts=()), seed=3)
    assert alone.curve[0] == alone.greedy == greedy.makespan  # no starts: the greedy first


def test_search_is_seeded(policy):
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    cfg = SearchConfig(budget=60, starts=(), beam=2, samples=4)  # nest's start is optimal
    a, b, other = (policy_search(policy, g, c, cfg, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.curve, b.curve)
    assert np.array_equal(a.placement.device, b.placement.device)
    assert np.array_equal(a.placement.order, b.placement.order)
    assert not np.array_equal(a.curve, other.curve)


def test_search_starts_from_anneals_heuristic_placements(policy):
    from placegym.teachers.anneal import STARTS

    g, c = make_graph("chainmm"), load_cluster("p100x4")
    res = policy_search(policy, g, c, SearchConfig(budget=6, beam=0, samples=0), seed=0)
    assert res.stages == {"starts": len(STARTS), "greedy": 1, "improve": 0, "repair": 0}
    best_start = min(simulate(g, c, get_teacher(t).place(g, c)).makespan for t in STARTS)
    assert res.makespan == min(res.greedy, best_start) == res.curve[-1]
    alone = policy_search(policy, g, c, SearchConfig(budget=6, starts=(), beam=0, samples=0))
    assert "starts" not in alone.stages and alone.stages["improve"] == 5
    short = policy_search(policy, g, c, SearchConfig(budget=3, beam=0, samples=0))
    assert short.stages == {"starts": 2, "greedy": 1, "improve": 0, "repair": 0}
    with pytest.raises(ValueError, match="nope"):
        policy_search(policy, g, c, SearchConfig(budget=6, starts=("nope",)))


def test_beam_of_width_one_is_greedy(policy):
    g, c = make_graph("llama_block"), load_cluster("p100x4")
    dec = Decoder(policy, g, c)
    greedy = dec.greedy()
    [beam] = dec.beam(1)
    assert np.array_equal(beam.device, greedy.device) and np.array_equal(beam.order, greedy.order)
    beams = dec.beam(3)
    assert len(beams) == 3
    assert len({(b.device.tobytes(), b.order.tobytes()) for b in beams}) == 3


def test_search_reaches_the_optimum_of_a_small_graph(policy):
    from simcases import graph, unit_cluster

    # fork-join with heavy transfers: 0 -> 1..4 -> 5
    g = graph(
        [1, 2, 2, 2, 2, 1],
        [[0, 1], [0, 2], [0, 3], [0, 4], [1, 5], [2, 5], [3, 5], [4, 5]],
        out_bytes=[1, 1, 1, 1, 1, 0],
    )
    c = unit_cluster(2)
    best = simulate(g, c, get_teacher("optimal").place(g, c)).makespan
    res = policy_search(policy, g, c, SearchConfig(budget=300, beam=2, samples=8), seed=0)
    assert res.makespan == pytest.approx(best)


def test_placer_and_config_errors(policy):
    placer = PolicySearch(policy, SearchConfig(budget=20, beam=0, samples=0), name="x")
    g, c = make_graph("chainmm"), load_cluster("p100x4")
    p = placer(g, c, 0)
    assert simulate(g, c, p).makespan == placer.last_result.makespan
    assert placer.last_result.stages.get("beam") is None
    for kw, msg in (
        ({"budget": 0}, "budget: must be >= 1, got 0"),
        ({"temperature": 0.0}, "temperature: must be > 0"),
        ({"t_start": 1e-3, "t_end": 1e-2}, "t_end: must satisfy"),
        ({"policy_moves": 2.0}, r"policy_moves: must be in \[0, 1\]"),
    ):
        with pytest.raises(ValueError, match=msg):
            SearchConfig(**kw)


@pytest.mark.parametrize("workload, cluster", [("chainmm", "p100x4"), ("ffnn", "doppler-unit-4")])
def test_best_of_samples_is_the_best_played_episode(policy, workload, cluster):
    from placegym.agents.doppler.decoder import best_of_samples
    from placegym.train.evaluate import AgentPlacer

    g, c = make_graph(workload), load_cluster(cluster)
    for seed in (0, 5):
        envs = [PlacementEnv(g, c) for _ in range(6)]
        records = play_episodes(policy, envs, [seed] * 6, rng=np.random.default_rng(seed))
        best = min(records, key=lambda r: r.makespan)
        assert len({r.makespan for r in records}) > 1  # the samples differ
        placement, makespan = best_of_samples(policy, g, c, 6, seed)
        assert makespan == best.makespan
        np.testing.assert_array_equal(placement.device, best.info["placement"])
        np.testing.assert_array_equal(placement.order, best.info["order"])
        placed = AgentPlacer(policy, mode="best_of_k", k=6).place(g, c, seed)
        np.testing.assert_array_equal(placed.device, placement.device)
        np.testing.assert_array_equal(placed.order, placement.order)
    with pytest.raises(ValueError, match="k: must be >= 1, got 0"):
        best_of_samples(policy, g, c, 0, 0)


@pytest.mark.parametrize("options", [{}, {"memory_mask": False, "dispatch": "fifo"}])
def test_evaluation_samples_are_the_played_episodes(policy, options):
    from placegym.train.evaluate import EnvPool, evaluate_policy

    g, c = make_graph("llama_block"), load_cluster("p100x4")
    ev = evaluate_policy(policy, g, c, k=5, seed=3, pool=EnvPool(**options))
    envs = [PlacementEnv(g, c, **options) for _ in range(5)]
    records = play_episodes(policy, envs, [3] * 5, rng=np.random.default_rng(3))
    makespans = [r.makespan for r in records]
    best = records[int(np.argmin(makespans))]
    assert ev.sampled == float(np.mean(makespans)) and ev.best == best.makespan
    np.testing.assert_array_equal(ev.best_placement.device, best.info["placement"])
    np.testing.assert_array_equal(ev.best_placement.order, best.info["order"])


def test_an_over_memory_search_is_repaired_and_counts_the_repair(policy):
    from placegym.envs.suites import get_suite

    inst = get_suite("memory-tight-v0").instance("random_dag-128-s101@p100x4-mem0.9")
    g, c = inst.graph, inst.cluster
    assert simulate(g, c, Decoder(policy, g, c).greedy()).oom  # the untrained greedy is over
    res = policy_search(policy, g, c, SearchConfig(budget=1, starts=()), seed=0)
    s = simulate(g, c, res.placement)
    assert not s.oom and res.makespan == s.makespan
    assert res.stages["greedy"] == 1 and res.stages["repair"] >= 2
    assert res.calls == 1 + res.stages["repair"] and res.curve[-1] == res.makespan


def test_the_search_carries_the_live_masks_recompute_set(policy):
    # a training step that fits nothing without recompute: every candidate (the starts,
    # the decodes, the annealing moves guided by a chain of the extended graph) carries
    # the live mask's recompute set, and the best found fits
    from placegym.envs.mdp.state import mask_recompute
    from placegym.envs.suites import get_suite

    suite = get_suite("pipedream-v0")
    inst = next(i for i in suite.instances("test") if i.id == "resnet18-train@p100x2-recompute1.1")
    g, c = inst.graph, inst.cluster
    cfg = SearchConfig(budget=40, memory_mask="live", beam=2, samples=4)
    result = policy_search(policy, g, c, cfg, seed=0)
    assert np.array_equal(result.placement.recompute, mask_recompute(g, c, "live"))
    s = simulate(g, c, result.placement)
    assert not s.oom and s.makespan == pytest.approx(result.makespan)
    assert result.stages["improve"] > 0
