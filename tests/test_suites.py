"""Benchmark suites: the registry, deterministic and versioned instances, CCR variants,
traced models, reference files (fresh digests, certified bounds, replayable best known),
``placegym suites`` list / show / export."""

import json

import numpy as np
import pytest

from placegym.envs import Placement, load_cluster, load_graph, load_placement, simulate
from placegym.envs.analysis.bounds import lower_bound
from placegym.envs.analysis.ccr import ccr
from placegym.envs.suites import SPLITS, InstanceSpec, Suite, get_suite, list_suites, workload
from placegym.envs.suites.catalog import CCRS
from placegym.envs.suites.reference import load_references, save_references
from placegym.teachers import make_teacher
from placegym.train.cli import main

SMALL = (
    "workloads-v0",
    "comm-heavy-v0",
    "generalize-v0",
    "memory-tight-v0",
    "pipedream-v0",
    "training-v0",
)


def test_registry_sizes_and_ids():
    names = [s.name for s in list_suites()]
    assert names == [
        "workloads-v0",
        "comm-heavy-v0",
        "generalize-v0",
        "nest-scale-v0",
        "memory-tight-v0",
        "published-v0",
        "pipedream-v0",
        "training-v0",
    ]
    sizes = {s.name: tuple(len(s.splits[k]) for k in SPLITS) for s in list_suites()}
    assert sizes == {
        "workloads-v0": (12, 12),
        "comm-heavy-v0": (48, 48),
        "generalize-v0": (24, 28),
        "nest-scale-v0": (4, 4),
        "memory-tight-v0": (12, 12),
        "published-v0": (16, 8),
        "pipedream-v0": (19, 18),
        "training-v0": (8, 12),
    }
    for s in list_suites():
        assert s.version == 0 and tuple(s.splits) == SPLITS
        assert len({spec.id for _, spec in s.specs()}) == len(s.specs())
    with pytest.raises(ValueError, match=r"suite: unknown suite 'nope' \(suites: workloads-v0"):
        get_suite("nope")
    with pytest.raises(ValueError, match=r"split: unknown split 'val' of suite comm-heavy-v0"):
        get_suite("comm-heavy-v0").specs("val")
    with pytest.raises(ValueError, match=r"instance: suite workloads-v0 has no instance 'x'"):
        get_suite("workloads-v0").instance("x")
    spec = InstanceSpec("a", workload("ffnn"), "p100x4")
    with pytest.raises(ValueError, match=r"suite t-v0: instance id 'a' appears twice"):
        Suite("t-v0", "", {"train": (spec,), "test": (spec,)})


def test_instances_are_deterministic_and_named_by_id():
    suite = get_suite("comm-heavy-v0")
    a = list(suite.instances("test"))
    b = list(suite.instances("test"))
    assert [i.digest for i in a] == [i.digest for i in b]
    assert all(i.graph.name == i.id and i.split == "test" for i in a)
    assert len({i.digest for i in a}) == len(a)


def test_comm_heavy_hits_its_ccr_on_its_own_cluster():
    suite = get_suite("comm-heavy-v0")
    clusters = {spec.cluster for _, spec in suite.specs()}
    assert clusters == {"p100x4", "doppler-unit-4", "p100x8", "doppler-unit-8"}
    for inst in suite.instances("train"):
        target = inst.spec.graph.ccr
        assert target in CCRS
        assert ccr(inst.graph, inst.cluster) == pytest.approx(target, rel=1e-12)


def test_generalize_test_split_holds_unseen_families_and_traced_models():
    suite = get_suite("generalize-v0")
    train = {spec.graph for _, spec in suite.specs("train")}
    test = [spec for _, spec in suite.specs("test")]
    assert not train & {spec.graph for spec in test}
    kinds = {(s.graph.kind, s.graph.name) for s in test}
    models = {"gpt_block", "resnet_stage", "unet_block", "moe_layer"}
    assert {("model", m) for m in models} <= kinds and ("workload", "moe") in kinds
    assert not any(s.graph.name == "moe" for _, s in suite.specs("train"))
    assert {load_cluster(s.cluster).num_devices for s in test} == {4, 8}
    gpt = suite.instance("gpt_block@p100x4").graph
    ops = set(gpt.op)
    assert {"matmul", "softmax", "linear", "layernorm", "gelu"} <= ops
    assert 100 <= gpt.num_nodes <= 200


