"""Heuristic hints for the placement policy: which nodes a heuristic puts together.

A heuristic's placement (NEST's level-wise DP, a METIS partition, ...) is fed to PLC
*symmetry-invariantly*: its device labels are arbitrary, so the policy never sees them;
it sees, for the node being placed and each device, how the node's *hint mates* (the
nodes the heuristic put on the same device as it) are spread over the devices so far
(:func:`hint_share`). A policy that always follows its mates, and opens an unused
device for a group none of whose nodes is placed yet, reproduces the heuristic's
device map up to a relabelling; learning decides where to deviate from it.

Hints are computed once per (graph, cluster) when the policy's graph inputs are built
(milliseconds for the single-pass heuristics), so a policy with hints remains a
single-pass placer. With :func:`hint_quality` the policy also learns how good each hint
is on this graph (its simulated makespan against the best hint's), so it can tell which
heuristic to follow where none is best everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from placegym.agents.doppler._kernels import hint_counts_kernel
from placegym.envs.analysis.levels import share_costs
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.sim.simulator import simulate_makespan

__all__ = [
    "HINT_FEATURES",
    "hint_groups",
    "hint_placements",
    "hint_quality",
    "hint_share",
    "plain_hint_placements",
    "unbounded_memory",
]

#: Features per hint and device in :func:`hint_share`.
HINT_FEATURES = 3


def hint_placements(graph: Graph, cluster: Cluster, names: tuple[str, ...]) -> list[Placement]:
    """The placement of ``graph`` on ``cluster`` by each heuristic of ``names``.

    Raises:
        ValueError: an unknown teacher name.
    """
    from placegym.teachers import get_teacher

    return [get_teacher(name).place(graph, cluster) for name in names]


def hint_groups(
    graph: Graph,
    cluster: Cluster,
    names: tuple[str, ...],
    placements: list[Placement] | None = None,
) -> np.ndarray:
    """``(n, K)`` int64: the device each heuristic of ``names`` gives every node (from
    ``placements`` when given, else :func:`hint_placements`).

    Raises:
        ValueError: an unknown teacher name.
    """
    if placements is None:
        placements = hint_placements(graph, cluster, names)
    if not placements:
        return np.zeros((graph.num_nodes, 0), dtype=np.int64)
    return np.stack([p.device for p in placements], axis=1).astype(np.int64)


def hint_quality(graph: Graph, cluster: Cluster, placements: list[Placement]) -> np.ndarray:
    """``(K,)`` float32: ``log(makespan_k / min_j makespan_j)`` of each hint placement
    (simulated, priority dispatch): 0 for the best hint, positive for the others."""
    if not placements:
        return np.zeros(0, dtype=np.float32)
    makespans = np.array([simulate_makespan(graph, cluster, p) for p in placements])
    return np.log(makespans / makespans.min()).astype(np.float32)


def hint_share(groups: Tensor | None, node: Tensor, placed: Tensor, d: int, hints: int) -> Tensor:
    """``(S, D, 3K)`` hint features of each state's node on every device.

    Per hint k, for the node of each state and every device d:

    - the share of the node's placed hint mates that sit on d;
    - the share of d's placed nodes that are *not* its hint mates (d is taken by another
      group);
    - 1 if some hint mate is placed already (else 0), on every device.

    Zeros when ``groups`` is None (a policy without hints sees no columns: ``hints=0``).
    The counts come from a compiled kernel
    (:func:`~placegym.agents.doppler._kernels.hint_counts_kernel`) in ``O(S · n · K)``
    time without an ``(S, n, D)`` one-hot (5.5 GB for the 4,894 states of one episode of
    a 4,894-node graph on 57 devices); they are exact integers, so the features are the
    bits of the one-hot formulation that the tests keep. No gradient (data only).

    Args:
        groups: ``(n, K)`` hint groups (:func:`hint_groups`) or None.
        node: ``(S,)`` the node placed in each state.
        placed: ``(S, n)`` the device of every node in each state (negative: unplaced).
        d: the number of devices D.
        hints: K, the number of hint columns expected.

    Raises:
        ValueError: a device in ``placed`` not below ``d``.
    """
    s = placed.shape[0]
    if hints == 0:
        return torch.zeros(s, d, 0, device=placed.device)
    if groups is None:
        return torch.zeros(s, d, HINT_FEATURES * hints, device=placed.device)
    g, v, p = (x.detach().cpu().numpy() for x in (groups, node, placed))
    on, count, ok = hint_counts_kernel(g, v, p, d)
    if not ok:
        raise ValueError(f"placed: devices must be below d={d}, got {int(placed.max())}")
    on_dev = torch.from_numpy(on).to(device=placed.device, dtype=torch.float32)
    count_t = torch.from_numpy(count).to(device=placed.device, dtype=torch.float32)
    count_t = count_t.unsqueeze(-1)  # (S, D, 1) nodes on each device
    placed_mates = on_dev.sum(dim=1, keepdim=True)  # (S, 1, K) placed mates
    share = on_dev / placed_mates.clamp(min=1)
    foreign = (count_t - on_dev) / count_t.clamp(min=1)
    has = (placed_mates > 0).to(on_dev.dtype).expand(-1, d, -1)
    return torch.stack([share, foreign, has], dim=-1).reshape(s, d, HINT_FEATURES * hints)


def plain_hint_placements(
    graph: Graph,
    cluster: Cluster,
    names: tuple[str, ...],
    known: Mapping[str, Placement] | None = None,
) -> list[Placement]:
    """The hint placements of ``names`` without a simulator call.

    Where memory cannot bind (:func:`~placegym.envs.analysis.memory.memory_may_bind`)
    they are :func:`~placegym.agents.doppler.hints.hint_placements`' (no teacher
    simulates there), taken from ``known`` (teacher name to its placement of ``graph``
    on ``cluster``, e.g. a search's heuristic starts) where it has them. Where memory may
    bind, a teacher's ``place`` simulates (its reserves, its repair, NEST's memory
    tables), so each hint is instead the teacher's placement on :func:`unbounded_memory`
    of the cluster: its plain rule, which no memory rule changes (the same devices,
    speeds and links; only the memory is larger); ``known`` is not read there.
    """
    if names and memory_may_bind(graph, cluster):
        return hint_placements(graph, unbounded_memory(graph, cluster), names)
    known = known or {}
    missing = tuple(n for n in names if n not in known)
    made = dict(zip(missing, hint_placements(graph, cluster, missing) if missing else []))
    return [known[n] if n in known else made[n] for n in names]


def unbounded_memory(graph: Graph, cluster: Cluster) -> Cluster:
    """``cluster`` with every device's memory raised to where nothing of ``graph`` can
    exceed it (twice every parameter and output byte, at least its own memory); devices,
    speeds and links unchanged. The same object for the same graph and cluster objects
    (so what is computed from it, e.g. its durations, is computed once)."""
    return _unbounded(graph, cluster)


def _unbounded_memory(graph: Graph, cluster: Cluster) -> Cluster:
    worst = 2.0 * float(graph.param_bytes.sum() + graph.out_bytes.sum()) + 1.0
    devices = tuple(
        dataclasses.replace(d, memory=max(d.memory, worst), memory_reserve=0.0)
        for d in cluster.devices
    )
    out = dataclasses.replace(cluster, devices=devices)
    share_costs(graph, out, cluster)  # memory is all that differs
    return out


_unbounded = IdentityCache(_unbounded_memory, size=4)
