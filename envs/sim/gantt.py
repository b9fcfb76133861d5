"""Gantt charts of schedules (matplotlib, headless).

One lane per device for compute, then one lane per channel that carried a transfer
(``gpu0→gpu1``, grey bars). Compute bars are coloured by layer or by op kind. Times are
in one unit (s, ms or µs, by the makespan) in the title and on the axis.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from placegym.envs.sim.simulator import Schedule

ColorBy = Literal["auto", "layer", "op", "device"]

__all__ = [
    "figure_height",
    "figure_rgb",
    "format_time",
    "gantt_figure",
    "gantt_rgb",
    "save_gantt",
]


def _categories(schedule: Schedule, color_by: ColorBy) -> tuple[list[str], np.ndarray]:
    g = schedule.graph
    if color_by == "auto":
        color_by = "layer" if (g.layer >= 0).any() else "op"
    if color_by == "layer":
        labels = [f"layer {x}" if x >= 0 else "no layer" for x in g.layer.tolist()]
    elif color_by == "op":
        labels = list(g.op)
    elif color_by == "device":
        labels = [schedule.cluster.devices[d].name for d in schedule.device.tolist()]
    else:
        raise ValueError(f"color_by: expected 'auto', 'layer', 'op' or 'device', got {color_by!r}")
    names, codes = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return [str(x) for x in names], codes


def gantt_figure(
    schedule: Schedule,
    *,
    color_by: ColorBy = "auto",
    title: str | None = None,
    width: float = 12.0,
    height: float | None = None,
) -> Figure:
    """Draw ``schedule`` and return the matplotlib ``Figure`` (no pyplot state is used).

    ``height`` (inches) defaults to one that fits every lane; a fixed one keeps the
    figure's size whatever the schedule (lanes are squeezed to fit it)."""
    from matplotlib.figure import Figure

    c = schedule.cluster
    names, codes = _categories(schedule, color_by)
    cmap = _palette(len(names))
    tr = schedule.transfers
    channels = sorted(set(zip(tr.src.tolist(), tr.dst.tolist())))
    lanes = [d.name for d in c.devices] + [
        f"{c.devices[a].name}→{c.devices[b].name}" for a, b in channels
    ]
    fig = Figure(figsize=(width, height or figure_height(len(lanes))), layout="constrained")
    ax = fig.add_subplot()
    scale, unit = _time_unit(schedule.makespan)
    start, finish = schedule.start * scale, schedule.finish * scale
    placed = np.isfinite(start)  # partial schedules leave unplaced nodes at nan
    for d in range(c.num_devices):
        on = np.flatnonzero((schedule.device == d) & placed)
        ax.broken_barh(
            list(zip(start[on], finish[on] - start[on])),
            (d - 0.4, 0.8),
            facecolors=[cmap[k] for k in codes[on]],
            edgecolor="black",
            linewidth=0.3,
        )
    for i, (a, b) in enumerate(channels):
        k = np.flatnonzero((tr.src == a) & (tr.dst == b))
        ax.broken_barh(
            list(zip(tr.start[k] * scale, (tr.arrival[k] - tr.start[k]) * scale)),
            (c.num_devices + i - 0.3, 0.6),
            facecolors="0.65",
            edgecolor="0.3",
            linewidth=0.3,
        )
    ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(schedule.makespan * scale, 1e-12) * 1.01)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(axis="x", alpha=0.3)
    if channels:
        ax.axhline(c.num_devices - 0.5, color="0.4", linewidth=0.8)
    g = schedule.graph
    ax.set_title(
        title
        or f"{g.name} on {c.name}: makespan {format_time(schedule.makespan)}"
        f"{'  (OOM)' if schedule.oom else ''}",
        fontsize=10,
    )
    _legend(ax, names, cmap, transfers=bool(channels))
    return fig


def _legend(ax, names: list[str], cmap: list, *, transfers: bool) -> None:
    """Beside the axes: the colour of each category (up to 24), then the transfer bars."""
    from matplotlib.patches import Patch

    handles = [Patch(color=cmap[k], label=nm) for k, nm in enumerate(names)]
    if len(names) > 24:
        handles = []  # too many categories to list
    if transfers:
        handles.append(Patch(facecolor="0.65", edgecolor="0.3", label="transfer (src→dst)"))
    if handles:
        ax.legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False
        )


def save_gantt(
    schedule: Schedule, path: str | os.PathLike[str], *, color_by: ColorBy = "auto", dpi: int = 120
) -> None:
    """Write the Gantt chart of ``schedule`` to ``path`` (format from the suffix)."""
    gantt_figure(schedule, color_by=color_by).savefig(path, dpi=dpi)


def figure_height(lanes: int) -> float:
    """Height in inches of a chart of ``lanes`` lanes."""
    return 1.2 + 0.32 * lanes


def gantt_rgb(
    schedule: Schedule,
    *,
    color_by: ColorBy = "auto",
    dpi: int = 80,
    height: float | None = None,
    title: str | None = None,
) -> np.ndarray:
    """The chart as an ``(H, W, 3)`` uint8 array (for ``render_mode="rgb_array"``);
    ``height`` and ``title`` as in :func:`gantt_figure`."""
    return figure_rgb(gantt_figure(schedule, color_by=color_by, height=height, title=title), dpi)


def figure_rgb(fig: Figure, dpi: int = 80) -> np.ndarray:
    """A figure drawn into an ``(H, W, 3)`` uint8 array at ``dpi``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(dpi)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def format_time(seconds: float) -> str:
    """``seconds`` in the unit the chart's axis uses, 4 significant digits (``2.227 ms``)."""
    scale, unit = _time_unit(seconds)
    return f"{seconds * scale:.4g} {unit}"


def _time_unit(makespan: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if makespan * scale >= 1:
            return scale, unit
    return 1e9, "ns"


def _palette(k: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab20" if k > 10 else "tab10"]
    return [cmap(i % cmap.N) for i in range(max(k, 1))]