@pytest.mark.parametrize("name", SMALL)
def test_reference_files_are_fresh_and_replay(name):
    suite = get_suite(name)
    refs = load_references(name)
    assert list(refs) == [spec.id for _, spec in suite.specs()]
    for inst in suite.instances():
        ref = refs[inst.id]
        assert ref.digest == inst.digest, f"{inst.id}: rebuilt instance differs (new version?)"
        assert (ref.split, ref.nodes, ref.edges) == (
            inst.split,
            inst.graph.num_nodes,
            inst.graph.num_edges,
        )
        lb = lower_bound(inst.graph, inst.cluster)
        assert ref.lower_bound == pytest.approx(lb.value, rel=1e-9)
        replayed = simulate(inst.graph, inst.cluster, ref.best_placement)
        assert replayed.makespan == pytest.approx(ref.best_makespan, rel=1e-9)
        assert replayed.oom == ref.best_oom
        assert ref.lower_bound <= ref.best_makespan


def test_published_instances_bring_their_accelerators_and_memory_binds_in_test():
    suite = get_suite("published-v0")
    for inst in suite.instances("test"):
        assert inst.id.startswith("latency-") and inst.cluster.name == inst.id
        assert inst.graph.measured and np.isfinite(inst.graph.time).all()
        # sizes less outputs (the simulator counts outputs live): 0.3-51 % of the memory
        resident = inst.graph.param_bytes.sum() / inst.cluster.memory.sum()
        assert resident <= 0.51, inst.id
        # memory binds where the layer graphs keep their weights: one device is over
        one = make_teacher("single_device").place(inst.graph, inst.cluster)
        binds = "bert24" in inst.id or "gnmt" in inst.id or "bert_l-3" in inst.id
        binds = binds or "bert_l-6" in inst.id
        assert simulate(inst.graph, inst.cluster, one).oom == binds, inst.id
    # the cluster source reloads the same accelerators (a training config names it)
    spec = suite.specs("test")[0][1]
    assert spec.cluster.startswith("dnn-partitioning:latency-inputs/")
    again = load_cluster(spec.cluster)
    assert again.to_dict() == suite.build("test", spec).cluster.to_dict()
    with pytest.raises(ValueError, match=r"no published workload 'nope\.json'"):
        load_cluster("dnn-partitioning:nope.json")
    train = list(suite.instances("train"))
    assert all(i.id.startswith("throughput-") for i in train)
    assert sum(1 for i in train if i.graph.groups) == 12  # training graphs and operator graphs


def test_nest_scale_smoke():
    suite = get_suite("nest-scale-v0")
    refs = load_references(suite.name)
    inst = suite.instance("llama_layer-4x32x32@tpuv4-fattree-64")
    assert inst.graph.num_nodes == 1553 and inst.cluster.num_devices == 64
    assert refs[inst.id].digest == inst.digest


@pytest.mark.slow
def test_nest_scale_references_are_fresh_and_replay():
    suite = get_suite("nest-scale-v0")
    refs = load_references(suite.name)
    for inst in suite.instances():
        assert 1000 <= inst.graph.num_nodes <= 10000
        assert inst.cluster.num_devices in (64, 1024)
        ref = refs[inst.id]
        assert ref.digest == inst.digest
        replayed = simulate(inst.graph, inst.cluster, ref.best_placement)
        assert replayed.makespan == pytest.approx(ref.best_makespan, rel=1e-9)
        assert ref.lower_bound == pytest.approx(lower_bound(inst.graph, inst.cluster).value)


