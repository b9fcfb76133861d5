"""Workload generators: block-decomposed graphs with real shapes and executable specs.

``make_graph(name, **params)`` builds a registered workload; ``list_workloads()`` lists
them. Each module's docstring gives its shapes, node-count formula and defaults.

Node ``spec`` kinds (``args``, ``shape`` and ``dtype`` as in :mod:`placegym.envs.core.specs`):

- ``input``: a data block of ``shape``, no operands.
- ``einsum``: ``torch.einsum(equation, *operands)``.
- ``concat_einsum``: the node operands concatenated along ``axis`` form the equation's
  first operand; the last operand (a param) is its second (``random_dag``).
- ``sum``: elementwise sum of the operands, then the optional ``activation``.
- ``mul``: elementwise product of the two operands.
- ``silu``: ``x · sigmoid(x)`` of the one operand.
- ``rmsnorm``: ``x / sqrt(mean(x², axis) + eps) · gain`` (operands: x, the gain param).
- ``softmax``: softmax over ``axis`` of ``scale · x``, upper triangle masked if ``causal``.
- ``topk_gate``, ``dispatch``, ``combine``: the routing kernels of :mod:`.moe`.

:func:`~placegym.envs.workloads.training.to_training_step` turns any forward graph into
the graph of one training step (backward nodes, gradient edges, optimizer state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder, einsum_flops
from placegym.envs.workloads._params import bind_params, format_defaults, parse_assignments
from placegym.envs.workloads.chainmm import chainmm
from placegym.envs.workloads.ffnn import ffnn
from placegym.envs.workloads.llama_block import llama_block
from placegym.envs.workloads.llama_layer import llama_layer
from placegym.envs.workloads.moe import moe
from placegym.envs.workloads.random_dag import random_dag
from placegym.envs.workloads.training import OPTIMIZER_STATES, to_training_step

WORKLOADS: dict[str, Callable[..., Graph]] = {
    "chainmm": chainmm,
    "ffnn": ffnn,
    "llama_block": llama_block,
    "llama_layer": llama_layer,
    "moe": moe,
    "random_dag": random_dag,
}

_DESCRIPTIONS = {
    "chainmm": "chain of square matrix products A1·…·Ak in blocks (DOPPLER's ChainMM)",
    "ffnn": "feed-forward network, batch and feature blocks (DOPPLER's FFNN)",
    "llama_block": "Llama-7B attention block: RMSNorm, QKV, per-head-group attention",
    "llama_layer": "Llama-7B layer: attention block plus SwiGLU MLP",
    "moe": "mixture-of-experts layer: router, top-k gate, expert FFNs, combine (seeded)",
    "random_dag": "seeded layered random DAG of concat-einsum kernels (generalisation)",
}


def list_workloads() -> list[tuple[str, str]]:
    """``(name, one-line description)`` for every registered workload."""
    return [(name, _DESCRIPTIONS[name]) for name in WORKLOADS]


def make_graph(name: str, **params: Any) -> Graph:
    """Build workload ``name``; string values are converted by the signature's defaults.

    Raises:
        ValueError: an unknown name (listing the known ones), an unknown parameter
            (listing the parameters), or a bad value.
    """
    if name not in WORKLOADS:
        raise ValueError(f"workload: unknown name {name!r} (known: {', '.join(WORKLOADS)})")
    fn = WORKLOADS[name]
    return fn(**bind_params(name, fn, params))


__all__ = [
    "OPTIMIZER_STATES",
    "WORKLOADS",
    "GraphBuilder",
    "chainmm",
    "einsum_flops",
    "ffnn",
    "format_defaults",
    "list_workloads",
    "llama_block",
    "llama_layer",
    "make_graph",
    "moe",
    "parse_assignments",
    "random_dag",
    "to_training_step",
]
