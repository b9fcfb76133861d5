"""Placements: a device per node plus a priority order, ``placegym.placement/v1``.

File format (DESIGN §2)::

    {"format": "placegym.placement/v1", "device": [d_0, ..., d_{n-1}],
     "order": [a permutation of 0..n-1]}

``order[r]`` is the node of rank ``r`` (rank 0 first); the MDP produces it as the SEL
order. ``rank`` is its inverse. Whether the device indices fit a cluster and the lengths
fit a graph is checked by :meth:`Placement.check` (``simulate`` calls it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from placegym.envs.core import validate as V
from placegym.envs.core.recompute_rule import check_recompute

if TYPE_CHECKING:
    from placegym.envs.core.cluster import Cluster
    from placegym.envs.core.graph import Graph

PLACEMENT_FORMAT = "placegym.placement/v1"

__all__ = ["PLACEMENT_FORMAT", "Placement", "load_placement", "split_group", "split_message"]


@dataclass(frozen=True, eq=False)
class Placement:
    """A validated placement.

    Args:
        device: ``(n,)`` device index per node (>= 0).
        order: ``(n,)`` a permutation of ``0..n-1``, highest priority first.
        recompute: node ids to recompute (:mod:`placegym.envs.core.recompute`), in any order,
            each once; stored ascending (default none: an empty array).

    Raises:
        ValueError: ``order`` not a permutation (naming a missing or repeated node),
            negative device indices, length mismatch, a ``recompute`` id out of
            ``0..n-1`` or repeated.
    """

    device: np.ndarray
    order: np.ndarray
    recompute: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        dev = _int_array(self.device, "device")
        order = _int_array(self.order, "order")
        if len(order) != len(dev):
            raise V.fail(
                "order", f"expected {len(dev)} entries (one per node, like device)", len(order)
            )
        if (dev < 0).any():
            i = int(np.flatnonzero(dev < 0)[0])
            raise V.fail(f"device[{i}]", "must be >= 0", int(dev[i]))
        n = len(order)
        if ((order < 0) | (order >= n)).any():
            i = int(np.flatnonzero((order < 0) | (order >= n))[0])
            raise V.fail(
                f"order[{i}]", f"not a permutation of 0..{n - 1}: out of range", int(order[i])
            )
        counts = np.bincount(order, minlength=n)
        if (counts != 1).any():
            missing = int(np.flatnonzero(counts == 0)[0])
            repeated = int(np.flatnonzero(counts > 1)[0])
            raise V.fail(
                "order",
                f"not a permutation of 0..{n - 1}: node {repeated} is "
                f"repeated and node {missing} is missing",
                order.tolist() if n <= 20 else f"[{n} ints]",
            )
        dev.setflags(write=False)
        order.setflags(write=False)
        object.__setattr__(self, "device", dev)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "recompute", _recompute_ids(self.recompute, n))

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``n``."""
        return int(self.device.shape[0])

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        rc = f", recompute={self.recompute.size}" if self.recompute.size else ""
        return f"Placement(nodes={self.num_nodes}, devices_used={len(np.unique(self.device))}{rc})"

    @cached_property
    def rank(self) -> np.ndarray:
        """``(n,)`` priority rank of each node (inverse of ``order``)."""
        r = np.empty_like(self.order)
        r[self.order] = np.arange(len(r), dtype=r.dtype)
        r.setflags(write=False)
        return r

    @cached_property
    def _max_device(self) -> int:
        return int(self.device.max())

    def check(self, graph: Graph, cluster: Cluster | None = None) -> None:
        """Raise ``ValueError`` unless this placement fits ``graph`` (and ``cluster``):
        one device per node, device indices in the cluster's range, every co-location
        group of ``graph`` on one device (:func:`split_group`), and every node of
        ``recompute`` one that may be recomputed
        (:func:`placegym.envs.core.recompute_rule.check_recompute`)."""
        if self.num_nodes != graph.num_nodes:
            raise V.fail(
                "device",
                f"expected {graph.num_nodes} entries (one per node of graph {graph.name!r})",
                self.num_nodes,
            )
        if cluster is not None and self.num_nodes and self._max_device >= cluster.num_devices:
            i = int(np.argmax(self.device >= cluster.num_devices))
            raise V.fail(
                f"device[{i}]",
                f"device index out of range for cluster "
                f"{cluster.name!r} with {cluster.num_devices} devices",
                int(self.device[i]),
            )
        split = split_group(graph, self.device[None, :])
        if split is not None:
            raise ValueError(split_message("device", graph, self.device, *split[1:]))
        if self.recompute.size:
            check_recompute(graph, self.recompute)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Placement:
        """Build from a ``placegym.placement/v1`` document (validated)."""
        data = V.as_mapping(data, "placement")
        V.check_format(data, PLACEMENT_FORMAT)
        dev = V.as_list(V.get(data, "device", ""), "device")
        order = V.as_list(V.get(data, "order", ""), "order")
        dev = [V.integer(x, f"device[{i}]", lo=0) for i, x in enumerate(dev)]
        order = [V.integer(x, f"order[{i}]") for i, x in enumerate(order)]
        rc = V.as_list(V.get(data, "recompute", "", default=[]), "recompute")
        rc = [V.integer(x, f"recompute[{i}]", lo=0) for i, x in enumerate(rc)]
        return cls(
            device=np.array(dev, dtype=np.int64),
            order=np.array(order, dtype=np.int64),
            recompute=np.array(rc, dtype=np.int64),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``placegym.placement/v1`` JSON document (``"recompute"`` only when some
        node is recomputed)."""
        out = {
            "format": PLACEMENT_FORMAT,
            "device": self.device.tolist(),
            "order": self.order.tolist(),
        }
        if self.recompute.size:
            out["recompute"] = self.recompute.tolist()
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the placement JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict()) + "\n")

    @classmethod
    def from_devices(cls, device: Any, graph: Graph) -> Placement:
        """Devices with the graph's topological order as priority."""
        return cls(device=np.asarray(device), order=graph.topological_order.copy())


def _int_array(x: Any, where: str) -> np.ndarray:
    arr = np.array(x)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.mod(arr, 1) == 0):
            return arr.astype(np.int64).reshape(-1)
        raise V.fail(where, "expected a 1-D list of integers", np.asarray(x).tolist())
    return arr.astype(np.int64, copy=True)


