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
  ``room``; else checkpointed with the smallest spacing ``k`` of :data:`SPACINGS`
  (2, 3, 4, 6, 8, 12) whose estimated peak is
  (:func:`~placegym.envs.analysis.memory.checkpoints` per device: each device rebuilds
  one segment between two of its checkpoints at a time; a smaller ``k`` recomputes
  fewer nodes, so it is tried first);
- **the choice**: the candidate of least estimated makespan
  (:func:`~placegym.agents.doppler.polish.eager_estimate`), the kept placement first
  on a tie and kept only where its own estimated peak is within ``room``.

**Weighing** (:func:`weigh_polished`, a selector's ``weigh=True``). Where memory may bind,
after the polish, the same candidates are weighed against the polished placement
whatever its estimated peak (the selector admitted it): the one of least estimate is
polished and taken where its estimate stays below the polished placement's. On a graph
that is not a training step the candidates are the bases that fit as they are.

:func:`relieve_kept` is a selector's use of it (``relieve=True``,
:func:`~placegym.agents.doppler.selector.relieve_selected`): it runs in
:func:`~placegym.agents.doppler.selector.one_pass_select` before the polish, and the
placement it takes is polished within the same room.

Cost: per base at most ``1 + len(SPACINGS)`` estimates, each an expansion and
an ``O(N + E)`` schedule of the extended graph, skipped where a lower bound on the peak
that needs no schedule (:func:`~placegym.envs.analysis.memory.stash_floors`) is over
``room`` already. The relief costs nothing where the kept placement carries no recompute
set and its estimated peak fits (the usual case), or on a graph that is not a training
step; the weighing costs that scan and one more polish wherever memory may bind.
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
    "SPACINGS",
    "STAGES",
    "Relief",
    "Settings",
    "checkpointed_within",
    "relieve",
    "relieve_kept",
    "weigh_polished",
]

#: The checkpoint spacings :func:`checkpointed_within` tries, smallest first: those of
#: :data:`~placegym.envs.analysis.memory.CHECKPOINT_EVERY` a ladder apart (each try is an
#: expansion and a schedule of the extended graph).
SPACINGS = (2, 3, 4, 6, 8, 12)
#: The name :func:`relieve` gives the contiguous stages base.
STAGES = "stages"


class Settings(NamedTuple):
    """A selector's settings :func:`relieve_kept` and :func:`weigh_polished` read: the
    share of every device's memory kept free (``peak_margin``), the polish's schedules
    (``evals``, 0: no polish) and its pair moves (``pairs``)."""

    peak_margin: float
    evals: int
    pairs: bool = False


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
    graph: Graph, cluster: Cluster, base: Placement, room: np.ndarray, beat: float = np.inf
) -> tuple[int, Placement, float] | None:
    """``base``'s devices and order with no recompute set where its estimated peak is
    within ``room`` on every device (``(0, placement, estimated makespan)``), else with
    the checkpoints of the smallest spacing of :data:`SPACINGS` whose estimated peak is
    (``(k, placement, estimated makespan)``); None where none is, or where the
    plain placement's estimated makespan is already at least ``beat`` (a recompute set
    only adds work, so its checkpointed placements are not tried)."""
    plain = Placement(device=base.device, order=base.order)
    makespan, peak = eager_estimate(graph, cluster, plain)
    if bool((peak <= room).all()):
        return 0, plain, makespan
    if makespan >= beat:
        return None
    for k in SPACINGS:
        nodes = checkpoints(graph, k, base.device)
        if not nodes.size:
            return None  # not a training step: nothing to recompute
        placement = Placement(device=base.device, order=base.order, recompute=nodes)
        within = _within(graph, cluster, placement, room)
        if within is not None:
            return k, placement, within
    return None


