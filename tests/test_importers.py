"""Importers: torch.fx models with hand-counted nodes and FLOP, DOPPLER text files, and the
``placegym graphs import-doppler`` command."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from placegym.envs import Placement, load_cluster, load_graph, simulate
from placegym.envs.importers import from_doppler, from_fx, parse_doppler
from placegym.envs.importers.fx import mha_flops
from placegym.train.cli import main


def check_args(g):
    """Each spec's node args are exactly the node's producers."""
    for v in range(g.num_nodes):
        nodes = [a["node"] for a in g.spec[v].get("args", []) if "node" in a]
        assert sorted(nodes) == g.predecessors(v).tolist(), (v, g.spec[v])


# ------------------------------------------------------------------ torch.fx
def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def test_fx_mlp_nodes_flops_and_bytes():
    g = from_fx(mlp(), torch.randn(4, 16))
    assert g.op == ("input", "linear", "relu", "linear")
    assert g.edges.tolist() == [[0, 1], [1, 2], [2, 3]]
    # linear: 2·rows·in·out + rows·out (bias); relu: one FLOP per element
    assert g.flops.tolist() == [0, 2 * 4 * 16 * 32 + 4 * 32, 4 * 32, 2 * 4 * 32 * 8 + 4 * 8]
    assert g.flops.sum() == 6432
    assert g.out_bytes.tolist() == [4 * 16 * 4, 4 * 32 * 4, 4 * 32 * 4, 4 * 8 * 4]
    assert g.param_bytes.tolist() == [0, (16 * 32 + 32) * 4, 0, (32 * 8 + 8) * 4]
    assert g.layer.tolist() == [0, 1, 2, 3]
    assert g.spec[1]["args"] == [{"node": 0}, {"param": [32, 16]}, {"param": [32]}]
    assert g.spec[3]["shape"] == [4, 8] and g.spec[3]["dtype"] == "float32"
    check_args(g)


def test_fx_without_inputs_and_with_split_linears():
    g = from_fx(mlp(), torch.randn(4, 16), keep_inputs=False)
    assert g.op == ("linear", "relu", "linear") and g.num_edges == 2
    full = from_fx(mlp(), torch.randn(4, 16))
    s = from_fx(mlp(), torch.randn(4, 16), parts=2)
    # each linear becomes two column blocks and a concat: 1 + 3 + 1 + 3 nodes
    assert s.op == ("input", "linear", "linear", "concat", "relu", "linear", "linear", "concat")
    assert s.flops.sum() == full.flops.sum()
    assert s.param_bytes.sum() == full.param_bytes.sum()
    assert s.flops[1] == s.flops[2] == full.flops[1] / 2
    assert s.spec[2]["columns"] == [16, 32] and s.spec[2]["shape"] == [4, 16]
    assert s.spec[1]["args"] == [{"node": 0}, {"param": [16, 16]}, {"param": [16]}]
    assert s.spec[3]["kind"] == "concat" and s.out_bytes[3] == full.out_bytes[1]
    assert s.edges.tolist() == [
        [0, 1],
        [0, 2],
        [1, 3],
        [2, 3],
        [3, 4],
        [4, 5],
        [4, 6],
        [5, 7],
        [6, 7],
    ]
    check_args(s)


class Block(nn.Module):
    """A pre-norm transformer block with hand-written attention (fx traces it through)."""

    def __init__(self, d=16, h=4, f=32):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.act, self.down = nn.Linear(d, f), nn.GELU(), nn.Linear(f, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q = q.view(b, s, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, s, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, s, self.h, d // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (d // self.h) ** -0.5
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(y)
        return x + self.down(self.act(self.up(self.ln2(x))))


def test_fx_transformer_block_by_hand():
    torch.manual_seed(0)
    m = Block()
    g = from_fx(m, torch.randn(2, 5, 16))  # 10 tokens, 4 heads of 4
    # input, ln1, qkv, chunk, 3 × (view, transpose), kᵀ, q@kᵀ, scale, softmax, @v,
    # transpose, reshape, o, add, ln2, up, gelu, down, add; shape queries are folded
    assert g.num_nodes == 24 and g.num_edges == 27
    expected = {
        "layernorm": 2 * 10 * 16,  # one FLOP per element
        "linear": (2 * 10 * 16 * 48 + 480)  # qkv
        + (2 * 10 * 16 * 16 + 160)  # o
        + (2 * 10 * 16 * 32 + 320)  # up
        + (2 * 10 * 32 * 16 + 160),  # down
        "matmul": 2 * (2 * 2 * 4 * 5 * 5 * 4),  # q@kᵀ and att@v: 2·B·H·S·S·dh each
        "mul": 2 * 4 * 5 * 5,
        "softmax": 2 * 4 * 5 * 5,
        "gelu": 10 * 32,
        "add": 2 * 10 * 16,
    }
    for op, flops in expected.items():
        assert g.flops[[o == op for o in g.op]].sum() == flops, op
    assert g.flops.sum() == sum(expected.values()) == 46640
    assert g.param_bytes.sum() == 4 * sum(p.numel() for p in m.parameters())
    check_args(g)
    s = from_fx(m, torch.randn(2, 5, 16), parts=2, min_split_flops=5000)
    assert s.num_nodes == 24 + 4 * 2  # only the four linears are large enough
    assert s.flops.sum() == g.flops.sum()
    everything = from_fx(m, torch.randn(2, 5, 16), parts=2)
    assert everything.num_nodes == 24 + 6 * 2  # and the two attention matmuls
    check_args(everything)


class MhaBlock(nn.Module):
    def __init__(self, d=16, h=4):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        a, _ = self.mha(x, x, x, need_weights=False)
        return self.ln(x + a)


def test_fx_multihead_attention_is_one_node_with_its_flops():
    g = from_fx(MhaBlock(), torch.randn(2, 5, 16))
    assert g.op == ("input", "multihead_attention", "add", "layernorm")
    n, seq, e, h = 2, 5, 16, 4
    mha = (
        4 * (2 * n * seq * e * e)  # q, k, v and output projections
        + 2 * (2 * n * seq * seq * e)  # scores and weighted sum
        + n * h * seq * seq  # softmax
        + 3 * n * seq * e  # in-projection bias
        + n * seq * e  # out-projection bias
    )
    assert g.flops[1] == mha == 24520
    assert g.flops.sum() == mha + 2 * n * seq * e
    assert g.param_bytes[1] == 4 * sum(p.numel() for p in MhaBlock().mha.parameters())
    assert g.edges.tolist() == [[0, 1], [0, 2], [1, 2], [2, 3]]  # getitem folded
    assert mha_flops(MhaBlock().mha, [n, seq, e], [n, seq, e]) == mha


class Direct(nn.Module):
    """Parameters read directly (get_attr), one transposed: both fold into param_bytes."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(8, 16))
        self.scale = nn.Parameter(torch.ones(8))

    def forward(self, x):
        return torch.relu(x @ self.w.t()) * self.scale


