"""Workload generators: documented counts, executable specs, hand-checked FLOP, seeding,
the 10k-node size knob, simulation, and the registry with its string parameters."""

import math

import numpy as np
import pytest

from placegym.envs import Placement, load_cluster, simulate
from placegym.envs.core.specs import DTYPE_BYTES
from placegym.envs.workloads import (
    WORKLOADS,
    chainmm,
    ffnn,
    list_workloads,
    llama_block,
    llama_layer,
    make_graph,
    moe,
    parse_assignments,
    random_dag,
)

# (nodes, edges) of each generator's defaults, as its module docstring states.
DEFAULTS = {
    "chainmm": (84, 120),
    "ffnn": (128, 192),
    "llama_block": (115, 162),
    "llama_layer": (197, 276),
    "moe": (116, 155),
    "random_dag": (128, 257),
}

# (parameters, nodes by the documented formula, edges by the formula or None if drawn)
FORMULA_CASES = [
    ("chainmm", {"matrices": 3, "blocks": 3, "dim": 96}, 3 * 9 + 2 * (27 + 9), 3 * 2 * 27),
    ("chainmm", {"matrices": 5, "blocks": 1}, 5 + 4 * 2, 3 * 4),
    ("ffnn", {"batch_blocks": 3, "feature_blocks": 2, "batch": 96}, 6 + 3 * (12 + 6), None),
    ("llama_block", {"head_groups": 4, "layers": 3}, 1 + 3 * (2 + 7 * 4), 3 * (2 + 40)),
    ("llama_block", {"head_groups": 32}, 1 + 2 + 7 * 32, 2 + 320),
    (
        "llama_layer",
        {"head_groups": 8, "mlp_blocks": 4, "layers": 2},
        1 + 2 * (4 + 56 + 20),
        2 * (4 + 80 + 28),
    ),
    ("moe", {"experts": 4, "expert_blocks": 2}, 4 + 4 * 8, 3 + 12 + 32),
    ("moe", {"experts": 16, "expert_blocks": 1, "top_k": 1}, 4 + 16 * 5, 3 + 48 + 64),
    ("random_dag", {"nodes": 57, "width": 5}, 57, None),
    ("random_dag", {"nodes": 1, "width": 5}, 1, 0),
]

TEN_K = {
    "chainmm": {"matrices": 17, "blocks": 8},
    "ffnn": {"dims": "2048,4096,4096,4096,4096,2048", "batch_blocks": 8, "feature_blocks": 16},
    "llama_block": {"layers": 45, "head_groups": 32},
    "llama_layer": {"layers": 32, "head_groups": 32, "mlp_blocks": 32},
    "moe": {"experts": 128, "expert_blocks": 32},
    "random_dag": {"nodes": 10000},
}


@pytest.fixture(scope="module")
def defaults():
    return {name: make_graph(name) for name in WORKLOADS}


def check_specs(g):
    """Every spec's node args are exactly the producers; shapes and params match bytes."""
    for v in range(g.num_nodes):
        spec = g.spec[v]
        itemsize = DTYPE_BYTES[spec["dtype"]]
        args = spec.get("args", [])
        nodes = [a["node"] for a in args if "node" in a]
        assert len(nodes) == len(set(nodes)), (v, spec)
        assert set(nodes) == set(g.predecessors(v).tolist()), (v, spec)
        assert spec["kind"] == g.op[v]
        assert g.out_bytes[v] == math.prod(spec["shape"]) * itemsize, (v, spec)
        params = sum(math.prod(a["param"]) for a in args if "param" in a)
        assert g.param_bytes[v] == params * itemsize, (v, spec)
        if spec["kind"] == "einsum":
            assert "->" in spec["equation"] and len(args) == spec["equation"].count(",") + 1


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_defaults_have_documented_counts_and_executable_specs(name, defaults):
    g = defaults[name]
    assert (g.num_nodes, g.num_edges) == DEFAULTS[name]
    assert 76 <= g.num_nodes <= 230  # sized like DOPPLER's graphs
    assert (g.layer >= 0).all()
    assert g.flops.sum() > 0
    check_specs(g)


@pytest.mark.parametrize(("name", "params", "nodes", "edges"), FORMULA_CASES)
def test_node_counts_follow_the_documented_formula(name, params, nodes, edges):
    g = make_graph(name, **params)
    assert g.num_nodes == nodes
    if edges is not None:
        assert g.num_edges == edges
    check_specs(g)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_size_knob_reaches_10k_nodes(name):
    # how fast: tests/benchmarks/test_generator_speed.py (make bench)
    g = make_graph(name, **TEN_K[name])
    assert g.num_nodes >= 10_000
    check_specs(g)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_generator_simulates_round_robin_on_p100x4(name, defaults):
    g = defaults[name]
    cluster = load_cluster("p100x4")
    order = g.topological_order
    device = np.empty(g.num_nodes, dtype=np.int64)
    device[order] = np.arange(g.num_nodes) % cluster.num_devices
    s = simulate(g, cluster, Placement(device=device, order=order))
    busiest = max(g.flops[device == d].sum() for d in range(4)) / 9.3e12
    assert np.isfinite(s.makespan) and s.makespan >= busiest > 0


