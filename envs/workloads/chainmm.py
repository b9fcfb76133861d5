"""``chainmm``: a chain of matrix products ``A_1 · A_2 · … · A_k`` in blocks (DOPPLER's ChainMM).

Every matrix is ``dim × dim`` and split into a ``blocks × blocks`` grid of input blocks
``A_m[i, j]`` of shape ``(dim/blocks, dim/blocks)``. The chain is evaluated left to right,
``P_1 = A_1``, ``P_m = P_{m-1} · A_m``: one ``einsum`` node ``ik,kj->ij`` per (row block i,
column block j, inner block k) multiplies ``P_{m-1}[i, k]`` by ``A_m[k, j]`` (both are
nodes: the matrices are data, not parameters), then one ``sum`` node per (i, j) adds the
``blocks`` partial products.

Nodes: ``k·b²`` inputs + per product ``b³`` block products + ``b²`` sums, in all
``k·b² + (k − 1)·(b³ + b²)`` with ``k = matrices`` and ``b = blocks``; edges
``3·(k − 1)·b³`` (two operands per product, ``b`` partials per sum). The defaults
(6 matrices, 2 × 2 blocks) give 84 nodes and 120 edges; ``matrices=17, blocks=8`` gives
10,304 nodes.

FLOP: ``2·r³`` per block product (``r = dim/blocks``), ``(b − 1)·r²`` per sum, so the
products total ``(k − 1)·2·dim³``. ``layer`` is 0 for inputs and ``m − 1`` for the nodes of
product ``P_m``.
"""

from __future__ import annotations

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder, split
from placegym.envs.workloads._ccr import ccr_option


@ccr_option
def chainmm(
    matrices: int = 6,
    dim: int = 4096,
    blocks: int = 2,
    dtype: str = "float32",
) -> Graph:
    """Build the block-partitioned matrix chain (see the module docstring).

    Args:
        matrices: ``k >= 2``, the number of matrices in the chain (the size knob).
        dim: side of every (square) matrix.
        blocks: blocks per side; ``dim`` must be a multiple of it (the size knob).
        dtype: element type of every block.

    Raises:
        ValueError: naming the parameter and its bad value.
    """
    if matrices < 2:
        raise ValueError(f"matrices: must be >= 2, got {matrices}")
    for name, value in (("dim", dim), ("blocks", blocks)):
        if value < 1:
            raise ValueError(f"{name}: must be >= 1, got {value}")
    r = split(dim, blocks, "dim")
    g = GraphBuilder(dtype=dtype)
    grid = range(blocks)
    mats = [[[g.input([r, r]) for _ in grid] for _ in grid] for _ in range(matrices)]
    acc = mats[0]
    for m in range(1, matrices):
        nxt = []
        for i in grid:
            row = []
            for j in grid:
                parts = [
                    g.einsum(
                        "ik,kj->ij",
                        [{"node": acc[i][k]}, {"node": mats[m][k][j]}],
                        [r, r],
                        m,
                        [[r, r], [r, r]],
                    )
                    for k in grid
                ]
                row.append(
                    g.add(
                        "sum",
                        flops=(blocks - 1) * r * r,
                        shape=[r, r],
                        layer=m,
                        args=[{"node": p} for p in parts],
                    )
                )
            nxt.append(row)
        acc = nxt
    return g.build(f"chainmm-{matrices}x{blocks}")
