"""The training-instance sampler (envs/suites/sampler.py): seeded and pure per index,
within its ranges, every family, memory-tight draws certified to fit, the suites' test
splits never produced, one clear error per bad argument."""

import dataclasses
import math

import pytest

import placegym.envs.suites.sampler as sampler_module
from placegym.envs import simulate
from placegym.envs.analysis.ccr import ccr
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.suites import get_suite
from placegym.envs.suites.sampler import (
    FAMILIES,
    InstanceSampler,
    held_out_match,
    recipe_key,
)

SMALL = {"nodes": (50, 400), "devices": (2, 16)}


@pytest.fixture(scope="module")
def drawn():
    """Two rounds of the ten families, half of them memory-tight."""
    sampler = InstanceSampler(0, memory_share=0.5, **SMALL)
    return [sampler.sample() for _ in range(2 * len(sampler.families))]


def test_same_seed_same_instances_other_seed_others():
    a, b = InstanceSampler(3, **SMALL), InstanceSampler(3, **SMALL)
    first = [inst.digest for inst, _ in zip(a, range(5))]
    assert first == [b.sample().digest for _ in range(5)]
    assert b.draw(2).digest == first[2]  # instance i depends only on (seed, i)
    other = [inst.digest for inst, _ in zip(InstanceSampler(4, **SMALL), range(5))]
    assert not set(first) & set(other)


