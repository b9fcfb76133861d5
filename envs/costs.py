"""Node durations: the roofline of DESIGN §3.1, or measured costs where given.

A cluster may carry a *profile* (:attr:`Cluster.profile`, written by ``placegym calibrate
--profile``): for each device ``kind`` (a class of identical devices, such as ``"cpu"`` or
``"cuda:NVIDIA H200"``), the measured seconds of kernels keyed by their *signature*. A
node's signature (:func:`kernel_signature`) is its ``spec`` with each producer operand
replaced by the producer's output shape, so every node running the same kernel on
same-shaped operands shares it, in any graph. The duration of node ``v`` on device ``d``
(no noise) is then

- ``profile[kind_d][signature_v] + launch_overhead_d`` when ``d`` has a kind whose profile
  has ``v``'s signature;
- else ``time_v + launch_overhead_d`` when the graph gives ``v`` a measured ``time``
  (``placegym.graph/v2``: the same on every device);
- else ``max(flops_v / flops_d, io_v / mem_bandwidth_d) + launch_overhead_d``.

Noise multiplies the first term in both cases. The profiled costs of a (graph, cluster)
pair are an ``(n, K)`` table over the ``K`` profiled kinds plus each device's kind index
(:attr:`Cluster.profile_class`), never an ``n × D`` array, so clusters of thousands of
devices cost no more than their classes. A graph's measured times join the same table
(:func:`cost_table`): as the entries of its nodes that a kind's profile lacks, and as one
more column for the devices without a profiled kind. Everything that takes a graph and a
cluster (the simulator, :mod:`placegym.envs.analysis`, the teachers, the environments)
reads durations through this module or that table, so profiled clusters and measured
graphs are used transparently.
"""

from __future__ import annotations

import json
import math

import numpy as np

from placegym.envs.cache import IdentityCache
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph

__all__ = [
    "cost_table",
    "kernel_signature",
    "node_durations",
    "profiled_seconds",
    "roofline_nodes",
    "signatures",
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


def _cost_table(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    table, dclass = profiled_seconds(graph, cluster), cluster.profile_class
    if not graph.measured:
        return table, dclass
    k = len(cluster.profile_kinds)
    time = graph.time[:, None]
    merged = np.where(np.isnan(table), time, table) if k else np.empty((graph.num_nodes, 0))
    out = np.concatenate([merged, time], axis=1)
    out.setflags(write=False)
    cls = np.where(dclass >= 0, dclass, k)
    cls.setflags(write=False)
    return out, cls


#: ``(table, dclass)``: the measured seconds of each node per device class (``(n, C)``,
#: NaN where the roofline applies) and each device's class (``(D,)``, -1: the roofline
#: for every node): the cluster's profile (:func:`profiled_seconds`,
#: :attr:`Cluster.profile_class`) with the graph's measured times merged in (module
#: docstring). The last 16 pairs are cached.
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
