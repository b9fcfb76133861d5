"""``moe``: a mixture-of-experts layer: router, top-k gate, expert FFNs, combine.

Shapes (``T = tokens``, ``D = d_model``, ``E = experts``, ``F = expert_blocks``,
``f = hidden / F``; defaults sized like Mixtral-8x7B: D 4096, hidden 14336, 8 experts,
top-2):

- ``input`` ``x`` ``(T, D)``.
- router ``einsum`` ``td,de->te`` by a resident ``(D, E)`` weight → logits ``(T, E)``.
- ``topk_gate`` ``(T, E)``: softmax over each token's ``top_k`` largest logits, zeros
  elsewhere; 5 FLOP per element.
- per expert e: ``dispatch`` (args ``x`` and the gate) → ``(n_e, D)``, the ``n_e`` tokens
  with the largest gate weight for e, in token order (0 FLOP: a gather). Then the expert
  FFN in F hidden blocks: up ``einsum`` ``td,df->tf`` by a resident ``(D, f)`` block,
  ``silu`` (4 FLOP per element), down ``einsum`` ``tf,fd->td`` by a resident ``(f, D)``
  block → a partial ``(n_e, D)``; a ``sum`` of the F partials → ``(n_e, D)``.
- ``combine`` (args the gate, then the E expert outputs) → ``(T, D)``: each token's
  expert outputs scaled by its gate weights and added, ``2·D`` FLOP per routed token.

Routing is drawn, so the graph depends on ``seed``: expert popularity
``p ~ Dirichlet(balance · 1_E)`` (large ``balance`` = even load), then every token picks
``top_k`` distinct experts with probability proportional to ``p`` (Gumbel top-k), and
``n_e`` is how many tokens picked expert e (``Σ n_e = T · top_k``). Executing, the
``dispatch`` rule above reproduces those counts whatever the router's weights are.

Nodes: ``4 + E·(3·F + 2)``; edges ``3 + 3·E + 4·E·F``. The defaults (8 experts, 4 blocks)
give 116 nodes and 155 edges; ``experts=128, expert_blocks=32`` gives 12,548. ``layer``
is 0 for the input, 1 for router and gate, 2 for the experts, 3 for the combine.
"""

from __future__ import annotations

import numpy as np

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import GraphBuilder, split
from placegym.envs.workloads._ccr import ccr_option
from placegym.envs.workloads.llama_block import SILU_FLOPS

GATE_FLOPS = 5  # per (token, expert): softmax over the selected logits, selection


def route(
    tokens: int, experts: int, top_k: int, balance: float, rng: np.random.Generator
) -> np.ndarray:
    """Tokens per expert, ``(E,)`` ints summing to ``tokens · top_k`` (module docstring)."""
    p = rng.dirichlet(np.full(experts, balance))
    keys = np.log(np.maximum(p, 1e-300)) + rng.gumbel(size=(tokens, experts))
    picks = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    return np.bincount(picks.reshape(-1), minlength=experts)


def _check(sizes: dict[str, int], top_k: int, balance: float) -> None:
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name}: must be >= 1, got {value}")
    if not 1 <= top_k <= sizes["experts"]:
        raise ValueError(f"top_k: must be in 1..experts ({sizes['experts']}), got {top_k}")
    if not balance > 0:
        raise ValueError(f"balance: must be > 0, got {balance}")


def _expert(g: GraphBuilder, x: int, n: int, d: int, f: int, blocks: int) -> int:
    """One expert FFN on ``x`` ``(n, d)`` in ``blocks`` hidden blocks; returns its sum node."""
    partials = []
    for _ in range(blocks):
        up = g.einsum("td,df->tf", [{"node": x}, {"param": [d, f]}], [n, f], 2, [[n, d], [d, f]])
        act = g.add("silu", flops=SILU_FLOPS * n * f, shape=[n, f], layer=2, args=[{"node": up}])
        partials.append(
            g.einsum("tf,fd->td", [{"node": act}, {"param": [f, d]}], [n, d], 2, [[n, f], [f, d]])
        )
    return g.add(
        "sum",
        flops=(blocks - 1) * n * d,
        shape=[n, d],
        layer=2,
        args=[{"node": u} for u in partials],
    )


@ccr_option
def moe(
    tokens: int = 4096,
    d_model: int = 4096,
    hidden: int = 14336,
    experts: int = 8,
    top_k: int = 2,
    expert_blocks: int = 4,
    balance: float = 1.0,
    seed: int | np.random.Generator = 0,
    dtype: str = "float32",
) -> Graph:
    """Build the mixture-of-experts layer (see the module docstring).

    Args:
        tokens: tokens routed in one step.
        d_model: model width.
        hidden: hidden size of every expert FFN.
        experts: number of experts (a size knob).
        top_k: experts per token.
        expert_blocks: blocks of each expert's hidden size; ``hidden`` must be a multiple.
        balance: Dirichlet concentration of expert popularity (> 0; large = even).
        seed: seed, or a numpy Generator, for the routing draw.
        dtype: element type of every tensor.

    Raises:
        ValueError: naming the parameter and its bad value.
    """
    sizes = {"tokens": tokens, "d_model": d_model, "hidden": hidden, "experts": experts}
    _check({**sizes, "expert_blocks": expert_blocks}, top_k, balance)
    f = split(hidden, expert_blocks, "hidden")
    counts = route(tokens, experts, top_k, balance, np.random.default_rng(seed))
    g = GraphBuilder(dtype=dtype)
    t, d, e = tokens, d_model, experts
    x = g.input([t, d])
    logits = g.einsum("td,de->te", [{"node": x}, {"param": [d, e]}], [t, e], 1, [[t, d], [d, e]])
    gate = g.add(
        "topk_gate",
        flops=GATE_FLOPS * t * e,
        shape=[t, e],
        layer=1,
        args=[{"node": logits}],
        k=top_k,
    )
    outs = []
    for ex, n in enumerate(counts.tolist()):
        xe = g.add(
            "dispatch",
            flops=0,
            shape=[n, d],
            layer=2,
            args=[{"node": x}, {"node": gate}],
            expert=ex,
        )
        outs.append(_expert(g, xe, n, d, f, expert_blocks))
    g.add(
        "combine",
        flops=2 * d * int(counts.sum()),
        shape=[t, d],
        layer=3,
        args=[{"node": u} for u in [gate, *outs]],
    )
    return g.build(f"moe-{experts}x{top_k}x{expert_blocks}")
