"""Building block-decomposed graphs with executable node specs.

Every node's ``spec`` says how to run it for real::

    {"kind": "input",  "shape": [64, 256], "dtype": "float32"}
    {"kind": "einsum", "equation": "ik,kj->ij", "args": [{"node": 3}, {"param": [256, 64]}],
     "shape": [64, 64], "dtype": "float32"}
    {"kind": "sum",    "args": [{"node": 5}, {"node": 6}], "activation": "relu", ...}

``args`` lists the operands in order: ``{"node": u}`` is the output of producer ``u``,
``{"param": shape}`` a resident parameter tensor of that shape (counted in
``param_bytes``). ``shape`` is the output block's shape; ``out_bytes`` is its size. A
node whose spec is ``{"kind": "input"}`` or carries ``"input": true`` is a data input
(:func:`is_data_input`: read, never differentiated).

This is the vocabulary every band shares: the generators build with
:class:`GraphBuilder`, the importers and the real executor read the same specs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placegym.envs.core.graph import Graph


def is_data_input(spec: Mapping[str, Any]) -> bool:
    """Whether a node with this spec is a data input (no gradient flows into it)."""
    return spec.get("kind") == "input" or spec.get("input") is True


DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype``."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    return DTYPE_BYTES[dtype]


@dataclass
class GraphBuilder:
    """Accumulates nodes and edges; :meth:`build` returns the validated :class:`Graph`."""

    dtype: str = "float32"
    flops: list[float] = field(default_factory=list)
    out_bytes: list[float] = field(default_factory=list)
    param_bytes: list[float] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)
    op: list[str] = field(default_factory=list)
    spec: list[dict[str, Any]] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)

    @property
    def itemsize(self) -> int:
        """Bytes per element of the builder's dtype."""
        return dtype_bytes(self.dtype)

    def add(
        self,
        op: str,
        *,
        flops: float,
        shape: Sequence[int],
        layer: int,
        args: Sequence[dict[str, Any]] = (),
        **extra: Any,
    ) -> int:
        """Add a node whose output block has ``shape``; ``args`` name producers and params."""
        v = len(self.flops)
        params = sum(math.prod(a["param"]) for a in args if "param" in a)
        seen: set[int] = set()
        for a in args:
            u = a.get("node")
            if u is not None and u not in seen:
                seen.add(u)
                self.edges.append((u, v))
        self.flops.append(float(flops))
        self.out_bytes.append(float(math.prod(shape) * self.itemsize))
        self.param_bytes.append(float(params * self.itemsize))
        self.layer.append(layer)
        self.op.append(op)
        spec = {"kind": op, "shape": list(shape), "dtype": self.dtype}
        if args:
            spec["args"] = [dict(a) for a in args]
        spec.update(extra)
        self.spec.append(spec)
        return v

    def input(self, shape: Sequence[int], layer: int = 0) -> int:
        """Add an input data block of ``shape`` (no operands); returns its node id."""
        return self.add("input", flops=0.0, shape=shape, layer=layer)

    def einsum(
        self,
        equation: str,
        args: Sequence[dict[str, Any]],
        shape: Sequence[int],
        layer: int,
        shapes: Sequence[Sequence[int]],
    ) -> int:
        """An einsum; ``shapes`` are the operand shapes (for the FLOP count)."""
        return self.add(
            "einsum",
            flops=einsum_flops(equation, shapes),
            shape=shape,
            layer=layer,
            args=args,
            equation=equation,
        )

    def build(self, name: str) -> Graph:
        """The graph built so far, named ``name``."""
        return Graph(
            flops=self.flops,
            out_bytes=self.out_bytes,
            param_bytes=self.param_bytes,
            layer=self.layer,
            op=tuple(self.op),
            spec=tuple(self.spec),
            edges=self.edges,
            name=name,
        )


def einsum_flops(equation: str, shapes: Sequence[Sequence[int]]) -> float:
    """2 × (product of every index extent) for a contraction, 1× for a pure elementwise map
    (multiply-add counted as two FLOP)."""
    lhs, out = equation.replace(" ", "").split("->")
    extent: dict[str, int] = {}
    for term, shape in zip(lhs.split(","), shapes, strict=True):
        if len(term) != len(shape):
            raise ValueError(
                f"equation: operand {term!r} has {len(term)} indices, shape {list(shape)}"
            )
        for ix, n in zip(term, shape, strict=True):
            if extent.setdefault(ix, n) != n:
                raise ValueError(f"equation: index {ix!r} has extents {extent[ix]} and {n}")
    total = math.prod(extent.values())
    contracted = set(extent) - set(out)
    return float(2 * total if contracted else total)


def split(extent: int, parts: int, what: str) -> int:
    """Block size of ``extent`` split into ``parts`` equal blocks."""
    if parts < 1 or extent % parts:
        raise ValueError(f"{what}: {extent} does not split into {parts} equal blocks")
    return extent // parts
