"""Formats of DESIGN §2: loading, saving, every validation message, conversions, presets."""

import copy
import json
import math

import numpy as np
import pytest
import torch

from placegym.envs import (
    Cluster,
    Graph,
    Placement,
    get_preset,
    list_presets,
    load_cluster,
    load_graph,
    load_placement,
    simulate,
)

GRAPH = {
    "format": "placegym.graph/v1",
    "name": "tiny",
    "nodes": [
        {
            "id": 0,
            "op": "einsum",
            "flops": 2e9,
            "out_bytes": 4096,
            "param_bytes": 1024,
            "layer": 0,
            "spec": {"eq": "ij,jk->ik"},
        },
        {"id": 1, "op": "relu", "flops": 1e6, "out_bytes": 4096, "layer": 1},
        {"id": 2, "op": "add", "flops": 1e6, "out_bytes": 2048.5},
    ],
    "edges": [[0, 1], [1, 2], [0, 2]],
}
CLUSTER = {
    "format": "placegym.cluster/v1",
    "name": "two",
    "devices": [
        {
            "name": "gpu0",
            "flops": 1e13,
            "mem_bandwidth": 7e11,
            "memory": 1.6e10,
            "launch_overhead": 5e-6,
            "path": [0, 0],
        },
        {"name": "gpu1", "flops": 1e13, "memory": 1.6e10, "path": [0, 1]},
    ],
    "levels": [
        {"name": "intra-node", "bandwidth": 1.2e10, "latency": 5e-6},
        {"name": "intra-rack", "bandwidth": 1.25e10, "latency": 1e-5},
        {"name": "inter-rack", "bandwidth": 6.25e9, "latency": 2e-5},
    ],
}
PLACEMENT = {"format": "placegym.placement/v1", "device": [0, 1, 1], "order": [0, 2, 1]}


def edited(doc, path, value=None, delete=False):
    """A deep copy of ``doc`` with the entry at ``path`` (a tuple of keys) replaced."""
    out = copy.deepcopy(doc)
    obj = out
    for key in path[:-1]:
        obj = obj[key]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return out


# ------------------------------------------------------------------ round trips
def test_graph_round_trip(tmp_path):
    g = load_graph(GRAPH)
    assert (g.num_nodes, g.num_edges, g.name) == (3, 3, "tiny")
    assert g.layer.tolist() == [0, 1, -1]
    assert g.param_bytes.tolist() == [1024, 0, 0]
    assert g.spec[0] == {"eq": "ij,jk->ik"}
    assert g.io_bytes.tolist() == [4096 + 1024, 4096 + 4096, 2048.5 + 4096 + 4096]
    g.save(tmp_path / "g.json")
    g2 = load_graph(tmp_path / "g.json")
    assert g2.to_dict() == g.to_dict()
    assert load_graph(str(tmp_path / "g.json")).to_dict() == g.to_dict()
    assert json.loads((tmp_path / "g.json").read_text())["nodes"][0]["out_bytes"] == 4096


def test_cluster_round_trip(tmp_path):
    c = load_cluster(CLUSTER)
    assert c.num_devices == 2
    assert c.mem_bandwidth[1] == math.inf  # absent: no roofline term
    assert c.pair_level.tolist() == [[0, 1], [1, 0]]
    c.save(tmp_path / "c.json")
    assert load_cluster(tmp_path / "c.json").to_dict() == c.to_dict()
    assert "mem_bandwidth" not in c.to_dict()["devices"][1]


def test_placement_round_trip(tmp_path):
    p = load_placement(PLACEMENT)
    assert p.rank.tolist() == [0, 2, 1]
    p.save(tmp_path / "p.json")
    assert load_placement(tmp_path / "p.json").to_dict() == PLACEMENT
    s = simulate(GRAPH, CLUSTER, tmp_path / "p.json")
    assert s.makespan > 0


def test_loaders_accept_objects_and_defaults():
    g = load_graph(GRAPH)
    assert load_graph(g) is g
    c = load_cluster("p100x4")
    assert load_cluster(c) is c
    minimal = {
        "format": "placegym.cluster/v1",
        "devices": [{"flops": 1, "memory": 1}],
        "levels": [{"bandwidth": 1}],
    }
    m = load_cluster(minimal)
    assert (m.devices[0].name, m.devices[0].launch_overhead, m.levels[0].latency) == (
        "dev0",
        0.0,
        0.0,
    )
    ng = load_graph(
        {"format": "placegym.graph/v1", "nodes": [{"flops": 1, "out_bytes": 2}], "edges": []}
    )
    assert ng.op == ("op",) and ng.layer.tolist() == [-1]