# ------------------------------------------------------------------ FLOP by hand
def test_chainmm_flops_by_hand():
    g = chainmm(matrices=3, dim=8, blocks=2)  # blocks 4×4, two products
    products = 2 * 8 * (2 * 4 * 4 * 4)  # 8 block products of 2·4³ per product
    sums = 2 * 4 * (1 * 4 * 4)  # 4 sums of 2 partials (16 adds) per product
    assert g.flops.sum() == products + sums == 2 * 2 * 8**3 + sums
    assert chainmm().flops[chainmm().op.index("einsum")] == 2 * 2048**3


def test_llama_block_flops_by_hand():
    # B=1, S=4, 2 heads of 2 features (D=4), 2 head groups of one head
    g = llama_block(batch=1, seq=4, heads=2, head_dim=2, head_groups=2)
    norm = 4 * 4 * 4  # 4 FLOP per element of (1, 4, 4)
    qkv = 3 * 2 * (2 * 4 * 4 * 1 * 2)  # three projections, two groups, 2·S·D·h·e
    scores = weighted = 2 * (2 * 1 * 4 * 4 * 2)  # two groups, 2·h·S²·e
    softmax = 2 * (5 * 1 * 4 * 4)
    out_proj = 2 * (2 * 4 * 1 * 2 * 4)
    residual = 2 * 4 * 4  # two partials + the residual: 2 adds per element
    assert g.flops.sum() == norm + qkv + scores + weighted + softmax + out_proj + residual
    assert g.flops.sum() == 1024


def test_llama_default_matmul_flops_match_the_model():
    b, s, d, hidden = 1, 2048, 4096, 11008
    attn_mm = 4 * 2 * b * s * d * d + 2 * (2 * b * s * s * d)  # Q, K, V, O + QKᵀ, PV
    mlp_mm = 3 * 2 * b * s * d * hidden  # gate, up, down
    block, layer = llama_block(), llama_layer()
    einsum = np.array([op == "einsum" for op in block.op])
    assert block.flops[einsum].sum() == attn_mm
    einsum = np.array([op == "einsum" for op in layer.op])
    assert layer.flops[einsum].sum() == attn_mm + mlp_mm
    # every weight of the layer is resident exactly once: 4·D² + 3·D·hidden + 2·D
    assert layer.param_bytes.sum() == 4 * (4 * d * d + 3 * d * hidden + 2 * d)


def test_moe_flops_follow_the_routing():
    t, d, h, e, k = 64, 32, 48, 4, 2
    g = moe(tokens=t, d_model=d, hidden=h, experts=e, top_k=k, expert_blocks=2, seed=1)
    counts = [g.spec[v]["shape"][0] for v in range(g.num_nodes) if g.op[v] == "dispatch"]
    assert len(counts) == e and sum(counts) == t * k
    einsum = np.array([op == "einsum" for op in g.op])
    assert g.flops[einsum].sum() == 2 * t * d * e + sum(2 * 2 * n * d * h for n in counts)
    assert g.flops[g.op.index("combine")] == 2 * d * t * k


def test_random_dag_flops_follow_the_block_shapes():
    g = random_dag(nodes=40, width=4, seed=3)
    for v in range(g.num_nodes):
        spec = g.spec[v]
        if spec["kind"] == "input":
            continue
        widths = [g.spec[a["node"]]["shape"][1] for a in spec["args"] if "node" in a]
        k, n = spec["args"][-1]["param"]
        assert k == sum(widths) and n == spec["shape"][1]
        assert g.flops[v] == 2 * spec["shape"][0] * k * n


# ------------------------------------------------------------------ seeding
@pytest.mark.parametrize("fn", [moe, random_dag])
def test_same_seed_same_graph_different_seed_different_graph(fn):
    a, b, c = fn(seed=7), fn(seed=7), fn(seed=8)
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()
    gen = fn(seed=np.random.default_rng(7))  # a Generator is accepted too
    assert gen.to_dict() == a.to_dict()


def test_deterministic_generators_ignore_no_seed():
    for fn in (chainmm, ffnn, llama_block, llama_layer):
        assert fn().to_dict() == fn().to_dict()


def test_moe_balance_controls_the_load_spread():
    def spread(balance):
        g = moe(experts=16, balance=balance, seed=0)
        counts = [g.spec[v]["shape"][0] for v in range(g.num_nodes) if g.op[v] == "dispatch"]
        return np.std(counts)

    assert spread(100.0) < spread(0.1)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("chainmm", {"matrices": 1}, r"matrices: must be >= 2, got 1"),
        ("chainmm", {"blocks": 3}, r"dim: 4096 does not split into 3 equal blocks"),
        ("llama_block", {"head_groups": 5}, r"heads: 32 does not split into 5"),
        ("llama_block", {"seq": 0}, r"seq: must be >= 1, got 0"),
        ("llama_layer", {"mlp_blocks": 3}, r"hidden: 11008 does not split into 3"),
        ("moe", {"top_k": 9}, r"top_k: must be in 1..experts \(8\), got 9"),
        ("moe", {"balance": 0.0}, r"balance: must be > 0, got 0.0"),
        ("moe", {"hidden": 0}, r"hidden: must be >= 1, got 0"),
        ("chainmm", {"dim": -4}, r"dim: must be >= 1, got -4"),
        ("random_dag", {"fan_in": 0.5}, r"fan_in: must be >= 1, got 0.5"),
        ("random_dag", {"nodes": 0}, r"nodes: must be >= 1, got 0"),
        ("ffnn", {"dtype": "int8"}, r"dtype: expected one of float32, .*got 'int8'"),
    ],
)
def test_bad_parameters_name_the_field_and_value(name, params, match):
    with pytest.raises(ValueError, match=match):
        make_graph(name, **params)


