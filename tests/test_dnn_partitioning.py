"""The dnn-partitioning workloads (Tarnawski et al., NeurIPS 2020): the 24 vendored files
import with the counts, times, groups and link costs of their raw JSON, the latency
instances have feasible placements, the expert splits load, hand-made files fail with
one clear error each, and ``placegym graphs import-dnn-partitioning`` round-trips."""

import copy
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_cli import one_line_error

from placegym.envs import Graph, Placement, load_cluster, load_graph, load_placement, simulate
from placegym.envs.analysis.levels import b_level, step_costs
from placegym.envs.analysis.memory import memory_infeasibility
from placegym.envs.core.placement import split_group
from placegym.envs.importers import dnn_partitioning as dp
from placegym.envs.importers import (
    expert_for,
    expert_placement,
    from_dnn_partitioning,
    node_index,
    parse_dnn_partitioning,
)
from placegym.teachers import make_teacher
from placegym.train.cli import main

DATA = dp.DATA_DIR

#: nodes, edges, co-location groups, accelerators, total fpgaLatency (ms) per file.
TABLE = {
    "latency-inputs/LayerGraphs/bert24_inference.json": (32, 55, 0, 5, 92.406),
    "latency-inputs/LayerGraphs/gnmt_inference.json": (96, 122, 0, 6, 182.563),
    "latency-inputs/LayerGraphs/inceptionv3_inference.json": (326, 363, 0, 12, 310.969),
    "latency-inputs/LayerGraphs/resnet50_inference.json": (177, 193, 0, 14, 201.450),
    "latency-inputs/OperatorGraphs/bert_l-12_inference.json": (783, 843, 215, 8, 642.780),
    "latency-inputs/OperatorGraphs/bert_l-3_inference.json": (235, 250, 63, 4, 49.353),
    "latency-inputs/OperatorGraphs/bert_l-6_inference.json": (418, 448, 114, 6, 77.462),
    "latency-inputs/OperatorGraphs/resnet50_inference.json": (604, 619, 108, 9, 325.132),
    "throughput-inputs/LayerGraphs/bert24_inference.json": (32, 55, 0, 6, 92.406),
    "throughput-inputs/LayerGraphs/bert24_training.json": (64, 110, 32, 6, 217.813),
    "throughput-inputs/LayerGraphs/gnmt_inference.json": (96, 122, 0, 6, 182.563),
    "throughput-inputs/LayerGraphs/gnmt_training.json": (192, 244, 96, 6, 520.453),
    "throughput-inputs/LayerGraphs/inceptionv3_inference.json": (326, 363, 0, 6, 310.969),
    "throughput-inputs/LayerGraphs/inceptionv3_training.json": (652, 726, 326, 6, 710.738),
    "throughput-inputs/LayerGraphs/resnet50_inference.json": (177, 193, 0, 6, 201.450),
    "throughput-inputs/LayerGraphs/resnet50_training.json": (354, 386, 177, 6, 462.381),
    "throughput-inputs/OperatorGraphs/bert_L-12_training.json": (2012, 2751, 417, 6, 1891.742),
    "throughput-inputs/OperatorGraphs/bert_l-12_inference.json": (783, 843, 215, 6, 642.780),
    "throughput-inputs/OperatorGraphs/bert_l-3_inference.json": (235, 250, 63, 3, 49.353),
    "throughput-inputs/OperatorGraphs/bert_l-3_training.json": (600, 817, 121, 3, 122.987),
    "throughput-inputs/OperatorGraphs/bert_l-6_inference.json": (418, 448, 114, 3, 77.462),
    "throughput-inputs/OperatorGraphs/bert_l-6_training.json": (1071, 1462, 220, 3, 192.917),
    "throughput-inputs/OperatorGraphs/resnet50_inference.json": (604, 619, 108, 6, 325.132),
    "throughput-inputs/OperatorGraphs/resnet50_training.json": (1243, 1806, 177, 6, 684.891),
}
LATENCY = [rel for rel in TABLE if rel.startswith("latency-")]

#: Whether each expert placement fits in memory (``simulate(...).oom`` is False): the
#: splits were made for the throughput inputs' 16 GiB accelerators.
#: Whether each expert split fits in memory under the simulator (its live tensors counted):
#: all but GNMT's latency split, whose peak exceeds a 600 MiB accelerator.
EXPERT_FITS = {rel: rel != "latency-inputs/LayerGraphs/gnmt_inference.json" for rel in dp.EXPERTS}
#: The latency workloads no placement fits (bounds.memory_infeasibility): BERT-L3's and
#: L6's last node holds its 358 MiB input and 358 MiB output on a 600 MiB accelerator.
NO_PLACEMENT_FITS = {
    "latency-inputs/OperatorGraphs/bert_l-3_inference.json",
    "latency-inputs/OperatorGraphs/bert_l-6_inference.json",
}


def raw(rel: str) -> dict:
    return json.loads((DATA / rel).read_text())


def raw_groups(doc: dict) -> list[int]:
    """Group per node computed from the raw JSON: colour classes of 2+ nodes, numbered
    by first appearance, -1 else."""
    counts = Counter(n["colorClass"] for n in doc["nodes"] if n.get("colorClass") is not None)
    number: dict[int, int] = {}
    out = []
    for n in doc["nodes"]:
        c = n.get("colorClass")
        out.append(-1 if c is None or counts[c] < 2 else number.setdefault(c, len(number)))
    return out


