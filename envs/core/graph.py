"""Dataflow graphs: the ``placegym.graph/v1`` and ``/v2`` formats, validation, conversions.

A graph is a DAG of block kernels. Node ``v`` does ``flops[v]`` FLOP, writes one output
tensor of ``out_bytes[v]`` bytes and keeps ``param_bytes[v]`` bytes of parameters resident
on its device. Edge ``(u, v)`` means the output of ``u`` is an input of ``v``.

File format (DESIGN §2)::

    {"format": "placegym.graph/v1", "name": "ffnn",
     "nodes": [{"id": 0, "op": "einsum", "flops": 2.1e9, "out_bytes": 4194304,
                "param_bytes": 0, "layer": 0, "spec": {}}],
     "edges": [[0, 3]]}

Required per node: ``flops`` and ``out_bytes``. Optional: ``id`` (if given it must equal
the node's list position), ``op`` (default ``"op"``), ``param_bytes`` (default 0),
``layer`` (a non-negative int; absent is stored as -1), ``spec`` (an object, default {}).
Unknown keys are ignored. Sizes may be fractional (they are stored as float64).

``placegym.graph/v2`` is v1 plus two optional node keys, for measured workloads and
co-location constraints:

- ``time``: the node's measured duration in seconds, either one number (finite, >= 0:
  the same on every device) or, as in HEFT's cost matrix, an object of seconds per
  device ``kind`` (:attr:`Device.kind <placegym.envs.core.cluster.Device.kind>`)::

      "time": 0.0012                                  # every device
      "time": {"cpu": 0.0093, "cuda:NVIDIA H200": 0.0004}
      "time": {"cpu": 0.0093, "*": 0.0004}            # "*": every other device

  On a device of kind ``k`` the node runs for ``time[k]`` when the object has ``k``,
  else for the ``"*"`` entry (the default: a plain number is exactly ``{"*": x}``), else
  for the roofline (a device without a kind takes the default): a kind missing from an
  object without ``"*"`` falls back to the roofline. The seconds replace the roofline term of
  rule 1 wherever the cluster has no profiled cost for the node (profile > ``time[k]``
  > default > roofline, :mod:`placegym.envs.core.costs`); the device's launch overhead and
  the noise apply as to the roofline. Each entry must be a finite number >= 0 and each
  key a non-empty string; an empty object is refused. Absent: the roofline everywhere.
- ``group``: a co-location group id (a non-negative int). Every node of a group must be
  placed on one device: a placement that splits a group is infeasible, and
  :meth:`~placegym.envs.core.placement.Placement.check` rejects it naming the group and two of
  its nodes. Absent: no group (stored as -1).

A graph is written as v1 when it has neither (so v1 files round-trip unchanged), else
as v2; a v1 document that carries either key is refused (an older reader would ignore
the constraint silently). A node's ``time`` is written as a number when it has no
per-kind entry (so v2 files with plain times re-save byte for byte), else as an object
of its kinds in sorted order then ``"*"`` for a default (:attr:`Graph.time` holds the
defaults, :attr:`Graph.kind_time` the rest; :meth:`Graph.time_on` resolves one kind).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from placegym.envs.core import validate as V

if TYPE_CHECKING:
    import networkx as nx
    from numpy.typing import ArrayLike
    from torch_geometric.data import Data

GRAPH_FORMAT = "placegym.graph/v1"
#: v1 plus measured node times and co-location groups (module docstring).
GRAPH_FORMAT_V2 = "placegym.graph/v2"
_V2_KEYS = ("time", "group")
#: The key of a ``time`` object's default entry (every kind the object does not name).
DEFAULT_KIND = "*"

__all__ = ["DEFAULT_KIND", "GRAPH_FORMAT", "GRAPH_FORMAT_V2", "Graph", "load_graph"]


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable, validated dataflow graph.

    Args:
        flops: ``(n,)`` FLOP per node, finite and >= 0.
        out_bytes: ``(n,)`` bytes of each node's output tensor, finite and >= 0.
        edges: ``(E, 2)`` int pairs ``(u, v)``; no self-loops, no duplicates, acyclic.
        param_bytes: ``(n,)`` resident parameter bytes (default zeros).
        layer: ``(n,)`` layer id per node, ``-1`` for none (default all -1).
        op: op kind per node (default ``"op"``).
        spec: executable kernel description per node (default empty dicts).
        name: a label.
        time: ``(n,)`` measured seconds per node on every device (the default of the
            module docstring), finite and >= 0, NaN where not measured (default all NaN:
            the roofline everywhere).
        group: ``(n,)`` co-location group id per node, ``-1`` for none (default all -1).
        kind_time: ``{kind: (n,) seconds}``, the measured seconds of each node on the
            devices of one kind, NaN where the node has none for that kind (there
            ``time`` applies). Kinds are non-empty strings other than ``"*"``; a kind
            without any measured node is dropped. Stored as a validated copy, kinds
            sorted, each array read-only.

    Raises:
        ValueError: naming the field (``nodes[i].flops``, ``edges[k]``) and the bad value;
            a cycle is reported with a node on it.
    """

    # the fields as __post_init__ leaves them (None becomes the default values)
    flops: np.ndarray
    out_bytes: np.ndarray
    edges: np.ndarray
    param_bytes: np.ndarray = None  # type: ignore[assignment]
    layer: np.ndarray = None  # type: ignore[assignment]
    op: tuple[str, ...] = None  # type: ignore[assignment]
    spec: tuple[Mapping[str, Any], ...] = None  # type: ignore[assignment]
    name: str = "graph"
    time: np.ndarray = None  # type: ignore[assignment]
    group: np.ndarray = None  # type: ignore[assignment]
    kind_time: dict[str, np.ndarray] = None  # type: ignore[assignment]
    _topo: np.ndarray = field(init=False, repr=False)

    if TYPE_CHECKING:  # what the constructor accepts

        def __init__(
            self,
            flops: ArrayLike,
            out_bytes: ArrayLike,
            edges: ArrayLike,
            param_bytes: ArrayLike | None = None,
            layer: ArrayLike | None = None,
            op: Sequence[str] | None = None,
            spec: Sequence[Mapping[str, Any]] | None = None,
            name: str = "graph",
            time: ArrayLike | None = None,
            group: ArrayLike | None = None,
            kind_time: Mapping[str, ArrayLike] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        s = object.__setattr__
        flops = _as_array(self.flops, "flops", np.float64)
        n = V.size(flops.shape[0], "nodes", V.NODE_LIMIT)
        s(self, "flops", _readonly(flops))
        s(self, "out_bytes", _readonly(self._node_array(self.out_bytes, "out_bytes", n, 0.0)))
        s(
            self,
            "param_bytes",
            _readonly(self._node_array(self.param_bytes, "param_bytes", n, 0.0)),
        )
        for key in ("flops", "out_bytes", "param_bytes"):
            V.check_array(getattr(self, key), "nodes[{i}]." + key)
        layer = self._node_array(self.layer, "layer", n, -1, dtype=np.int64)
        if (layer < -1).any():
            i = int(np.flatnonzero(layer < -1)[0])
            raise V.fail(f"nodes[{i}].layer", "must be a non-negative integer", int(layer[i]))
        s(self, "layer", _readonly(layer))
        s(self, "time", _readonly(_check_time(self._node_array(self.time, "time", n, np.nan))))
        s(self, "kind_time", self._check_kind_time(self.kind_time, n))
        group = self._node_array(self.group, "group", n, -1, dtype=np.int64)
        if (group < -1).any():
            i = int(np.flatnonzero(group < -1)[0])
            raise V.fail(f"nodes[{i}].group", "must be a non-negative integer", int(group[i]))
        s(self, "group", _readonly(group))
        op = ("op",) * n if self.op is None else tuple(str(o) for o in self.op)
        spec = ({},) * n if self.spec is None else tuple(self.spec)
        if len(op) != n:
            raise V.fail("op", f"expected {n} entries", len(op))
        if len(spec) != n:
            raise V.fail("spec", f"expected {n} entries", len(spec))
        s(self, "op", op)
        s(self, "spec", spec)
        s(self, "edges", _readonly(self._check_edges(self.edges, n)))
        s(self, "_topo", _readonly(self._toposort()))

    @staticmethod
    def _node_array(value: Any, key: str, n: int, default: float, dtype: Any = np.float64):
        if value is None:
            return np.full(n, default, dtype=dtype)
        arr = _as_array(value, key, dtype)
        if arr.shape[0] != n:
            raise V.fail(key, f"expected {n} entries (one per node)", arr.shape[0])
        return arr

    @classmethod
    def _check_kind_time(cls, value: Any, n: int) -> dict[str, np.ndarray]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise V.fail("kind_time", "expected a mapping {kind: seconds per node}", value)
        out: dict[str, np.ndarray] = {}
        for kind, times in value.items():
            where = f"kind_time[{kind!r}]"
            if not isinstance(kind, str) or not kind or kind == DEFAULT_KIND:
                raise V.fail("kind_time", "kinds must be non-empty strings other than '*'", kind)
            arr = _check_time(cls._node_array(times, where, n, np.nan), kind)
            if not np.isnan(arr).all():
                out[kind] = _readonly(arr)
        return dict(sorted(out.items()))

    @staticmethod
    def _check_edges(edges: Any, n: int) -> np.ndarray:
        e = _as_array(edges, "edges", np.int64, flat=False)
        if V.size(len(e), "edges", V.EDGE_LIMIT) == 0 or e.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
        if e.ndim != 2 or e.shape[1] != 2:
            raise V.fail("edges", "expected a list of [u, v] pairs", np.asarray(edges).tolist())
        bad = (e < 0) | (e >= n)
        if bad.any():
            k = int(np.argwhere(bad)[0][0])
            raise V.fail(f"edges[{k}]", f"node id out of range 0..{n - 1}", e[k].tolist())
        loops = np.flatnonzero(e[:, 0] == e[:, 1])
        if loops.size:
            k = int(loops[0])
            raise V.fail(f"edges[{k}]", "self-loop", e[k].tolist())
        key = e[:, 0] * n + e[:, 1]
        uniq, counts = np.unique(key, return_counts=True)
        if (counts > 1).any():
            dup_key = uniq[np.flatnonzero(counts > 1)[0]]
            k = int(np.flatnonzero(key == dup_key)[1])
            raise V.fail(f"edges[{k}]", "duplicate edge", e[k].tolist())
        return e

    def _toposort(self) -> np.ndarray:
        """Kahn's algorithm, smallest id first among ready nodes (deterministic)."""
        import heapq

        n = self.num_nodes
        indeg = np.bincount(self.edges[:, 1], minlength=n).tolist()
        ptr, idx = self.consumer_csr
        heap = [v for v in range(n) if indeg[v] == 0]
        order: list[int] = []
        while heap:
            v = heapq.heappop(heap)
            order.append(v)
            for c in idx[ptr[v] : ptr[v + 1]].tolist():
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(heap, c)
        if len(order) < n:
            raise ValueError(f"edges: the graph has a cycle: {self._find_cycle(indeg)}")
        return np.array(order, dtype=np.int64)

    def _find_cycle(self, indeg: list[int]) -> str:
        ptr, idx = self.producer_csr
        v = next(i for i, d in enumerate(indeg) if d > 0)
        seen: dict[int, int] = {}
        path: list[int] = []
        while v not in seen:  # walk back along unresolved producers until one repeats
            seen[v] = len(path)
            path.append(v)
            v = next(u for u in idx[ptr[v] : ptr[v + 1]].tolist() if indeg[u] > 0)
        cyc = path[seen[v] :][::-1]
        return f"node {v} is on it ({' -> '.join(map(str, [*cyc, cyc[0]]))})"

    # ------------------------------------------------------------------ structure
    @cached_property
    def num_nodes(self) -> int:
        """Number of nodes ``n``."""
        return int(self.flops.shape[0])

    @cached_property
    def num_edges(self) -> int:
        """Number of edges ``E``."""
        return int(self.edges.shape[0])

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        return f"Graph(name={self.name!r}, nodes={self.num_nodes}, edges={self.num_edges})"

    @cached_property
    def consumer_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ptr, idx)``: consumers of ``v`` are ``idx[ptr[v]:ptr[v+1]]`` (ascending)."""
        return _csr(self.edges[:, 0], self.edges[:, 1], self.num_nodes)

    @cached_property
    def producer_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ptr, idx)``: producers of ``v`` are ``idx[ptr[v]:ptr[v+1]]`` (ascending)."""
        return _csr(self.edges[:, 1], self.edges[:, 0], self.num_nodes)

    @cached_property
    def in_degree(self) -> np.ndarray:
        """``(n,)`` number of producers of each node."""
        return _readonly(np.diff(self.producer_csr[0]))

    @property
    def topological_order(self) -> np.ndarray:
        """Node ids in a topological order (Kahn, smallest ready id first)."""
        return self._topo

    @cached_property
    def in_bytes(self) -> np.ndarray:
        """``(n,)`` bytes read from producers: sum of ``out_bytes[u]`` over producers u."""
        return _readonly(
            np.bincount(
                self.edges[:, 1],
                weights=self.out_bytes[self.edges[:, 0]],
                minlength=self.num_nodes,
            ).astype(np.float64)
        )

    @cached_property
    def io_bytes(self) -> np.ndarray:
        """``(n,)`` memory traffic of each node: output + params + inputs (DESIGN §3.1)."""
        return _readonly(self.out_bytes + self.param_bytes + self.in_bytes)

    def predecessors(self, v: int) -> np.ndarray:
        """The producers of node ``v``."""
        ptr, idx = self.producer_csr
        return idx[ptr[v] : ptr[v + 1]]

    def successors(self, v: int) -> np.ndarray:
        """The consumers of node ``v``."""
        ptr, idx = self.consumer_csr
        return idx[ptr[v] : ptr[v + 1]]

    # ------------------------------------------------------------------ I/O
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Graph:
        """Parse and validate a ``placegym.graph/v1`` or ``/v2`` document."""
        data = V.as_mapping(data, "graph")
        v2 = data.get("format") == GRAPH_FORMAT_V2
        if not v2:
            V.check_format(data, GRAPH_FORMAT, GRAPH_FORMAT_V2)
        nodes = V.as_list(V.get(data, "nodes", ""), "nodes")
        edges = V.as_list(V.get(data, "edges", ""), "edges")
        name = str(data.get("name", "graph"))
        n = len(nodes)
        flops = np.empty(n)
        out_b = np.empty(n)
        par_b = np.empty(n)
        layer = np.full(n, -1, dtype=np.int64)
        time = np.full(n, np.nan)
        kind_time: dict[str, np.ndarray] = {}
        group = np.full(n, -1, dtype=np.int64)
        ops: list[str] = []
        specs: list[Mapping[str, Any]] = []
        for i, raw in enumerate(nodes):
            w = f"nodes[{i}]"
            nd = V.as_mapping(raw, w)
            if "id" in nd and V.integer(nd["id"], f"{w}.id") != i:
                raise V.fail(
                    f"{w}.id", f"node ids must be 0..n-1 in list order, expected {i}", nd["id"]
                )
            flops[i] = V.number(V.get(nd, "flops", w), f"{w}.flops")
            out_b[i] = V.number(V.get(nd, "out_bytes", w), f"{w}.out_bytes")
            par_b[i] = V.number(nd.get("param_bytes", 0), f"{w}.param_bytes")
            if nd.get("layer") is not None:
                layer[i] = V.integer(nd["layer"], f"{w}.layer", lo=0)
            for key in _V2_KEYS:
                if key in nd and not v2:
                    raise V.fail(
                        f"{w}.{key}", f"needs the format tag {GRAPH_FORMAT_V2!r}", nd[key]
                    )
            if nd.get("time") is not None:
                for kind, t in _parse_time(nd["time"], f"{w}.time").items():
                    if kind == DEFAULT_KIND:
                        time[i] = t
                    else:
                        kind_time.setdefault(kind, np.full(n, np.nan))[i] = t
            if nd.get("group") is not None:
                group[i] = V.integer(nd["group"], f"{w}.group", lo=0)
            op = nd.get("op", "op")
            if not isinstance(op, str):
                raise V.fail(f"{w}.op", "expected a string", op)
            ops.append(op)
            specs.append(V.as_mapping(nd.get("spec", {}), f"{w}.spec"))
        pairs = np.zeros((len(edges), 2), dtype=np.int64)
        for k, e in enumerate(edges):
            if not isinstance(e, list | tuple) or len(e) != 2:
                raise V.fail(f"edges[{k}]", "expected a pair [u, v]", e)
            pairs[k] = [V.integer(x, f"edges[{k}]") for x in e]
        return cls(
            flops=flops,
            out_bytes=out_b,
            param_bytes=par_b,
            layer=layer,
            op=tuple(ops),
            spec=tuple(specs),
            edges=pairs,
            name=name,
            time=time,
            group=group,
            kind_time=kind_time,
        )

    @cached_property
    def measured(self) -> bool:
        """Whether any node has a measured ``time`` (for every device or for a kind)."""
        return bool((~np.isnan(self.time)).any()) or bool(self.kind_time)

    def time_on(self, kind: str | None) -> np.ndarray:
        """``(n,)`` the measured seconds of each node on a device of ``kind`` (None: a
        device without a kind): its per-kind time where it has one, else its default
        :attr:`time`; NaN where neither is given (the roofline applies). A cluster's
        profile is not consulted: :func:`placegym.envs.core.costs.kind_times` adds it."""
        per_kind = self.kind_time.get(kind) if kind is not None else None
        if per_kind is None:
            return self.time
        return _readonly(np.where(np.isnan(per_kind), self.time, per_kind))

    def node_time(self, v: int) -> float | dict[str, float] | None:
        """Node ``v``'s ``time`` as the document writes it: a number, an object of
        seconds per kind (``"*"`` last, for the default), or None when not measured."""
        default = float(self.time[v])
        kinds = {k: float(t[v]) for k, t in self.kind_time.items() if not np.isnan(t[v])}
        if not kinds:
            return None if np.isnan(default) else default
        if not np.isnan(default):
            kinds[DEFAULT_KIND] = default
        return kinds

    @cached_property
    def groups(self) -> dict[int, np.ndarray]:
        """Each co-location group's nodes (ascending ids), by group id."""
        ids = np.flatnonzero(self.group >= 0)
        out: dict[int, list[int]] = {}
        for v in ids.tolist():
            out.setdefault(int(self.group[v]), []).append(v)
        return {g: _readonly(np.array(vs, dtype=np.int64)) for g, vs in sorted(out.items())}

    @cached_property
    def group_first(self) -> np.ndarray:
        """``(n,)`` the first (lowest-id) node of each node's co-location group, -1 for a
        node in none: a placement keeps every group together exactly when each grouped
        node shares its first node's device."""
        first = np.full(self.num_nodes, -1, dtype=np.int64)
        for nodes in self.groups.values():
            first[nodes] = nodes[0]
        return _readonly(first)

    @property
    def format(self) -> str:
        """The format tag :meth:`to_dict` writes: v2 when a node has a time or a group."""
        return GRAPH_FORMAT_V2 if self.measured or bool(self.groups) else GRAPH_FORMAT

    def to_dict(self) -> dict[str, Any]:
        """The graph's JSON document (:attr:`format`)."""
        nodes = []
        for i in range(self.num_nodes):
            nd: dict[str, Any] = {
                "id": i,
                "op": self.op[i],
                "flops": V.compact(self.flops[i]),
                "out_bytes": V.compact(self.out_bytes[i]),
                "param_bytes": V.compact(self.param_bytes[i]),
            }
            if self.layer[i] >= 0:
                nd["layer"] = int(self.layer[i])
            if self.spec[i]:
                nd["spec"] = dict(self.spec[i])
            t = self.node_time(i)
            if t is not None:
                nd["time"] = t
            if self.group[i] >= 0:
                nd["group"] = int(self.group[i])
            nodes.append(nd)
        return {
            "format": self.format,
            "name": self.name,
            "nodes": nodes,
            "edges": self.edges.tolist(),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    # ------------------------------------------------------------------ conversions
    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph`` with node attributes (op, flops, out_bytes, param_bytes,
        layer, spec, time, group, and ``kind_time``: the node's ``{kind: seconds}``) and
        edge attribute ``bytes`` (the producer's ``out_bytes``)."""
        import networkx as nx

        g: nx.DiGraph = nx.DiGraph(name=self.name)
        for i in range(self.num_nodes):
            g.add_node(
                i,
                op=self.op[i],
                flops=float(self.flops[i]),
                out_bytes=float(self.out_bytes[i]),
                param_bytes=float(self.param_bytes[i]),
                layer=int(self.layer[i]),
                spec=dict(self.spec[i]),
                time=float(self.time[i]),
                group=int(self.group[i]),
                kind_time={k: float(t[i]) for k, t in self.kind_time.items() if t[i] == t[i]},
            )
        g.add_edges_from(
            (int(u), int(v), {"bytes": float(self.out_bytes[u])}) for u, v in self.edges
        )
        return g

    @classmethod
    def from_networkx(cls, g: nx.DiGraph, name: str | None = None) -> Graph:
        """Build from a DiGraph whose nodes carry ``flops`` and ``out_bytes`` (and optionally
        ``param_bytes``, ``layer``, ``op``, ``spec``, ``time``, ``group``, ``kind_time``).
        Nodes are numbered in ``g.nodes`` order."""
        index = {v: i for i, v in enumerate(g.nodes)}
        nodes = []
        for _, attrs in g.nodes(data=True):
            nd: dict[str, Any] = {
                k: attrs[k]
                for k in ("flops", "out_bytes", "param_bytes", "op", "spec")
                if k in attrs
            }
            if attrs.get("layer", -1) not in (None, -1):
                nd["layer"] = attrs["layer"]
            time = dict(attrs.get("kind_time") or {})
            if attrs.get("time") is not None and not np.isnan(attrs["time"]):
                time[DEFAULT_KIND] = attrs["time"]
            if time:
                nd["time"] = time if set(time) != {DEFAULT_KIND} else time[DEFAULT_KIND]
            if attrs.get("group", -1) not in (None, -1):
                nd["group"] = attrs["group"]
            nodes.append(nd)
        data = {
            "format": GRAPH_FORMAT_V2,
            "name": name or g.graph.get("name") or "graph",
            "nodes": nodes,
            "edges": [[index[u], index[v]] for u, v in g.edges],
        }
        return cls.from_dict(data)

    def to_pyg(self) -> Data:
        """A ``torch_geometric.data.Data``: ``edge_index`` (2, E) long, ``x`` (n, 3) float32
        = [flops, out_bytes, param_bytes], ``edge_attr`` (E, 1) float32 = bytes on the edge,
        plus ``layer`` (n,) long and ``num_nodes``."""
        import torch
        from torch_geometric.data import Data

        x = np.stack([self.flops, self.out_bytes, self.param_bytes], axis=1)
        return Data(
            x=torch.as_tensor(x, dtype=torch.float32),
            edge_index=torch.as_tensor(self.edges.T.copy(), dtype=torch.long),
            edge_attr=torch.as_tensor(
                self.out_bytes[self.edges[:, 0]], dtype=torch.float32
            ).reshape(-1, 1),
            layer=torch.tensor(self.layer, dtype=torch.long),
            num_nodes=self.num_nodes,
        )


def _check_time(time: np.ndarray, kind: str | None = None) -> np.ndarray:
    """``time`` (seconds per node, NaN: not measured) if every other entry is finite and
    >= 0; else the error names the first bad node (and the kind)."""
    bad = np.isinf(time) | (time < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = f"nodes[{i}].time" + ("" if kind is None else f"[{json.dumps(kind)}]")
        raise V.fail(where, "must be a finite number >= 0", float(time[i]))
    return time


def _parse_time(value: Any, where: str) -> dict[str, float]:
    """A node's ``time`` field as ``{kind: seconds}`` (a number is ``{"*": seconds}``)."""
    if not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise V.fail(where, "expected a number of seconds or an object {kind: seconds}", value)
        return {DEFAULT_KIND: V.number(value, where)}
    if not value:
        raise V.fail(where, "an object of seconds per device kind needs at least one kind", {})
    out = {}
    for kind, t in value.items():
        if not isinstance(kind, str) or not kind:
            raise V.fail(where, "device kinds must be non-empty strings", kind)
        out[kind] = V.number(t, f"{where}[{json.dumps(kind)}]")
    return out


def _as_array(value: Any, key: str, dtype: Any, *, flat: bool = True) -> np.ndarray:
    """``value`` as an array of ``dtype`` (flattened); a value that does not convert
    (a string, a ragged list, a number beyond the dtype's range) raises naming ``key``."""
    try:
        arr = np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise V.fail(key, f"expected {np.dtype(dtype).name} numbers", value) from None
    return arr.reshape(-1) if flat else arr


def _csr(keys: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((vals, keys))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return _readonly(ptr), _readonly(vals[order].astype(np.int64))


def load_graph(source: Graph | V.Source) -> Graph:
    """Load a graph from a :class:`Graph`, a dict, or a JSON file path."""
    if isinstance(source, Graph):
        return source
    return V.load_document(source, "graph", Graph.from_dict)
