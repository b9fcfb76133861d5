"""What ``placegym anytime`` reports beside its runs: :func:`versus`, each search placer
against a baseline run by run (it reads each placer's trace,
:class:`~placegym.train.harness.anytime.Trace`, at the simulator calls and at the wall
seconds the baseline's run of the same instance and seed took, and counts the runs that
end no slower; the command prints it with ``anneal`` as the baseline), and
:func:`plot_curves`, the figure of the curves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placegym.teachers.anneal import STARTS
from placegym.train.harness.replay import RTOL

__all__ = ["Curves", "Versus", "plot_curves", "versus"]

#: Per placer, ``(mean, std)`` over seeds of its curve on a grid of call counts.
Curves = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Versus:
    """How one placer's runs compare with a baseline's runs of the same instance and seed
    (:func:`versus`): how many of the ``pairs`` end no slower than the baseline's final
    makespan when read at the baseline's simulator calls (``at_calls``) and at its wall
    seconds (``at_seconds``); ``instances`` lists, per instance, ``(at_calls,
    at_seconds, pairs)``."""

    at_calls: int
    at_seconds: int
    pairs: int
    instances: dict[str, tuple[int, int, int]]

    def share(self, equal: str) -> float:
        """The share of pairs no slower than the baseline at ``equal`` calls or seconds."""
        won = self.at_calls if equal == "calls" else self.at_seconds
        return won / self.pairs if self.pairs else math.nan


def versus(runs: Sequence[Any], baseline: str = "anneal") -> dict[str, Versus]:
    """Per placer other than ``baseline``: its runs
    (:class:`~placegym.train.harness.anytime.AnytimeRun`) against the baseline's run of the same
    instance and seed, where both ended feasible. A pair counts at equal calls when the
    placer's best after the baseline's calls is at most the baseline's final makespan
    (to :data:`~placegym.train.harness.replay.RTOL`), and at equal seconds when its best
    reported within the baseline's wall seconds is (a placer not done by then is read as
    it stood, e.g. a warm-started search that spent part of the time decoding).

    Raises:
        ValueError: no run of ``baseline``.
    """
    base = {(r.instance, r.seed): r for r in runs if r.placer == baseline and r.feasible}
    if not any(r.placer == baseline for r in runs):
        raise ValueError(f"baseline: no run of {baseline!r} to compare with")
    out: dict[str, Versus] = {}
    for name in dict.fromkeys(r.placer for r in runs if r.placer != baseline):
        per: dict[str, list[int]] = {}
        for r in runs:
            b = base.get((r.instance, r.seed))
            if r.placer != name or b is None or not r.feasible or not b.trace.best:
                continue
            limit = b.trace.best[-1] * (1 + RTOL)
            at_calls = float(r.trace.best_at(np.asarray([b.calls]))[0])
            at_seconds = float(r.trace.best_at_seconds(np.asarray([b.seconds]))[0])
            cell = per.setdefault(r.instance, [0, 0, 0])
            cell[0] += bool(at_calls <= limit)  # nan (nothing feasible yet) never counts
            cell[1] += bool(at_seconds <= limit)
            cell[2] += 1
        inst = {k: (v[0], v[1], v[2]) for k, v in per.items()}
        totals = [sum(v[i] for v in inst.values()) for i in range(3)]
        out[name] = Versus(totals[0], totals[1], totals[2], inst)
    return out


def plot_curves(cv: Curves, grid: np.ndarray, path: Path, *, normalizer: str, title: str) -> None:
    """Mean ± std band per placer, calls on a log axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for name, (mean, std) in cv.items():
        ok = np.isfinite(mean)
        (line,) = ax.plot(grid[ok], mean[ok], label=name)
        ax.fill_between(
            grid[ok], (mean - std)[ok], (mean + std)[ok], alpha=0.2, color=line.get_color()
        )
    ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    starts = len(STARTS)
    ax.axvline(starts, color="0.6", linewidth=0.8, linestyle=":")
    ax.annotate(
        "heuristic starts", (starts, 1.0), xytext=(3, 3), textcoords="offset points", fontsize=7
    )
    ax.set_xscale("log")
    ax.set_xlabel("simulator calls")
    ax.set_ylabel(f"best makespan / {normalizer} (geo. mean)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
