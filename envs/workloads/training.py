"""Training-step graphs: a forward graph plus its backward pass and optimizer state.

:func:`to_training_step` turns the forward graph of a step (a generator graph, a
:func:`~placegym.envs.importers.from_fx` trace, a PipeDream profile) into the graph of one
training step. For a forward graph of ``n`` nodes and edges ``E``:

- Nodes: ``2n``. Node ``v < n`` is forward node ``v``: its ``flops``, ``out_bytes``,
  ``time``, ``layer``, ``op`` and ``spec`` are unchanged (``param_bytes`` as below).
  Node ``n + v`` is its backward node ``v'``: ``op`` ``"bw:<op>"``, the same ``layer``,
  ``spec`` ``{"kind": "backward", "forward": v}`` (plus the forward spec's
  ``"source_id"`` when it has one; a backward node is not executable by
  :mod:`placegym.envs.real`).
- Edges, in this order: the forward edges ``E``; a stash edge ``v -> v'`` for every
  ``v`` (v's output stays alive until its backward has run, since the simulator frees a
  tensor when its last consumer finishes; for a sink this edge is the loss that starts
  the backward pass); a gradient edge ``v' -> u'`` for every forward edge ``u -> v``, in
  ``E``'s order, except into a data input (below).
- Backward duration, by the first rule that applies: a data input's backward node has
  ``time`` 0; a forward spec with ``"backward_time"`` (seconds, finite and >= 0; the
  PipeDream importer writes it) gives that ``time``; a measured forward ``time`` ``t``
  gives ``backward_factor * t``; otherwise ``v'`` is unmeasured and the roofline of rule
  1 applies to its ``flops`` and bytes. Per-kind times (``time`` as ``{kind: s}``) carry
  over the same way: ``v'`` takes ``backward_factor`` times v's time on each kind (0 for
  a data input; none where the spec gives ``backward_time``, whose value is then the
  default). ``flops[v'] = backward_factor * flops[v]``
  (0 for a data input) in every case.
- Output bytes: ``out_bytes[v']`` is the sum of ``out_bytes[u]`` over v's producers ``u``
  that are not data inputs: the gradients of v's inputs (0 for a source). A graph node
  has one output tensor, so every ``u'`` receives all of them: a transfer overestimates
  the gradient when ``v`` has two or more producers on other devices.
- Resident bytes: ``param_bytes[v]`` becomes ``param_bytes[v] * (2 + k)``: the
  parameters, their gradients and ``k`` optimizer states (:data:`OPTIMIZER_STATES`:
  ``sgd`` 0, ``momentum`` 1, ``adam`` and ``adamw`` 2 moments; an integer ``optimizer``
  is ``k`` itself). ``param_bytes[v']`` is 0: the group (below) puts ``v'`` on v's
  device. On an unmeasured node ``param_bytes`` also enters the roofline's memory
  traffic (rule 1), so a memory-bound forward node with parameters gets slower.
- Co-location: ``v`` and ``v'`` share a ``group``: v's group when it has one (an
  existing group keeps its id and gains its members' backward nodes), else a new id,
  numbered ``max(existing ids) + 1``, ``+ 2``, ... (from 0 without any) in node order.
- Data inputs: nodes whose spec ``kind`` is ``"input"`` (generators, ``from_fx``) or
  whose spec has ``"input": true`` (PipeDream's input nodes). Nothing differentiates
  them: their backward node has ``time`` 0, ``flops`` 0, ``out_bytes`` 0 and only its
  stash edge; it exists so that node ``n + v`` is always v's backward node.
- Refused (``ValueError``): a graph with a backward node already (spec kind
  ``"backward"`` or an op starting with ``"bw:"``, as in the dnn-partitioning training
  workloads), a bad ``backward_time``, factor or optimizer.
- Name: ``"<name>-train"`` unless given.

A chain ``0 -> 1 -> 2`` becomes 6 nodes with edges ``0->1, 1->2`` (forward), ``0->3,
1->4, 2->5`` (stash) and ``4->3, 5->4`` (gradients), groups ``{0, 3}``, ``{1, 4}``,
``{2, 5}``; the critical path is ``0, 1, 2, 5, 4, 3``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from placegym.envs.core import validate as V
from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import is_data_input

__all__ = ["OPTIMIZER_STATES", "is_data_input", "to_training_step"]

#: Optimizer state copies ``k`` per parameter (resident bytes are ``param * (2 + k)``).
OPTIMIZER_STATES: dict[str, int] = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}


def _state_copies(optimizer: str | int) -> int:
    if isinstance(optimizer, bool):
        raise V.fail("optimizer", "expected a name or an integer >= 0", optimizer)
    if isinstance(optimizer, int):
        return V.integer(optimizer, "optimizer", lo=0)
    if optimizer not in OPTIMIZER_STATES:
        raise V.fail(
            "optimizer",
            f"unknown optimizer (known: {', '.join(OPTIMIZER_STATES)}, or an integer >= 0)",
            optimizer,
        )
    return OPTIMIZER_STATES[optimizer]


def _check(graph: Graph) -> None:
    for v in range(graph.num_nodes):
        if graph.spec[v].get("kind") == "backward" or graph.op[v].startswith("bw:"):
            raise V.fail(
                f"nodes[{v}]",
                "is a backward node already: the graph is a training graph, give its "
                "forward graph",
                graph.op[v],
            )


def _backward_times(graph: Graph, factor: float, data: np.ndarray) -> np.ndarray:
    """Measured seconds of each backward node, NaN where the roofline applies."""
    out = np.full(graph.num_nodes, np.nan)
    for v in range(graph.num_nodes):
        if data[v]:
            out[v] = 0.0
        elif "backward_time" in graph.spec[v]:
            t = graph.spec[v]["backward_time"]
            out[v] = V.number(t, f"nodes[{v}].spec.backward_time")
        elif not math.isnan(graph.time[v]):
            out[v] = factor * graph.time[v]
    return out


def _kind_backward(graph: Graph, t: np.ndarray, factor: float, data: np.ndarray) -> np.ndarray:
    """Per-kind seconds of each backward node: ``factor`` times the forward's on that kind
    (0 for a data input; NaN, so the default applies, where the spec gives a
    ``backward_time`` or the forward has no time on that kind)."""
    out = factor * t
    out[data] = 0.0
    out[[("backward_time" in s) for s in graph.spec]] = np.nan
    return out


def _groups(graph: Graph) -> np.ndarray:
    """Each forward node's group: its own, else a new one (module docstring)."""
    group = graph.group.copy()
    free = np.flatnonzero(group < 0)
    start = int(group.max()) + 1 if graph.num_nodes and group.max() >= 0 else 0
    group[free] = start + np.arange(free.size)
    return group


