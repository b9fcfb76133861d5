r"""Import PipeDream profiles: the ``graph.txt`` files of PipeDream's profiler.

PipeDream (Narayanan et al., SOSP 2019; ``msr-fiddle/pipedream``) profiles a model's
layers and writes one text file per model (its repository ships them under
``profiler/*/profiles/<model>/graph.txt``). Node lines come first, then edge lines::

    node1 -- Input -- forward_compute_time=473.625, backward_compute_time=0.000, \
activation_size=154140672.000, parameter_size=0.000
    node2 -- Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False) \
-- forward_compute_time=23.046, backward_compute_time=9.284, activation_size=822083584.000, \
parameter_size=37632.000
    node7 -- LSTM(2048, 1024) -- forward_compute_time=3.190, backward_compute_time=5.348, \
activation_size=[6291456.0; 131072.0; 131072.0], parameter_size=50364416.000
    <TAB>node1 -- node2

(a node is one line in the file, wrapped here after ``\``; ``<TAB>`` is a tab character).

Format, as read here:

- A line that starts with a tab is an edge ``<id> -- <id>``: the first node's output is
  an input of the second. Every other non-blank line is a node line ``<id> --
  <description> -- <sizes>``, split at its first and its last ``' -- '``: the id is one
  word (``node7``; ids need not be contiguous or sorted), the description is the text
  between (any one-line text, spaces, parentheses, commas and ``=`` included, not
  empty), and the sizes are the four comma-separated ``key=value`` entries
  ``forward_compute_time`` and ``backward_compute_time`` (milliseconds),
  ``activation_size`` and ``parameter_size`` (bytes), each exactly once, in any order.
  A value is a finite number >= 0; ``activation_size`` may also be a bracketed list
  ``[6291456.0; 131072.0; 131072.0]`` (a layer with a tuple output), whose sum is the
  layer's output size (``[]`` is 0). PipeDream's optimizer writes partitioned graphs with
  a fourth part ``-- stage_id=<int>``; it is read too.
- Blank lines are skipped; error messages give physical line numbers. An edge listed
  more than once is one edge. An edge may name a node whose line comes later.

Conversion (to ``placegym.graph/v2``):

- Nodes: one per node line, in the file's order; node ``i`` is the ``i``-th node line.
  ``op`` is the description's leading name (``Conv2d``, ``__getitem__``, ``Input0``: the
  text before the first ``(`` or space; ``"op"`` if that is empty). ``spec`` is
  ``{"kind": "opaque", "source_id": "node7", "desc": <the description>,
  "backward_time": <seconds>}`` plus ``"stage_id"`` when the line has one: the files carry
  times, not kernels, and a saved graph keeps the file's ids. No ``layer``, no ``group``.
- Time: ``time = forward_compute_time / 1000`` seconds, measured (the same on every
  device; ``flops`` is 0). ``backward_compute_time / 1000`` is kept as the spec's
  ``backward_time`` (seconds) for :func:`~placegym.envs.workloads.training.to_training_step`.
- Memory: ``out_bytes`` is ``activation_size`` (a list summed), ``param_bytes`` is
  ``parameter_size``.
- Input nodes: a node with no producer whose description starts with ``Input`` holds the
  data batch, and its ``forward_compute_time`` is the data-loading time (473.6 ms in
  ResNet-18's profile). Like PipeDream's own optimizer, which zeroes it, the import gives
  such a node ``time`` 0 by default and keeps the loading time as the spec's
  ``"load_time"`` (seconds) with ``"input": true``; ``input_time=True`` keeps it as the
  node's ``time``. Its ``out_bytes`` (the batch) is kept either way.

Malformed files raise ``ValueError``, one line naming the file, the line number, the
problem and the line's text, cut at 100 characters (``PATH: line 3: parameter_size:
expected a number, '4x' is not one, got 'node3 -- ReLU -- ...'``): a node line without
``' -- '`` after the id or before the sizes, an id that is not one word, an empty
description, an entry that is not ``key=value``, an unknown, repeated or missing key, a
value that is not a finite number >= 0 (or a list of them), a bad ``stage_id``, a
repeated node id, an edge line that is not ``<id> -- <id>``, an edge naming no node, a
self-loop, a cycle (named by its ids and edge lines), a file without node lines.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs.core import validate as V
from placegym.envs.core.graph import Graph
from placegym.envs.importers._common import find_cycle, nonnegative

__all__ = ["KEYS", "from_pipedream", "parse_pipedream", "pipedream_name"]

SEP = " -- "
#: The keys of a node line's sizes, in PipeDream's order.
KEYS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
_FORMAT = f"expected 'nodeK{SEP}<description>{SEP}{'=..., '.join(KEYS)}=...'"
_OP = re.compile(r"[^\s(]+")


@dataclass
class _Node:
    id: str
    line: int
    desc: str
    sizes: dict[str, float]
    stage: int | None


@dataclass
class _Profile:
    nodes: list[_Node] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)  # node indices
    edge_lines: list[int] = field(default_factory=list)


def _fail(line: int, problem: str, text: str) -> ValueError:
    return V.fail(f"line {line}", problem, text.strip())


def _number(tok: str, what: str, k: int, text: str) -> float:
    return nonnegative(tok, what, lambda problem: _fail(k, problem, text))


def _activation(tok: str, k: int, text: str) -> float:
    """A number, or the sum of a ``[a; b; ...]`` list."""
    what = "activation_size"
    if not tok.startswith("["):
        return _number(tok, what, k, text)
    if not tok.endswith("]"):
        raise _fail(k, f"{what}: {tok!r} is a list without its closing ']'", text)
    inner = tok[1:-1].strip()
    if not inner:
        return 0.0
    parts = [p.strip() for p in inner.split(";")]
    return float(sum(_number(p, f"{what} entry {i}", k, text) for i, p in enumerate(parts)))


def _sizes(meta: str, k: int, text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for i, entry in enumerate(meta.split(",")):
        key, eq, value = (s.strip() for s in entry.partition("="))
        if not eq:
            raise _fail(k, f"size entry {i} {entry.strip()!r} is not key=value", text)
        if key not in KEYS:
            raise _fail(k, f"unknown key {key!r} (expected {', '.join(KEYS)})", text)
        if key in out:
            raise _fail(k, f"key {key!r} appears twice", text)
        if key == "activation_size":
            out[key] = _activation(value, k, text)
        else:
            out[key] = _number(value, key, k, text)
    missing = [key for key in KEYS if key not in out]
    if missing:
        raise _fail(k, f"missing {', '.join(missing)}", text)
    return out


def _one_word(tok: str) -> bool:
    return bool(tok) and len(tok.split()) == 1


def _node_line(text: str, k: int) -> _Node:
    line = text.strip()
    head, sep, rest = line.partition(SEP)
    if not sep:
        raise _fail(k, f"no {SEP!r} after the node id ({_FORMAT})", text)
    if not _one_word(head):
        raise _fail(k, f"the node id {head!r} is not one word", text)
    body, sep, meta = rest.rpartition(SEP)
    stage = None
    if sep and meta.startswith("stage_id="):
        tok = meta.removeprefix("stage_id=").strip()
        if not tok.isdigit():
            raise _fail(k, f"stage_id: expected an integer >= 0, {tok!r} is not one", text)
        stage = int(tok)
        body, sep, meta = body.rpartition(SEP)
    if not sep:
        hint = ""
        if _one_word(rest):
            hint = " (an edge line starts with a tab)"
        raise _fail(k, f"no {SEP!r} between the description and the sizes{hint}", text)
    if not body.strip():
        raise _fail(k, "empty module description", text)
    return _Node(head, k, body, _sizes(meta, k, text), stage)


def _parse(text: str) -> _Profile:
    prof = _Profile()
    index: dict[str, int] = {}
    raw_edges: list[tuple[str, str, int, str]] = []
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("\t"):
            ends = line.strip().split(SEP)
            if len(ends) != 2 or not all(_one_word(e) for e in ends):
                raise _fail(k, f"expected an edge '<id>{SEP}<id>' after the tab", line)
            raw_edges.append((ends[0], ends[1], k, line))
            continue
        node = _node_line(line, k)
        if node.id in index:
            first = prof.nodes[index[node.id]].line
            raise _fail(k, f"duplicate node id {node.id!r} (line {first} has it too)", line)
        index[node.id] = len(prof.nodes)
        prof.nodes.append(node)
    if not prof.nodes:
        raise ValueError(f"no node lines ({_FORMAT})")
    seen: set[tuple[int, int]] = set()
    for a, b, k, line in raw_edges:
        for x in (a, b):
            if x not in index:
                raise _fail(k, f"edge: no node line has the id {x!r}", line)
        if a == b:
            raise _fail(k, f"edge: self-loop on {a!r}", line)
        pair = (index[a], index[b])
        if pair not in seen:
            seen.add(pair)
            prof.edges.append(pair)
            prof.edge_lines.append(k)
    _check_acyclic(prof)
    return prof


def _check_acyclic(prof: _Profile) -> None:
    """Raise naming the file's ids and edge lines along a cycle, if there is one."""
    edges = find_cycle(len(prof.nodes), prof.edges)
    if edges is None:
        return
    cycle = [(prof.edges[e][1], prof.edge_lines[e]) for e in edges]  # (node, edge line)
    first = min(range(len(cycle)), key=lambda i: cycle[i][0])  # from the earliest node line
    ids = [prof.nodes[x].id for x, _ in cycle[first:] + cycle[:first]]
    lines = sorted(k for _, k in cycle)
    raise ValueError(
        f"line {lines[0]}: the edges form a cycle {' -> '.join([*ids, ids[0]])} "
        f"(edge lines {', '.join(map(str, lines))})"
    )