# ------------------------------------------------------------------ validation
GRAPH_ERRORS = [
    (
        edited(GRAPH, ("format",), "placegym.graph/v9"),
        r"format: unknown format tag, expected 'placegym.graph/v1' or 'placegym.graph/v2', "
        r"got 'placegym.graph/v9'",
    ),
    (edited(GRAPH, ("format",), delete=True), r"format: missing field"),
    (edited(GRAPH, ("nodes",), delete=True), r"^nodes: missing field"),
    (edited(GRAPH, ("edges",), delete=True), r"^edges: missing field"),
    (edited(GRAPH, ("nodes", 1, "flops"), delete=True), r"nodes\[1\]\.flops: missing field"),
    (
        edited(GRAPH, ("nodes", 2, "out_bytes"), delete=True),
        r"nodes\[2\]\.out_bytes: missing field",
    ),
    (edited(GRAPH, ("nodes", 1, "flops"), -1), r"nodes\[1\]\.flops: must be >= 0, got -1"),
    (
        edited(GRAPH, ("nodes", 1, "out_bytes"), float("nan")),
        r"nodes\[1\]\.out_bytes: must be finite, got nan",
    ),
    (
        edited(GRAPH, ("nodes", 0, "param_bytes"), float("inf")),
        r"nodes\[0\]\.param_bytes: must be finite, got inf",
    ),
    (
        edited(GRAPH, ("nodes", 0, "flops"), "big"),
        r"nodes\[0\]\.flops: expected a number, got 'big'",
    ),
    (edited(GRAPH, ("nodes", 1, "layer"), -2), r"nodes\[1\]\.layer: must be >= 0, got -2"),
    (
        edited(GRAPH, ("nodes", 1, "id"), 5),
        r"nodes\[1\]\.id: node ids must be 0..n-1 in list order, expected 1, got 5",
    ),
    (edited(GRAPH, ("edges", 1), [1, 3]), r"edges\[1\]: node id out of range 0..2, got \[1, 3\]"),
    (
        edited(GRAPH, ("edges", 1), [-1, 2]),
        r"edges\[1\]: node id out of range 0..2, got \[-1, 2\]",
    ),
    (edited(GRAPH, ("edges", 1), [2, 2]), r"edges\[1\]: self-loop, got \[2, 2\]"),
    (edited(GRAPH, ("edges", 2), [0, 1]), r"edges\[2\]: duplicate edge, got \[0, 1\]"),
    (
        edited(GRAPH, ("edges", 2), [2, 0]),
        r"edges: the graph has a cycle: node \d is on it \((\d -> ){3}\d\)",
    ),
    (edited(GRAPH, ("edges", 0), [0]), r"edges\[0\]: expected a pair \[u, v\], got \[0\]"),
    (edited(GRAPH, ("nodes",), {"a": 1}), r"nodes: expected a list, got \{'a': 1\}"),
]


@pytest.mark.parametrize(("doc", "message"), GRAPH_ERRORS)
def test_graph_validation_messages(doc, message):
    with pytest.raises(ValueError, match=message):
        load_graph(doc)


def test_cycle_message_names_a_node_on_the_cycle():
    doc = edited(GRAPH, ("edges",), [[0, 1], [1, 2], [2, 1]])
    with pytest.raises(
        ValueError, match=r"cycle: node (1|2) is on it \((1 -> 2 -> 1|2 -> 1 -> 2)\)"
    ):
        load_graph(doc)


