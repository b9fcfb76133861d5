"""The torch.fx importer: models with hand-counted nodes and FLOP (DOPPLER files:
test_doppler_format.py)."""

import numpy as np
import pytest
import torch
from torch import nn

from placegym.envs import Cluster, Device, Level
from placegym.envs.analysis.levels import durations_on
from placegym.envs.importers import from_fx
from placegym.envs.importers._fx_timing import check_cpu
from placegym.envs.importers.fx import mha_flops


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


# ------------------------------------------------------------------ measured CPU times
def test_fx_measure_none_is_the_graph_of_the_rules():
    x = torch.randn(4, 16)
    g = from_fx(mlp(), x)
    assert from_fx(mlp(), x, measure=None).to_dict() == g.to_dict()
    assert g.format == "placegym.graph/v1" and not g.measured and g.kind_time == {}


@pytest.mark.parametrize("parts", [1, 2])
def test_fx_measure_cpu_times_every_node(parts):
    """Times vary run to run: the structure is what holds."""
    x = torch.randn(2, 5, 16)
    plain = from_fx(Block(), x, parts=parts)
    g = from_fx(Block(), x, parts=parts, measure="cpu", warmup=1, repeats=3)
    assert list(g.kind_time) == ["cpu"] and np.isnan(g.time).all()
    t = g.kind_time["cpu"]
    inputs = np.array([op == "input" for op in g.op])
    assert inputs.sum() == 1 and (t[inputs] == 0).all()
    assert np.isfinite(t).all() and (t[~inputs] > 0).all()
    doc = g.to_dict()  # all but the times is the unmeasured graph
    assert [nd.pop("time") for nd in doc["nodes"]] == [{"cpu": s} for s in t.tolist()]
    assert {**doc, "format": plain.format} == plain.to_dict()
    concats = [v for v in range(g.num_nodes) if g.op[v] == "concat"]
    assert bool(concats) == (parts > 1)
    for v in concats:  # a split op's seconds are shared by columns
        blocks = g.predecessors(v)
        per_column = [t[b] / np.diff(g.spec[b]["columns"])[0] for b in blocks]
        assert per_column == pytest.approx([per_column[0]] * len(blocks), rel=1e-12)
    # on a device of kind "cpu" a node runs for its measured seconds plus the launch
    c = Cluster((Device("cpu0", 1e9, 1e12, launch_overhead=1e-6, kind="cpu"),), (Level("l", 1e9),))
    np.testing.assert_array_equal(durations_on(g, c)[:, 0], t + 1e-6)


def test_fx_measure_errors():
    x = torch.randn(4, 16)
    with pytest.raises(ValueError, match=r"measure: expected None or 'cpu', got 'cuda'"):
        from_fx(mlp(), x, measure="cuda")
    with pytest.raises(ValueError, match=r"warmup: must be an integer >= 0, got -1"):
        from_fx(mlp(), x, measure="cpu", warmup=-1)
    with pytest.raises(ValueError, match=r"repeats: must be an integer >= 1, got 0"):
        from_fx(mlp(), x, measure="cpu", repeats=0)
    meta = torch.empty(4, 16, device="meta")
    with pytest.raises(ValueError, match=r"but example_inputs\[0\] is on meta"):
        from_fx(mlp().to("meta"), meta, measure="cpu")
    assert from_fx(mlp().to("meta"), meta).flops.sum() == 6432  # shapes need no CPU
    with pytest.raises(ValueError, match=r"but the module's '0\.weight' is on meta"):
        check_cpu(torch.fx.symbolic_trace(mlp().to("meta")), [x])