# ------------------------------------------------------------------ registry
def test_list_workloads_names_and_one_line_descriptions():
    listed = list_workloads()
    assert [n for n, _ in listed] == list(WORKLOADS)
    assert set(WORKLOADS) >= {"chainmm", "ffnn", "llama_block", "llama_layer", "moe"}
    for _, desc in listed:
        assert desc and "\n" not in desc


def test_make_graph_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"workload: unknown name 'gpt' \(known: chainmm, ffnn, "):
        make_graph("gpt")


def test_make_graph_unknown_parameter_lists_the_parameters():
    with pytest.raises(
        ValueError, match=r"workload chainmm: unknown parameter 'size' \(parameters: matrices, "
    ):
        make_graph("chainmm", size=3)


def test_string_parameters_are_converted_by_the_signature():
    g = make_graph("ffnn", dims="[512, 1024,256]", batch="64", feature_blocks="2")
    assert g.to_dict() == ffnn(dims=(512, 1024, 256), batch=64, feature_blocks=2).to_dict()
    g = make_graph("moe", balance="0.5", seed="3", tokens="128", dtype="float16")
    assert g.to_dict() == moe(balance=0.5, seed=3, tokens=128, dtype="float16").to_dict()
    assert make_graph("random_dag", dim_sigma="0", nodes="20").num_nodes == 20


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"blocks": "two"}, r"workload chainmm: parameter blocks: expected an integer, got 'two'"),
        ({"dim": "1.5"}, r"parameter dim: expected an integer, got '1.5'"),
    ],
)
def test_bad_string_values_name_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        make_graph("chainmm", **params)
    with pytest.raises(ValueError, match=r"parameter dims: expected a comma-separated list"):
        make_graph("ffnn", dims="1024,x")
    with pytest.raises(ValueError, match=r"parameter balance: expected a number, got 'lots'"):
        make_graph("moe", balance="lots")


def test_parse_assignments():
    assert parse_assignments(["a=1", "dims=1,2", "a=3", "s="]) == {
        "a": "3",
        "dims": "1,2",
        "s": "",
    }
    with pytest.raises(ValueError, match=r"--param: expected k=v, got 'blocks'"):
        parse_assignments(["blocks"])
    with pytest.raises(ValueError, match=r"--param: expected k=v, got '=3'"):
        parse_assignments(["=3"])


# ------------------------------------------------------------------ CLI
def test_cli_graphs_list(capsys):
    from placegym.train.cli import main

    assert main(["graphs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["name", "nodes", "edges"]
    # a row per workload, each followed by an indented line of its parameters
    rows = {ln.split()[0]: ln.split()[1:3] for ln in lines[1::2]}
    assert rows == {n: [str(a), str(b)] for n, (a, b) in DEFAULTS.items()}
    assert all(ln.strip().startswith("--param defaults: ") for ln in lines[2::2])


def test_cli_graphs_export_writes_the_graph(tmp_path, capsys):
    from placegym.envs import load_graph
    from placegym.train.cli import main

    out = tmp_path / "g.json"
    argv = ["graphs", "export", "llama_layer", "--param", "layers=2", "--param", "seq=256"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "393 nodes" in capsys.readouterr().out  # 1 + 2·(4 + 7·16 + 5·16)
    assert load_graph(out).to_dict() == llama_layer(layers=2, seq=256).to_dict()
    argv = ["graphs", "export", "ffnn", "--param", "dims=256,512", "--out", str(out)]
    assert main(argv) == 0
    assert load_graph(out).to_dict() == ffnn(dims=(256, 512)).to_dict()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gpt"], "workload: unknown name 'gpt' (known: chainmm, ffnn, llama_block,"),
        (["moe", "--param", "experts=x"], "parameter experts: expected an integer, got 'x'"),
        (["moe", "--param", "colour=red"], "workload moe: unknown parameter 'colour'"),
        (["moe", "--param", "experts"], "--param: expected k=v, got 'experts'"),
        (["chainmm", "--param", "blocks=3"], "dim: 4096 does not split into 3 equal blocks"),
    ],
)
def test_cli_graphs_export_errors_are_one_line_exit_2(argv, message, tmp_path, capsys):
    from placegym.train.cli import main

    out = tmp_path / "g.json"
    assert main(["graphs", "export", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placegym graphs: error: ") and err.count("\n") == 1
    assert message in err
    assert not out.exists()