CLUSTER_ERRORS = [
    (
        edited(CLUSTER, ("format",), "placegym.graph/v1"),
        r"format: unknown format tag, expected 'placegym.cluster/v1', got 'placegym.graph/v1'",
    ),
    (edited(CLUSTER, ("devices",), delete=True), r"^devices: missing field"),
    (edited(CLUSTER, ("levels",), delete=True), r"^levels: missing field"),
    (edited(CLUSTER, ("devices",), []), r"devices: at least one device is required"),
    (edited(CLUSTER, ("devices", 1, "flops"), delete=True), r"devices\[1\]\.flops: missing field"),
    (
        edited(CLUSTER, ("devices", 0, "memory"), delete=True),
        r"devices\[0\]\.memory: missing field",
    ),
    (edited(CLUSTER, ("devices", 1, "flops"), 0), r"devices\[1\]\.flops: must be > 0, got 0"),
    (
        edited(CLUSTER, ("devices", 0, "mem_bandwidth"), 0),
        r"devices\[0\]\.mem_bandwidth: must be > 0, got 0",
    ),
    (edited(CLUSTER, ("devices", 0, "memory"), 0), r"devices\[0\]\.memory: must be > 0, got 0"),
    (
        edited(CLUSTER, ("devices", 0, "launch_overhead"), -1e-6),
        r"devices\[0\]\.launch_overhead: must be >= 0, got -1e-06",
    ),
    (
        edited(CLUSTER, ("devices", 0, "flops"), float("inf")),
        r"devices\[0\]\.flops: must be finite, got inf",
    ),
    (
        edited(CLUSTER, ("levels", 1, "bandwidth"), 0),
        r"levels\[1\]\.bandwidth: must be > 0, got 0",
    ),
    (
        edited(CLUSTER, ("levels", 2, "bandwidth"), delete=True),
        r"levels\[2\]\.bandwidth: missing field",
    ),
    (edited(CLUSTER, ("levels", 0, "latency"), -1), r"levels\[0\]\.latency: must be >= 0, got -1"),
    (
        edited(CLUSTER, ("devices", 1, "path"), [0]),
        r"devices\[1\]\.path: all device paths must have the same length \(devices\[0\]\.path has "
        r"2\), got \[0\]",
    ),
    (edited(CLUSTER, ("devices", 1, "path"), [0, -1]), r"devices\[1\]\.path\[1\]: must be >= 0"),
    (
        edited(CLUSTER, ("levels",), CLUSTER["levels"][:2]),
        r"levels: device paths have length 2, so 3 levels are needed; number of levels, got 2",
    ),
    (
        edited(CLUSTER, ("level_matrix",), [[0, 3], [3, 0]]),
        r"level_matrix\[0\]\[1\]: out of range \(must be < 3\), got 3",
    ),
    (
        edited(CLUSTER, ("level_matrix",), [[0, 1]]),
        r"level_matrix: expected 2 rows \(one per device\), got 1",
    ),
    (
        edited(CLUSTER, ("level_matrix",), [[0, 1], [1]]),
        r"level_matrix\[1\]: expected 2 entries, got 1",
    ),
]


@pytest.mark.parametrize(("doc", "message"), CLUSTER_ERRORS)
def test_cluster_validation_messages(doc, message):
    with pytest.raises(ValueError, match=message):
        load_cluster(doc)


PLACEMENT_ERRORS = [
    (
        edited(PLACEMENT, ("format",), "x"),
        r"format: unknown format tag, expected 'placegym.placement/v1', got 'x'",
    ),
    (edited(PLACEMENT, ("order",), delete=True), r"^order: missing field"),
    (edited(PLACEMENT, ("device",), delete=True), r"^device: missing field"),
    (
        edited(PLACEMENT, ("order",), [0, 1, 1]),
        r"order: not a permutation of 0..2: node 1 is repeated and node 2 is missing, "
        r"got \[0, 1, 1\]",
    ),
    (
        edited(PLACEMENT, ("order",), [0, 1, 3]),
        r"order\[2\]: not a permutation of 0..2: out of range, got 3",
    ),
    (
        edited(PLACEMENT, ("order",), [0, 1]),
        r"order: expected 3 entries \(one per node, like device\), got 2",
    ),
    (edited(PLACEMENT, ("device",), [0, -1, 0]), r"device\[1\]: must be >= 0, got -1"),
    (edited(PLACEMENT, ("device",), [0, 1.5, 0]), r"device\[1\]: expected an integer, got 1.5"),
]


@pytest.mark.parametrize(("doc", "message"), PLACEMENT_ERRORS)
def test_placement_validation_messages(doc, message):
    with pytest.raises(ValueError, match=message):
        load_placement(doc)


def test_placement_must_fit_graph_and_cluster():
    with pytest.raises(
        ValueError,
        match=r"device\[2\]: device index out of range for cluster "
        r"'two' with 2 devices, got 2",
    ):
        simulate(GRAPH, CLUSTER, edited(PLACEMENT, ("device",), [0, 1, 2]))
    short = {"format": "placegym.placement/v1", "device": [0, 1], "order": [1, 0]}
    with pytest.raises(
        ValueError,
        match=r"^device: expected 3 entries \(one per node of graph 'tiny'\), got 2$",
    ):
        simulate(GRAPH, CLUSTER, short)


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edited(GRAPH, ("nodes", 1, "flops"), -1)))
    with pytest.raises(ValueError, match=r"bad\.json: nodes\[1\]\.flops: must be >= 0"):
        load_graph(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=r"broken\.json: not valid JSON"):
        load_graph(broken)
    with pytest.raises(FileNotFoundError, match=r"missing\.json: no such file"):
        load_placement(tmp_path / "missing.json")
    with pytest.raises(
        ValueError,
        match=r"cluster: unknown preset or file 'p100x5' "
        r"\(presets: p100x4, ",
    ):
        load_cluster("p100x5")
    lst = tmp_path / "list.json"
    lst.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"list\.json: expected a JSON object, got list"):
        load_cluster(lst)


