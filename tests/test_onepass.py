"""The one-pass greedy decode (:mod:`placegym.agents.doppler.onepass`): the same placement
as :meth:`Decoder.greedy` of the same policy, graph inputs, cluster and mask, bit for bit
(suite instances and random graphs, with co-location groups and memory limits, under the
zoo policies' masks and random policies of every supported input), and not one
simulator call."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from placegym.agents import pretrained
from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.decoder import Decoder
from placegym.agents.doppler.hints import hint_placements
from placegym.agents.doppler.onepass import (
    ONE_PASS_HINTS,
    OnePassDecoder,
    check_one_pass,
    one_pass_greedy,
    plain_hint_placements,
    unbounded_memory,
)
from placegym.agents.doppler.placer import AgentPlacer, torch_threads
from placegym.envs import load_cluster, simulate
from placegym.envs.analysis.levels import durations_on
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.mdp.state import mask_recompute
from placegym.envs.sim import _kernel
from placegym.envs.sim import simulator as sim
from placegym.envs.suites import get_suite
from placegym.envs.workloads import make_graph
from placegym.envs.workloads.memory import add_groups, tighten


@contextlib.contextmanager
def counted_simulations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every call of the simulator's public functions and of its compiled entry points
    (through which every other import of them runs), by name."""
    calls: list[str] = []

    def counting(module, name):
        inner = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls.append(name)
            return inner(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    for name in ("simulate", "simulate_batch", "simulate_makespan"):
        counting(sim, name)
    for name in ("simulate_one", "makespan_one", "run_rows"):
        counting(_kernel, name)
    yield calls


def _instance(suite: str, inst_id: str):
    for split in ("train", "test"):
        for inst in get_suite(suite).instances(split):
            if inst.id == inst_id:
                return inst
    raise KeyError(inst_id)


def _same(a, b) -> bool:
    return (
        np.array_equal(a.device, b.device)
        and np.array_equal(a.order, b.order)
        and np.array_equal(a.recompute, b.recompute)
    )


def _check_equal(policy, graph, cluster, mask) -> None:
    # one torch thread, as the placers decode (small forwards on several threads only
    # wait for each other on a busy machine)
    with torch_threads(1), torch.no_grad():
        dec = Decoder(policy, graph, cluster, mask)
        old = dec.greedy()
        new = OnePassDecoder(policy, graph, cluster, mask, inputs=dec.inputs).greedy()
    assert _same(old, new), f"{graph.name} on {cluster.name} ({mask=})"


SUITE_CASES = [
    ("generalize-v0", "random_dag-96-s0@v100x8"),
    ("generalize-v0", "resnet_stage@p100x4"),
    ("memory-tight-v0", "llama_block-1x16@v100x8-mem0.5"),
    ("memory-tight-v0", "moe-8x2x4-s0@h100-2x8-mem0.6-r1-2"),
    ("published-v0", "latency-layer-resnet50_inference"),
    ("training-v0", "llama_layer-1x16x16-train@h100-2x8-mem0.5-port"),
]


@pytest.mark.parametrize("agent", ["generalist-memory-v1", "generalist-memory-v2"])
@pytest.mark.parametrize(("suite", "inst_id"), SUITE_CASES)
def test_one_pass_decodes_the_zoo_policies_greedy_placement(agent, suite, inst_id):
    inst = _instance(suite, inst_id)
    placer = pretrained(agent)
    _check_equal(placer.policy, inst.graph, inst.cluster, placer.memory_mask)


CONFIGS = [
    PolicyConfig(hidden=16, layers=1),
    PolicyConfig(hidden=16, layers=2, siblings=False, positions=True, rules=True),
    PolicyConfig(hidden=8, layers=1, hints=("critical_path", "heft"), insertion=True),
    PolicyConfig(hidden=16, layers=1, hints=("metis",), rules=True, topology=True),
    PolicyConfig(hidden=8, layers=1, hints=("nest",), rules=True, insertion=True, successors=True),
]


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    preset = ["p100x4", "v100x8", "h100-2x8"][seed % 3]
    graph = make_graph("random_dag", nodes=int(rng.integers(30, 90)), seed=seed)
    cluster = load_cluster(preset)
    if seed % 2:
        graph = add_groups(graph, size=3, share=0.6, seed=seed)
        graph, cluster = tighten(graph, cluster, resident=0.7, ratios=(1.0, 0.5))
    return graph, cluster


@pytest.mark.parametrize("seed", range(len(CONFIGS) + 2))
def test_one_pass_decodes_random_policies_on_random_graphs(seed):
    graph, cluster = _random_case(seed)
    torch.manual_seed(seed)
    policy = DopplerPolicy(CONFIGS[seed % len(CONFIGS)]).eval()
    for mask in (True, "room", "live", "timed", False):
        _check_equal(policy, graph, cluster, mask)


def test_one_pass_decodes_on_many_devices():
    # 64 devices and co-location groups, every optional input at once
    graph = add_groups(make_graph("random_dag", nodes=48, seed=7), size=3, share=0.6, seed=7)
    cluster = load_cluster("tpuv4-fattree-64")
    torch.manual_seed(7)
    config = PolicyConfig(
        hidden=8,
        layers=1,
        hints=("critical_path", "metis"),
        positions=True,
        rules=True,
        insertion=True,
        successors=True,
        topology=True,
    )
    _check_equal(DopplerPolicy(config).eval(), graph, cluster, True)


def test_random_graphs_cover_groups_and_memory():
    graph, cluster = _random_case(1)
    assert graph.groups and memory_may_bind(graph, cluster)


def test_one_pass_makes_no_simulator_call(monkeypatch):
    # memory binds: the plain decode simulates (its reserves, its hints' repair), the
    # one-pass decode, hints and encoders included, does not
    inst = _instance("memory-tight-v0", "llama_block-1x16@v100x8-mem0.5")
    graph, cluster = inst.graph, inst.cluster
    assert memory_may_bind(graph, cluster)
    placer = pretrained("generalist-memory-v2")
    with counted_simulations(monkeypatch) as calls:
        placement = one_pass_greedy(placer.policy, graph, cluster, placer.memory_mask)
        assert calls == []
        placement.check(graph, cluster)
        AgentPlacer(placer.policy, memory_mask="room").place(graph, cluster)
        assert calls  # the counter sees the plain decode's calls


def test_one_pass_makes_no_simulator_call_on_a_training_step(monkeypatch):
    # live tensors bind: NEST's hint on the unbounded copy of the cluster used to
    # simulate its whole run to price an overflow that cannot happen there
    inst = _instance("pipedream-v0", "resnet18-train@p100x2-live1.05")
    placer = pretrained("generalist-memory-v2")
    with counted_simulations(monkeypatch) as calls:
        one_pass_greedy(placer.policy, inst.graph, inst.cluster, "live")
        assert calls == []


def test_one_pass_recomputes_where_the_live_mask_must(monkeypatch):
    # no placement of this training step fits without recompute: the live mask's
    # placements recompute a checkpoint set, found without a simulator call
    inst = _instance("pipedream-v0", "resnet18-train@p100x2-recompute1.1")
    graph, cluster = inst.graph, inst.cluster
    placer = pretrained("generalist-memory-v2")
    with counted_simulations(monkeypatch) as calls:
        p = one_pass_greedy(placer.policy, graph, cluster, "live")
        assert calls == []
    assert p.recompute.size
    assert np.array_equal(p.recompute, mask_recompute(graph, cluster, "live"))
    assert not simulate(graph, cluster, p).oom
    _check_equal(placer.policy, graph, cluster, "live")


def test_one_pass_equals_the_placer_where_it_makes_no_simulator_call(monkeypatch):
    inst = _instance("generalize-v0", "random_dag-96-s0@p100x4")
    graph, cluster = inst.graph, inst.cluster
    placer = pretrained("generalist-memory-v2")
    with counted_simulations(monkeypatch) as calls:
        old = placer.place(graph, cluster)
        assert calls == []  # memory cannot bind: nothing simulated, hints included
        new = one_pass_greedy(placer.policy, graph, cluster, placer.memory_mask)
        fast = pretrained("generalist-memory-v2", one_pass=True).place(graph, cluster)
        assert calls == []
    assert _same(old, new) and _same(old, fast)


def test_known_teacher_placements_are_read_as_hints_where_memory_cannot_bind(monkeypatch):
    from placegym.agents.doppler import hints

    inst = _instance("generalize-v0", "random_dag-96-s0@p100x4")
    graph, cluster = inst.graph, inst.cluster
    policy = pretrained("generalist-memory-v2").policy
    names = tuple(policy.config.hints)
    known = dict(zip(names, hint_placements(graph, cluster, names)))
    placed = []
    real = hints.hint_placements
    monkeypatch.setattr(
        hints, "hint_placements", lambda g, c, n: placed.append(n) or real(g, c, n)
    )
    assert _same(
        one_pass_greedy(policy, graph, cluster, "room", known=known),
        one_pass_greedy(policy, graph, cluster, "room"),
    )
    assert placed == [names]  # the decode given them placed nothing again
    mem = _instance("memory-tight-v0", "moe-8x2x4-s0@p100x4-mem0.9")  # memory may bind:
    wrong = {n: known[names[0]] for n in names}  # not read there (plain rules instead)
    assert _same(
        one_pass_greedy(policy, mem.graph, mem.cluster, "room", known=wrong),
        one_pass_greedy(policy, mem.graph, mem.cluster, "room"),
    )


def test_plain_hints_are_the_teachers_where_memory_cannot_bind(monkeypatch):
    inst = _instance("memory-tight-v0", "moe-8x2x4-s0@p100x4-mem0.9")
    graph, cluster = inst.graph, inst.cluster
    assert memory_may_bind(graph, cluster)
    roomy = unbounded_memory(graph, cluster)
    assert not memory_may_bind(graph, roomy)
    assert np.array_equal(roomy.pair_bandwidth, cluster.pair_bandwidth)
    assert durations_on(graph, roomy) is durations_on(graph, cluster)  # computed once
    with counted_simulations(monkeypatch) as calls:
        hints = plain_hint_placements(graph, cluster, ONE_PASS_HINTS)
        assert calls == []
    for p in hints:
        p.check(graph, cluster)


@pytest.mark.parametrize(
    ("field", "config"),
    [
        ("prices", PolicyConfig(hidden=8, prices=True)),
        ("affinity", PolicyConfig(hidden=8, affinity=True)),
        ("hint_quality", PolicyConfig(hidden=8, hints=("heft",), hint_quality=True)),
        ("hints", PolicyConfig(hidden=8, hints=("heft", "single_device"))),
        ("learn", PolicyConfig(hidden=8, learn="select")),
    ],
)
def test_one_pass_refuses_policies_it_cannot_decode_in_one_pass(field, config):
    policy = DopplerPolicy(config)
    match = "learn='both'" if field == "learn" else field
    with pytest.raises(ValueError, match=match):
        check_one_pass(policy)


def test_placers_refuse_one_pass_where_it_cannot_apply():
    with pytest.raises(ValueError, match=r"policy\.prices"):
        pretrained("generalist-v1", one_pass=True)
    policy = DopplerPolicy(PolicyConfig(hidden=8))
    with pytest.raises(ValueError, match="one_pass: decodes the greedy mode only"):
        AgentPlacer(policy, mode="sample", one_pass=True)


def test_parted_head_is_the_whole_head_up_to_rounding():
    # the PLC head's first layer by parts (node, kept mean embeddings, shared device
    # mean, per-device columns) against the whole row, as a decode updates its rows
    from placegym.agents.doppler.heads import PartedHead, forward, head_layers
    from placegym.agents.doppler.inputs import device_width, plc_width

    torch.manual_seed(3)
    config = PolicyConfig(hidden=16, layers=1, hints=("nest",), rules=True, insertion=True)
    policy = DopplerPolicy(config).eval()
    layers = head_layers(policy.plc_head)
    h, f, d = config.hidden, device_width(config), 300
    x = torch.randn(d, plc_width(config))
    col_mean = 2 * h + 1 + f
    x[:, col_mean : col_mean + f] = x[:, 2 * h + 1 : col_mean].mean(dim=0)
    node_h = torch.randn(5, h).numpy()
    head = PartedHead(layers, node_h, h=h, col_mean=col_mean, col_rest=col_mean + f, d=d)
    with torch.no_grad():
        for step, (v, dirty) in enumerate([(0, -1), (3, 7), (1, d), (4, 0)]):
            if 0 <= dirty < d:
                x[dirty, h : 2 * h] = torch.randn(h)  # a node placed there
            x[:, :h] = torch.from_numpy(node_h[v])
            x[:, 2 * h + 1 : col_mean] = torch.randn(d, f)  # this step's device rows
            x[:, col_mean : col_mean + f] = x[:, 2 * h + 1 : col_mean].mean(dim=0)
            whole = forward(layers, x).squeeze(-1)
            parted = head(x, v, dirty)
            assert torch.allclose(parted, whole, rtol=1e-5, atol=1e-5), step
    with pytest.raises(ValueError, match="first layer of a parted head must be linear"):
        PartedHead([None, *layers], node_h, h=h, col_mean=col_mean, col_rest=col_mean + f, d=d)


def test_one_pass_decodes_on_a_thousand_devices_with_the_head_by_parts(monkeypatch):
    from placegym.agents.doppler import heads

    calls = []
    inner = heads.PartedHead.__call__
    monkeypatch.setattr(
        heads.PartedHead, "__call__", lambda self, *a: calls.append(1) or inner(self, *a)
    )
    graph = make_graph("random_dag", nodes=40, seed=11)
    cluster = load_cluster("tpuv4-fattree-1024")
    assert cluster.num_devices >= heads.PARTED_MIN_DEVICES
    torch.manual_seed(11)
    config = PolicyConfig(hidden=16, layers=1, hints=("critical_path",), rules=True,
                          insertion=True, successors=True)  # fmt: skip
    _check_equal(DopplerPolicy(config).eval(), graph, cluster, True)
    assert len(calls) == graph.num_nodes