# ------------------------------------------------------------------ the published files
def test_every_published_file_is_vendored_and_listed():
    found = {p.relative_to(DATA).as_posix() for p in DATA.glob("*-inputs/*/*.json")}
    assert found == set(TABLE) == set(dp.INPUTS) and len(dp.INPUTS) == 24
    experts = {p.relative_to(DATA).as_posix() for p in DATA.glob("human-experts/*.json")}
    assert len(experts) == 6 and set(dp.EXPERTS.values()) == experts
    assert (DATA / "LICENSE.txt").read_text().startswith("Code for NeurIPS 2020 paper")
    assert "MIT License" in (DATA / "LICENSE.txt").read_text()
    assert "b207b6ad27a1407d321f1e028cea96d7f2c90e3e" in (DATA / "README.md").read_text()


@pytest.mark.parametrize("rel", list(TABLE))
def test_published_file_imports_with_its_raw_counts(rel):
    doc = raw(rel)
    g, c = from_dnn_partitioning(DATA / rel)
    nodes, edges, groups, devices, total_ms = TABLE[rel]
    raw_group = raw_groups(doc)
    raw_ms = sum(n["fpgaLatency"] for n in doc["nodes"])
    assert g.num_nodes == len(doc["nodes"]) == nodes
    assert g.num_edges == len(doc["edges"]) == edges
    assert len(g.groups) == len(set(raw_group) - {-1}) == groups
    assert g.group.tolist() == raw_group
    assert g.time.sum() * 1e3 == pytest.approx(raw_ms, rel=1e-12)
    assert raw_ms == pytest.approx(total_ms, abs=5e-4)
    assert c.num_devices == doc["maxFPGAs"] == devices
    assert (c.memory == doc["maxSizePerFPGA"]).all() and (c.launch_overhead == 0).all()
    assert all(d.kind is None for d in c.devices) and len(c.levels) == 1
    assert c.levels[0].latency == 0
    # node order and fields follow the file
    ids = [n["id"] for n in doc["nodes"]]
    assert node_index(DATA / rel) == {nid: i for i, nid in enumerate(ids)}
    assert [s["source_id"] for s in g.spec] == ids
    # resident bytes: the node's size less its output, which the simulator counts live
    sizes = np.array([n["size"] for n in doc["nodes"]])
    assert g.param_bytes.tolist() == np.maximum(sizes - g.out_bytes, 0.0).tolist()
    assert (g.flops == 0).all()
    for i, n in enumerate(doc["nodes"]):
        op = n.get("name", f"node{n['id']}")
        assert g.op[i] == (f"bw:{op}" if n["isBackwardNode"] else op)
        assert g.layer[i] == (-1 if n.get("layerId") is None else n["layerId"])
    index = {nid: i for i, nid in enumerate(ids)}
    assert g.edges.tolist() == [[index[e["sourceId"]], index[e["destId"]]] for e in doc["edges"]]


def test_readme_facts():
    inception = raw("latency-inputs/LayerGraphs/inceptionv3_inference.json")
    assert round(sum(n["fpgaLatency"] for n in inception["nodes"]), 1) == 311.0
    for rel in TABLE:  # cpuLatency is synthetic: 10x (layer) or 23x (operator graphs)
        factor = 10.0 if "LayerGraphs" in rel else 23.0
        for n in raw(rel)["nodes"]:
            assert n["cpuLatency"] == pytest.approx(factor * n["fpgaLatency"], rel=1e-9)
    sizes = [TABLE[rel][0] for rel in LATENCY]
    devices = [TABLE[rel][3] for rel in LATENCY]
    assert (min(sizes), max(sizes), min(devices), max(devices)) == (32, 783, 4, 14)


def test_training_layer_graphs_extend_their_inference_graphs():
    for model in ("bert24", "gnmt", "inceptionv3", "resnet50"):
        inf = raw(f"throughput-inputs/LayerGraphs/{model}_inference.json")
        train = raw(f"throughput-inputs/LayerGraphs/{model}_training.json")
        fwd = [n for n in train["nodes"] if not n["isBackwardNode"]]
        assert {n["id"]: n for n in fwd} == {n["id"]: n for n in inf["nodes"]}
        classes = Counter(n["colorClass"] for n in train["nodes"])
        assert set(classes.values()) == {2} and len(classes) == len(fwd)  # fwd + bwd pairs
        forward_ids = {n["id"] for n in fwd}
        crossing = [
            e
            for e in train["edges"]
            if (e["sourceId"] in forward_ids) != (e["destId"] in forward_ids)
        ]
        assert crossing == []  # the backward part is not connected to the forward part


