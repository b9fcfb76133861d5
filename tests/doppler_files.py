"""DOPPLER graph files written in the shape of the published ones, for the importer tests.

Two structures like DOPPLER's workloads: a block matrix chain (``chainmm_like``) and a
block feed-forward network (``ffnn_like``). Their input vertices (matrix or activation
and weight blocks) are counted on line 1 and listed on line 2, with ids that overlap the
node ids (0, 1, 2, ...), as the published files' do; the nodes' communication cost is 4x
their compute cost. :func:`doppler_text` writes a structure the way the published files
look: irregular spacing after commas, trailing commas, repeated edges, edges in a shuffled
order, an op-type word on some node lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Structure:
    """What a DOPPLER file describes: nodes 0..n-1, their costs, edges, input count."""

    inputs: int
    comp: list[int] = field(default_factory=list)
    op: list[str] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)

    def add(self, comp: int, op: str, producers: list[int]) -> int:
        v = len(self.comp)
        self.comp.append(comp)
        self.op.append(op)
        self.edges += [(u, v) for u in producers]
        return v

    @property
    def comm(self) -> list[int]:
        return [4 * c for c in self.comp]


def chainmm_like(matrices: int, blocks: int, r: int = 10) -> Structure:
    """``A_1 ... A_k`` in ``b x b`` blocks of side ``r``: ``(k - 1)(b^3 + b^2)`` nodes."""
    s = Structure(inputs=matrices * blocks * blocks)
    grid = range(blocks)
    acc: list[list[int]] | None = None  # the running product's blocks (None: A_1, inputs)
    for _ in range(1, matrices):
        nxt = []
        for i in grid:
            row = []
            for _ in grid:
                parts = [
                    s.add(2 * r**3, "matmul", [] if acc is None else [acc[i][k]]) for k in grid
                ]
                row.append(s.add((blocks - 1) * r * r, "add", parts))
            nxt.append(row)
        acc = nxt
    return s


def ffnn_like(layers: int, batch_blocks: int, feature_blocks: int, r: int = 8) -> Structure:
    """``layers`` dense layers in blocks: ``layers * bb * (fb^2 + fb)`` nodes."""
    s = Structure(inputs=batch_blocks * feature_blocks + layers * feature_blocks**2)
    x: list[list[int]] | None = None
    for _ in range(layers):
        nxt = []
        for i in range(batch_blocks):
            row = []
            for _j in range(feature_blocks):
                parts = [
                    s.add(2 * r**3, "matmul", [] if x is None else [x[i][k]])
                    for k in range(feature_blocks)
                ]
                row.append(s.add(feature_blocks * r * r, "relu", parts))
            nxt.append(row)
        x = nxt
    return s


def _join(items: list[int], rng: np.random.Generator) -> str:
    seps = [",", ", ", ",  ", " ,"]
    text = ""
    for i, x in enumerate(items):
        text += str(x) + (seps[int(rng.integers(len(seps)))] if i < len(items) - 1 else "")
    return text + ("," if rng.random() < 0.5 else "")


def doppler_text(s: Structure, seed: int = 0, repeats: int = 5) -> str:
    """The file text of ``s``: inputs listed as ids 0..k-1 (overlapping node ids),
    ``repeats`` edges listed twice, edges shuffled, irregular separators, op words on
    two nodes in three."""
    rng = np.random.default_rng(seed)
    n = len(s.comp)
    edges = list(s.edges) + [s.edges[int(i)] for i in rng.integers(len(s.edges), size=repeats)]
    edges = [edges[int(i)] for i in rng.permutation(len(edges))]
    lines = [
        f"{n + s.inputs}",
        _join(list(range(s.inputs)), rng),
        _join([u for u, _ in edges], rng),
        _join([v for _, v in edges], rng),
    ]
    for v in range(n):
        line = f"{s.comp[v]},{s.comm[v]}" if v % 2 else f"{s.comp[v]}, {s.comm[v]}"
        if v % 3:
            line += f",{s.op[v]}" if v % 2 else f", {s.op[v]}"
        lines.append(line)
    return "\n".join(lines) + "\n"
