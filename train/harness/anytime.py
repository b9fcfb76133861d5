"""Anytime curves: best makespan found vs simulator calls, for search-based placers.

A search placer is best written to the :class:`~placegym.train.harness.placers.SearchPlacer`
protocol, ``search(graph, cluster, sim, seed) -> Placement``: it simulates through the
budgeted handle ``sim`` (:class:`~placegym.train.harness.placers.Simulator`), which counts
every call, stops the run at its budget (the run is then recorded ``over budget``) and
draws the curve itself: each time the best placement ``sim`` has simulated improves, a
point at the calls made so far. Pass such an object (or a one-pass
:class:`~placegym.train.harness.placers.Placer`: its curve is one point, at the calls it
made) to :func:`register_search_placer`, or name it with ``placegym anytime --placer``.
The placement it returns must be no worse than the best it simulated (a better one it
never simulated adds a last point).

The older form is a function that reports its bests by hand to a :class:`Trace`::

    def my_search(graph, cluster, budget, seed, trace) -> Placement:
        ...  # evaluate placements, at most `budget` of them in all
        trace.report(calls_so_far, best_makespan_so_far)
        return best_placement

A search that may hold an infeasible best (over a device's memory: nothing it has tried
fits yet) says so with ``trace.report(calls, makespan, feasible=False)``; the curves count
a run only from its first feasible best on.

Register either with :func:`register_search_placer` and ``placegym anytime --placers`` can
run it beside the built-in ones (a learned agent that samples or searches is one more search
placer). The harness checks every run: calls never exceed the budget and never go back,
and the returned placement's simulated makespan equals the last best reported. The budget
is a hard cap on the calls a run actually makes
(:func:`~placegym.train.harness.calls.counting`, whatever makes them: a teacher's
internal simulations included): the call that would exceed it stops the run, which is
recorded over budget. A placer
with a ``check(graph, cluster, budget)`` attribute is asked on every instance before any
run, so that a budget it cannot work with is refused at once.

Every run also records its wall time and the simulator calls it actually made
(:mod:`placegym.train.harness.calls`: a heuristic start's internal simulations included,
the harness's check of the final placement not), shown beside each other in the table.

Feasibility (:mod:`placegym.train.harness.feasibility`): every run records whether its
final placement is feasible (``AnytimeRun.feasible``, ``infeasible``: over a device's
memory, a split co-location group, the placer raised or was stopped at its budget, which
fails that run only). The
curves are geometric means over the instances on which every run of every placer ended
feasible (:func:`solved_instances`; the count is in the table and the title), and a run's
point counts only once its best is feasible. A breach of the search-placer contract
(budget, calls going back, a final placement that does not take the reported best) is
still an error.

Built-in search placers, both starting from the same heuristic placements (critical_path,
heft, nest, metis, round_robin: their evaluation counts as the first five calls, after
the simulations a memory-aware start makes inside, which count too):

- ``anneal``: :func:`placegym.teachers.anneal.anneal` from the best start. Where memory
  may bind, the starts are simulated once more to tell whether one fits, and where none
  does the best is repaired first (:func:`~placegym.teachers.make_feasible`, counted; a
  repair that fits is one more start). Its bests are feasible from the start when some
  start or the repair fits (it ranks any placement that fits before any that does not);
  else they are reported infeasible until its final placement, if that fits (a
  conservative curve: anneal does not say when it first fit).
- ``random_search``: the best start, then uniformly random placements (a uniform device
  per node, one per co-location group, which its members share; a uniformly random
  priority permutation), evaluated in batches; the best
  placement that fits in memory is kept. The standard control at equal budget: a search
  that does not beat it has learned nothing about the problem.

:func:`run_anytime` runs placers over a suite split and seeds; :func:`write_anytime`
writes ``anytime.csv`` (every improvement of every run), ``anytime_curve.csv`` (the mean
and std over seeds of the geometric mean over instances of best / best known, on a grid
of call counts, over the instances every run solved) and ``anytime.png`` (those curves,
log-scaled calls).
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs import Cluster, Graph, Placement, simulate_batch
from placegym.envs.analysis.memory import memory_may_bind, units
from placegym.envs.suites import Suite
from placegym.teachers.anneal import STARTS, score_starts
from placegym.train.harness.anytime_report import Curves, plot_curves
from placegym.train.harness.calls import BudgetExceeded, counting, patched, uncounted
from placegym.train.harness.feasibility import count, simulate_outcome
from placegym.train.harness.placers import (
    TORCH_THREADS,
    Simulator,
    as_placer,
    not_a_placement,
    placer_name,
    placing_threads,
)
from placegym.train.harness.replay import RTOL
from placegym.train.progress import progress_bar

#: The heuristic teachers whose placements every built-in search starts from (as does an
#: agent's :func:`~placegym.agents.doppler.search.policy_search` by default).
START_TEACHERS = STARTS


@dataclass
class Trace:
    """Best makespan found vs simulator calls, as reported by one search run.

    Attributes:
        budget: the most calls the run may use.
        calls: call counts at which the best changed (strictly increasing).
        best: the best makespan after ``calls[i]`` calls (decreasing, but where an
            infeasible best gives way to a feasible one).
        feasible: whether that best is feasible (as the search reported).
        seconds: wall seconds from the trace's creation (the run's start) to each report;
            a search that reports its curve after the fact is timed at its reports, which
            can only make it look slower.
    """

    budget: int
    calls: list[int] = field(default_factory=list)
    best: list[float] = field(default_factory=list)
    feasible: list[bool] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter, repr=False)

    def report(self, calls: int, makespan: float, feasible: bool = True) -> None:
        """After ``calls`` calls in all, the best placement found takes ``makespan``
        (``feasible`` False: it exceeds a device's memory, nothing found fits yet).

        The best only improves, except where a search trades a placement that exceeds a
        device's memory for a slower one that fits.

        Raises:
            TraceError: ``calls`` beyond the budget or below an earlier report.
        """
        if calls > self.budget:
            raise TraceError(f"trace: {calls} calls reported, over the budget of {self.budget}")
        if self.calls and calls < self.calls[-1]:
            raise TraceError(f"trace: calls went back from {self.calls[-1]} to {calls}")
        changed = not self.best or makespan != self.best[-1] or feasible != self.feasible[-1]
        if changed:
            self.calls.append(int(calls))
            self.best.append(float(makespan))
            self.feasible.append(bool(feasible))
            self.seconds.append(time.perf_counter() - self.start)

    def best_at(self, calls: np.ndarray) -> np.ndarray:
        """The best makespan after each of ``calls`` calls (nan before the first report
        and while the best is infeasible)."""
        return self._at(self.calls, calls)

    def best_at_seconds(self, seconds: np.ndarray) -> np.ndarray:
        """The best makespan reported within each of ``seconds`` wall seconds of the run's
        start (nan before the first report and while the best is infeasible)."""
        return self._at(self.seconds, seconds)

    def _at(self, marks: list, at: np.ndarray) -> np.ndarray:
        i = np.searchsorted(np.asarray(marks), np.asarray(at), side="right") - 1
        out = np.asarray(self.best, dtype=np.float64)[np.maximum(i, 0)]
        ok = np.asarray(self.feasible, dtype=bool)[np.maximum(i, 0)] if self.calls else False
        return np.where((i >= 0) & ok, out, np.nan)


class TraceError(ValueError):
    """A search placer broke the :class:`Trace` contract (an error, not a failed run)."""


#: A search placer in the older, function form: ``(graph, cluster, budget, seed, trace) ->
#: best placement``, reporting its bests to ``trace`` (module docstring). An object of the
#: :class:`~placegym.train.harness.placers.SearchPlacer` protocol becomes one through
#: :class:`SearchRun`.
SearchFunction = Callable[[Graph, Cluster, int, int, Trace], Placement]


def heuristic_starts(graph: Graph, cluster: Cluster) -> list[Placement]:
    """The placements of :data:`START_TEACHERS` (the shared starting point)."""
    from placegym.teachers import get_teacher

    return [get_teacher(t).place(graph, cluster) for t in START_TEACHERS]


def anneal_search(
    graph: Graph,
    cluster: Cluster,
    budget: int,
    seed: int,
    trace: Trace,
    *,
    proposals: Callable[[Graph, Cluster, dict[str, Placement]], Sequence[Placement]] | None = None,
):
    """Simulated annealing from the best heuristic start (a :data:`SearchFunction`; its
    reports' feasibility: module docstring). ``proposals(graph, cluster, starts)``, when
    given, adds starts of its own (e.g. a learned policy's placement: a *warm-started*
    anneal), made inside the run, so their wall time and any simulator calls they make
    count; it reads the heuristic starts by teacher name.

    Every call counts against ``budget``: the starts' own simulations (a memory-aware
    teacher's), the check of whether any start fits and anneal's; the trace reports the
    calls actually made. Where no start fits, anneal's repair of its best start
    (:func:`~placegym.teachers.make_feasible`) is done here first and counted: a repair
    that fits becomes a start (so anneal's bests are feasible from its first report),
    one that does not has its calls set aside, since anneal repeats it.

    Raises:
        BudgetExceeded: the starts leave anneal less than one call per start.
    """
    from placegym.teachers import make_feasible
    from placegym.teachers.anneal import anneal

    with counting() as run:  # this run's calls, however made (an outer budget applies)
        starts = heuristic_starts(graph, cluster)
        if proposals is not None:
            starts += list(proposals(graph, cluster, dict(zip(START_TEACHERS, starts))))
        fits, repeat = True, 0
        if memory_may_bind(graph, cluster):
            makespan, oom = score_starts(graph, cluster, starts)
            if oom.all():
                best = starts[int(np.argmin(makespan))]  # anneal's pick where none fits
                with counting() as repair:
                    fixed = make_feasible(graph, cluster, best)
                fits = fixed is not best  # else it is the placement itself, over memory
                if fits:
                    starts.append(fixed)
                else:
                    repeat = repair.calls
        left = budget - run.calls - repeat
        if left < len(starts):
            raise BudgetExceeded(budget, run.calls, len(starts) + repeat)

        def observe(_: int, makespan: float) -> None:
            trace.report(run.calls, makespan, feasible=fits)

        res = anneal(graph, cluster, starts, budget=left, seed=seed, observe=observe)
        if not fits and res.feasible:  # anneal's own evaluation: no call more
            trace.report(run.calls, res.makespan, feasible=True)
    return res.placement


def random_search(graph: Graph, cluster: Cluster, budget: int, seed: int, trace: Trace):
    """The best heuristic start, then uniform random placements (module docstring);
    every call counts against ``budget``, the starts' own simulations included."""
    rng = np.random.default_rng(seed)
    with counting() as run:  # this run's calls, however made (an outer budget applies)
        starts = heuristic_starts(graph, cluster)
        n, d = graph.num_nodes, cluster.num_devices
        u = units(graph)  # a group draws one device (node by node without groups)
        devs = np.stack([p.device for p in starts])
        ords = np.stack([p.order for p in starts])
        best_key, best = (True, math.inf), (devs[0], ords[0])
        while True:
            used = run.calls
            res = simulate_batch(graph, cluster, devs, ords)
            for i in range(len(devs)):
                key = (bool(res.oom[i]), float(res.makespan[i]))  # placements that fit first
                if key < best_key:
                    best_key, best = key, (devs[i], ords[i])
                trace.report(used + i + 1, best_key[1], feasible=not best_key[0])
            k = min(64, budget - run.calls)
            if k <= 0:
                return Placement(device=best[0], order=best[1])
            devs = rng.integers(d, size=(k, u.count))[:, u.of]
            ords = rng.permuted(np.tile(np.arange(n), (k, 1)), axis=1)


SEARCH_PLACERS: dict[str, SearchFunction] = {
    "anneal": anneal_search,
    "random_search": random_search,
}


class SearchRun:
    """A :class:`~placegym.train.harness.placers.SearchPlacer` (or a one-pass
    :class:`~placegym.train.harness.placers.Placer`) as a :data:`SearchFunction`:
    the run gets a :class:`~placegym.train.harness.placers.Simulator` of the budget, whose
    improvements are the trace (module docstring).

    Raises (when called):
        BudgetExceeded: the run went past its budget (also when the placer caught the
            refusal and returned anyway).
        TraceError: the placement returned is worse than the best the run simulated.
    """

    def __init__(self, placer: Any) -> None:
        self.placer, self.name = placer, placer_name(placer)
        self.searches = callable(getattr(placer, "search", None))
        if not self.searches:
            as_placer(placer)  # refuses a non-placer now

    def __call__(
        self, graph: Graph, cluster: Cluster, budget: int, seed: int, trace: Trace
    ) -> Placement:
        """Run the placer with ``budget`` calls, its bests reported to ``trace``."""
        with counting(budget) as counter:
            if self.searches:
                sim = Simulator(graph, cluster, counter, on_best=trace.report)
                placement = self.placer.search(graph, cluster, sim, seed)
            else:
                placement = as_placer(self.placer).place(graph, cluster, seed)
        if counter.exceeded:
            raise BudgetExceeded(budget, counter.calls, 0)
        with uncounted():
            out = simulate_outcome(graph, cluster, placement)
        if out.makespan is not None:
            _final_point(trace, counter.calls, out.makespan, not out.oom)
        return placement

    def check(self, graph: Graph, cluster: Cluster, budget: int) -> None:
        """The placer's ``check``, given the budget when it takes three arguments."""
        check = getattr(self.placer, "check", None)
        if not callable(check):
            return
        try:
            check(graph, cluster, budget)
        except TypeError:
            check(graph, cluster)

    def __repr__(self) -> str:
        return f"SearchRun({self.placer!r})"


def _final_point(trace: Trace, calls: int, makespan: float, feasible: bool) -> None:
    """Report the returned placement when it beats the trace's best (it was never
    simulated through the handle); refuse one that is worse."""
    if not trace.best:
        trace.report(calls, makespan, feasible)
        return
    last, ok = trace.best[-1], trace.feasible[-1]
    if feasible == ok and abs(makespan - last) <= RTOL * max(last, 1e-300):
        return
    if (not feasible, makespan) < (not ok, last):
        trace.report(calls, makespan, feasible)
        return
    raise TraceError(
        f"returned a placement taking {makespan!r}{'' if feasible else ' (over memory)'}, "
        f"worse than the best it simulated, {last!r}: return the best placement found"
    )


def register_search_placer(name: str, placer: Any) -> None:
    """Make ``placer`` available to :func:`run_anytime` under ``name``: a
    :data:`SearchFunction`, or an object wrapped in :class:`SearchRun` (a
    :class:`~placegym.train.harness.placers.SearchPlacer` or a one-pass
    :class:`~placegym.train.harness.placers.Placer`).

    Raises:
        ValueError: ``placer`` is none of these.
    """
    is_function = callable(placer) and not (
        callable(getattr(placer, "search", None)) or callable(getattr(placer, "place", None))
    )
    SEARCH_PLACERS[name] = placer if is_function else SearchRun(placer)


@dataclass
class AnytimeRun:
    """One search run on one instance: its trace, the normalizer of its curve, whether
    its final placement is feasible (``infeasible``: why not), its wall time and the
    simulator calls it made (module docstring)."""

    instance: str
    placer: str
    seed: int
    trace: Trace
    reference: float  # best known (or the lower bound where none is known)
    infeasible: str | None = None
    seconds: float = 0.0
    calls: int = 0

    @property
    def feasible(self) -> bool:
        """The final placement is feasible (module docstring)."""
        return self.infeasible is None


@dataclass(frozen=True)
class _Done:
    trace: Trace
    infeasible: str | None
    seconds: float
    calls: int


def _run_one(name: str, inst, budget: int, seed: int) -> _Done:
    """The run's trace, why its final placement is infeasible (None: feasible), its
    seconds and its simulator calls."""
    if name not in SEARCH_PLACERS:
        raise ValueError(
            f"placers: unknown search placer {name!r} (known: {', '.join(SEARCH_PLACERS)})"
        )
    trace = Trace(budget)
    t0 = time.perf_counter()
    with counting(budget) as counter:  # the budget is a hard cap on every search
        try:
            placement = SEARCH_PLACERS[name](inst.graph, inst.cluster, budget, seed, trace)
            why = not_a_placement(placement)
        except TraceError as e:
            raise TraceError(f"{name} on {inst.id}: {e}") from None
        except BudgetExceeded as e:  # stopped: this run fails, the others go on
            why = str(e)
        except Exception as e:  # this run fails; the others go on
            why = f"placer raised {type(e).__name__}: {e}"
    seconds = time.perf_counter() - t0
    if why is None and counter.exceeded:  # it caught the refusal and went on
        why = str(BudgetExceeded(budget, counter.calls, 0))
    if why is not None:
        return _Done(trace, why, seconds, counter.calls)
    with uncounted():
        out = simulate_outcome(inst.graph, inst.cluster, placement)
    if out.makespan is None:  # a split group: nothing to check the reports against
        return _Done(trace, out.infeasible, seconds, counter.calls)
    final = out.makespan
    if not trace.best or abs(final - trace.best[-1]) > RTOL * max(final, 1e-300):
        last = trace.best[-1] if trace.best else None
        raise ValueError(
            f"{name} on {inst.id}: reported best {last!r} but its placement takes {final!r}"
        )
    return _Done(trace, out.infeasible, seconds, counter.calls)


def run_anytime(
    suite: Suite,
    split: str | None,
    placers: Sequence[str],
    *,
    budget: int,
    seeds: Sequence[int] = (0, 1, 2),
    progress: bool | str = True,
    torch_threads: int | None = TORCH_THREADS,
) -> tuple[list[AnytimeRun], str]:
    """Run every search placer on every instance of the split for every seed, each run
    held to ``budget`` calls, with ``torch_threads`` torch threads (None: the process's
    setting). ``progress``: a bar (True), nothing (False), or ``"auto"``: a bar on a
    terminal, else a line every few seconds on stderr.

    Returns:
        The runs and the name of the normalizer: ``"best known"`` when every instance has
        a fresh reference entry, else ``"lower bound"`` (for every instance).
    """
    from placegym.envs.suites.reference import load_references
    from placegym.train.harness.suite_bench import instance_bounds

    if budget < len(START_TEACHERS):
        raise ValueError(
            f"budget: must be >= {len(START_TEACHERS)} (the heuristic starts), got {budget}"
        )
    refs = load_references(suite.name)
    insts = list(suite.instances(split))
    for name in placers:  # a placer that can tell refuses a problem before any run
        check = getattr(SEARCH_PLACERS.get(name), "check", None)
        if callable(check):
            for inst in insts:
                check(inst.graph, inst.cluster, budget)
    bounds = [instance_bounds(inst, refs) for inst in insts]
    known = all(best is not None for _, best in bounds)
    runs = []
    total = len(insts) * len(placers) * len(seeds)
    bar = progress_bar(total, desc="anytime", unit="runs", mode=progress)
    # once for every run (each run counts its calls)
    with bar, patched(), placing_threads(torch_threads):
        for inst, (bound, best) in zip(insts, bounds):
            for name in placers:
                for seed in seeds:
                    bar.set_postfix_str(f"{inst.id} {name}")
                    done = _run_one(name, inst, budget, seed)
                    reference = best if known and best is not None else bound
                    runs.append(
                        AnytimeRun(
                            inst.id,
                            name,
                            seed,
                            done.trace,
                            reference,
                            done.infeasible,
                            done.seconds,
                            done.calls,
                        )
                    )
                    bar.update()
    return runs, "best known" if known else "lower bound"


def call_grid(budget: int, points: int = 200) -> np.ndarray:
    """Log-spaced call counts from 1 to ``budget`` (integers, ``budget`` included)."""
    return np.unique(np.round(np.logspace(0, math.log10(max(budget, 1)), points)).astype(int))


def solved_instances(runs: Sequence[AnytimeRun]) -> tuple[list[str], list[str]]:
    """``(instances on which every run ended feasible, every instance)``, in run order:
    the curves' instances."""
    ok: dict[str, bool] = {}
    for r in runs:
        ok[r.instance] = ok.get(r.instance, True) and r.feasible
    return [k for k, v in ok.items() if v], list(ok)


def feasible_runs(runs: Sequence[AnytimeRun]) -> dict[str, str]:
    """Per placer, ``"ok/total"`` of its runs whose final placement is feasible."""
    names = dict.fromkeys(r.placer for r in runs)
    return {p: count(r.feasible for r in runs if r.placer == p) for p in names}


def curves(runs: Sequence[AnytimeRun], grid: np.ndarray) -> Curves:
    """Per placer: ``(mean, std)`` over seeds of the geometric mean, over the instances
    every run solved (:func:`solved_instances`), of best / reference at each grid point
    (nan until every such instance has a feasible best; nan throughout without any)."""
    solved = set(solved_instances(runs)[0])
    out: Curves = {}
    for name in dict.fromkeys(r.placer for r in runs):
        per_seed = []
        for seed in sorted({r.seed for r in runs if r.placer == name}):
            mine = [r for r in runs if r.placer == name and r.seed == seed]
            mine = [r for r in mine if r.instance in solved]
            if not mine:
                per_seed.append(np.full(len(grid), np.nan))
                continue
            ratios = np.stack([r.trace.best_at(grid) / r.reference for r in mine])
            per_seed.append(np.exp(np.log(ratios).mean(axis=0)))
        arr = np.stack(per_seed)
        out[name] = (arr.mean(axis=0), arr.std(axis=0))
    return out


def write_anytime(
    runs: Sequence[AnytimeRun], out: Path, *, budget: int, normalizer: str, title: str
) -> Curves:
    """``anytime.csv``, ``anytime_curve.csv`` and ``anytime.png`` in ``out`` (module
    docstring); returns the curves. ``anytime.csv`` has a row per reported best (its
    ratio empty while infeasible) with the run's ``infeasible`` reason, wall time
    (``seconds``) and simulator calls made in all (``run_calls``), a run that reported
    nothing one row without calls; ``anytime_curve.csv`` says over how many instances."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "anytime.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "instance",
                "placer",
                "seed",
                "calls",
                "best_makespan",
                "ratio",
                "feasible",
                "infeasible",
                "seconds",
                "run_calls",
                "at_seconds",
            ]
        )
        for r in runs:
            why, cost = r.infeasible or "", [r.seconds, r.calls]
            points = zip(r.trace.calls, r.trace.best, r.trace.feasible, r.trace.seconds)
            for c, b, ok, t in points:
                ratio = b / r.reference if ok else ""
                w.writerow([r.instance, r.placer, r.seed, c, b, ratio, ok, why, *cost, t])
            if not r.trace.calls:
                w.writerow([r.instance, r.placer, r.seed, "", "", "", False, why, *cost, ""])
    grid = call_grid(budget)
    cv = curves(runs, grid)
    solved, every = solved_instances(runs)
    with open(out / "anytime_curve.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["placer", "calls", "mean_ratio", "std_ratio", "normalizer", "instances", "of"])
        for name, (mean, std) in cv.items():
            for c, m, s in zip(grid, mean, std):
                if np.isfinite(m):
                    w.writerow([name, int(c), m, s, normalizer, len(solved), len(every)])
    plot_curves(cv, grid, out / "anytime.png", normalizer=normalizer, title=title)
    return cv