# ------------------------------------------------------------------ feasibility
def first_fit_groups(doc: dict) -> list[int]:
    """First-fit of the colour classes (a singleton class or no class: the node alone),
    in order of first appearance, onto the first accelerator with room."""
    units: dict[tuple, list[int]] = {}
    counts = Counter(n.get("colorClass") for n in doc["nodes"])
    for i, n in enumerate(doc["nodes"]):
        c = n.get("colorClass")
        key = ("class", c) if c is not None and counts[c] >= 2 else ("node", i)
        units.setdefault(key, []).append(i)
    used = [0.0] * doc["maxFPGAs"]
    device = [-1] * len(doc["nodes"])
    for members in units.values():
        size = sum(doc["nodes"][i]["size"] for i in members)
        k = next(k for k, u in enumerate(used) if u + size <= doc["maxSizePerFPGA"])
        used[k] += size
        for i in members:
            device[i] = k
    return device


def first_fit_nodes(doc: dict) -> list[int]:
    used = [0.0] * doc["maxFPGAs"]
    device = []
    for n in doc["nodes"]:
        k = next(k for k, u in enumerate(used) if u + n["size"] <= doc["maxSizePerFPGA"])
        used[k] += n["size"]
        device.append(k)
    return device


@pytest.mark.parametrize("rel", LATENCY)
def test_latency_instance_has_a_placement_that_fits(rel):
    doc = raw(rel)
    g, c = from_dnn_partitioning(DATA / rel)
    share = sum(n["size"] for n in doc["nodes"]) / (doc["maxFPGAs"] * doc["maxSizePerFPGA"])
    assert 54 <= round(100 * share) <= 65  # 54.0 % (bert_l-12) to 65.3 % (gnmt)
    # resident: each size less its output (which the simulator counts while it lives)
    sizes = np.array([n["size"] for n in doc["nodes"]])
    assert g.param_bytes.tolist() == np.maximum(sizes - g.out_bytes, 0).tolist()
    assert g.param_bytes.sum() <= share * c.memory.sum()
    per_node = np.array(first_fit_nodes(doc))
    # node by node first-fit splits the operator graphs' colour classes
    assert (split_group(g, per_node[None]) is not None) == ("OperatorGraphs" in rel)
    device = np.array(first_fit_groups(doc))
    placement = Placement.from_devices(device, g)
    placement.check(g, c)  # every group on one accelerator
    resident = np.bincount(device, weights=g.param_bytes, minlength=c.num_devices)
    assert (resident <= c.memory).all()
    assert np.isfinite(simulate(g, c, placement).makespan)


@pytest.mark.parametrize("rel", [r for r in TABLE if r.startswith("latency-")])
def test_latency_instance_fits_the_simulator_or_is_certified_infeasible(rel):
    g, c = from_dnn_partitioning(DATA / rel)
    why = memory_infeasibility(g, c)
    if rel in NO_PLACEMENT_FITS:
        assert why is not None and "more than the largest device memory" in why
        return
    assert why is None
    heft = make_teacher("heft").place(g, c)  # memory-aware: a placement that fits
    assert not simulate(g, c, heft).oom


# ------------------------------------------------------------------ times and the link
@pytest.mark.parametrize("rel", list(TABLE))
def test_node_durations_are_the_measured_latencies(rel):
    doc = raw(rel)
    g, c = from_dnn_partitioning(DATA / rel)
    ms = np.array([n["fpgaLatency"] for n in doc["nodes"]], dtype=float)
    duration = step_costs(g, c).duration
    assert duration.shape == (g.num_nodes, c.num_devices)
    assert (duration == (ms / 1000)[:, None]).all()
    np.testing.assert_allclose(duration, np.tile(ms * 1e-3, (c.num_devices, 1)).T, rtol=1e-15)


@pytest.mark.parametrize("rel", list(TABLE))
def test_every_edge_cost_is_reproduced_exactly(rel):
    doc = raw(rel)
    g, c = from_dnn_partitioning(DATA / rel)
    bw = c.levels[0].bandwidth
    index = node_index(DATA / rel)
    cost = np.array([e["cost"] for e in doc["edges"]])
    size = np.array([e["size"] for e in doc["edges"]])
    src = np.array([index[e["sourceId"]] for e in doc["edges"]])
    assert (g.out_bytes[src] / bw == cost / 1000).all()
    # the bandwidth is the most common size/cost ratio, in bytes per second
    both = (cost > 0) & (size > 0)
    ratio, count = Counter((size[both] / cost[both]).tolist()).most_common(1)[0]
    assert bw == ratio * 1000 and bw in (2.0**31, 1000 * 2.0**31)
    holds = both & (size == ratio * cost)
    assert count > both.sum() / 2
    np.testing.assert_allclose(g.out_bytes[src[holds]], size[holds], rtol=1e-15)
    sinks = np.setdiff1d(np.arange(g.num_nodes), src)
    assert (g.out_bytes[sinks] == 0).all()


def two_node_transfer(g: Graph, c, u: int, time=(0.0, 0.0)) -> tuple[float, float]:
    """Makespan and transfer time of ``u``'s output sent from accelerator 0 to 1."""
    pair = Graph(flops=[0, 0], out_bytes=[g.out_bytes[u], 0], edges=[[0, 1]], time=list(time))
    s = simulate(pair, c, Placement(device=[0, 1], order=[0, 1]))
    assert len(s.transfers) == 1
    return s.makespan, float(s.transfers.arrival[0] - s.transfers.start[0])