def test_fx_direct_parameters_fold_into_their_consumers():
    g = from_fx(Direct(), torch.randn(3, 16), parts=4)
    assert g.op == ("input", *("matmul",) * 4, "concat", "relu", "mul")
    assert g.flops[1:5].tolist() == [2 * 3 * 16 * 8 / 4] * 4
    assert g.param_bytes.tolist() == [0, 128, 128, 128, 128, 0, 0, 32]
    check_args(g)


def test_fx_errors():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ValueError, match=r"module: torch.fx cannot trace Branchy"):
        from_fx(Branchy(), torch.randn(2))
    with pytest.raises(ValueError, match=r"example_inputs: Sequential failed on them"):
        from_fx(mlp(), torch.randn(4, 5))
    with pytest.raises(ValueError, match=r"parts: must be >= 1, got 0"):
        from_fx(mlp(), torch.randn(4, 16), parts=0)


# ------------------------------------------------------------------ DOPPLER files
# 7 vertices, inputs 0 and 1; edge 3 -> 5 twice; mixed separators and blank lines.
DOPPLER = """7
0 1
0, 1,2 2 3 3 4 5
2,2,3,4,5,5,6,6

100,10,matmul
200 , 20

300,30
400,40,add
500,50

"""


def test_doppler_drops_inputs_renumbers_and_merges(tmp_path):
    path = tmp_path / "chain.txt"
    path.write_text(DOPPLER)
    g = from_doppler(path)
    assert g.name == "chain"
    assert g.flops.tolist() == [100, 200, 300, 400, 500]
    assert g.out_bytes.tolist() == [10, 20, 30, 40, 50]
    assert g.op == ("matmul", "op", "op", "add", "op")
    assert [s["vertex"] for s in g.spec] == [2, 3, 4, 5, 6]  # new id i was vertex kept[i]
    # 2->3, 2->4, 3->5 (merged), 4->6, 5->6; the edges from inputs 0 and 1 are gone
    assert g.edges.tolist() == [[0, 1], [0, 2], [1, 3], [2, 4], [3, 4]]
    assert g.param_bytes.sum() == 0