def test_constructors_validate_too():
    with pytest.raises(ValueError, match=r"nodes\[1\]\.flops: must be >= 0, got -3.0"):
        Graph(flops=[1.0, -3.0], out_bytes=[0, 0], edges=[])
    with pytest.raises(ValueError, match=r"out_bytes: expected 2 entries \(one per node\), got 3"):
        Graph(flops=[1.0, 3.0], out_bytes=[0, 0, 0], edges=[])
    with pytest.raises(ValueError, match=r"order\[0\]: not a permutation"):
        Placement(device=np.array([0]), order=np.array([4]))


# ------------------------------------------------------------------ conversions
def test_to_networkx_and_back():
    g = load_graph(GRAPH)
    nxg = g.to_networkx()
    assert sorted(nxg.edges) == [(0, 1), (0, 2), (1, 2)]
    assert nxg.nodes[0]["op"] == "einsum" and nxg.nodes[0]["param_bytes"] == 1024
    assert nxg.edges[0, 2]["bytes"] == 4096
    back = Graph.from_networkx(nxg).to_dict()
    assert sorted(back.pop("edges")) == sorted(g.to_dict()["edges"])
    assert back == {k: v for k, v in g.to_dict().items() if k != "edges"}


def test_to_pyg():
    g = load_graph(GRAPH)
    data = g.to_pyg()
    assert data.num_nodes == 3
    assert data.edge_index.dtype == torch.long
    assert data.edge_index.tolist() == [[0, 1, 0], [1, 2, 2]]
    assert data.x.shape == (3, 3) and data.x[0].tolist() == [2e9, 4096, 1024]
    assert data.edge_attr.shape == (3, 1)
    assert data.layer.tolist() == [0, 1, -1]


def test_structure_helpers():
    g = load_graph(GRAPH)
    assert g.topological_order.tolist() == [0, 1, 2]
    assert g.successors(0).tolist() == [1, 2]
    assert g.predecessors(2).tolist() == [0, 1]
    assert g.in_degree.tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        g.flops[0] = 5.0  # read-only


# ------------------------------------------------------------------ presets
def test_every_preset_loads_and_simulates():
    names = [name for name, _ in list_presets()]
    assert names == [
        "p100x4",
        "p100x2",
        "p100x8",
        "v100x8",
        "h100x8",
        "h100-2x8",
        "doppler-unit-4",
        "doppler-unit-8",
        "tpuv4-fattree-64",
        "h100-spineleaf-64",
        "tpuv4-fattree-1024",
        "h100-spineleaf-1024",
    ]
    g = load_graph(GRAPH)
    for name in names:
        c = load_cluster(name)
        assert c.name == name
        assert Cluster.from_dict(c.to_dict()).to_dict() == c.to_dict()
        p = Placement(device=np.arange(3) % c.num_devices, order=np.arange(3))
        assert simulate(g, c, p).makespan > 0


def test_preset_numbers():
    assert get_preset("p100x4").num_devices == 4
    assert get_preset("p100x4").pair_level.max() == 0
    v = get_preset("v100x8")
    assert v.num_devices == 8 and v.level_matrix is not None
    assert (v.pair_bandwidth == v.pair_bandwidth.T).all()
    # each V100 has six NVLinks: two doubled pairs and two single pairs
    links = (v.pair_level == 0).sum(axis=1) * 2 + (v.pair_level == 1).sum(axis=1) - 2
    assert links.tolist() == [6] * 8
    two = get_preset("h100-2x8")
    assert two.pair_level[0, 7] == 0 and two.pair_level[0, 8] == 1
    for n in (64, 1024):
        t = get_preset(f"tpuv4-fattree-{n}")
        h = get_preset(f"h100-spineleaf-{n}")
        assert t.num_devices == h.num_devices == n
        assert len(np.unique(t.paths[:, 0])) == n // 32  # racks
        assert [lv.bandwidth for lv in t.levels] == [900e9, 100e9, 400e9]
        assert [lv.bandwidth for lv in h.levels] == [900e9, 12.5e9, 50e9]
        assert [lv.latency for lv in h.levels] == [1e-4, 2e-4, 3e-4]
        assert t.memory[0] == 64e9 and h.memory[0] == 90e9
        # 8 per node, 4 nodes per rack
        assert t.pair_level[0, 7] == 0 and t.pair_level[0, 8] == 1
        assert t.pair_level[0, 31] == 1 and t.pair_level[0, 32] == 2