def to_training_step(
    graph: Graph,
    *,
    backward_factor: float = 2.0,
    optimizer: str | int = "adam",
    name: str | None = None,
) -> Graph:
    """The graph of one training step of a forward graph (see the module docstring).

    Args:
        graph: the forward graph (nodes ``0..n-1``).
        backward_factor: backward cost per unit of forward cost, for nodes whose spec has
            no ``backward_time``: it scales a measured ``time`` and the ``flops``.
        optimizer: ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"adamw"``
            (:data:`OPTIMIZER_STATES`), or the number of state copies per parameter.
        name: the new graph's name (default ``"<name>-train"``).

    Returns:
        ``2n`` nodes: the forward nodes, then backward node ``n + v`` of each node ``v``,
        each pair in one co-location group.

    Raises:
        ValueError: naming the argument or node field that is wrong.
    """
    ok = isinstance(backward_factor, int | float) and not isinstance(backward_factor, bool)
    if not ok or not math.isfinite(backward_factor) or backward_factor < 0:
        raise V.fail("backward_factor", "must be a finite number >= 0", backward_factor)
    k = _state_copies(optimizer)
    _check(graph)
    n = graph.num_nodes
    data = np.array([is_data_input(s) for s in graph.spec], dtype=bool)
    e = graph.edges
    grad = e[~data[e[:, 0]] & ~data[e[:, 1]]]  # forward edges u -> v of a gradient to u
    nodes = np.arange(n, dtype=np.int64)
    edges = np.concatenate(
        [e, np.stack([nodes, nodes + n], axis=1), np.stack([grad[:, 1], grad[:, 0]], axis=1) + n]
    )
    grad_bytes = np.bincount(grad[:, 1], weights=graph.out_bytes[grad[:, 0]], minlength=n)
    bw_flops = np.where(data, 0.0, backward_factor * graph.flops)
    group = _groups(graph)
    bw_spec = []
    for v in range(n):
        spec: dict[str, Any] = {"kind": "backward", "forward": v}
        if "source_id" in graph.spec[v]:
            spec["source_id"] = graph.spec[v]["source_id"]
        bw_spec.append(spec)
    return Graph(
        flops=np.concatenate([graph.flops, bw_flops]),
        out_bytes=np.concatenate([graph.out_bytes, grad_bytes]),
        param_bytes=np.concatenate([graph.param_bytes * (2 + k), np.zeros(n)]),
        edges=edges,
        layer=np.concatenate([graph.layer, graph.layer]),
        op=(*graph.op, *(f"bw:{op}" for op in graph.op)),
        spec=(*graph.spec, *bw_spec),
        name=name or f"{graph.name}-train",
        time=np.concatenate([graph.time, _backward_times(graph, backward_factor, data)]),
        kind_time={
            kind: np.concatenate([t, _kind_backward(graph, t, backward_factor, data)])
            for kind, t in graph.kind_time.items()
        },
        group=np.concatenate([group, group]),
    )