def test_doppler_costs_are_cost_units_on_the_unit_presets():
    g = parse_doppler("3\n0\n0 1\n1 2\n2e10,1e10\n3e10,5e9\n")
    c = load_cluster("doppler-unit-4")
    one = simulate(g, c, Placement(device=np.array([0, 0]), order=np.array([0, 1])))
    assert one.makespan == pytest.approx(5.0)  # (2e10 + 3e10) / 1e10
    two = simulate(g, c, Placement(device=np.array([0, 1]), order=np.array([0, 1])))
    assert two.makespan == pytest.approx(6.0)  # plus the 1e10 comm units of vertex 1
    assert load_cluster("doppler-unit-8").num_devices == 8


def test_doppler_without_inputs_or_edges_and_leading_blank_lines():
    g = parse_doppler("2\n\n\n\n1,2\n3,4\n")
    assert g.num_nodes == 2 and g.num_edges == 0
    g = parse_doppler("\r\n\n3\r\n0\r\n1,\r\n2\r\n1,2\r\n3,4\r\n")  # CRLF, trailing comma
    assert g.flops.tolist() == [1, 3] and g.edges.tolist() == [[0, 1]]
    with pytest.raises(ValueError, match=r"^line 5: edge sources: expected integers"):
        parse_doppler("\n\n3\n0\n1,x\n2\n1,2\n3,4\n")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("x\n\n\n\n", r"^line 1: vertex count: expected integers, 'x' is not one, got 'x'"),
        ("0\n\n\n\n", r"^line 1: vertex count: expected one integer >= 1, got '0'"),
        ("3\n0\n", r"^line 3: missing \(edge sources\); the file has 2 lines"),
        ("3\n0\n0,a\n1,2\n", r"^line 3: edge sources: expected integers, 'a' is not one"),
        ("3\n0\n0 1\n1\n1,1\n1,1\n", r"^line 4: edge destinations: 1 entries for the 2 sources"),
        ("3\n7\n0\n1\n", r"^line 2: input vertex ids: vertex id 7 out of range 0..2, got '7'"),
        ("3\n0\n0\n9\n", r"^line 4: edge destinations: vertex id 9 out of range 0..2"),
        ("3\n0\n1\n1\n", r"^line 3: edge 0 is a self-loop on vertex 1, got '1'"),
        ("3\n0\n1\n0\n", r"^line 4: edge 0 \(1 -> 0\) points into input vertex 0"),
        ("3\n0\n1\n2\n1,2\n1,2,op,x\n", r"^line 6: expected comp_cost,comm_cost\[,op_type\], got"),
        ("3\n0\n1\n2\n1,2\n-1,2\n", r"^line 6: comp_cost: must be a finite number >= 0, not '-1'"),
        ("3\n0\n1\n2\nabc,2\n1,2\n", r"^line 5: comp_cost: expected a number, 'abc' is not one"),
        ("3\n0\n1\n2\n1,inf\n1,2\n", r"^line 5: comm_cost: must be a finite number >= 0"),
        ("3\n0\n1\n2\n1,2\n", r"^line 6: end of file after 1 cost lines, expected 2"),
        ("3\n0\n1\n2\n1,2\n1,2\n\n3,4\n", r"^line 8: more cost lines than the 2 non-input"),
        ("3\n\n1 2\n2 1\n1,1\n1,1\n1,1\n", r"edges: the graph has a cycle"),
    ],
)
def test_doppler_errors_name_the_line_and_text(text, match):
    with pytest.raises(ValueError, match=match):
        parse_doppler(text)


def test_doppler_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("3\n0\n0,a\n1,2\n")
    with pytest.raises(ValueError, match=r"bad.txt: line 3: edge sources"):
        from_doppler(path)
    with pytest.raises(FileNotFoundError, match=r"missing.txt: no such file"):
        from_doppler(tmp_path / "missing.txt")


# ------------------------------------------------------------------ CLI
def test_cli_import_doppler(tmp_path, capsys):
    src, out = tmp_path / "g.txt", tmp_path / "g.json"
    src.write_text(DOPPLER)
    assert main(["graphs", "import-doppler", str(src), "--out", str(out)]) == 0
    assert "5 nodes, 5 edges" in capsys.readouterr().out
    assert load_graph(out).to_dict() == from_doppler(src).to_dict()
    assert json.loads(out.read_text())["nodes"][0]["spec"] == {"kind": "opaque", "vertex": 2}


def test_cli_import_doppler_bad_file_is_one_line_exit_2(tmp_path, capsys):
    src = tmp_path / "bad.txt"
    src.write_text("3\n0\n0,a\n1,2\n")
    assert main(["graphs", "import-doppler", str(src), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 3: edge sources" in err
    assert main(["graphs", "import-doppler", str(tmp_path / "nope.txt"), "--out", "x"]) == 2
    assert "no such file" in capsys.readouterr().err
