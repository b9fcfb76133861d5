"""``random_dag``: a seeded family of layered DAGs of executable kernels, for generalisation.

Structure: ``L = ceil(nodes / width)`` layers; every layer gets one node and the other
``nodes − L`` are spread over the layers uniformly at random (multinomial). Layer-0 nodes
are ``input`` blocks. A node in layer ``ℓ ≥ 1`` has ``m = 1 + Poisson(fan_in − 1)``
producers (at most the number of candidates): one drawn from layer ``ℓ − 1``, the others
without replacement from layers ``ℓ − window .. ℓ − 1``. Node ids go layer by layer.

Costs: every node outputs a ``(rows, n_v)`` block, with width
``n_v = max(16, 16·round(dim · exp(dim_sigma · z) / 16))``, ``z ~ N(0, 1)`` (log-normal
around ``dim``). A non-input node runs ``concat_einsum``: its producers' blocks are
concatenated along the last axis (in ``args`` order) into ``(rows, K)`` with ``K`` the sum
of their widths, then ``ik,kj->ij`` with a resident ``(K, n_v)`` parameter:
``2·rows·K·n_v`` FLOP, ``4·K·n_v`` parameter bytes in float32.

Nodes: exactly ``nodes`` (default 128, in 16 layers of 8 on average); edges are drawn,
about ``fan_in`` per non-input node (257 with the defaults). ``nodes=10000`` builds in
well under a second. ``layer`` is the layer index ``ℓ``. Every draw comes from
``numpy.random.default_rng(seed)`` (or the Generator passed as ``seed``), in this order:
layer sizes, widths, then each node's producers in id order.
"""

from __future__ import annotations

import math

import numpy as np

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder
from placegym.envs.workloads._ccr import ccr_option


def _check(nodes: int, width: int, fan_in: float, window: int, rows: int, dim: int) -> None:
    for name, value in (
        ("nodes", nodes),
        ("width", width),
        ("window", window),
        ("rows", rows),
        ("dim", dim),
    ):
        if value < 1:
            raise ValueError(f"{name}: must be >= 1, got {value}")
    if not fan_in >= 1:
        raise ValueError(f"fan_in: must be >= 1, got {fan_in}")


def _layers(nodes: int, width: int, rng: np.random.Generator) -> list[range]:
    """Node id ranges of the layers: each non-empty, sizes drawn multinomially."""
    count = math.ceil(nodes / width)
    sizes = 1 + rng.multinomial(nodes - count, np.full(count, 1.0 / count))
    ends = np.cumsum(sizes).tolist()
    return [range(a, b) for a, b in zip([0, *ends[:-1]], ends)]


def _producers(
    layers: list[range], ell: int, fan_in: float, window: int, rng: np.random.Generator
) -> list[int]:
    """Sorted producers of one node in layer ``ell`` (see the module docstring)."""
    first = int(rng.choice(layers[ell - 1]))
    pool = [u for lay in layers[max(0, ell - window) : ell] for u in lay if u != first]
    m = min(int(rng.poisson(fan_in - 1.0)), len(pool))
    extra = rng.choice(pool, size=m, replace=False).tolist() if m else []
    return sorted([first, *extra])


@ccr_option
def random_dag(
    nodes: int = 128,
    width: int = 8,
    fan_in: float = 2.0,
    window: int = 2,
    rows: int = 256,
    dim: int = 1024,
    dim_sigma: float = 0.5,
    seed: int | np.random.Generator = 0,
    dtype: str = "float32",
) -> Graph:
    """Build one member of the layered random-DAG family (see the module docstring).

    Args:
        nodes: total node count (the size knob).
        width: mean nodes per layer.
        fan_in: mean producers per non-input node (>= 1).
        window: how many earlier layers a node may read from (>= 1).
        rows: rows of every block.
        dim: median block width.
        dim_sigma: log-normal spread of the block widths (0 = all ``dim``, rounded).
        seed: seed, or a numpy Generator, for every draw.
        dtype: element type of every block.

    Raises:
        ValueError: naming the parameter and its bad value.
    """
    _check(nodes, width, fan_in, window, rows, dim)
    if not dim_sigma >= 0:
        raise ValueError(f"dim_sigma: must be >= 0, got {dim_sigma}")
    rng = np.random.default_rng(seed)
    layers = _layers(nodes, width, rng)
    z = rng.standard_normal(nodes)
    widths = np.maximum(16, 16 * np.round(dim * np.exp(dim_sigma * z) / 16)).astype(int).tolist()
    g = GraphBuilder(dtype=dtype)
    for v in layers[0]:
        g.input([rows, widths[v]])
    for ell in range(1, len(layers)):
        for v in layers[ell]:
            src = _producers(layers, ell, fan_in, window, rng)
            k, n = sum(widths[u] for u in src), widths[v]
            g.add(
                "concat_einsum",
                flops=2 * rows * k * n,
                shape=[rows, n],
                layer=ell,
                args=[*({"node": u} for u in src), {"param": [k, n]}],
                equation="ik,kj->ij",
                axis=-1,
            )
    return g.build(f"random_dag-{nodes}x{width}")
