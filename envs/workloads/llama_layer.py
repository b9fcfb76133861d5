"""``llama_layer``: a full Llama-7B layer, attention block plus SwiGLU MLP, in blocks.

The attention half is exactly :mod:`~placegym.envs.workloads.llama_block`'s (read its
docstring for those shapes). The MLP reads the block's output ``h`` ``(B, S, D)``, with
``F = mlp_blocks`` blocks of the hidden dimension (``hidden = 11008`` for Llama-7B,
``f = hidden / F`` per block):

- ``rmsnorm`` ``(B, S, D)`` with a resident gain ``(D,)``, 4 FLOP per element.
- per block: gate and up ``einsum`` ``bsd,df->bsf`` by resident ``(D, f)`` blocks →
  ``(B, S, f)``, ``2·B·S·D·f`` FLOP each; ``silu`` of the gate, 4 FLOP per element
  (``x / (1 + exp(−x))``); ``mul`` of that and the up product, 1 FLOP per element; down
  ``einsum`` ``bsf,fd->bsd`` by a resident ``(f, D)`` block → a partial ``(B, S, D)``.
- ``sum`` of the F partials and the residual ``h``, ``F`` FLOP per element.

``layers`` stacks that many layers (``layers=32`` is the whole Llama-7B trunk).

Nodes: ``1 + layers·(4 + 7·G + 5·F)``; edges ``layers·(4 + 10·G + 7·F)``. The defaults
(1 layer, 16 head groups, 16 MLP blocks, batch 1, seq 2048) give 197 nodes and 276 edges;
``layers=32, head_groups=32, mlp_blocks=32`` gives 12,417. ``layer`` is 0 for the input,
``2l + 1`` for the attention nodes of layer ``l`` and ``2l + 2`` for its MLP nodes.
"""

from __future__ import annotations

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder, split
from placegym.envs.workloads._ccr import ccr_option
from placegym.envs.workloads.llama_block import (
    SILU_FLOPS,
    LlamaShape,
    add_attention,
    make_shape,
    residual_sum,
    rmsnorm,
)


def add_mlp(g: GraphBuilder, h: int, s: LlamaShape, hidden: int, blocks: int, layer: int) -> int:
    """Append one SwiGLU MLP reading ``h``; returns its residual-sum node."""
    f = split(hidden, blocks, "hidden")
    bsd, bsf = s.tokens, [s.batch, s.seq, f]
    elems = s.batch * s.seq * f
    hn = rmsnorm(g, h, s, layer)
    partials = []
    for _ in range(blocks):
        gate, up = (
            g.einsum(
                "bsd,df->bsf",
                [{"node": hn}, {"param": [s.d_model, f]}],
                bsf,
                layer,
                [bsd, [s.d_model, f]],
            )
            for _ in "gu"
        )
        act = g.add(
            "silu", flops=SILU_FLOPS * elems, shape=bsf, layer=layer, args=[{"node": gate}]
        )
        prod = g.add(
            "mul", flops=elems, shape=bsf, layer=layer, args=[{"node": act}, {"node": up}]
        )
        partials.append(
            g.einsum(
                "bsf,fd->bsd",
                [{"node": prod}, {"param": [f, s.d_model]}],
                bsd,
                layer,
                [bsf, [f, s.d_model]],
            )
        )
    return residual_sum(g, partials, h, s, layer)


@ccr_option
def llama_layer(
    batch: int = 1,
    seq: int = 2048,
    heads: int = 32,
    head_dim: int = 128,
    head_groups: int = 16,
    hidden: int = 11008,
    mlp_blocks: int = 16,
    layers: int = 1,
    dtype: str = "float32",
) -> Graph:
    """Build ``layers`` Llama layers, attention plus SwiGLU MLP (see the module docstring).

    Args:
        batch: sequences per step.
        seq: tokens per sequence.
        heads: attention heads (32 for Llama-7B).
        head_dim: features per head (128 for Llama-7B).
        head_groups: blocks of heads; ``heads`` must be a multiple of it (a size knob).
        hidden: MLP hidden size (11008 for Llama-7B).
        mlp_blocks: blocks of the hidden size; ``hidden`` must be a multiple of it.
        layers: stacked layers (a size knob).
        dtype: element type of every tensor.

    Raises:
        ValueError: naming the parameter and its bad value.
    """
    s = make_shape(batch, seq, heads, head_dim, head_groups, layers)
    if mlp_blocks < 1:
        raise ValueError(f"mlp_blocks: must be >= 1, got {mlp_blocks}")
    split(hidden, mlp_blocks, "hidden")
    g = GraphBuilder(dtype=dtype)
    x = g.input(s.tokens)
    for layer in range(layers):
        h = add_attention(g, x, s, 2 * layer + 1)
        x = add_mlp(g, h, s, hidden, mlp_blocks, 2 * layer + 2)
    return g.build(f"llama_layer-{layers}x{head_groups}x{mlp_blocks}")
