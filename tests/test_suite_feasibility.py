"""On the test splits where memory binds, every memory-aware teacher is feasible on every
instance that some placement fits, and the rest carry a certificate that none does."""

import pytest

from placegym.envs import simulate
from placegym.envs.analysis.memory import memory_infeasibility
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
