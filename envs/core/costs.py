"""Node durations: the roofline of DESIGN §3.1, or measured costs where given.

A cluster may carry a *profile* (:attr:`Cluster.profile`, written by ``placegym calibrate
--profile``): for each device ``kind`` (a class of identical devices, such as ``"cpu"`` or
``"cuda:NVIDIA H200"``), the measured seconds of kernels keyed by their *signature*. A
node's signature (:func:`kernel_signature`) is its ``spec`` with each producer operand
replaced by the producer's output shape, so every node running the same kernel on
same-shaped operands shares it, in any graph. A graph may carry measured times
(``placegym.graph/v2``): a default :attr:`Graph.time` for every device and per-kind
seconds :attr:`Graph.kind_time` (HEFT's cost matrix). The duration of node ``v`` on
device ``d`` of kind ``k`` (no noise) is ``m + launch_overhead_d``, where ``m`` is the
first of

1. ``profile[k][signature_v]``, when the profile of ``k`` has ``v``'s signature;
2. ``kind_time[k][v]``, when the graph gives ``v`` a time for kind ``k``;
3. ``time[v]``, when the graph gives ``v`` a default time (the only measured term a
   device without a kind has);
4. the roofline ``max(flops_v / flops_d, io_v / mem_bandwidth_d)``.

Noise multiplies ``m``. Terms 1-3 are resolved in one place, :func:`kind_times` (per
device kind of the cluster, an ``(n,)`` column of measured seconds, NaN where the
roofline applies), and :func:`with_kind_times` bakes them into a graph's ``kind_time``,
so a profiled graph saved to JSON simulates identically on the same cluster without its
profile. :func:`cost_table` packs them as an ``(n, C)`` table over the ``C`` cost classes
(the profiled kinds, then the other kinds the graph times, then one class for the
default) plus each device's class index, never an ``n × D`` array, so clusters of
thousands of devices cost no more than their classes. Everything that takes a graph and
a cluster (the simulator and its oracle, :mod:`placegym.envs.analysis.levels`,
the teachers, the environments) reads durations through this module or that table, so
profiled clusters and measured graphs are used transparently.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph

__all__ = [
    "cost_table",
    "kernel_signature",
    "kind_times",
    "node_durations",
    "profiled_seconds",
    "roofline_nodes",
    "signatures",
    "with_kind_times",
]

#: The table of a cluster without a profile: never indexed (every class is -1).
NO_PROFILE = np.empty((0, 0))
NO_PROFILE.setflags(write=False)


def kernel_signature(graph: Graph, v: int) -> str | None:
    """The signature of node ``v``'s kernel, or None when its spec is not a kernel.

    Canonical JSON of the spec with ``args`` as ``[["node", producer shape] | ["param",
    shape], ...]``: node ids are dropped, so equal kernels of different nodes (and graphs)
    share one signature.
    """
    spec = graph.spec[v]
    if not spec or "kind" not in spec:
        return None
    key = {k: x for k, x in spec.items() if k != "args"}
    try:
        key["args"] = [
            ["param", list(a["param"])]
            if "param" in a
            else ["node", list(graph.spec[int(a["node"])].get("shape", []))]
            for a in spec.get("args", [])
        ]
        return json.dumps(key, sort_keys=True, separators=(",", ":"))
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def signatures(graph: Graph) -> list[str | None]:
    """:func:`kernel_signature` of every node."""
    return [kernel_signature(graph, v) for v in range(graph.num_nodes)]


def _profiled_seconds(graph: Graph, cluster: Cluster) -> np.ndarray:
    kinds = cluster.profile_kinds
    if not kinds:
        return NO_PROFILE
    assert cluster.profile is not None
    sigs = signatures(graph)
    table = np.full((graph.num_nodes, len(kinds)), np.nan)
    for k, kind in enumerate(kinds):
        prof = cluster.profile[kind]
        table[:, k] = [math.nan if s is None else prof.get(s, math.nan) for s in sigs]
    table.setflags(write=False)
    return table


#: ``(n, K)`` profiled seconds of each node on each profiled kind (NaN: not profiled,
#: the roofline applies), or :data:`NO_PROFILE`; the last 16 pairs are cached.
profiled_seconds = IdentityCache(_profiled_seconds, size=16)


def _device_kinds(cluster: Cluster) -> tuple[str, ...]:
    """The cluster's device kinds, in order of their first device."""
    return tuple(dict.fromkeys(d.kind for d in cluster.devices if d.kind is not None))


