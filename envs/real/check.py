"""How well a calibrated cluster predicts its devices: simulated vs measured makespans.

:func:`rank_check` runs the :func:`check_placements` of a graph on the devices and
compares the measured makespans with the simulated ones of a given cluster: the
Spearman rank correlation and the median relative error (``placegym calibrate
--check``). :func:`calibrate_and_check` calibrates the devices with the graph's kernels
profiled and checks the result, with the profiling executions interleaved in time with
the check's (``placegym calibrate --profile --check``).

Measuring on a shared virtual machine needs care (figures from this project's 2-core
VM, idle, FFNN / 2 on two CPU workers):

- one execution of a placement varies by about 12% from the next (the cores' speed
  varies; the two workers' independently), so each placement runs in many interleaved
  rounds (15 by default) and its median counts; the median of 5 runs misorders
  placements whose makespans differ by less than about 5%;
- the machine's speed level drifts by 4-9% between stretches of 10 s and by up to 20%
  between one minute and the next: kernel costs profiled before a check were 13% and
  20% off the level of the check's minute in 2 of 14 calibrations, so
  :func:`calibrate_and_check` interleaves the profiling executions with the check's
  rounds, and profiled costs and measured makespans share the machine's level (the
  cluster is fitted on the profiling executions alone: no check placement enters it);
- another process may take the workers' cores for a while: runs it disturbed are left
  out and made up (:func:`rank_check`).

Device sets that share hardware by construction
(:func:`~placegym.envs.real.devices.shared_hardware`), whose contention the simulator
does not model, are refused unless the caller allows them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.real.calibrate import fit_cluster, probe_devices
from placegym.envs.real.devices import device_kind, parse_devices, shared_hardware
from placegym.envs.real.executor import TorchExecutor
from placegym.envs.real.profile import (
    kernel_medians,
    profile_from_runs,
    profile_placements,
    profile_with_costs,
    timed_in_runs,
)

__all__ = ["RankCheck", "calibrate_and_check", "check_placements", "rank_check", "spearman"]


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 of ``a``, tied values sharing the mean of their ranks."""
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    cuts = np.flatnonzero(np.diff(a[order])) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(a)], strict=True):
        ranks[order[lo:hi]] = (lo + hi - 1) / 2
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's ρ of ``x`` and ``y``: the Pearson correlation of their ranks (ties
    get mean ranks, as ``scipy.stats.spearmanr``); NaN when either is constant or has
    fewer than two entries.

    Raises:
        ValueError: ``x`` and ``y`` differ in length.
    """
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"y: expected {a.shape[0]} values like x, got shape {b.shape}")
    ra, rb = _ranks(a) - (len(a) - 1) / 2, _ranks(b) - (len(b) - 1) / 2
    den = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb) / den if den > 0 else math.nan


@dataclass(frozen=True)
class RankCheck:
    """Simulated vs measured makespans of the same placements.

    Attributes:
        spearman: rank correlation of ``simulated`` and ``measured``.
        simulated, measured: ``(P,)`` makespans (s); measured ones are medians over the
            undisturbed runs of each placement (:func:`rank_check`).
        cpu_share: how undisturbed the CPU workers were during the measurements: the
            median over every timed run of
            :attr:`~placegym.envs.real.executor.Measurement.cpu_share` (about 1 on
            an otherwise idle machine, NaN without CPU workers).
        runs: ``(P,)`` timed runs of each placement.
        disturbed: ``(P,)`` of those, runs that other load disturbed (left out of the
            median; :func:`rank_check`).
        interference: per device kind profiled in runs by :func:`calibrate_and_check`,
            how much longer its kernels took with every device of the kind busy than
            with one alone (0.1: 10%; the simulator's devices are independent: 0).
    """

    spearman: float
    simulated: np.ndarray
    measured: np.ndarray
    cpu_share: float
    runs: np.ndarray
    disturbed: np.ndarray
    interference: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def relative_errors(self) -> np.ndarray:
        """``|simulated - measured| / measured`` per placement."""
        return np.abs(self.simulated - self.measured) / self.measured

    @property
    def median_relative_error(self) -> float:
        """The median of :attr:`relative_errors`."""
        return float(np.median(self.relative_errors))


def check_placements(graph: Graph, devices: int, count: int, seed: int) -> list[Placement]:
    """``count`` random placements of ``graph`` on ``devices`` devices, in topological
    order, whose makespans span the range from balanced to all on one device.

    Placement ``i`` gives one device (drawn uniformly) the share
    ``m_i = 1/D + (1 - 1/D) (i + u_i) / count`` of the nodes, ``u_i ~ U(0, 1)``, and the
    other devices the rest in shares drawn from ``Dirichlet(1)``; then the nodes are dealt
    to the devices in those shares (rounded), in random order. The largest share is
    stratified: the placements spread evenly from balanced to lopsided, which sets their
    makespans apart (with shares drawn from ``Dirichlet(1)`` outright and every node's
    device drawn from them, two devices' placements bunch by chance, and placements whose
    makespans differ by less than the measurement's noise are ranked by the noise).
    Seeded by ``seed`` alone; nothing is chosen by its outcome.
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        top = 1 / devices + (1 - 1 / devices) * (i + rng.random()) / max(count, 1)
        w = np.zeros(devices)
        j = int(rng.integers(devices))
        w[j] = top
        rest = [k for k in range(devices) if k != j]
        if rest:
            w[rest] = (1 - top) * rng.dirichlet(np.ones(len(rest)))
        dev = _deal(w, graph.num_nodes, rng)
        out.append(Placement(device=dev, order=graph.topological_order.copy()))
    return out


def _deal(shares: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(n,)`` devices in random order, device ``k`` on ``shares[k] * n`` nodes (rounded
    by largest remainder)."""
    want = shares / shares.sum() * n
    counts = np.floor(want).astype(np.int64)
    counts[np.argsort(counts - want)[: n - counts.sum()]] += 1
    dev = np.repeat(np.arange(len(shares)), counts)
    rng.shuffle(dev)
    return dev


def rank_check(
    graph: Graph,
    cluster: Cluster,
    devices: str,
    *,
    placements: int = 20,
    seed: int = 0,
    repeats: int = 15,
    quiet: float = 0.9,
    allow_shared: bool = False,
) -> RankCheck:
    """Spearman and errors of ``cluster``'s simulated vs the measured makespans of the
    :func:`check_placements` of ``graph`` on ``devices``.

    Measurements are interleaved to cancel drift (the machine warming up, other load):
    one untimed round over all placements, then ``repeats`` timed rounds, each running
    every placement once.

    A run is *disturbed* when its CPU workers ran a smaller share of the time they were
    ready to run (:attr:`~placegym.envs.real.executor.Measurement.cpu_share`) than
    ``quiet`` times the largest share among the runs of the same placement: another
    process had their cores for a while. (The share of an undisturbed run is below 1,
    the more so the more copies the placement makes: the executor's copy threads take
    the workers' cores for a moment; runs of one placement make the same copies.) Each
    placement with disturbed runs is run again, up to ``repeats`` more times, until it
    has ``repeats`` undisturbed runs. Its measured makespan is the median of its
    undisturbed runs; :attr:`RankCheck.cpu_share` and :attr:`RankCheck.disturbed` report
    the load met.

    Raises:
        ValueError: ``devices`` share hardware by construction (streams or partitions of
            one GPU, more CPU workers than cores) and ``allow_shared`` is False: their
            contention is not in the simulator, so no correlation can be expected; or
            ``repeats`` < 1.
    """
    _refuse(devices, allow_shared, repeats)
    ex = TorchExecutor(graph, devices, warmup=0, repeats=1)
    chosen = check_placements(graph, cluster.num_devices, placements, seed)
    times, shares = _measure_rounds(ex, chosen, repeats, quiet)
    return _compare(graph, cluster, chosen, times, shares, quiet)


def calibrate_and_check(
    graph: Graph,
    devices: str = "cpu#2",
    *,
    placements: int = 20,
    seed: int = 0,
    repeats: int = 15,
    quiet: float = 0.9,
    allow_shared: bool = False,
    profile_mode: str = "auto",
    size: int | None = None,
    probe_repeats: int = 5,
    level_gap: float = 0.25,
    name: str | None = None,
) -> tuple[Cluster, RankCheck]:
    """:func:`~placegym.envs.real.calibrate.calibrate` ``devices`` with ``graph``'s
    kernels profiled, then :func:`rank_check` the cluster on ``graph``; the profiling
    executions of the kinds timed in runs are interleaved with the check's rounds (one
    pass over the :func:`~placegym.envs.real.profile.profile_placements` before each
    round; the same rule for disturbed runs), so that the kernel costs and the measured
    makespans are taken over the same minutes (module docstring). Kinds timed in
    isolation (GPUs) are profiled before the check, as ``calibrate`` does.

    Args:
        graph: the graph profiled and checked.
        devices: the backend devices.
        placements: how many check placements.
        seed: their seed.
        repeats: timed rounds (:func:`rank_check`).
        quiet: the share of a placement's best CPU share below which a run is disturbed.
        allow_shared: check devices that share hardware anyway.
        profile_mode: ``auto``, ``run`` or ``isolated`` (as for ``calibrate``).
        size: side of the calibration matmuls (as for ``calibrate``).
        probe_repeats: timed runs per probe measurement (``calibrate``'s ``repeats``).
        level_gap: as for ``calibrate``.
        name: the cluster's name (default ``calibrated-<devices>``).

    Returns:
        The fitted cluster and the check.
    """
    _refuse(devices, allow_shared, repeats)
    probes = probe_devices(devices, size=size, repeats=probe_repeats)
    vds = probes.devices
    of_kind: dict[str, list[int]] = {}
    for d, v in enumerate(vds):
        of_kind.setdefault(device_kind(v), []).append(d)
    in_runs = {k: ds for k, ds in of_kind.items() if timed_in_runs(vds[ds[0]], profile_mode)}
    alone = [vds[d] for k, ds in of_kind.items() if k not in in_runs for d in ds]
    profile, costs = profile_with_costs([graph], alone, mode=profile_mode) if alone else ({}, {})
    passes = {k: _ProfilePasses(graph, [vds[d] for d in ds]) for k, ds in in_runs.items()}
    ex = TorchExecutor(graph, devices, warmup=0, repeats=1)
    chosen = check_placements(graph, len(vds), placements, seed)

    def profile_pass() -> None:
        for p in passes.values():
            p.run()

    times, shares = _measure_rounds(ex, chosen, repeats, quiet, before=profile_pass)
    interference = {}
    for kind, p in passes.items():
        profile[kind], costs[kind], interference[kind] = p.result(quiet)
    cluster = fit_cluster(probes, profile, costs, level_gap=level_gap, name=name)
    check = _compare(graph, cluster, chosen, times, shares, quiet)
    return cluster, dataclasses.replace(check, interference=interference)


class _ProfilePasses:
    """Executions of a graph's profile placements on the devices of one kind, one pass
    at a time; then the kernel costs and run costs of the undisturbed ones."""

    def __init__(self, graph: Graph, devices: list) -> None:
        self.graph = graph
        self.ex = TorchExecutor(graph, devices, warmup=0, repeats=1)
        self.placements = profile_placements(graph, len(devices))
        for p in self.placements:  # untimed
            self.ex.run(p)
        self.runs: list[list] = [[] for _ in self.placements]

    def run(self) -> None:
        for p, done in zip(self.placements, self.runs, strict=True):
            done.append(self.ex.run(p))

    def result(self, quiet: float):
        """(kernel costs, run costs, interference) of the undisturbed executions; the
        interference is the median over kernels of their cost with every device busy
        over their cost alone, less 1 (NaN with one device)."""
        kept = []
        for p, done in zip(self.placements, self.runs, strict=True):
            calm = _undisturbed([m.cpu_share for m in done], quiet)
            kept += [(self.graph, p, m) for m, ok in zip(done, calm, strict=True) if ok]
        kernels, costs = profile_from_runs(kept)
        busy = kernel_medians([r for r in kept if len(np.unique(r[1].device)) > 1])
        alone = kernel_medians([r for r in kept if len(np.unique(r[1].device)) == 1])
        ratios = [busy[k] / alone[k] for k in busy.keys() & alone.keys() if alone[k] > 0]
        return kernels, costs, float(np.median(ratios)) - 1 if ratios else float("nan")


def _refuse(devices: str, allow_shared: bool, repeats: int) -> None:
    notes = shared_hardware(parse_devices(devices))
    if notes and not allow_shared:
        raise ValueError(
            f"devices: {devices!r} are not independent devices ({notes[0]}); a rank check "
            f"on them measures contention the simulator does not model. Use several GPUs "
            f"('cuda:0,cuda:1'), CPU workers ('cpu#2') or a GPU with CPU workers "
            f"('cuda:0,cpu#2'), or allow shared devices explicitly"
        )
    if repeats < 1:
        raise ValueError(f"repeats: need at least 1 timed round, got {repeats}")


def _compare(graph, cluster, chosen, times, shares, quiet: float) -> RankCheck:
    """The :class:`RankCheck` of measured runs (per placement: makespans, CPU shares)."""
    from placegym.envs.sim.simulator import simulate

    sim = np.array([simulate(graph, cluster, p).makespan for p in chosen])
    real, disturbed = np.empty(len(chosen)), np.empty(len(chosen), dtype=np.int64)
    for i, (t, sh) in enumerate(zip(times, shares, strict=True)):
        calm = _undisturbed(sh, quiet)
        real[i] = np.median(t[calm])
        disturbed[i] = len(t) - calm.sum()
    every = np.concatenate(shares)
    share = float(np.median(every[np.isfinite(every)])) if np.isfinite(every).any() else np.nan
    runs = np.array([len(t) for t in times])
    rho = spearman(sim, real)
    rho = 0.0 if math.isnan(rho) else rho  # a constant vector has no order: 0, as ever
    return RankCheck(rho, sim, real, share, runs, disturbed)


def _measure_rounds(
    ex: TorchExecutor,
    chosen: list[Placement],
    rounds: int,
    quiet: float,
    before: Callable[[], None] | None = None,
):
    """Per placement: ``(runs,)`` makespans and CPU shares of its timed runs (see
    :func:`rank_check`: interleaved rounds, then disturbed runs made up); ``before`` is
    called before each round."""
    for p in chosen:  # untimed
        ex.run(p)
    times: list[list[float]] = [[] for _ in chosen]
    shares: list[list[float]] = [[] for _ in chosen]

    def run(i: int) -> None:
        m = ex.run(chosen[i])
        times[i].append(m.makespan)
        shares[i].append(m.cpu_share)

    for _ in range(rounds):
        if before is not None:
            before()
        for i in range(len(chosen)):
            run(i)
    for _ in range(rounds):
        short = [i for i, sh in enumerate(shares) if _undisturbed(sh, quiet).sum() < rounds]
        if not short:
            break
        for i in short:
            run(i)
    return [np.array(t) for t in times], [np.array(s) for s in shares]


def _undisturbed(shares, quiet: float) -> np.ndarray:
    """Which runs of one placement were undisturbed: CPU share at least ``quiet`` times
    the largest (all of them without scheduler statistics: NaN shares)."""
    shares = np.asarray(shares, dtype=np.float64)
    if not np.isfinite(shares).any():
        return np.ones(len(shares), dtype=bool)
    return ~(shares < quiet * np.nanmax(shares))