def relieve(
    graph: Graph,
    cluster: Cluster,
    kept: Placement,
    bases: Mapping[str, Placement],
    room: np.ndarray,
    always: bool = False,
) -> Relief | None:
    """The placement to take instead of ``kept`` (module docstring): None where memory
    cannot bind, the graph is not a training step, ``kept`` carries no recompute set and
    its estimated peak is within ``cluster.memory``, or no candidate has a smaller
    estimate than ``kept`` (where ``kept``'s peak is within ``room``) or fits ``room``
    at all; no simulator call. ``always``: weigh the candidates wherever memory may
    bind, on any graph (one that is not a training step has no checkpoints, so its
    candidates are the bases that fit as they are), against ``kept``'s estimate
    whatever its estimated peak.

    Raises:
        ValueError: ``room`` not one value per device.
    """
    room = np.asarray(room, dtype=np.float64)
    if room.shape != (cluster.num_devices,):
        raise ValueError(
            f"room: expected {cluster.num_devices} values (one per device), got shape {room.shape}"
        )
    step = checkpoints(graph, CHECKPOINT_EVERY[0]).size > 0
    if not memory_may_bind(graph, cluster) or not (step or always):
        return None
    makespan, peak = eager_estimate(graph, cluster, kept)
    if not always and not kept.recompute.size and bool((peak <= cluster.memory).all()):
        return None
    least = makespan if always or bool((peak <= room).all()) else np.inf
    best: Relief | None = None
    candidates = {"kept": kept, STAGES: stage_placement(graph, cluster), **bases}
    if always and not kept.recompute.size:
        del candidates["kept"]  # as it is, it is kept; checkpointed, no faster
    for name, base in candidates.items():
        found = checkpointed_within(graph, cluster, base, room, least)
        if found is None:
            continue
        every, placement, estimate = found
        if estimate < least * (1 - 1e-9):
            best, least = Relief(name, every, placement), estimate
    return best


#: The proposals :func:`relieve_kept` also checkpoints (beside the kept placement and
#: contiguous stages): the hints that cut the graph into stages.
RELIEF_BASES = ("nest", "metis")


def _label(name: str | None, relief: Relief) -> str:
    """``BASE@every<k>`` (``BASE@plain`` with no recompute set; ``BASE`` is ``name``, or
    ``own``, for the kept devices)."""
    base = (name or "own") if relief.base == "kept" else relief.base
    return f"{base}@" + (f"every{relief.every}" if relief.every else "plain")


def _relieved(
    graph: Graph,
    cluster: Cluster,
    kept: Placement,
    proposals: Mapping[str, Placement],
    settings: Settings,
    always: bool = False,
) -> tuple[Relief, Placement] | None:
    """:func:`relieve`'s choice for ``kept`` (the bases :data:`RELIEF_BASES` of
    ``proposals``, the room ``1 - peak_margin`` of every device's memory) and its
    placement polished with ``evals`` schedules, its moves kept within the same room
    (:func:`~placegym.agents.doppler.polish.polish`; none with ``evals`` 0); None where
    it takes none."""
    peak_margin, evals, pairs = settings
    room = (1 - peak_margin) * np.asarray(cluster.memory, dtype=np.float64)
    bases = {n: proposals[n] for n in RELIEF_BASES if n in proposals}
    relief = relieve(graph, cluster, kept, bases, room, always)
    if relief is None:
        return None
    placement = relief.placement
    if evals:
        placement = polish(graph, cluster, placement, evals, memory=room, pairs=pairs)
    return relief, placement


def relieve_kept(
    graph: Graph,
    cluster: Cluster,
    name: str | None,
    kept: Placement,
    proposals: Mapping[str, Placement],
    settings: Settings,
) -> tuple[str, Placement, bool] | None:
    """Where :func:`relieve` takes another placement than ``kept`` (``name``: the
    proposal it is, None for the policy's own): ``(label, placement, polished)``, the
    placement polished (:func:`_relieved`, by ``settings``), labelled ``BASE@every<k>``
    (``BASE@plain`` with no recompute set; ``BASE`` is ``name``, or ``own``, for the
    kept devices); else None. No simulator call."""
    got = _relieved(graph, cluster, kept, proposals, settings)
    if got is None:
        return None
    relief, placement = got
    return _label(name, relief), placement, placement is not relief.placement


def weigh_polished(
    graph: Graph,
    cluster: Cluster,
    name: str | None,
    polished: Placement,
    proposals: Mapping[str, Placement],
    settings: Settings,
) -> tuple[str, Placement, bool] | None:
    """Where memory may bind: the candidates of :func:`relieve` (``always``: contiguous
    stages and :data:`RELIEF_BASES` of ``proposals``, and the kept devices where
    ``polished`` carries a recompute set, each as it is or checkpointed to fit
    ``1 - peak_margin`` of every device's memory by estimate) weighed against the
    ``polished`` placement (``name``: the proposal it came from, None for the policy's
    own), the one of least estimate polished (:func:`_relieved`) and taken, labelled as
    :func:`relieve_kept` labels it, where its estimate stays below ``polished``'s (which
    counts as it is: the selector admitted it); else None. No simulator call."""
    got = _relieved(graph, cluster, polished, proposals, settings, always=True)
    if got is None:
        return None
    relief, placement = got
    least = eager_estimate(graph, cluster, polished)[0]
    if eager_estimate(graph, cluster, placement)[0] >= least * (1 - 1e-9):
        return None
    return _label(name, relief), placement, True
