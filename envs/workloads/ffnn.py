"""``ffnn``: a feed-forward network partitioned into blocks.

``X (batch × dims[0])`` goes through ``len(dims) - 1`` dense layers ``W_l (dims[l] ×
dims[l+1])``, ReLU between layers. The batch is split into ``batch_blocks`` row blocks and
every feature dimension into ``feature_blocks`` column blocks, so each layer is a block
matrix product: one ``einsum`` node per (row block i, output block j, input block k)
multiplying ``X[i, k]`` by the resident weight block ``W[k, j]``, then one ``sum`` node per
(i, j) adding the k partial products (with the activation fused).

Nodes: ``rb·fb`` inputs + per layer ``rb·fb²`` products + ``rb·fb`` sums. The defaults
give 8 + 3 × 40 = 128 nodes and 192 edges; ``layer`` is 0 for inputs and l+1 for layer l.
The size knobs are the blocks and the layer count: ``batch_blocks=8, feature_blocks=16,
dims=(2048, 4096, 4096, 4096, 4096, 2048)`` gives 11,008 nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder, split
from placegym.envs.workloads._ccr import ccr_option


@ccr_option
def ffnn(
    batch: int = 1024,
    dims: Sequence[int] = (2048, 4096, 4096, 2048),
    batch_blocks: int = 2,
    feature_blocks: int = 4,
    dtype: str = "float32",
    activation: str = "relu",
) -> Graph:
    """Build the block-partitioned FFNN graph (see the module docstring)."""
    dims = [int(d) for d in dims]
    if len(dims) < 2:
        raise ValueError(f"dims: need at least an input and an output size, got {dims}")
    b = GraphBuilder(dtype=dtype)
    rows = split(batch, batch_blocks, "batch")
    cols = [split(d, feature_blocks, f"dims[{i}]") for i, d in enumerate(dims)]
    x = [[b.input([rows, cols[0]]) for _ in range(feature_blocks)] for _ in range(batch_blocks)]
    for layer in range(len(dims) - 1):
        k_size, n_size = cols[layer], cols[layer + 1]
        last = layer == len(dims) - 2
        nxt = []
        for i in range(batch_blocks):
            row = []
            for _ in range(feature_blocks):
                parts = [
                    b.einsum(
                        "ik,kj->ij",
                        [{"node": x[i][k]}, {"param": [k_size, n_size]}],
                        [rows, n_size],
                        layer + 1,
                        [[rows, k_size], [k_size, n_size]],
                    )
                    for k in range(feature_blocks)
                ]
                act = {} if last else {"activation": activation}
                flops = (feature_blocks - 1 + (0 if last else 1)) * rows * n_size
                row.append(
                    b.add(
                        "sum",
                        flops=flops,
                        shape=[rows, n_size],
                        layer=layer + 1,
                        args=[{"node": p} for p in parts],
                        **act,
                    )
                )
            nxt.append(row)
        x = nxt
    return b.build(f"ffnn-{len(dims) - 1}x{batch_blocks}x{feature_blocks}")