#: The recompute set of a placement without one (shared, read-only).
_NO_RECOMPUTE = np.zeros(0, dtype=np.int64)
_NO_RECOMPUTE.setflags(write=False)


def _recompute_ids(x: Any, n: int) -> np.ndarray:
    """``recompute`` validated: ids in ``0..n-1``, each once, stored ascending."""
    if x is None:
        return _NO_RECOMPUTE
    ids = _int_array(x, "recompute")
    if ids.size == 0:
        return _NO_RECOMPUTE
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        i = int(bad[0])
        raise V.fail(f"recompute[{i}]", f"not a node id: out of range 0..{n - 1}", int(ids[i]))
    ids.sort()
    if (np.diff(ids) == 0).any():
        v = int(ids[np.flatnonzero(np.diff(ids) == 0)[0]])
        raise V.fail("recompute", f"node {v} is repeated", np.asarray(x).tolist())
    ids.setflags(write=False)
    return ids


def load_placement(source: Placement | V.Source) -> Placement:
    """Load a placement from a :class:`Placement`, a dict, or a JSON file path."""
    if isinstance(source, Placement):
        return source
    return V.load_document(source, "placement", Placement.from_dict)


def split_group(graph: Graph, devices: np.ndarray) -> tuple[int, int, int, int] | None:
    """The first ``(row, group, u, v)`` of ``(B, n)`` device rows where nodes ``u`` (the
    group's first node) and ``v`` share co-location group ``group`` but not a device;
    None when every row keeps every group together."""
    if not graph.groups:
        return None
    first = graph.group_first
    grouped = np.flatnonzero(first >= 0)
    bad = devices[:, grouped] != devices[:, first[grouped]]
    if not bad.any():
        return None
    row, k = (int(x) for x in np.argwhere(bad)[0])
    v = int(grouped[k])
    return row, int(graph.group[v]), int(first[v]), v


def split_message(where: str, graph: Graph, device: np.ndarray, group: int, u: int, v: int) -> str:
    """The error of a placement (``device``: its row) that splits ``group``."""
    return (
        f"{where}: splits co-location group {group} of graph {graph.name!r}: node {u} is on "
        f"device {int(device[u])}, node {v} on device {int(device[v])} (a group shares one "
        "device)"
    )
