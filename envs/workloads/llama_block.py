"""``llama_block``: the attention half of a Llama-7B layer, split by head groups.

Shapes (Llama-7B: ``heads = 32``, ``head_dim = 128``, ``D = heads · head_dim = 4096``;
``B = batch``, ``S = seq``, ``G = head_groups``, ``h = heads / G`` heads per group):

- ``input`` ``x`` ``(B, S, D)``.
- ``rmsnorm`` ``(B, S, D)`` with a resident gain ``(D,)``: 4 FLOP per element (square,
  accumulate, scale by the inverse RMS, scale by the gain).
- per group g and each of Q, K, V: ``einsum`` ``bsd,dhe->bshe`` of the normed input by the
  resident weight block ``(D, h, head_dim)`` → ``(B, S, h, head_dim)`` (column-parallel
  blocks of the projection), ``2·B·S·D·h·head_dim`` FLOP.
- per group: scores ``einsum`` ``bqhe,bkhe->bhqk`` → ``(B, h, S, S)``, ``2·B·h·S²·head_dim``
  FLOP; ``softmax`` over the last axis (``scale = head_dim^-½``, ``causal`` mask), 5 FLOP
  per element (scale, subtract the max, exp, sum, divide); weighted sum ``einsum``
  ``bhqk,bkhe->bqhe`` → ``(B, S, h, head_dim)``, ``2·B·h·S²·head_dim`` FLOP.
- per group: output projection ``einsum`` ``bshe,hed->bsd`` by the resident block
  ``(h, head_dim, D)`` → a partial ``(B, S, D)`` (row-parallel blocks).
- ``sum`` of the G partials and the residual ``x`` → ``(B, S, D)``, ``G`` FLOP per element.

Rotary position embeddings are not modelled (they are elementwise and would be fused).
``layers`` stacks that many blocks, each taking the previous block's output as ``x``.

Nodes: ``1 + layers·(2 + 7·G)``; edges ``layers·(2 + 10·G)``. The defaults (1 layer,
16 head groups of 2 heads, batch 1, seq 2048) give 115 nodes and 162 edges;
``layers=45, head_groups=32`` gives 10,171. ``layer`` is 0 for the input and ``l + 1`` for
the nodes of block ``l``.
"""

from __future__ import annotations

from dataclasses import dataclass

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder, split
from placegym.envs.workloads._ccr import ccr_option

NORM_FLOPS = 4  # per element: square, accumulate, scale by 1/rms, scale by the gain
SOFTMAX_FLOPS = 5  # per element: scale, subtract the max, exp, sum, divide
SILU_FLOPS = 4  # per element: negate, exp, add one, divide (the MLPs of llama_layer, moe)


@dataclass(frozen=True)
class LlamaShape:
    """Tensor extents shared by the Llama generators (see the module docstring)."""

    batch: int
    seq: int
    heads: int
    head_dim: int
    groups: int

    @property
    def d_model(self) -> int:
        """Model width: heads × head size."""
        return self.heads * self.head_dim

    @property
    def group_heads(self) -> int:
        """Query heads per key/value head (grouped-query attention)."""
        return self.heads // self.groups

    @property
    def tokens(self) -> list[int]:
        """``[B, S, D]``: the shape of the residual stream."""
        return [self.batch, self.seq, self.d_model]


def make_shape(
    batch: int, seq: int, heads: int, head_dim: int, head_groups: int, layers: int
) -> LlamaShape:
    """Validate the Llama extents; raises ValueError naming the bad parameter."""
    for name, value in (
        ("batch", batch),
        ("seq", seq),
        ("heads", heads),
        ("head_dim", head_dim),
        ("head_groups", head_groups),
        ("layers", layers),
    ):
        if value < 1:
            raise ValueError(f"{name}: must be >= 1, got {value}")
    split(heads, head_groups, "heads")
    return LlamaShape(batch, seq, heads, head_dim, head_groups)


def rmsnorm(g: GraphBuilder, x: int, shape: LlamaShape, layer: int) -> int:
    """An RMSNorm node over the residual stream ``x`` with a resident gain ``(D,)``."""
    return g.add(
        "rmsnorm",
        flops=NORM_FLOPS * shape.batch * shape.seq * shape.d_model,
        shape=shape.tokens,
        layer=layer,
        args=[{"node": x}, {"param": [shape.d_model]}],
        axis=-1,
        eps=1e-6,
    )


def add_attention(g: GraphBuilder, x: int, s: LlamaShape, layer: int) -> int:
    """Append one attention block reading ``x``; returns its residual-sum node."""
    bsd, he = [s.batch, s.seq, s.d_model], [s.group_heads, s.head_dim]
    head = [s.batch, s.seq, *he]
    probs = [s.batch, s.group_heads, s.seq, s.seq]
    xn = rmsnorm(g, x, s, layer)
    partials = []
    for _ in range(s.groups):
        q, k, v = (
            g.einsum(
                "bsd,dhe->bshe",
                [{"node": xn}, {"param": [s.d_model, *he]}],
                head,
                layer,
                [bsd, [s.d_model, *he]],
            )
            for _ in "qkv"
        )
        scores = g.einsum(
            "bqhe,bkhe->bhqk", [{"node": q}, {"node": k}], probs, layer, [head, head]
        )
        p = g.add(
            "softmax",
            flops=SOFTMAX_FLOPS * s.batch * s.group_heads * s.seq * s.seq,
            shape=probs,
            layer=layer,
            args=[{"node": scores}],
            axis=-1,
            scale=s.head_dim**-0.5,
            causal=True,
        )
        o = g.einsum("bhqk,bkhe->bqhe", [{"node": p}, {"node": v}], head, layer, [probs, head])
        partials.append(
            g.einsum(
                "bshe,hed->bsd",
                [{"node": o}, {"param": [*he, s.d_model]}],
                bsd,
                layer,
                [head, [*he, s.d_model]],
            )
        )
    return residual_sum(g, partials, x, s, layer)


def residual_sum(g: GraphBuilder, partials: list[int], x: int, s: LlamaShape, layer: int) -> int:
    """Add the partial products and the residual ``x``: one FLOP per element per partial."""
    return g.add(
        "sum",
        flops=len(partials) * s.batch * s.seq * s.d_model,
        shape=s.tokens,
        layer=layer,
        args=[{"node": u} for u in [*partials, x]],
    )


@ccr_option
def llama_block(
    batch: int = 1,
    seq: int = 2048,
    heads: int = 32,
    head_dim: int = 128,
    head_groups: int = 16,
    layers: int = 1,
    dtype: str = "float32",
) -> Graph:
    """Build ``layers`` Llama attention blocks (see the module docstring).

    Args:
        batch: sequences per step.
        seq: tokens per sequence.
        heads: attention heads (32 for Llama-7B).
        head_dim: features per head (128 for Llama-7B); ``D = heads · head_dim``.
        head_groups: blocks of heads; ``heads`` must be a multiple of it (a size knob).
        layers: stacked attention blocks (a size knob).
        dtype: element type of every tensor.

    Raises:
        ValueError: naming the parameter and its bad value.
    """
    s = make_shape(batch, seq, heads, head_dim, head_groups, layers)
    g = GraphBuilder(dtype=dtype)
    x = g.input(s.tokens)
    for layer in range(layers):
        x = add_attention(g, x, s, layer + 1)
    return g.build(f"llama_block-{layers}x{head_groups}")
