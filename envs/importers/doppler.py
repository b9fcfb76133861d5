"""Import DOPPLER's published graph text format.

The format (one graph per file)::

    8                 line 1: vertex count n, input vertices included
    0 1               line 2: input vertex ids
    0,1,2,2,3         line 3: edge sources
    2,2,3,4,4         line 4: edge destinations (edge k is sources[k] -> destinations[k])
    1.5e9,4096,mm     then one line per non-input vertex, in increasing id order:
    ...               comp_cost,comm_cost[,op_type]

Lines 2-4 are integer lists separated by whitespace or commas (or both); an empty line 2
means no inputs, empty lines 3 and 4 no edges. Blank lines before line 1 and after line 4
are skipped (error messages give physical line numbers); cost fields are separated by
commas (or whitespace when there is no comma).

Conversion: input vertices are dropped with their outgoing edges (they hold data that
is present before the step starts); the remaining vertices are renumbered ``0..m-1`` in
increasing original id; ``comp_cost`` becomes ``flops`` and ``comm_cost`` becomes
``out_bytes``, so on the ``doppler-unit-4`` / ``doppler-unit-8`` presets (1e10 FLOP/s and
1e10 B/s, no latency) simulated seconds are DOPPLER's cost units / 1e10. ``op_type``
becomes ``op`` (default ``"op"``); ``spec`` is ``{"kind": "opaque", "vertex": original
id}`` (the files carry costs, not kernels). Duplicate edges are merged.

Errors raise ``ValueError`` naming the file, the line number and the offending text.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from placegym.envs.graph import Graph
from placegym.envs.validate import read_text

_SEP = re.compile(r"[\s,]+")


def _fail(line: int, problem: str, text: str) -> ValueError:
    return ValueError(f"line {line}: {problem}, got {text.strip()!r}")


def _ints(lines: list[str], k: int, what: str) -> list[int]:
    """The integer list on (1-based) line ``k``; a missing line is an error."""
    if k > len(lines):
        raise ValueError(f"line {k}: missing ({what}); the file has {len(lines)} lines")
    out = []
    for tok in _SEP.split(lines[k - 1].strip()):
        if not tok:
            continue
        try:
            out.append(int(tok))
        except ValueError:
            raise _fail(
                k, f"{what}: expected integers, {tok!r} is not one", lines[k - 1]
            ) from None
    return out


def _check_ids(ids: list[int], n: int, k: int, what: str, text: str) -> None:
    for x in ids:
        if not 0 <= x < n:
            raise _fail(k, f"{what}: vertex id {x} out of range 0..{n - 1}", text)


def _header(lines: list[str], top: int) -> tuple[int, set[int], list[tuple[int, int]]]:
    """Vertex count, input ids and edges of the four header lines from line ``top``."""
    k_count, k_inputs, k_src, k_dst = range(top, top + 4)
    count = _ints(lines, k_count, "vertex count")
    if len(count) != 1 or count[0] < 1:
        raise _fail(k_count, "vertex count: expected one integer >= 1", lines[k_count - 1])
    n = count[0]
    inputs = _ints(lines, k_inputs, "input vertex ids")
    _check_ids(inputs, n, k_inputs, "input vertex ids", lines[k_inputs - 1])
    src = _ints(lines, k_src, "edge sources")
    dst = _ints(lines, k_dst, "edge destinations")
    _check_ids(src, n, k_src, "edge sources", lines[k_src - 1])
    _check_ids(dst, n, k_dst, "edge destinations", lines[k_dst - 1])
    if len(src) != len(dst):
        raise _fail(
            k_dst,
            f"edge destinations: {len(dst)} entries for the {len(src)} sources of line {k_src}",
            lines[k_dst - 1],
        )
    into = set(inputs)
    for k, (u, v) in enumerate(zip(src, dst)):
        if u == v:
            raise _fail(k_src, f"edge {k} is a self-loop on vertex {u}", lines[k_src - 1])
        if v in into:
            problem = f"edge {k} ({u} -> {v}) points into input vertex {v}"
            raise _fail(k_dst, problem, lines[k_dst - 1])
    return n, into, list(zip(src, dst))


def _number(tok: str, k: int, what: str, text: str) -> float:
    try:
        x = float(tok)
    except ValueError:
        raise _fail(k, f"{what}: expected a number, {tok.strip()!r} is not one", text) from None
    if not math.isfinite(x) or x < 0:
        raise _fail(k, f"{what}: must be a finite number >= 0, not {tok.strip()!r}", text)
    return x


def _costs(lines: list[str], first: int, expected: int) -> list[tuple[float, float, str]]:
    """``(comp, comm, op)`` of the cost lines from line ``first`` on (blank lines skipped)."""
    rows: list[tuple[float, float, str]] = []
    for k in range(first, len(lines) + 1):
        text = lines[k - 1]
        if not text.strip():
            continue
        if len(rows) == expected:
            raise _fail(k, f"more cost lines than the {expected} non-input vertices", text)
        fields = [f.strip() for f in text.split(",")] if "," in text else text.split()
        if len(fields) not in (2, 3):
            raise _fail(k, "expected comp_cost,comm_cost[,op_type]", text)
        comp = _number(fields[0], k, "comp_cost", text)
        comm = _number(fields[1], k, "comm_cost", text)
        rows.append((comp, comm, fields[2] if len(fields) == 3 and fields[2] else "op"))
    if len(rows) < expected:
        raise ValueError(
            f"line {len(lines) + 1}: end of file after {len(rows)} cost lines, expected "
            f"{expected} (one per non-input vertex)"
        )
    return rows


def parse_doppler(text: str, name: str = "doppler") -> Graph:
    """Build the :class:`Graph` of a DOPPLER graph file's text (see the module docstring).

    Raises:
        ValueError: ``line K: <problem>, got '<the line>'``.
    """
    lines = text.splitlines()
    top = next((k for k, line in enumerate(lines, 1) if line.strip()), 1)
    n, inputs, edges = _header(lines, top)
    kept = [v for v in range(n) if v not in inputs]
    rows = _costs(lines, top + 4, len(kept))
    new_id = {v: i for i, v in enumerate(kept)}
    merged = sorted({(new_id[u], new_id[v]) for u, v in edges if u not in inputs})
    return Graph(
        flops=[r[0] for r in rows],
        out_bytes=[r[1] for r in rows],
        op=tuple(r[2] for r in rows),
        spec=tuple({"kind": "opaque", "vertex": v} for v in kept),
        edges=merged,
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