def _build(prof: _Profile, name: str, input_time: bool) -> Graph:
    n = len(prof.nodes)
    has_producer = np.zeros(n, dtype=bool)
    for _, v in prof.edges:
        has_producer[v] = True
    ops, specs, times = [], [], []
    for i, nd in enumerate(prof.nodes):
        m = _OP.match(nd.desc.strip())
        ops.append(m.group(0) if m else "op")
        fwd = nd.sizes["forward_compute_time"] / 1000.0
        spec: dict[str, Any] = {
            "kind": "opaque",
            "source_id": nd.id,
            "desc": nd.desc,
            "backward_time": nd.sizes["backward_compute_time"] / 1000.0,
        }
        if nd.stage is not None:
            spec["stage_id"] = nd.stage
        if not has_producer[i] and nd.desc.strip().startswith("Input"):
            spec["input"] = True
            spec["load_time"] = fwd
            fwd = fwd if input_time else 0.0
        specs.append(spec)
        times.append(fwd)
    return Graph(
        flops=np.zeros(n),
        out_bytes=[nd.sizes["activation_size"] for nd in prof.nodes],
        param_bytes=[nd.sizes["parameter_size"] for nd in prof.nodes],
        edges=np.array(prof.edges, dtype=np.int64).reshape(-1, 2),
        op=ops,
        spec=specs,
        name=name,
        time=times,
    )


