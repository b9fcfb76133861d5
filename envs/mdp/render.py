"""Rendering of the environment: the Gantt chart of the final schedule, or of the
contention-free list-schedule estimate of the partial assignment during an episode.

Before the first node is placed the chart is empty: its title says so, and its time axis
spans the episode's reference makespan (critical_path's), in that makespan's unit, so
the first frame already has the scale the episode will be drawn at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim.gantt import figure_height, figure_rgb, format_time, gantt_figure
from placegym.envs.sim.simulator import Schedule, TransferTrace

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Episode(Protocol):
    """What a frame is drawn from (a :class:`~placegym.envs.mdp.env.PlacementEnv` is
    one): the graph, the cluster, the partial state, the final schedule once there is
    one; ``reference_makespan`` (optional) sets the empty chart's time axis."""

    graph: Graph
    cluster: Cluster
    state: PlacementState | None
    schedule: Schedule | None


def partial_schedule(env: Episode) -> Schedule:
    """A drawable :class:`Schedule` of the placed nodes' estimated times (no transfers);
    with nothing placed, its ``makespan`` is the episode's reference makespan (the
    horizon of the empty chart)."""
    s = env.state
    assert s is not None, "reset() first"
    n = env.graph.num_nodes
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
    horizon = float(np.nanmax(s.est_finish)) if s.num_placed else _empty_horizon(env)
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


def _empty_horizon(env: Episode) -> float:
    """The time axis of a chart with nothing placed: the reference makespan, else the
    graph's compute on the fastest device (else one second)."""
    ref = float(getattr(env, "reference_makespan", np.nan))
    if np.isfinite(ref) and ref > 0:
        return ref
    work = float(np.sum(env.graph.flops)) / float(np.max(env.cluster.flops))
    return work if np.isfinite(work) and work > 0 else 1.0


def frame_lanes(num_devices: int) -> int:
    """Lanes a frame has room for: the devices plus up to ``D + 8`` transfer channels
    (all ``D(D-1)`` of them for D <= 4); more channels are squeezed into that room."""
    d = num_devices
    return d + min(d * (d - 1), d + 8)


def frame_figure(env: Episode) -> Figure:
    """The Gantt chart of the current frame: the final schedule, else the partial one
    titled with the nodes placed and its estimated makespan, else (nothing placed) an
    empty chart titled ``nothing placed yet``."""
    height = figure_height(frame_lanes(env.cluster.num_devices))
    if env.schedule is not None:
        return gantt_figure(env.schedule, height=height)
    s = env.state
    assert s is not None, "reset() first"
    where = f"{env.graph.name} on {env.cluster.name}"
    schedule = partial_schedule(env)
    if s.num_placed:
        title = (
            f"{where}: {s.num_placed}/{env.graph.num_nodes} placed, estimated makespan "
            f"{format_time(schedule.makespan)}"
        )
    else:
        title = f"{where}: nothing placed yet"
    return gantt_figure(schedule, height=height, title=title)


def schedule_rgb(env: Episode) -> np.ndarray:
    """``(H, W, 3)`` uint8 image of the current (partial or final) schedule
    (:func:`frame_figure`); every frame of an env has the same size (960 px wide, the
    height set by its device count)."""
    return figure_rgb(frame_figure(env))