@pytest.mark.parametrize(
    "rel",
    [
        "latency-inputs/LayerGraphs/inceptionv3_inference.json",
        "latency-inputs/OperatorGraphs/bert_l-3_inference.json",
        "throughput-inputs/LayerGraphs/gnmt_training.json",  # edges off the ratio
        "throughput-inputs/LayerGraphs/bert24_training.json",  # size without cost
        "throughput-inputs/OperatorGraphs/resnet50_training.json",
    ],
)
def test_two_node_cross_device_transfer_takes_the_edge_cost(rel):
    doc = raw(rel)
    g, c = from_dnn_partitioning(DATA / rel)
    index = node_index(DATA / rel)
    edges = doc["edges"]
    picked = {e["sourceId"]: e for e in edges[:: max(1, len(edges) // 25)]}
    by_cost = sorted(edges, key=lambda e: e["cost"])
    picked.update({e["sourceId"]: e for e in (by_cost[0], by_cost[-1])})
    picked.update({e["sourceId"]: e for e in edges if e["size"] != 0 and e["cost"] == 0})
    assert len(picked) >= 10
    for e in picked.values():
        u = index[e["sourceId"]]
        makespan, transfer = two_node_transfer(g, c, u)
        assert makespan == transfer == e["cost"] / 1000, e
        # with the nodes' own times: producer, transfer, consumer in a row
        t_u, t_v = g.time[u], g.time[index[e["destId"]]]
        makespan, transfer = two_node_transfer(g, c, u, (t_u, t_v))
        assert transfer == pytest.approx(e["cost"] / 1000, rel=1e-12, abs=1e-18)
        assert makespan == pytest.approx(t_u + e["cost"] / 1000 + t_v, rel=1e-12)


# ------------------------------------------------------------------ expert splits
@pytest.mark.parametrize("rel", list(dp.EXPERTS))
def test_expert_placement_loads_keeps_groups_and_simulates(rel):
    expert = expert_for(DATA / rel)
    assert expert == DATA / dp.EXPERTS[rel] and expert_for(dp.dnn_partitioning_name(rel)) == expert
    g, c = from_dnn_partitioning(DATA / rel)
    p = expert_placement(DATA / rel, expert)
    p.check(g, c)
    split = json.loads(expert.read_text())
    index = node_index(DATA / rel)
    for k, fpga in enumerate(split["fpgas"]):
        for nid in fpga["nodes"]:
            assert p.device[index[nid]] == k
    for nodes in g.groups.values():  # unlisted backward nodes follow their forward node
        assert len(set(p.device[nodes].tolist())) == 1
    # priority: descending b-level, ties by node index
    level = b_level(g, c)
    key = [(-level[v], v) for v in p.order.tolist()]
    assert key == sorted(key)
    s = simulate(g, c, p)
    assert np.isfinite(s.makespan) and s.makespan > 0
    assert (not s.oom) == EXPERT_FITS[rel]


@pytest.mark.parametrize("model", ["bert24", "gnmt"])
def test_training_experts_are_the_inference_splits_with_backward_nodes_grouped(model):
    rel = f"throughput-inputs/LayerGraphs/{model}_training.json"
    inference = DATA / f"human-experts/{model}_inference_expert.json"
    training = DATA / f"human-experts/{model}_training_expert.json"
    derived = expert_placement(DATA / rel, inference)
    listed = expert_placement(DATA / rel, training)
    assert (derived.device == listed.device).all() and (derived.order == listed.order).all()


def test_which_workloads_have_an_expert():
    assert sum(expert_for(DATA / rel) is not None for rel in TABLE) == 11
    assert expert_for(DATA / "latency-inputs/OperatorGraphs/resnet50_inference.json") is None
    assert expert_for("throughput-operator-resnet50_training") is None
    assert expert_for("elsewhere/resnet50_training.json") is None
    # the bert24 split needs 6 accelerators, the latency bert24 instance has 5
    assert expert_for(DATA / "latency-inputs/LayerGraphs/bert24_inference.json") is None
    expert = DATA / "human-experts/bert24_inference_expert.json"
    graph = DATA / "latency-inputs/LayerGraphs/bert24_inference.json"
    with pytest.raises(ValueError) as e:
        expert_placement(graph, expert)
    assert str(e.value).startswith(
        f"{expert}: fpgas[5].nodes: accelerator 5 does not exist: {graph} has maxFPGAs = 5, "
        "got [25, 26, 27, 28, 29, 30, 31, 32]"
    )


# ------------------------------------------------------------------ hand-made files
SMALL = {
    "maxSizePerFPGA": 1000.0,
    "maxFPGAs": 2,
    "maxCPUs": 1,
    "nodes": [
        {
            "id": 10,
            "name": "a",
            "supportedOnFpga": 1,
            "cpuLatency": 10.0,
            "fpgaLatency": 1.0,
            "isBackwardNode": 0,
            "colorClass": 7,
            "size": 100.0,
        },
        {
            "id": 4,
            "supportedOnFpga": True,
            "cpuLatency": 20.0,
            "fpgaLatency": 2.0,
            "isBackwardNode": False,
            "colorClass": 3,
            "size": 200.0,
            "layerId": 1,
        },
        {
            "id": 12,
            "name": "a_grad",
            "supportedOnFpga": 1,
            "cpuLatency": 5.0,
            "fpgaLatency": 0.5,
            "isBackwardNode": 1,
            "colorClass": 7,
            "size": 100.0,
        },
    ],
    "edges": [
        {"sourceId": 10, "destId": 4, "cost": 0.5, "size": 1000.0},
        {"sourceId": 4, "destId": 12, "cost": 0.25},
    ],
}


def write(tmp_path: Path, doc, name: str = "w.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_small_file_by_the_rules(tmp_path):
    g, c = from_dnn_partitioning(write(tmp_path, SMALL))
    assert g.name == c.name == "w"
    assert g.op == ("a", "node4", "bw:a_grad")
    assert g.layer.tolist() == [-1, 1, -1] and g.group.tolist() == [0, -1, 0]
    assert g.time.tolist() == [1.0 / 1000, 2.0 / 1000, 0.5 / 1000]
    # resident: size less output (a sink keeps its size)
    assert g.param_bytes.tolist() == [0, 0, 100] and g.edges.tolist() == [[0, 1], [1, 2]]
    assert c.levels[0].bandwidth == 2000.0 * 1000  # 1000 B per 0.5 ms
    assert g.out_bytes.tolist() == [1000.0, 500.0, 0.0]  # the edge size; cost x B; a sink
    assert [d.name for d in c.devices] == ["acc0", "acc1"] and (c.memory == 1000).all()
    assert (c.flops == dp.NOMINAL_FLOPS).all()
    assert parse_dnn_partitioning(SMALL, "x")[0].to_dict() == {**g.to_dict(), "name": "x"}
    assert Graph.from_dict(g.to_dict()).to_dict() == g.to_dict()


def test_link_fit_rules(tmp_path):
    doc = copy.deepcopy(SMALL)
    for e in doc["edges"]:
        e.pop("size", None)
    g, c = parse_dnn_partitioning(doc)
    assert c.levels[0].bandwidth == dp.DEFAULT_BANDWIDTH == 2.0**31
    assert g.out_bytes[0] / dp.DEFAULT_BANDWIDTH == 0.5 / 1000
    # ratios 2000 (one edge) and 4000 B/ms (two edges): the most common wins
    doc = copy.deepcopy(SMALL)
    doc["edges"][1]["size"] = 1000.0
    doc["edges"].append({"sourceId": 10, "destId": 12, "cost": 0.5, "size": 2000.0})
    _, c = parse_dnn_partitioning(doc)
    assert c.levels[0].bandwidth == 4000.0 * 1000
    # a tie goes to the first edge's ratio; an edge with a size but cost 0 sends 0 bytes
    doc = copy.deepcopy(SMALL)
    doc["edges"][1].update(cost=0.0, size=77.0)
    doc["edges"].append({"sourceId": 12, "destId": 13, "cost": 1.0, "size": 10.0})
    doc["nodes"].append({**doc["nodes"][1], "id": 13, "colorClass": None})
    g, c = parse_dnn_partitioning(doc)
    assert c.levels[0].bandwidth == 2000.0 * 1000 and g.out_bytes[1] == 0
    assert g.out_bytes[2] / c.levels[0].bandwidth == 1.0 / 1000 and g.group[3] == -1


def mutate(path: tuple, value=None, delete: bool = False, append=None):
    def apply(doc):
        *head, last = path
        obj = doc
        for k in head:
            obj = obj[k]
        if append is not None:
            obj[last].append(append)
        elif delete:
            del obj[last]
        else:
            obj[last] = value
        return doc

    return apply


BAD_FILES = [
    (mutate(("maxSizePerFPGA",), delete=True), "maxSizePerFPGA: missing field"),
    (mutate(("maxSizePerFPGA",), -5), "maxSizePerFPGA: must be > 0, got -5"),
    (mutate(("maxFPGAs",), "2"), "maxFPGAs: expected an integer, got '2'"),
    (mutate(("maxFPGAs",), 0), "maxFPGAs: must be >= 1, got 0"),
    (mutate(("maxCPUs",), -1), "maxCPUs: must be >= 0, got -1"),
    (mutate(("nodes",), delete=True), "nodes: missing field"),
    (mutate(("nodes",), {}), "nodes: expected a list, got {}"),
    (mutate(("nodes", 1), 5), "nodes[1]: expected an object, got 5"),
    (mutate(("nodes", 0, "id"), delete=True), "nodes[0].id: missing field"),
    (mutate(("nodes", 0, "id"), -1), "nodes[0].id: must be >= 0, got -1"),
    (mutate(("nodes", 0, "id"), 1.5), "nodes[0].id: expected an integer, got 1.5"),
    (
        mutate(("nodes", 2, "id"), 10),
        "nodes[2].id: duplicate node id (nodes[0] has it too), got 10",
    ),
    (mutate(("nodes", 0, "name"), 3), "nodes[0].name: expected a string, got 3"),
    (
        mutate(("nodes", 0, "supportedOnFpga"), 2),
        "nodes[0].supportedOnFpga: expected true/false or 0/1, got 2",
    ),
    (
        mutate(("nodes", 0, "supportedOnFpga"), False),
        "nodes[0].supportedOnFpga: node id 10 cannot run on an accelerator, and a graph "
        "cannot keep a node off a device, got False",
    ),
    (mutate(("nodes", 1, "cpuLatency"), delete=True), "nodes[1].cpuLatency: missing field"),
    (mutate(("nodes", 1, "fpgaLatency"), delete=True), "nodes[1].fpgaLatency: missing field"),
    (mutate(("nodes", 0, "fpgaLatency"), -1), "nodes[0].fpgaLatency: must be >= 0, got -1"),
    (mutate(("nodes", 0, "fpgaLatency"), "1"), "nodes[0].fpgaLatency: expected a number, got '1'"),
    (
        mutate(("nodes", 0, "isBackwardNode"), "no"),
        "nodes[0].isBackwardNode: expected true/false or 0/1, got 'no'",
    ),
    (mutate(("nodes", 2, "size"), delete=True), "nodes[2].size: missing field"),
    (mutate(("nodes", 2, "size"), -3.0), "nodes[2].size: must be >= 0, got -3.0"),
    (mutate(("nodes", 0, "colorClass"), -2), "nodes[0].colorClass: must be >= 0, got -2"),
    (mutate(("nodes", 0, "colorClass"), "x"), "nodes[0].colorClass: expected an integer, got 'x'"),
    (mutate(("nodes", 1, "layerId"), -1), "nodes[1].layerId: must be >= 0, got -1"),
    (mutate(("edges",), None), "edges: expected a list, got None"),
    (mutate(("edges", 0), [10, 4]), "edges[0]: expected an object, got [10, 4]"),
    (mutate(("edges", 0, "sourceId"), delete=True), "edges[0].sourceId: missing field"),
    (mutate(("edges", 0, "sourceId"), 4.5), "edges[0].sourceId: expected an integer, got 4.5"),
    (mutate(("edges", 0, "destId"), 99), "edges[0].destId: no node has this id, got 99"),
    (mutate(("edges", 0, "destId"), 10), "edges[0]: self-loop on node id 10, got {"),
    (
        mutate(("edges",), append={"sourceId": 10, "destId": 4, "cost": 0.5}),
        "edges[2]: duplicate of edges[0] (10 -> 4), got {",
    ),
    (mutate(("edges", 0, "cost"), delete=True), "edges[0].cost: missing field"),
    (mutate(("edges", 0, "cost"), -1), "edges[0].cost: must be >= 0, got -1"),
    (mutate(("edges", 0, "size"), -1), "edges[0].size: must be >= 0, got -1"),
    (
        mutate(("edges",), append={"sourceId": 10, "destId": 12, "cost": 0.75}),
        "edges[2].cost: node id 10 ('a') sends its output at cost 0.5 on edges[0]: every edge "
        "out of a node must have the same cost, got 0.75",
    ),
    (
        mutate(("edges",), append={"sourceId": 12, "destId": 10, "cost": 0.0}),
        "edges: the graph has a cycle through node ids 4 -> 12 -> 10 -> 4",
    ),
]


@pytest.mark.parametrize("apply, message", BAD_FILES, ids=[m.split(":")[0] for _, m in BAD_FILES])
def test_bad_workload_gives_one_error_naming_file_field_value(tmp_path, apply, message):
    path = write(tmp_path, apply(copy.deepcopy(SMALL)))
    with pytest.raises(ValueError) as e:
        from_dnn_partitioning(path)
    assert str(e.value).startswith(f"{path}: {message}"), str(e.value)


def test_unreadable_workload_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing.json: no such file"):
        from_dnn_partitioning(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=r"w.json: not valid JSON"):
        from_dnn_partitioning(write(tmp_path, "{"))
    with pytest.raises(ValueError, match=r"w.json: expected a JSON object, got list"):
        from_dnn_partitioning(write(tmp_path, [SMALL]))


GOOD_SPLIT = {"cpus": [{"load": 0.0, "nodes": []}], "fpgas": [{"nodes": [4]}, {"nodes": [10]}]}

BAD_SPLITS = [
    ({"cpus": []}, "fpgas: missing field"),
    ({"fpgas": {}}, "fpgas: expected a list, got {}"),
    ({"fpgas": [3]}, "fpgas[0]: expected an object, got 3"),
    ({"fpgas": [{}]}, "fpgas[0].nodes: missing field"),
    ({"fpgas": [{"nodes": 4}]}, "fpgas[0].nodes: expected a list, got 4"),
    ({"fpgas": [{"nodes": [4.5]}]}, "fpgas[0].nodes[0]: expected an integer, got 4.5"),
    ({"fpgas": [{"nodes": [99]}]}, "fpgas[0].nodes[0]: no node of {graph} has this id, got 99"),
    (
        {"fpgas": [{"nodes": [4]}, {"nodes": [10, 4]}]},
        "fpgas[1].nodes[1]: node id 4 is already placed by fpgas[0].nodes[0], got 4",
    ),
    ({"cpus": 5, "fpgas": []}, "cpus: expected a list, got 5"),
    (
        {"cpus": [{"nodes": [4]}], "fpgas": [{"nodes": [10]}]},
        "cpus[0].nodes: nodes on CPUs cannot be placed (a split names no CPU device), got [4]",
    ),
    (
        {"fpgas": [{"nodes": [4]}, {"nodes": []}, {"nodes": [10]}]},
        "fpgas[2].nodes: accelerator 2 does not exist: {graph} has maxFPGAs = 2, got [10]",
    ),
    (
        {"fpgas": [{"nodes": [4, 12]}, {"nodes": [10]}]},
        "fpgas[0].nodes[1]: node id 12 is on accelerator 0 but node id 10 of the same "
        "colorClass 7 is on accelerator 1 (fpgas[1].nodes[0]): a colour class shares one "
        "accelerator, got 12",
    ),
    (
        {"fpgas": [{"nodes": [10]}]},
        "fpgas: node id 4 ('node4') is on no accelerator: the split does not list it or any "
        "node of its colorClass",
    ),
]


def test_small_expert_split(tmp_path):
    graph = write(tmp_path, SMALL)
    p = expert_placement(graph, write(tmp_path, GOOD_SPLIT, "split.json"))
    assert p.device.tolist() == [1, 0, 1]  # node id 12 joins id 10's colour class
    g, c = from_dnn_partitioning(graph)
    level = b_level(g, c)
    assert p.order.tolist() == sorted(range(3), key=lambda v: (-level[v], v))


@pytest.mark.parametrize("split, message", BAD_SPLITS, ids=[m for _, m in BAD_SPLITS])
def test_bad_expert_split_gives_one_error_naming_file_field_value(tmp_path, split, message):
    graph = write(tmp_path, SMALL)
    path = write(tmp_path, split, "split.json")
    with pytest.raises(ValueError) as e:
        expert_placement(graph, path)
    expected = f"{path}: " + message.replace("{graph}", str(graph))
    assert str(e.value).startswith(expected), str(e.value)


def test_unreadable_expert_files(tmp_path):
    graph = write(tmp_path, SMALL)
    with pytest.raises(FileNotFoundError, match=r"nope.json: no such file"):
        expert_placement(graph, tmp_path / "nope.json")
    with pytest.raises(ValueError, match=r"split.json: expected a JSON object, got list"):
        expert_placement(graph, write(tmp_path, [GOOD_SPLIT], "split.json"))


# ------------------------------------------------------------------ command line
def test_cli_round_trip(tmp_path, capsys):
    rel = "throughput-inputs/LayerGraphs/resnet50_training.json"
    expert = DATA / dp.EXPERTS[rel]
    out = tmp_path / "out"
    argv = ["graphs", "import-dnn-partitioning", str(DATA / rel), "--out", str(out)]
    assert main([*argv, "--expert", str(expert)]) == 0
    lines = capsys.readouterr().out.splitlines()
    name = "throughput-layer-resnet50_training"
    assert len(lines) == 3
    assert lines[0].startswith(f"{out / name}.graph.json: {name}, 354 nodes, 386 edges, 177 ")
    assert lines[1].startswith(f"{out / name}.cluster.json: 6 accelerators of 17.19 GB")
    assert lines[2].startswith(f"{out / name}.expert.placement.json: 6 accelerators used")
    assert lines[2].endswith("fits in memory")
    g, c = from_dnn_partitioning(DATA / rel)
    assert load_graph(out / f"{name}.graph.json").to_dict() == g.to_dict()
    assert load_cluster(out / f"{name}.cluster.json").to_dict() == c.to_dict()
    p = load_placement(out / f"{name}.expert.placement.json")
    q = expert_placement(DATA / rel, expert)
    assert p.device.tolist() == q.device.tolist() and p.order.tolist() == q.order.tolist()
    # without --expert, under another name: two files
    assert main([*argv, "--name", "r50"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert load_graph(out / "r50.graph.json").name == "r50"
    assert not (out / "r50.expert.placement.json").exists()


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "out"
    bad = write(tmp_path, mutate(("nodes", 0, "fpgaLatency"), -1)(copy.deepcopy(SMALL)))
    assert main(["graphs", "import-dnn-partitioning", str(bad), "--out", str(out)]) == 2
    msg = one_line_error(capsys, "graphs")
    assert msg == f"{bad}: nodes[0].fpgaLatency: must be >= 0, got -1"
    good = write(tmp_path, SMALL, "good.json")
    split = write(tmp_path, {"fpgas": [{"nodes": [99]}]}, "split.json")
    argv = ["graphs", "import-dnn-partitioning", str(good), "--out", str(out)]
    assert main([*argv, "--expert", str(split)]) == 2
    assert one_line_error(capsys, "graphs").startswith(f"{split}: fpgas[0].nodes[0]: no node")
    assert not out.exists()  # nothing is written unless every input is good
    assert (
        main(["graphs", "import-dnn-partitioning", str(tmp_path / "no.json"), "--out", "x"]) == 2
    )
    assert one_line_error(capsys, "graphs") == f"{tmp_path / 'no.json'}: no such file"


# ------------------------------------------------------------------ CPU devices
def without_times(doc: dict) -> dict:
    return {**doc, "nodes": [{k: v for k, v in n.items() if k != "time"} for n in doc["nodes"]]}


def test_cpus_add_cpu_devices_and_per_kind_times(tmp_path):
    path = write(tmp_path, SMALL)
    g0, c0 = from_dnn_partitioning(path)
    g, c = from_dnn_partitioning(path, cpus=2)
    assert [d.name for d in c.devices] == ["acc0", "acc1", "cpu0", "cpu1"]
    assert [d.kind for d in c.devices] == [dp.ACCELERATOR_KIND] * 2 + [dp.CPU_KIND] * 2
    # the format bounds only accelerators: a CPU holds every resident and output byte
    assert c.memory.tolist() == [1000.0, 1000.0, 1600.0, 1600.0]
    assert [(lv.name, lv.bandwidth) for lv in c.levels] == [
        ("host", dp.HOST_BANDWIDTH),
        ("link", c0.levels[0].bandwidth),
    ]
    assert (c.pair_level[:2, :].sum(), c.pair_level[2, 3], c.pair_level[3, 0]) == (6, 0, 1)
    assert np.isnan(g.time).all() and list(g.kind_time) == ["accelerator", "cpu"]
    assert g.kind_time["accelerator"].tolist() == g0.time.tolist()
    assert g.kind_time["cpu"].tolist() == [10.0 / 1000, 20.0 / 1000, 5.0 / 1000]
    assert g.to_dict()["nodes"][0]["time"] == {"accelerator": 0.001, "cpu": 0.01}
    assert without_times(g.to_dict()) == without_times(g0.to_dict())
    assert from_dnn_partitioning(path, cpus=0)[0].to_dict() == g0.to_dict()
    # node id 4 on acc0, ids 10 and 12 (one colour class) on cpu0: 10 ms, 0.5 ms link,
    # 2 ms, 0.25 ms link, 5 ms
    s = simulate(g, c, Placement(device=np.array([2, 0, 2]), order=np.array([0, 1, 2])))
    assert s.finish.tolist() == pytest.approx([0.01, 0.0125, 0.01775], rel=1e-12)
    # id 4 on the other CPU: transfers between the CPUs of one host take ~nothing
    s = simulate(g, c, Placement(device=np.array([2, 3, 2]), order=np.array([0, 1, 2])))
    assert s.makespan == pytest.approx(0.035, rel=1e-12)
    # HEFT: node id 10's 1000 B output and id 12's 100 B overfill an accelerator's
    # 1000 B, so the colour class goes to a CPU; with room, to the 10x faster accelerators
    assert make_teacher("heft").place(g, c).device.tolist() == [2, 3, 2]
    roomy = parse_dnn_partitioning({**SMALL, "maxSizePerFPGA": 1e6}, cpus=2)
    assert (make_teacher("heft").place(*roomy).device < 2).all()
    _, c1 = from_dnn_partitioning(path, cpus="file", cpu_memory=5e3)
    assert [d.name for d in c1.devices] == ["acc0", "acc1", "cpu0"]  # maxCPUs = 1
    assert c1.memory[-1] == 5e3
    split = write(tmp_path, GOOD_SPLIT, "split.json")
    p = expert_placement(path, split, cpus=2)
    assert p.device.tolist() == expert_placement(path, split).device.tolist()
    level = b_level(g, c)
    assert p.order.tolist() == sorted(range(3), key=lambda v: (-level[v], v))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpus": -1}, "cpus: must be >= 0, got -1"),
        ({"cpus": 1.5}, "cpus: expected an integer, got 1.5"),
        ({"cpus": "all"}, "cpus: expected a number of CPU devices >= 0 or 'file', got 'all'"),
        ({"cpus": 1, "cpu_memory": 0}, "cpu_memory: must be > 0, got 0"),
    ],
)
def test_bad_cpu_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError) as e:
        parse_dnn_partitioning(SMALL, **kwargs)
    assert str(e.value) == message


def test_published_workload_with_its_cpus():
    rel = "latency-inputs/LayerGraphs/resnet50_inference.json"
    doc = raw(rel)
    g, c = from_dnn_partitioning(DATA / rel, cpus="file")
    assert c.num_devices == doc["maxFPGAs"] + doc["maxCPUs"] == 14 + 8
    cpu = np.array([n["cpuLatency"] for n in doc["nodes"]]) / 1000
    assert g.kind_time["cpu"].tolist() == cpu.tolist()
    table, dclass = step_costs(g, c).duration, c.num_devices
    np.testing.assert_array_equal(table[:, 0], g.kind_time["accelerator"])
    np.testing.assert_array_equal(table[:, -1], g.kind_time["cpu"])
    assert dclass == table.shape[1]


def test_cli_cpus(tmp_path, capsys):
    out = tmp_path / "out"
    good = write(tmp_path, SMALL, "good.json")
    argv = ["graphs", "import-dnn-partitioning", str(good), "--out", str(out)]
    assert main([*argv, "--cpus", "2", "--cpu-memory", "4096"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "3.5 ms on accelerator / 35 ms on cpu measured" in lines[0]
    assert "2 accelerators of 1e-06 GB and 2 CPUs of 4.096e-06 GB" in lines[1]
    g, c = from_dnn_partitioning(good, cpus=2, cpu_memory=4096)
    assert load_graph(out / "good.graph.json").to_dict() == g.to_dict()
    assert load_cluster(out / "good.cluster.json").to_dict() == c.to_dict()
    assert main([*argv, "--cpus", "-1"]) == 2
    message = "cpus: expected a number of CPU devices >= 0 or 'file', got '-1'"
    assert one_line_error(capsys, "graphs") == message
