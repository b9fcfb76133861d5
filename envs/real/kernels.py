"""Executable kernels from node ``spec`` s, and the scale knob.

Every node kind of :mod:`placegym.envs.workloads` runs with torch: ``input`` (loads its
data block: a copy), ``einsum``, ``concat_einsum``, ``sum`` (+ ``activation``), ``mul``,
``silu``, ``rmsnorm``, ``softmax`` (scaled, optionally causal), ``topk_gate``,
``dispatch`` and ``combine`` (the MoE routing kernels). ``args`` give the operands in
order: producer outputs (``{"node": u}``) and resident parameters (``{"param": shape}``).

:func:`scale_graph` divides every tensor dimension larger than ``SMALL_DIM`` by ``scale``
(``d -> max(SMALL_DIM, floor(d / scale))``; small dimensions such as heads per group or
experts are counts and stay; the same map for every tensor, so operand shapes stay
consistent) and recomputes ``out_bytes`` and ``param_bytes`` from the new shapes and
``flops`` (einsums exactly, other kernels in proportion to their output size). The
simulator then describes the same work the backend runs. ``scale > 1`` shrinks a graph so
a CPU run takes seconds; ``scale < 1`` grows it (``0.25``: blocks 4× larger per
dimension, 64× the FLOP of a matmul) so that on a large GPU kernel time dominates the
runtime's per-kernel dispatch cost.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import DTYPE_BYTES, einsum_flops

__all__ = ["Kernel", "build_kernels", "make_tensors", "scale_graph"]

EXECUTABLE = (
    "input",
    "einsum",
    "concat_einsum",
    "sum",
    "mul",
    "silu",
    "rmsnorm",
    "softmax",
    "topk_gate",
    "dispatch",
    "combine",
)


#: Dimensions up to this size are structural counts (heads per group, experts, ...) and
#: are never scaled; larger ones become ``max(SMALL_DIM, floor(d / scale))``.
SMALL_DIM = 16


def _scale_shape(shape: Sequence[int], scale: float) -> list[int]:
    # the epsilon keeps d / scale from rounding just below an integer (7 / 0.7 and the like)
    return [
        int(d) if d <= SMALL_DIM else max(SMALL_DIM, math.floor(d / scale + 1e-9)) for d in shape
    ]


def _check_spec(graph: Graph, v: int) -> dict[str, Any]:
    spec = dict(graph.spec[v])
    kind = spec.get("kind")
    if kind not in EXECUTABLE:
        raise ValueError(
            f"node {v}: spec kind {kind!r} is not executable (executable kinds: "
            f"{', '.join(EXECUTABLE)})"
        )
    if "shape" not in spec:
        raise ValueError(f"node {v}: spec has no 'shape'")
    if spec.get("dtype", "float32") not in DTYPE_BYTES:
        raise ValueError(
            f"node {v}: spec dtype {spec.get('dtype')!r} is not one of {', '.join(DTYPE_BYTES)}"
        )
    producers = {a["node"] for a in spec.get("args", []) if "node" in a}
    if producers != set(graph.predecessors(v).tolist()):
        raise ValueError(
            f"node {v}: spec args name nodes {sorted(producers)}, the graph's "
            f"producers are {graph.predecessors(v).tolist()}"
        )
    return spec


def scale_graph(graph: Graph, scale: float) -> Graph:
    """The graph with every tensor dimension divided by ``scale`` (module docstring)."""
    ok = isinstance(scale, numbers.Real) and not isinstance(scale, bool)
    if not ok or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale: must be a number > 0, got {scale!r}")
    scale = int(scale) if float(scale).is_integer() else float(scale)
    specs = [_check_spec(graph, v) for v in range(graph.num_nodes)]
    if scale == 1:
        return graph
    new_specs, flops, out_b, par_b = [], [], [], []
    for spec in specs:
        s = dict(spec)
        s["shape"] = _scale_shape(spec["shape"], scale)
        args = [dict(a) for a in spec.get("args", [])]
        for a in args:
            if "param" in a:
                a["param"] = _scale_shape(a["param"], scale)
        if args:
            s["args"] = args
        item = DTYPE_BYTES[s.get("dtype", "float32")]
        new_specs.append(s)
        out_b.append(math.prod(s["shape"]) * item)
        par_b.append(sum(math.prod(a["param"]) for a in args if "param" in a) * item)
    for v, s in enumerate(new_specs):
        flops.append(_scaled_flops(graph, v, specs[v], s, new_specs))
    return Graph(
        flops=flops,
        out_bytes=out_b,
        param_bytes=par_b,
        edges=graph.edges,
        layer=graph.layer,
        op=graph.op,
        spec=tuple(new_specs),
        name=f"{graph.name}/scale{scale}",
    )


def _operand_shapes(s: dict[str, Any], specs: list[dict[str, Any]]) -> list[list[int]]:
    return [a["param"] if "param" in a else specs[a["node"]]["shape"] for a in s["args"]]


def _scaled_flops(graph: Graph, v: int, old: dict, new: dict, specs: list[dict]) -> float:
    if new["kind"] == "einsum":
        return einsum_flops(new["equation"], _operand_shapes(new, specs))
    if new["kind"] == "concat_einsum":
        shapes = _operand_shapes(new, specs)
        axis = new.get("axis", -1)
        cat = list(shapes[0])
        cat[axis] = sum(s[axis] for s in shapes[:-1])
        param = list(shapes[-1])
        param[0] = cat[axis]
        return einsum_flops(new["equation"], [cat, param])
    ratio = math.prod(new["shape"]) / max(1, math.prod(old["shape"]))
    return float(graph.flops[v]) * ratio


# ---------------------------------------------------------------------- kernels
@dataclass
class Kernel:
    """A node ready to run: ``fn(inputs, params) -> output``; params are built once."""

    node: int
    kind: str
    fn: Callable[..., Any]
    param_shapes: list[list[int]]
    out_shape: list[int]
    dtype: str


def build_kernels(graph: Graph) -> list[Kernel]:
    """One :class:`Kernel` per node. Raises ``ValueError`` naming a node whose spec cannot
    run (unknown kind, missing shape, args that do not match the graph)."""
    out = []
    for v in range(graph.num_nodes):
        spec = _check_spec(graph, v)
        args = spec.get("args", [])
        out.append(
            Kernel(
                node=v,
                kind=spec["kind"],
                fn=_make_fn(spec),
                param_shapes=[a["param"] for a in args if "param" in a],
                out_shape=list(spec["shape"]),
                dtype=spec.get("dtype", "float32"),
            )
        )
    return out


def _split(spec: dict[str, Any], inputs: list, params: list) -> list:
    """Operands in ``args`` order from the producer outputs and the params."""
    it_in, it_par = iter(inputs), iter(params)
    return [next(it_par) if "param" in a else next(it_in) for a in spec.get("args", [])]


def _make_fn(spec: dict[str, Any]) -> Callable[..., Any]:
    import torch
    import torch.nn.functional as F

    kind = spec["kind"]
    act = {"relu": F.relu, "silu": F.silu, "gelu": _gelu, None: None}[spec.get("activation")]

    def einsum(inputs, params, data):
        return torch.einsum(spec["equation"], *_split(spec, inputs, params))

    def concat_einsum(inputs, params, data):
        return torch.einsum(
            spec["equation"],
            torch.cat(inputs, dim=spec.get("axis", -1)),
            params[0][: sum(x.shape[spec.get("axis", -1)] for x in inputs)],
        )

    def total(inputs, params, data):
        y = inputs[0].clone() if len(inputs) == 1 else inputs[0] + inputs[1]
        for x in inputs[2:]:
            y += x
        return act(y, inplace=True) if act is not None else y

    def rmsnorm(inputs, params, data):
        x, gain = _split(spec, inputs, params)
        axis = spec.get("axis", -1)
        return x * torch.rsqrt(x.pow(2).mean(axis, keepdim=True) + spec.get("eps", 1e-6)) * gain

    def softmax(inputs, params, data):
        x = inputs[0] * spec.get("scale", 1.0)
        if spec.get("causal"):
            q, k = x.shape[-2], x.shape[-1]
            mask = torch.ones(q, k, dtype=torch.bool, device=x.device).triu(1 + k - q)
            x = x.masked_fill(mask, float("-inf"))
        return torch.softmax(x, dim=spec.get("axis", -1))

    def topk_gate(inputs, params, data):
        logits = inputs[0]
        top = logits.topk(spec.get("k", 1), dim=-1)
        return torch.zeros_like(logits).scatter(-1, top.indices, torch.softmax(top.values, -1))

    def dispatch(inputs, params, data):
        x, gate = inputs
        return x[_routed(gate[:, spec["expert"]], spec["shape"][0])]

    def combine(inputs, params, data):
        gate, experts = inputs[0], inputs[1:]
        out = torch.zeros(
            gate.shape[0], experts[0].shape[-1], dtype=experts[0].dtype, device=experts[0].device
        )
        for e, y in enumerate(experts):
            idx = _routed(gate[:, e], y.shape[0])
            out.index_add_(0, idx, y * gate[idx, e : e + 1])
        return out

    table = {
        "input": lambda inputs, params, data: data.clone(),
        "einsum": einsum,
        "concat_einsum": concat_einsum,
        "sum": total,
        "mul": lambda inputs, params, data: inputs[0] * inputs[1],
        "silu": lambda inputs, params, data: F.silu(inputs[0]),
        "rmsnorm": rmsnorm,
        "softmax": softmax,
        "topk_gate": topk_gate,
        "dispatch": dispatch,
        "combine": combine,
    }
    return table[kind]


def _gelu(x, inplace: bool = False):
    import torch.nn.functional as F

    return F.gelu(x)


def _routed(weights, count: int):
    """Indices of the ``count`` tokens of largest gate weight, in token order."""
    import torch

    count = min(count, weights.shape[0])
    return weights.topk(count).indices.sort().values.to(torch.long)


def param_seed(seed: int, node: int) -> int:
    return int(np.random.SeedSequence([seed, node]).generate_state(1)[0])


def make_tensors(kernel: Kernel, seed: int, device: str) -> tuple[list, Any]:
    """The kernel's params (scaled normal, so activations stay O(1)) and, for an input
    node, its data block: drawn on the host from ``(seed, node)``, then moved to ``device``
    (the values do not depend on the device)."""
    import torch

    dtype = getattr(torch, kernel.dtype)
    gen = torch.Generator().manual_seed(param_seed(seed, kernel.node))
    params = [
        (torch.randn(s, generator=gen) / max(1, s[0]) ** 0.5).to(dtype=dtype, device=device)
        for s in kernel.param_shapes
    ]
    data = None
    if kernel.kind == "input":
        data = torch.randn(kernel.out_shape, generator=gen).to(dtype=dtype, device=device)
    return params, data