def parse_pipedream(text: str, name: str = "pipedream", *, input_time: bool = False) -> Graph:
    """Build the :class:`Graph` of a PipeDream profile's text (see the module docstring).

    Args:
        text: the ``graph.txt`` contents.
        name: the graph's name.
        input_time: keep an input node's data-loading time as its ``time`` (default: 0).

    Raises:
        ValueError: ``line K: <problem>, got '<the line>'``.
    """
    return _build(_parse(text), name, input_time)


def pipedream_name(path: str | os.PathLike[str]) -> str:
    """The graph name of a profile: its folder's name for a ``graph.txt``
    (``profiles/resnet18/graph.txt`` -> ``resnet18``), else the file's stem."""
    p = Path(path)
    if p.stem == "graph" and p.parent.name:
        return p.parent.name
    return p.stem


def from_pipedream(
    path: str | os.PathLike[str], *, name: str | None = None, input_time: bool = False
) -> Graph:
    """Read a PipeDream profile ``graph.txt`` (see the module docstring).

    Args:
        path: the text file.
        name: the graph's name (default :func:`pipedream_name`).
        input_time: keep an input node's data-loading time as its ``time`` (default: 0,
            the loading time kept in its spec as ``load_time``).

    Returns:
        The forward graph: nodes in the file's order, measured times in seconds, the
        backward times in each node's spec (``backward_time``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: ``PATH: line K: <problem>, got '<the line>'``.
    """
    p = Path(path)
    text = V.read_text(p, "PipeDream profile")
    try:
        return parse_pipedream(text, name or pipedream_name(p), input_time=input_time)
    except ValueError as e:
        raise ValueError(f"{p}: {e}") from None