def kind_times(graph: Graph, cluster: Cluster) -> dict[str, np.ndarray]:
    """``{kind: (n,)}`` the measured seconds of each node on the devices of each kind of
    the cluster (in order of first device): the profile, else the graph's time for the
    kind, else its default time; NaN where none applies (the roofline). Terms 1-3 of the
    module docstring, the only place they are resolved; devices without a kind take the
    graph's default :attr:`Graph.time`. The arrays are read-only."""
    prof = profiled_seconds(graph, cluster)
    index = {k: j for j, k in enumerate(cluster.profile_kinds)}
    out = {}
    for kind in _device_kinds(cluster):
        col = graph.time_on(kind)
        if kind in index:
            col = np.where(np.isnan(prof[:, index[kind]]), col, prof[:, index[kind]])
            col.setflags(write=False)
        out[kind] = col
    return out


def with_kind_times(graph: Graph, cluster: Cluster) -> Graph:
    """``graph`` with the measured seconds :func:`kind_times` resolves on ``cluster``
    baked into its per-kind times, for every kind the cluster profiles or the graph
    already times (other kinds keep the graph's default). On any cluster of the same
    devices, with or without that profile, the result has the same durations as
    ``graph`` on ``cluster``: save it (``placegym.graph/v2``) to replay a profiled run
    without the profile. Per-kind times of kinds the cluster lacks are kept."""
    times = kind_times(graph, cluster)
    own = [k for k in times if k in cluster.profile_kinds or k in graph.kind_time]
    return dataclasses.replace(graph, kind_time={**graph.kind_time, **{k: times[k] for k in own}})


def _cost_table(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    times = kind_times(graph, cluster)
    profiled = cluster.profile_kinds
    kinds = [*profiled, *(k for k in times if k in graph.kind_time and k not in profiled)]
    default = not np.isnan(graph.time).all()
    if not kinds and not default:
        return NO_PROFILE, cluster.profile_class
    cols = [times[k] for k in kinds] + [graph.time] * default
    table = np.stack(cols, axis=1)
    table.setflags(write=False)
    index = {k: j for j, k in enumerate(kinds)}
    rest = len(kinds) if default else -1  # devices whose kind has no column of its own
    cls = np.array([index.get(d.kind or "", rest) for d in cluster.devices], dtype=np.int64)
    cls.setflags(write=False)
    return table, cls


#: ``(table, dclass)``: the measured seconds of each node per cost class (``(n, C)``,
#: NaN where the roofline applies; the columns of :func:`kind_times` for the profiled
#: kinds and the kinds the graph times, then the graph's default time when it has one)
#: and each device's class (``(D,)``, -1: the roofline for every node). The last 16
#: pairs are cached.
cost_table = IdentityCache(_cost_table, size=16)


def roofline_nodes(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` whether each node's duration is the roofline on every device (no profiled
    or measured cost applies to it): the nodes that bounds on FLOP and bytes may count."""
    table, dclass = cost_table(graph, cluster)
    if not table.size:
        return np.ones(graph.num_nodes, dtype=bool)
    used = np.unique(dclass[dclass >= 0])
    return np.isnan(table[:, used]).all(axis=1)


def node_durations(graph: Graph, cluster: Cluster, nodes, devices) -> np.ndarray:
    """Noise-free durations of ``nodes[i]`` on ``devices[i]`` (index arrays that broadcast),
    with the simulator's arithmetic (module docstring)."""
    nodes, devices = np.asarray(nodes), np.asarray(devices)
    t = np.maximum(
        graph.flops[nodes] / cluster.flops[devices],
        graph.io_bytes[nodes] / cluster.mem_bandwidth[devices],
    )
    table, dclass = cost_table(graph, cluster)
    if table.size:
        cls = dclass[devices]
        prof = np.where(cls >= 0, table[nodes, np.maximum(cls, 0)], np.nan)
        t = np.where(np.isnan(prof), t, prof)
    return t + cluster.launch_overhead[devices]
