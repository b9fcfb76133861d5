"""Rendering of the environment: the Gantt chart of the final schedule, or of the
contention-free list-schedule estimate of the partial assignment during an episode."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from placegym.envs.gantt import figure_height, gantt_rgb
from placegym.envs.placement import Placement
from placegym.envs.simulator import Schedule, TransferTrace

if TYPE_CHECKING:
    from placegym.envs.env import PlacementEnv


def partial_schedule(env: PlacementEnv) -> Schedule:
    """A drawable :class:`Schedule` of the placed nodes' estimated times (no transfers)."""
    s = env.state
    assert s is not None, "reset() first"
    n = env.graph.num_nodes
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
    horizon = float(np.nanmax(s.est_finish)) if s.num_placed else 0.0
    return Schedule(
        makespan=horizon,
        start=s.est_start.copy(),
        finish=s.est_finish.copy(),
        transfers=TransferTrace(empty_i, empty_i, empty_i, empty_f, empty_f, empty_f),
        peak_memory=s.param_used.copy(),
        oom=bool((s.param_used > env.cluster.memory).any()),
        graph=env.graph,
        cluster=env.cluster,
        placement=Placement(device=np.maximum(s.device, 0), order=np.arange(n)),
    )


def frame_lanes(num_devices: int) -> int:
    """Lanes a frame has room for: the devices plus up to ``D + 8`` transfer channels
    (all ``D(D-1)`` of them for D <= 4); more channels are squeezed into that room."""
    d = num_devices
    return d + min(d * (d - 1), d + 8)


def schedule_rgb(env: PlacementEnv) -> np.ndarray:
    """``(H, W, 3)`` uint8 image of the current (partial or final) schedule; every frame
    of an env has the same size (960 px wide, the height set by its device count)."""
    schedule = env.schedule if env.schedule is not None else partial_schedule(env)
    return gantt_rgb(schedule, height=figure_height(frame_lanes(env.cluster.num_devices)))