def test_reference_file_round_trip_and_errors(tmp_path):
    refs = load_references("workloads-v0")
    first = dict(list(refs.items())[:2])
    path = save_references("workloads-v0", first, tmp_path)
    again = load_references("workloads-v0", tmp_path)
    assert [r.to_dict() for r in again.values()] == [r.to_dict() for r in first.values()]
    assert load_references("nope-v0", tmp_path) == {}
    doc = json.loads(path.read_text())
    del doc["instances"][next(iter(first))]["best_makespan"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"workloads-v0.json: instances\['chainmm-6x2@p100x4'\]"):
        load_references("workloads-v0", tmp_path)


def test_cli_lists_shows_and_exports(tmp_path, capsys):
    assert main(["suites"]) == 0
    out = capsys.readouterr().out
    assert "comm-heavy-v0" in out and "    48    48  " in out and "nest-scale-v0" in out
    assert main(["suites", "show", "workloads-v0", "--split", "test"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 13 and lines[1].startswith("chainmm-4x3@p100x4")
    assert (
        main(["suites", "export", "workloads-v0", "--split", "test", "--out", str(tmp_path)]) == 0
    )
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["suite"] == "workloads-v0" and len(manifest["instances"]) == 12
    refs = load_references("workloads-v0")
    for entry in manifest["instances"]:
        g = load_graph(tmp_path / entry["graph"])
        c = load_cluster(tmp_path / entry["cluster"])
        p = load_placement(tmp_path / entry["best_placement"])
        assert (g.num_nodes, entry["nodes"]) == (refs[entry["id"]].nodes,) * 2
        assert simulate(g, c, p).makespan == pytest.approx(entry["best_known"], rel=1e-9)
        assert entry["lower_bound"] == refs[entry["id"]].lower_bound
        assert entry["spec"]["cluster"] == c.name
    assert main(["suites", "export", "nope", "--out", str(tmp_path)]) == 2
    assert "suite: unknown suite 'nope'" in capsys.readouterr().err
    assert np.isfinite([e["best_known"] for e in manifest["instances"]]).all()


def test_published_references_replay_feasibly_and_cover_the_train_split():
    suite = get_suite("published-v0")
    refs = load_references(suite.name)
    assert {spec.id for _, spec in suite.specs("train")} <= set(refs)
    for split, spec in suite.specs():
        if spec.id not in refs:
            continue  # test instances whose best known is still to be found
        inst = suite.build(split, spec)
        ref = refs[inst.id]
        assert ref.digest == inst.digest
        replayed = simulate(inst.graph, inst.cluster, ref.best_placement)
        assert not replayed.oom and not ref.best_oom
        assert replayed.makespan == pytest.approx(ref.best_makespan, rel=1e-9)
        assert ref.lower_bound <= ref.best_makespan


def test_show_keeps_long_ids_apart_from_the_split(capsys):
    assert main(["suites", "show", "comm-heavy-v0", "--split", "test"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 48
    for row in rows:
        instance, split = row.split()[:2]
        assert split == "test" and instance.endswith(("@p100x4", "-4", "-8", "@p100x8"))


def test_training_instances_are_memory_tight_training_steps_some_with_ports():
    suite = get_suite("training-v0")
    links = set()
    for inst in suite.instances():
        g, c = inst.graph, inst.cluster
        n = g.num_nodes // 2
        # one training step: node n + v is v's backward node, in v's co-location group
        assert all(s.get("kind") == "backward" for s in g.spec[n:])
        assert (g.group[:n] == g.group[n:]).all() and (g.group >= 0).all()
        share = g.param_bytes.sum() / c.memory.sum()
        assert 0.5 - 1e-9 <= share <= 0.7 + 1e-9, inst.id
        one = Placement(device=np.zeros(g.num_nodes, dtype=np.int64), order=g.topological_order)
        assert simulate(g, c, one).oom, inst.id  # memory binds: one device is over
        assert c.links == ("port" if inst.id.endswith("-port") else "pair")
        links.add(c.links)
    assert links == {"pair", "port"}
