"""On the test splits where memory binds, every memory-aware teacher is feasible on every
instance that some placement fits, and the rest carry a certificate that none does; on
the training steps of pipedream-v0 (live tensors binding, some only fitting with
recomputation) every one stays within memory."""

import functools

import pytest

from placegym.envs import simulate
from placegym.envs.analysis.memory import (
    fit_certificate,
    memory_infeasibility,
    stash_infeasibility,
)
from placegym.envs.core.placement import split_group
from placegym.envs.suites import get_suite
from placegym.teachers import make_teacher

TEACHERS = ["critical_path", "heft", "nest", "metis", "anneal"]
SPLITS = [("memory-tight-v0", "test"), ("published-v0", "test"), ("training-v0", "test")]


def instances():
    for suite, split in SPLITS:
        yield from get_suite(suite).instances(split)


@pytest.mark.parametrize("name", TEACHERS)
def test_teachers_are_feasible_on_every_instance_that_fits(name):
    certified = []
    for inst in instances():
        why = memory_infeasibility(inst.graph, inst.cluster)
        if why is not None:
            certified.append(inst.id)
            continue
        p = make_teacher(name, seed=0).place(inst.graph, inst.cluster)
        assert split_group(inst.graph, p.device[None]) is None, inst.id
        s = simulate(inst.graph, inst.cluster, p)
        assert not s.oom, f"{name} on {inst.id}: {s.infeasibility}"
    # the only instances no placement fits: BERT-L3's and L6's 358 MiB logits
    assert certified == [
        "latency-operator-bert_l-3_inference",
        "latency-operator-bert_l-6_inference",
    ]


@pytest.mark.slow
def test_fortified_lookahead_is_feasible_on_every_instance_that_fits():
    for inst in instances():
        if memory_infeasibility(inst.graph, inst.cluster) is None:
            p = make_teacher("fortified_lookahead").place(inst.graph, inst.cluster)
            assert not simulate(inst.graph, inst.cluster, p).oom, inst.id


@functools.cache
def certified_training_steps(split: str = "test") -> tuple:
    """pipedream-v0's instances where a placement is certified to fit (live tensors
    included, or with recomputation): all of them, by construction of the suite."""
    found = tuple(get_suite("pipedream-v0").instances(split))
    for inst in found:
        assert fit_certificate(inst.graph, inst.cluster) is not None, inst.id
    return found


@pytest.mark.parametrize("name", ["critical_path", "heft_rule", "heft", "nest", "metis"])
def test_teachers_keep_training_steps_within_memory(name):
    for inst in certified_training_steps():
        p = make_teacher(name, seed=0).place(inst.graph, inst.cluster)
        s = simulate(inst.graph, inst.cluster, p)
        assert not s.oom, f"{name} on {inst.id}: {s.infeasibility}"
        if stash_infeasibility(inst.graph, inst.cluster) is not None:
            assert p.recompute.size, inst.id  # only recomputation fits there


@pytest.mark.slow
@pytest.mark.parametrize("name", ["anneal", "lookahead", "fortified_lookahead"])
def test_searches_keep_training_steps_within_memory(name):
    for split in ("train", "test"):
        for inst in certified_training_steps(split):
            p = make_teacher(name).place(inst.graph, inst.cluster)
            assert not simulate(inst.graph, inst.cluster, p).oom, f"{name} on {inst.id}"
