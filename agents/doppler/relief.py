"""Memory relief by checkpointing, judged on the estimated schedule: no simulator call.

A one-pass agent decodes a training step under its memory mask, whose room is a static
account of the live tensors; with a recompute set (the mask's checkpoints, where no
placement without recompute can fit) that account can be short of what the schedule
holds, and the placement it keeps can be over memory. :func:`relieve` checks the kept
placement on its estimated schedule (:func:`~placegym.agents.doppler.polish.eager_peak`,
which runs a recompute set as the simulator does, on the extended graph) and, where it
carries a recompute set or its estimated peak is over some device's memory, weighs it
against other placements of the same step:

- **the bases**: the kept placement's devices, contiguous stages
  (:func:`~placegym.envs.analysis.memory.stage_placement`, which keep each stage's stash
  on its device) and the other ``bases`` given (the decoder's hints: NEST's and METIS's
  stages), each with its own priority order;
- **each base** as it is, with no recompute set, where its estimated peak is within
  ``room``; else checkpointed with the smallest spacing ``k`` of
  :data:`~placegym.envs.analysis.memory.CHECKPOINT_EVERY` whose estimated peak is
  (:func:`~placegym.envs.analysis.memory.checkpoints` per device: each device rebuilds
  one segment between two of its checkpoints at a time; a smaller ``k`` recomputes
  fewer nodes, so it is tried first);
- **the choice**: the candidate of least estimated makespan
  (:func:`~placegym.agents.doppler.polish.eager_estimate`), the kept placement first
  on a tie and kept only where its own estimated peak is within ``room``.

:func:`relieve_kept` is a selector's use of it (``relieve=True``,
:func:`~placegym.agents.doppler.selector.relieve_selected`): it runs in
:func:`~placegym.agents.doppler.selector.one_pass_select` before the polish, and the
placement it takes is polished within the same room.

Cost: per base at most ``1 + len(CHECKPOINT_EVERY)`` estimates, each an expansion and
an ``O(N + E)`` schedule of the extended graph, skipped where a lower bound on the peak
that needs no schedule (:func:`~placegym.envs.analysis.memory.stash_floors`) is over
``room`` already; none where the kept placement carries no
recompute set and its estimated peak fits (the usual case), or on a graph that is not a
training step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from placegym.agents.doppler.polish import eager_estimate, polish
from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.memory import (
    CHECKPOINT_EVERY,
    checkpoints,
    memory_may_bind,
    stage_placement,
    stash_floors,
)

__all__ = [
    "RELIEF_BASES",
    "STAGES",
    "Relief",
    "checkpointed_within",
    "relieve",
    "relieve_kept",
]

#: The name :func:`relieve` gives the contiguous stages base.
STAGES = "stages"


class Relief(NamedTuple):
    """What :func:`relieve` takes instead of the kept placement: the base's name, the
    checkpoint spacing (0: no recompute set) and the placement."""

    base: str
    every: int
    placement: Placement


def _within(
    graph: Graph, cluster: Cluster, placement: Placement, room: np.ndarray
) -> float | None:
    """``placement``'s estimated makespan where its estimated peak is within ``room`` on
    every device, else None: first :func:`~placegym.envs.analysis.memory.stash_floors`,
    a lower bound on that peak that needs no schedule, then the estimate itself."""
    floors = stash_floors(graph, cluster, placement.device, placement.recompute)
    if bool((floors > room).any()):
        return None
    makespan, peak = eager_estimate(graph, cluster, placement)
    return makespan if bool((peak <= room).all()) else None


def checkpointed_within(
    graph: Graph, cluster: Cluster, base: Placement, room: np.ndarray
) -> tuple[int, Placement, float] | None:
    """``base``'s devices and order with no recompute set where its estimated peak is
    within ``room`` on every device (``(0, placement, estimated makespan)``), else with
    the checkpoints of the smallest spacing of :data:`CHECKPOINT_EVERY` whose estimated
    peak is (``(k, placement, estimated makespan)``); None where none is."""
    plain = Placement(device=base.device, order=base.order)
    makespan = _within(graph, cluster, plain, room)
    if makespan is not None:
        return 0, plain, makespan
    for k in CHECKPOINT_EVERY:
        nodes = checkpoints(graph, k, base.device)
        if not nodes.size:
            return None  # not a training step: nothing to recompute
        placement = Placement(device=base.device, order=base.order, recompute=nodes)
        makespan = _within(graph, cluster, placement, room)
        if makespan is not None:
            return k, placement, makespan
    return None


def relieve(
    graph: Graph,
    cluster: Cluster,
    kept: Placement,
    bases: Mapping[str, Placement],
    room: np.ndarray,
) -> Relief | None:
    """The placement to take instead of ``kept`` (module docstring): None where memory
    cannot bind, the graph is not a training step, ``kept`` carries no recompute set and
    its estimated peak is within ``cluster.memory``, or no candidate has a smaller
    estimate than ``kept`` (where ``kept``'s peak is within ``room``) or fits ``room``
    at all; no simulator call.

    Raises:
        ValueError: ``room`` not one value per device.
    """
    room = np.asarray(room, dtype=np.float64)
    if room.shape != (cluster.num_devices,):
        raise ValueError(
            f"room: expected {cluster.num_devices} values (one per device), got shape {room.shape}"
        )
    if not memory_may_bind(graph, cluster) or not checkpoints(graph, CHECKPOINT_EVERY[0]).size:
        return None
    makespan, peak = eager_estimate(graph, cluster, kept)
    if not kept.recompute.size and bool((peak <= cluster.memory).all()):
        return None
    least = makespan if bool((peak <= room).all()) else np.inf
    best: Relief | None = None
    candidates = {"kept": kept, STAGES: stage_placement(graph, cluster), **bases}
    for name, base in candidates.items():
        found = checkpointed_within(graph, cluster, base, room)
        if found is None:
            continue
        every, placement, estimate = found
        if estimate < least * (1 - 1e-9):
            best, least = Relief(name, every, placement), estimate
    return best


#: The proposals :func:`relieve_kept` also checkpoints (beside the kept placement and
#: contiguous stages): the hints that cut the graph into stages.
RELIEF_BASES = ("nest", "metis")


def relieve_kept(
    graph: Graph,
    cluster: Cluster,
    name: str | None,
    kept: Placement,
    proposals: Mapping[str, Placement],
    *,
    peak_margin: float,
    evals: int,
    pairs: bool = False,
) -> tuple[str, Placement, bool] | None:
    """Where :func:`relieve` takes another placement than ``kept`` (``name``: the
    proposal it is, None for the policy's own; the bases :data:`RELIEF_BASES` of
    ``proposals``, the room ``1 - peak_margin`` of every device's memory): ``(label,
    placement, polished)``, the placement polished with ``evals`` schedules and its
    moves kept within the same room (:func:`~placegym.agents.doppler.polish.polish`;
    none with ``evals`` 0), labelled ``BASE@every<k>`` (``BASE@plain`` with no
    recompute set; ``BASE`` is ``name``, or ``own``, for the kept devices); else None.
    No simulator call."""
    room = (1 - peak_margin) * np.asarray(cluster.memory, dtype=np.float64)
    bases = {n: proposals[n] for n in RELIEF_BASES if n in proposals}
    relief = relieve(graph, cluster, kept, bases, room)
    if relief is None:
        return None
    label = f"{(name or 'own') if relief.base == 'kept' else relief.base}@"
    label += f"every{relief.every}" if relief.every else "plain"
    placement = relief.placement
    if evals:
        placement = polish(graph, cluster, placement, evals, memory=room, pairs=pairs)
    return label, placement, placement is not relief.placement
