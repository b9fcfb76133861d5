"""Timing the nodes of a traced module on this machine's CPU, one node at a time.

:func:`time_nodes` interprets the ``GraphModule`` once on the example inputs with a
``torch.fx.Interpreter`` whose ``run_node`` calls each chosen node's op on its recorded
input values ``warmup`` times, then ``repeats`` times under ``time.perf_counter``, and
keeps the median; the last result flows on to the node's consumers. The figures are the
wall time of one op call from Python on this machine, its load and its torch thread
count, so they are not deterministic across runs (see
:func:`~placegym.envs.importers.fx.from_fx`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import torch
from torch import fx

__all__ = ["check_cpu", "time_nodes"]


def check_cpu(gm: fx.GraphModule, inputs: Sequence[Any]) -> None:
    """Raise unless every example input, parameter and buffer is on the CPU."""
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            raise ValueError(
                f"measure: 'cpu' times ops on this machine's CPU, but example_inputs[{i}] "
                f"is on {x.device}"
            )
    for name, t in [*gm.named_parameters(), *gm.named_buffers()]:
        if t.device.type != "cpu":
            raise ValueError(
                f"measure: 'cpu' times ops on this machine's CPU, but the module's {name!r} "
                f"is on {t.device}"
            )


def _median_seconds(call: Callable[[], Any], warmup: int, repeats: int) -> tuple[float, Any]:
    """The median wall time of ``repeats`` calls after ``warmup`` untimed ones, and the
    last call's result."""
    out = None
    for _ in range(warmup):
        out = call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def time_nodes(
    gm: fx.GraphModule,
    inputs: Sequence[Any],
    nodes: Collection[fx.Node],
    concat_widths: Mapping[fx.Node, Sequence[int]],
    *,
    warmup: int,
    repeats: int,
) -> tuple[dict[fx.Node, float], dict[fx.Node, float]]:
    """Median seconds of each of ``nodes``, and of each ``concat_widths`` node's
    ``torch.cat`` along the last axis of its result split into blocks of those widths
    (the concat of a node split by columns: the blocks are contiguous copies, made
    outside the timed calls).

    Returns:
        ``(op seconds by node, concat seconds by node)``.
    """
    ops: dict[fx.Node, float] = {}
    cats: dict[fx.Node, float] = {}
    wanted = set(nodes)

    class _Timer(fx.Interpreter):
        def run_node(self, n: fx.Node) -> Any:
            if n not in wanted:
                return super().run_node(n)
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            run = getattr(self, n.op)
            ops[n], out = _median_seconds(lambda: run(n.target, args, kwargs), warmup, repeats)
            if n in concat_widths:
                blocks = [b.contiguous() for b in torch.split(out, list(concat_widths[n]), -1)]
                cats[n], _ = _median_seconds(lambda: torch.cat(blocks, -1), warmup, repeats)
            return out

    with torch.no_grad():
        _Timer(gm).run(*inputs)
    return ops, cats
