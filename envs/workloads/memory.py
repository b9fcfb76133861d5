"""Memory-tight instances: co-location groups and device memories that bind, on resident
bytes or on live tensors.

The generators' graphs fit in any preset's memory many times over, so nothing in them
tests memory feasibility. These transforms make instances where it binds
(the ``memory-tight-v0`` suite):

- :func:`add_groups`: seeded co-location groups of up to ``size`` nodes joined along
  edges between nodes that hold resident bytes, as a weight and the kernels that use it
  (or a layer's forward and backward kernels) must share a device;
- :func:`tighten`: heterogeneous memories (the preset's times ``ratios``) and resident
  bytes scaled to a fraction ``resident`` of the cluster's total memory, every duration
  unchanged (the graph carries them as measured times);
- :func:`fit_live`: device memories set where live tensors bind (stashed activations of
  a training step) and a placement is certified by simulation to fit (the
  ``pipedream-v0`` suite);
- :func:`fit_recompute`: device memories set where only recomputation fits: a placement
  with a recompute set is certified by simulation to fit, and none without one can
  (``pipedream-v0``'s recompute variants).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from placegym.envs.analysis.levels import durations_on
from placegym.envs.analysis.memory import (
    recompute_placement,
    stage_placement,
    stash_bound,
    stash_infeasibility,
)
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.sim.simulator import simulate

__all__ = [
    "add_groups",
    "fit_live",
    "fit_recompute",
    "live_name",
    "recompute_name",
    "tight_name",
    "tighten",
]


def add_groups(graph: Graph, *, size: int = 3, share: float = 0.5, seed: int = 0) -> Graph:
    """``graph`` with co-location groups (``placegym.graph/v2``; its existing groups are
    replaced).

    The edges whose two ends both hold resident bytes are visited in a seeded random
    order; each joins its ends' groups with probability ``share`` when the joined group
    has at most ``size`` nodes. Groups of one node are dropped; the rest are numbered in
    order of their first node.

    Raises:
        ValueError: ``size`` < 2 or ``share`` outside [0, 1], naming the argument.
    """
    if size < 2:
        raise ValueError(f"size: must be >= 2, got {size!r}")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share: must be in [0, 1], got {share!r}")
    n = graph.num_nodes
    parent = list(range(n))
    count = [1] * n

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    rng = np.random.default_rng(seed)
    heavy = graph.param_bytes > 0
    edges = [(int(u), int(v)) for u, v in graph.edges if heavy[u] and heavy[v]]
    for k in rng.permutation(len(edges)).tolist():
        a, b = root(edges[k][0]), root(edges[k][1])
        if a != b and count[a] + count[b] <= size and rng.random() < share:
            a, b = min(a, b), max(a, b)
            parent[b], count[a] = a, count[a] + count[b]
    roots = [root(v) for v in range(n)]
    ids: dict[int, int] = {}
    group = np.full(n, -1, dtype=np.int64)
    for v in range(n):
        if count[roots[v]] > 1:
            group[v] = ids.setdefault(roots[v], len(ids))
    return dataclasses.replace(graph, group=group)


def tight_name(name: str, resident: float, ratios: Sequence[float]) -> str:
    """The name :func:`tighten` gives cluster ``name``: ``<name>-mem<resident>``, plus
    ``-r<ratio>-<ratio>...`` when the memory ratios differ."""
    out = f"{name}-mem{resident:g}"
    if len(set(ratios)) > 1:
        out += "-r" + "-".join(f"{r:g}" for r in ratios)
    return out


def tighten(
    graph: Graph, cluster: Cluster, *, resident: float, ratios: Sequence[float] = (1.0,)
) -> tuple[Graph, Cluster]:
    """``graph`` and ``cluster`` made memory-tight, with every duration unchanged.

    Device ``d``'s memory becomes the preset's times ``ratios[d % len(ratios)]``. The
    graph's resident bytes are scaled by one factor so that they make ``resident`` of the
    cluster's total memory; since resident bytes are read by a kernel (rule 1's ``io``),
    each node first gets its duration on the cluster as a measured ``time`` (the roofline
    term on any device: the devices must compute alike), so scaling them changes no
    duration. The cluster is named ``<name>-mem<resident>`` (plus ``-r<ratios>`` when
    they differ).

    Raises:
        ValueError: ``resident`` outside (0, 1], a ratio <= 0, devices that do not
            compute alike, or a graph without resident bytes, naming the argument.
    """
    if not 0.0 < resident <= 1.0:
        raise ValueError(f"resident: must be in (0, 1], got {resident!r}")
    if not ratios or min(ratios) <= 0:
        raise ValueError(f"ratios: expected positive numbers, got {tuple(ratios)!r}")
    total = float(graph.param_bytes.sum())
    if total <= 0:
        raise ValueError(f"graph: {graph.name!r} has no resident bytes to make memory bind")
    dur = durations_on(graph, cluster)
    if not (dur == dur[:, :1]).all():
        raise ValueError(f"cluster: {cluster.name!r} has devices that compute differently")
    devices = tuple(
        dataclasses.replace(dev, memory=float(dev.memory * ratios[d % len(ratios)]))
        for d, dev in enumerate(cluster.devices)
    )
    tight = dataclasses.replace(
        cluster, devices=devices, name=tight_name(cluster.name, resident, ratios)
    )
    time = dur[:, 0] - cluster.launch_overhead[0]  # every device's, per-kind times included
    scale = resident * float(tight.memory.sum()) / total
    graph = dataclasses.replace(
        graph, time=time, kind_time={}, param_bytes=graph.param_bytes * scale
    )
    return graph, tight


def live_name(name: str, slack: float) -> str:
    """The name of a cluster made tight on live tensors: ``<name>-live<slack>``."""
    return f"{name}-live{slack:g}"


def fit_live(graph: Graph, cluster: Cluster, *, slack: float) -> tuple[Graph, Cluster]:
    """``cluster`` with every device's memory set where live tensors bind and a placement
    is certified to fit: ``slack`` times the largest simulated peak of
    :func:`~placegym.envs.analysis.memory.stage_placement` (contiguous stages) with
    memory unbounded. So that placement fits by construction
    (:func:`~placegym.envs.analysis.memory.live_certificate` finds it), while on a
    training step, whose stashed activations dwarf its weights, a placement that gathers
    more of the stash on one device does not. The graph is unchanged; the cluster is
    named :func:`live_name`.

    Raises:
        ValueError: ``slack`` below 1 or not finite.
    """
    _check_slack(slack)
    roomy = _roomy(cluster)
    peak = float(simulate(graph, roomy, stage_placement(graph, roomy)).peak_memory.max())
    return graph, _with_memory(cluster, slack * peak, live_name(cluster.name, slack))


def _check_slack(slack: object) -> None:
    if not (isinstance(slack, int | float) and 1.0 <= slack < float("inf")):
        raise ValueError(f"slack: must be a finite number >= 1, got {slack!r}")


def _roomy(cluster: Cluster) -> Cluster:
    """``cluster`` with memory unbounded (peaks do not depend on memory)."""
    return dataclasses.replace(
        cluster, devices=tuple(dataclasses.replace(d, memory=1e30) for d in cluster.devices)
    )


def _with_memory(cluster: Cluster, memory: float, name: str) -> Cluster:
    devices = tuple(dataclasses.replace(d, memory=memory) for d in cluster.devices)
    return dataclasses.replace(cluster, devices=devices, name=name)


def recompute_name(name: str, slack: float) -> str:
    """The name of a cluster where only recomputation fits: ``<name>-recompute<slack>``."""
    return f"{name}-recompute{slack:g}"


def fit_recompute(graph: Graph, cluster: Cluster, *, slack: float) -> tuple[Graph, Cluster]:
    """``cluster`` with every device's memory set where only recomputation fits:
    ``slack`` times the largest simulated peak of
    :func:`~placegym.envs.analysis.memory.recompute_placement` (contiguous stages,
    checkpointed) with memory unbounded, so that placement, recompute set included, fits
    by construction (:func:`~placegym.envs.analysis.memory.recompute_certificate` finds
    it); and below the memory at which any placement *without* recompute could fit
    (:func:`~placegym.envs.analysis.memory.stash_infeasibility` proves that none does:
    the stash of the forward pass and the resident bytes, all live when the backward pass
    starts, exceed the devices' total memory). The graph is unchanged; the cluster is
    named :func:`recompute_name`.

    Raises:
        ValueError: ``slack`` below 1 or not finite; a graph without a node that may be
            recomputed; or memory at which that proof fails (naming both figures).
    """
    _check_slack(slack)
    roomy = _roomy(cluster)
    placement = recompute_placement(graph, roomy)
    if placement is None:
        raise ValueError(f"graph: {graph.name!r} has no node that may be recomputed")
    peak = float(simulate(graph, roomy, placement).peak_memory.max())
    tight = _with_memory(cluster, slack * peak, recompute_name(cluster.name, slack))
    if stash_infeasibility(graph, tight) is None:
        raise ValueError(
            f"slack: {slack:g} times the recompute certificate's peak ({slack * peak:.6g} "
            f"bytes per device) does not rule out placements without recompute of "
            f"{graph.name!r} on {cluster.name!r} (their stash bound is "
            f"{stash_bound(graph, tight):.6g} bytes in all, over {cluster.num_devices} "
            "devices)"
        )
    return graph, tight
