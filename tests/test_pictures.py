"""Pictures: Gantt charts (one time unit, labelled transfer lanes) and bench's ratio bars."""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from test_io import CLUSTER, GRAPH, PLACEMENT

from placegym.envs import simulate
from placegym.envs.sim.gantt import format_time, gantt_figure
from placegym.train.harness.bench import Record, ratios_figure


def test_gantt_title_and_axis_share_one_unit_and_transfer_lanes_are_labelled():
    schedule = simulate(GRAPH, CLUSTER, PLACEMENT)
    assert 1e-6 <= schedule.makespan < 1e-3  # drawn in µs
    ax = gantt_figure(schedule).axes[0]
    assert ax.get_title() == f"tiny on two: makespan {schedule.makespan * 1e6:.4g} µs"
    assert ax.get_xlabel() == "time (µs)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gpu0", "gpu1", "gpu0→gpu1"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["layer 0", "layer 1", "no layer", "transfer (src→dst)"]
    assert format_time(2.2270e-3) == "2.227 ms" and format_time(41.1) == "41.1 s"
    assert format_time(3.2e-6) == "3.2 µs"


def test_ratio_legend_never_covers_a_bar():
    placers = ["critical_path", "heft", "nest", "metis", "round_robin", "single_device"]
    ratios = [1.0, 1.0, 0.79, 1.26, 0.85, 3.18]
    records = [
        Record("ffnn", "p100x4", 0, p, r, r, None, False, 0.0) for p, r in zip(placers, ratios)
    ]
    fig = ratios_figure(records)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == placers
    bars = [patch.get_window_extent() for patch in ax.patches]
    assert len(bars) == len(placers)
    assert not any(legend.overlaps(b) for b in bars)
    assert legend.x0 >= ax.get_window_extent().x1  # beside the axes
    np.testing.assert_allclose([p.get_height() for p in ax.patches], ratios)
