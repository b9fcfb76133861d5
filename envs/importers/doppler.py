"""Import DOPPLER's published graph text format.

The format (one graph per file; ``V`` vertices in all, ``k`` of them inputs)::

    136                   line 1: V, the vertex count, input vertices included
    0, 1, 2, ...          line 2: the k input vertex ids
    0,0,1, 1, 2,          line 3: edge sources      (edge i is sources[i] -> destinations[i])
    16,17,16, 17, 18,     line 4: edge destinations
    2000,8000,matmul      then n = V - k lines, one per node in id order 0..n-1:
    1000,4000             comp,comm[,op_type]
    ...

- The graph has ``n = V - k`` nodes, numbered ``0..n-1``; edges refer to those numbers.
  Input vertices hold data present before the step starts: they are not part of the
  graph, and their ids (which may coincide with node ids) are read but otherwise
  ignored.
- Lines 2-4 are integer lists. Entries are separated by commas with or without spaces
  (plain whitespace also separates), and a line may end with a trailing comma:
  ``16,6, 16, 16,`` holds the four entries 16, 6, 16, 16. An empty line 2 means no
  inputs, empty lines 3 and 4 no edges.
- Each node line is the node's compute cost and the communication cost of its output
  (numbers, integers in the published files), optionally followed by an op-type word;
  fields are separated by commas and/or whitespace.
- An edge listed more than once is one edge.
- Blank lines before line 1 and among the node lines are skipped (error messages give
  physical line numbers).

Conversion: ``comp`` becomes ``flops`` and ``comm`` becomes ``out_bytes``, so on the
``doppler-unit-4`` / ``doppler-unit-8`` presets (1e10 FLOP/s and 1e10 B/s, no latency)
simulated seconds are DOPPLER's cost units / 1e10. The op word becomes ``op`` (default
``"op"``); ``spec`` is ``{"kind": "opaque"}`` (the files carry costs, not kernels).

Malformed files raise ``ValueError`` naming the line number, the problem and the line's
text: entries that are not integers, more input ids than vertices, edge lists of
unequal length, an edge endpoint outside ``0..n-1``, a self-loop, a missing or extra node
line, a bad cost; a cycle is reported by :class:`~placegym.envs.core.graph.Graph`.

A small file in this format ships with the package (:data:`SAMPLE`, a 4-matrix block
chain product in 2 x 2 blocks: 36 nodes, written the way the published files are, with
irregular spacing, trailing commas and repeated edges):
``placegym graphs import-doppler --sample --out g.json`` converts it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from placegym.envs.core.graph import Graph
from placegym.envs.core.validate import read_text
from placegym.envs.importers._common import nonnegative

_SPACE = re.compile(r"\s+")

#: The sample DOPPLER graph file shipped with the package (package data).
SAMPLE = Path(__file__).resolve().parent / "data" / "chainmm_4x2.txt"


def _fail(line: int, problem: str, text: str) -> ValueError:
    return ValueError(f"line {line}: {problem}, got {text.strip()!r}")


def _fields(text: str) -> list[str]:
    """Comma and/or whitespace separated fields; one trailing comma is allowed.

    Raises:
        ValueError: an empty field between two commas (``problem`` text only).
    """
    parts = [p.strip() for p in text.strip().split(",")]
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()  # the trailing comma
    if parts == [""]:
        return []
    if "" in parts:
        raise ValueError(f"empty entry {parts.index('') + 1} (two commas in a row)")
    return [tok for p in parts for tok in _SPACE.split(p)]


def _ints(lines: list[str], k: int, what: str) -> list[int]:
    """The integer list on (1-based) line ``k``; a missing line is an error."""
    if k > len(lines):
        raise ValueError(f"line {k}: missing ({what}); the file has {len(lines)} lines")
    text = lines[k - 1]
    try:
        fields = _fields(text)
    except ValueError as e:
        raise _fail(k, f"{what}: {e}", text) from None
    out = []
    for tok in fields:
        try:
            out.append(int(tok))
        except ValueError:
            raise _fail(k, f"{what}: expected integers, {tok!r} is not one", text) from None
    return out


def _header(lines: list[str], top: int) -> tuple[int, list[tuple[int, int]]]:
    """Node count ``n`` and the edges of the four header lines from line ``top``."""
    k_count, k_inputs, k_src, k_dst = range(top, top + 4)
    count = _ints(lines, k_count, "vertex count")
    if len(count) != 1 or count[0] < 0:
        raise _fail(k_count, "vertex count: expected one integer >= 0", lines[k_count - 1])
    inputs = _ints(lines, k_inputs, "input vertex ids")
    if any(x < 0 for x in inputs):
        bad = next(x for x in inputs if x < 0)
        raise _fail(k_inputs, f"input vertex ids: {bad} is negative", lines[k_inputs - 1])
    n = count[0] - len(inputs)
    if n < 0:
        problem = f"input vertex ids: {len(inputs)} ids for {count[0]} vertices (line {k_count})"
        raise _fail(k_inputs, problem, lines[k_inputs - 1])
    src = _ints(lines, k_src, "edge sources")
    dst = _ints(lines, k_dst, "edge destinations")
    if len(src) != len(dst):
        problem = (
            f"edge destinations: {len(dst)} entries for the {len(src)} sources of line {k_src}"
        )
        raise _fail(k_dst, problem, lines[k_dst - 1])
    for k, ids, what in ((k_src, src, "edge sources"), (k_dst, dst, "edge destinations")):
        for i, x in enumerate(ids):
            if not 0 <= x < n:
                problem = (
                    f"{what}: entry {i} is {x}, outside the node ids 0..{n - 1} "
                    f"(n = {count[0]} vertices - {len(inputs)} inputs)"
                )
                raise _fail(k, problem, lines[k - 1])
    for i, (u, v) in enumerate(zip(src, dst)):
        if u == v:
            raise _fail(k_src, f"edge {i} is a self-loop on node {u}", lines[k_src - 1])
    return n, list(zip(src, dst))


def _number(tok: str, k: int, what: str, text: str) -> float:
    return nonnegative(tok, what, lambda problem: _fail(k, problem, text))


def _node_lines(lines: list[str], first: int, n: int) -> list[tuple[float, float, str]]:
    """``(comp, comm, op)`` of the node lines from line ``first`` on (blank lines skipped)."""
    rows: list[tuple[float, float, str]] = []
    for k in range(first, len(lines) + 1):
        text = lines[k - 1]
        if not text.strip():
            continue
        if len(rows) == n:
            raise _fail(k, f"more node lines than the {n} nodes", text)
        try:
            fields = _fields(text)
        except ValueError as e:
            raise _fail(k, f"node {len(rows)}: {e}", text) from None
        if len(fields) not in (2, 3):
            raise _fail(k, f"node {len(rows)}: expected comp,comm[,op_type]", text)
        comp = _number(fields[0], k, f"node {len(rows)}: comp", text)
        comm = _number(fields[1], k, f"node {len(rows)}: comm", text)
        rows.append((comp, comm, fields[2] if len(fields) == 3 else "op"))
    if len(rows) < n:
        raise ValueError(
            f"line {len(lines) + 1}: end of file after {len(rows)} node lines, expected {n} "
            f"(one per node)"
        )
    return rows


def parse_doppler(text: str, name: str = "doppler") -> Graph:
    """Build the :class:`Graph` of a DOPPLER graph file's text (see the module docstring).

    Raises:
        ValueError: ``line K: <problem>, got '<the line>'``, or a cycle.
    """
    lines = text.splitlines()
    top = next((k for k, line in enumerate(lines, 1) if line.strip()), 1)
    n, edges = _header(lines, top)
    rows = _node_lines(lines, top + 4, n)
    return Graph(
        flops=[r[0] for r in rows],
        out_bytes=[r[1] for r in rows],
        op=tuple(r[2] for r in rows),
        spec=tuple({"kind": "opaque"} for _ in rows),
        edges=sorted(set(edges)),
        name=name,
    )


def from_doppler(path: str | os.PathLike[str], *, name: str | None = None) -> Graph:
    """Read a DOPPLER graph file (see the module docstring).

    Args:
        path: the text file.
        name: the graph's name (default: the file's stem).

    Raises:
        FileNotFoundError: no such file.
        ValueError: ``PATH: line K: <problem>, got '<the line>'``, or a cycle.
    """
    p = Path(path)
    text = read_text(p, "DOPPLER graph")
    try:
        return parse_doppler(text, name or p.stem)
    except ValueError as e:
        raise ValueError(f"{p}: {e}") from None
