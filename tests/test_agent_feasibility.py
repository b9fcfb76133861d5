"""Agents never end over memory where a placement fits: an untrained policy (whose greedy
pass is over memory on most memory-tight instances) placed through ``AgentPlacer`` in every
mode, and the bench's best-of-K, are feasible and keep every group whole."""

import numpy as np
import pytest
import torch

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.decoder import Decoder
from placegym.envs import simulate
from placegym.envs.core.placement import split_group
from placegym.envs.suites import get_suite
from placegym.train.evaluate import AgentPlacer

INSTANCES = [
    ("memory-tight-v0", "random_dag-128-s101@p100x4-mem0.9"),
    ("memory-tight-v0", "llama_layer-1x16x16@v100x8-mem0.7-r1-2"),
    ("memory-tight-v0", "moe-8x2x4-s0@h100-2x8-mem0.6-r1-2"),
    ("published-v0", "latency-layer-gnmt_inference"),
]


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return DopplerPolicy(PolicyConfig(hidden=16, layers=2)).eval()


CASES = [(*inst, "greedy") for inst in INSTANCES] + [
    (*INSTANCES[0], "sample"),
    (*INSTANCES[2], "best_of_k"),
]


@pytest.mark.parametrize("suite,iid,mode", CASES)
def test_agent_placements_fit(policy, suite, iid, mode):
    inst = get_suite(suite).instance(iid)
    g, c = inst.graph, inst.cluster
    p = AgentPlacer(policy, mode=mode, k=4).place(g, c, seed=1)
    assert split_group(g, p.device[None]) is None
    s = simulate(g, c, p)
    assert not s.oom, s.infeasibility


def test_the_repair_is_needed_and_leaves_a_fitting_placement_alone(policy):
    inst = get_suite("memory-tight-v0").instance("random_dag-128-s101@p100x4-mem0.9")
    g, c = inst.graph, inst.cluster
    raw = Decoder(policy, g, c).greedy()
    assert simulate(g, c, raw).oom  # the policy alone is over memory here
    inst = get_suite("published-v0").instance("latency-layer-bert24_inference")
    g, c = inst.graph, inst.cluster
    raw = Decoder(policy, g, c).greedy()
    if not simulate(g, c, raw).oom:  # fits: the placer returns the policy's own placement
        p = AgentPlacer(policy).place(g, c)
        assert np.array_equal(p.device, raw.device) and np.array_equal(p.order, raw.order)


def test_the_search_moves_groups_whole(policy):
    # past the greedy pass the search anneals: every candidate keeps its groups whole
    from placegym.agents.doppler.search import SearchConfig, policy_search

    inst = get_suite("memory-tight-v0").instance("random_dag-128-s101@p100x4-mem0.9")
    g, c = inst.graph, inst.cluster
    assert g.groups
    res = policy_search(policy, g, c, SearchConfig(budget=400), seed=0)
    assert res.stages.get("improve", 0) > 0, res.stages  # the annealing stage ran
    assert split_group(g, res.placement.device[None]) is None
    assert not simulate(g, c, res.placement).oom