def test_every_family_within_the_ranges(drawn):
    assert {inst.recipe["family"] for inst in drawn} == set(FAMILIES)
    for inst in drawn:
        r = inst.recipe
        assert 50 <= inst.graph.num_nodes <= 400 and r["nodes"] == inst.graph.num_nodes
        assert 2 <= inst.cluster.num_devices <= 16
        assert 0.1 <= r["ccr"] <= 10
        assert math.isclose(ccr(inst.graph, inst.cluster), r["ccr"], rel_tol=1e-6)
        assert inst.graph.name == inst.id and inst.id.endswith(r["family"])
        if r["training"]:  # a training step: each forward node and its backward
            assert inst.graph.num_nodes % 2 == 0
            assert inst.graph.op[inst.graph.num_nodes // 2].startswith("bw:")


def test_memory_tight_draws_fit_their_certificate(drawn):
    tight = [inst for inst in drawn if inst.recipe["memory"]]
    assert len(tight) >= 5
    for inst in drawn:
        if inst.recipe["memory"] or memory_may_bind(inst.graph, inst.cluster):
            assert inst.certificate is not None
        if inst.certificate is not None:
            assert not simulate(inst.graph, inst.cluster, inst.certificate).oom
    assert all(memory_may_bind(inst.graph, inst.cluster) for inst in tight)


def test_resident_and_live_tightening_on_heterogeneous_devices():
    sampler = InstanceSampler(
        5,
        nodes=(50, 200),
        devices=(2, 8),
        families=["ffnn", "chainmm"],
        memory_share=1.0,
        training_share=0.3,
        heterogeneous_share=1.0,
    )
    insts = [sampler.sample() for _ in range(8)]
    modes = {inst.recipe["memory"]["mode"] for inst in insts}
    assert modes == {"resident", "live"}  # chainmm has no resident bytes: live tensors
    paths = set()
    for inst in insts:
        kinds = {d.kind for d in inst.cluster.devices}
        assert len(kinds) >= 2
        assert not simulate(inst.graph, inst.cluster, inst.certificate).oom
        assert math.isclose(ccr(inst.graph, inst.cluster), inst.recipe["ccr"], rel_tol=1e-6)
        if inst.recipe["memory"]["mode"] == "resident":  # durations frozen as measured times
            alike = len({(d.flops, d.mem_bandwidth) for d in inst.cluster.devices}) == 1
            if alike:  # tighten itself: one time for every device
                assert not inst.graph.kind_time and (inst.graph.time >= 0).all()
            else:  # per device kind
                assert set(inst.graph.kind_time) == kinds
            paths.add(alike)
    assert paths == {True, False}


def test_a_held_out_digest_is_redrawn(monkeypatch):
    first = InstanceSampler(7, **SMALL).draw(0)
    monkeypatch.setattr(sampler_module, "held_out_digests", lambda: frozenset({first.digest}))
    again = InstanceSampler(7, **SMALL).draw(0)
    assert again.digest != first.digest
    assert again.recipe["redraws"]["held-out instance"] == 1


def test_a_held_out_graph_is_redrawn_on_any_cluster(monkeypatch):
    first = InstanceSampler(8, **SMALL).draw(0)
    r = first.recipe
    key = recipe_key(r["kind"], r["name"], r["params"])
    monkeypatch.setattr(sampler_module, "_held_out_recipes", lambda kind: {key})
    again = InstanceSampler(8, **SMALL).draw(0)
    assert recipe_key(again.recipe["kind"], again.recipe["name"], again.recipe["params"]) != key
    assert again.recipe["redraws"]["held-out graph"] == 1


def test_the_real_guards_know_the_test_splits():
    workloads = sampler_module._held_out_recipes("workload")
    assert recipe_key("workload", "moe", {"seed": 0}) in workloads  # generalize-v0 test
    assert recipe_key("workload", "random_dag", {"nodes": 256, "seed": 100}) in workloads
    assert recipe_key("workload", "ffnn", {}) not in workloads  # a train-only graph
    assert recipe_key("model", "gpt_block", {"parts": 4}) in sampler_module._held_out_recipes(
        "model"
    )
    inst = get_suite("workloads-v0").instance("chainmm-4x3@p100x4")
    assert inst.digest in sampler_module.held_out_digests()
    renamed = dataclasses.replace(inst.graph, name="anything")
    cluster = dataclasses.replace(inst.cluster, name="other")
    assert held_out_match(renamed, cluster) == "workloads-v0/chainmm-4x3@p100x4"
    mine = InstanceSampler(0, **SMALL).draw(0)
    assert held_out_match(mine.graph, mine.cluster) is None


def test_families_out_of_reach_are_skipped_and_named():
    big = InstanceSampler(0, nodes=(5000, 6000))
    assert "gpt_block" not in big.families and "gpt_block" in big.skipped
    assert "random_dag" in big.families


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seed": -1}, "seed: must be >= 0, got -1"),
        ({"seed": "a"}, "seed: expected an integer, got 'a'"),
        ({"nodes": (400, 50)}, r"nodes: expected \(integers low, high\) with 2 <= low"),
        ({"nodes": (1, 50)}, r"nodes: expected \(integers low, high\).*got \(1, 50\)"),
        ({"nodes": 100}, r"nodes: expected \(integers low, high\).*got 100"),
        ({"devices": (1, 8)}, r"devices: expected \(integers low, high\).*got \(1, 8\)"),
        ({"devices": (2, 5000)}, r"devices: .*<= 4096, got \(2, 5000\)"),
        ({"ccr": (0, 1)}, r"ccr: expected \(numbers low, high\).*got \(0, 1\)"),
        ({"memory_share": 1.5}, r"memory_share: expected a probability in \[0, 1\], got 1.5"),
        ({"families": ["nope"]}, "families: unknown family .*got 'nope'"),
        ({"families": []}, r"families: expected a non-empty list of family names, got \[\]"),
        ({"families": "ffnn"}, "families: expected a non-empty list"),
        (
            {"families": ["gpt_block"], "nodes": (5000, 6000)},
            "families: gpt_block reaches 75-1800 nodes, none in",
        ),
        ({"max_redraws": 0}, "max_redraws: must be >= 1, got 0"),
    ],
)
def test_bad_arguments_give_one_clear_error(kwargs, message):
    args = {"seed": 0, **kwargs}
    with pytest.raises(ValueError, match=f"^{message}"):
        InstanceSampler(args.pop("seed"), **args)


def test_a_negative_index_is_refused():
    with pytest.raises(ValueError, match=r"^index: must be >= 0, got -1"):
        InstanceSampler(0, **SMALL).draw(-1)
