"""Benchmark your own placer against placegym's teachers and agents.

A *placer* maps a dataflow graph onto a cluster's devices: it returns a
:class:`~placegym.envs.Placement` (a device per node and a priority order). Write one,
run it on a benchmark suite beside the built-in placers, read the table.

Write a placer
==============

One pass, ``place(graph, cluster, seed) -> Placement`` (the :class:`Placer` protocol;
``seed`` feeds your random draws, a deterministic placer ignores it)::

    import numpy as np
    from placegym.envs import Placement

    class LeastLoaded:
        name = "least_loaded"          # the column name (default: the class name)

        def place(self, graph, cluster, seed):
            load = np.zeros(cluster.num_devices)
            device = np.empty(graph.num_nodes, dtype=int)
            for v in graph.topological_order:
                d = int(np.argmin(load))
                device[v], load[d] = d, load[d] + graph.flops[v] / cluster.flops[d]
            return Placement(device=device, order=graph.topological_order)

A search with a budget of simulator calls, ``search(graph, cluster, sim, seed) ->
Placement`` (the :class:`SearchPlacer` protocol). ``sim`` (a :class:`Simulator`) is given
by the harness: ``sim.simulate(placement)`` (one call, a full schedule with ``makespan``
and ``oom``), ``sim.batch(devices, orders)`` (``B`` placements, ``B`` calls),
``sim.remaining``, ``sim.best``. The call that would exceed the budget raises
:class:`BudgetExceeded`; the harness stops the run there and records it ``over budget``
(a failure, never a result). You report nothing: the handle counts. Return the best
placement you found.

Also accepted wherever a placer is: a teacher (``placegym.teachers.get_teacher("heft")``,
any object with ``place(graph, cluster)``), a trained agent (a shipped one,
``placegym.agents.pretrained("generalist-v1")``, which decodes under the memory mask it
was trained under and carries its ``card``; a checkpoint's,
``placegym.train.evaluate.load_agent(path)``), a function ``(graph, cluster, seed)``.

Run it
======

From Python, on a suite split (``placegym suites`` lists them)::

    from placegym.benchmark import evaluate
    res = evaluate(LeastLoaded(), suite="generalize-v0", split="test", seeds=[0, 1],
                   teachers=["critical_path", "heft", "anneal"])
    print(res.table())                  # the table `placegym bench --suite` prints
    res.save("out/results.json")        # replay: placegym bench --replay out/results.json
    df = res.to_pandas()                # one row per (placer, instance, seed)

A search placer needs ``budget=`` (simulator calls per placement); a one-pass placer
given one is stopped where it would exceed it. Several placers: ``evaluate({"a": A(),
"b": B()}, ...)``. :func:`run_suite` is the same run for placers already named, giving
the bare :class:`SuiteRecord` rows. A shipped agent goes in as it is::

    import placegym.agents
    res = evaluate(placegym.agents.pretrained("generalist-memory-v2"), suite="memory-tight-v0")

From the command line, ``--placer MODULE:ATTRIBUTE`` (repeatable; a class is
instantiated, keyword arguments as JSON after ``=``)::

    placegym bench --suite generalize-v0 --split test --placer mymod:LeastLoaded
    placegym bench --suite generalize-v0 --placer 'mymod:Search={"restarts": 4}' --budget 500
    placegym anytime --suite comm-heavy-v0 --split test --placer mymod:Search --budget 3000

``mymod.py`` may sit in the current directory (it is put on ``sys.path``, as
``python -m`` does). A package can also declare its placers as plug-ins, in its
``pyproject.toml``::

    [project.entry-points."placegym.placers"]
    least_loaded = "mypkg.placers:LeastLoaded"

and once it is installed, ``--placer least_loaded`` finds it.

Read the table
==============

Per placer: the geometric-mean ratio of its makespan to ``critical_path`` (below 1 is
faster), its mean / max gap to the suite's certified lower bound and to the best known
placement (negative: a new best), the instances within 1% of the best known, then its
cost, ``time`` (wall seconds) and ``calls`` (simulator calls it made, summed over its
runs: a teacher's or a policy's internal simulations included, the harness's evaluation
of the result not), and ``feasible`` (runs whose placement fits in memory and keeps every
co-location group whole). Failures are never ranked: a run over a device's memory shows
``OOM``, one that splits a group ``split``, one that raised ``failed``, one stopped at its
budget ``budget``, one that returns anything but a ``Placement`` ``failed`` (the row says
what it returned); the run goes on. The summary gives each placer's means over the
instances that it and ``critical_path`` solved, and says over how many (``compared``).

Check, trace, rank
==================

Replay: :func:`replay` re-simulates every row of a results file (``res.save(...)``,
``placegym bench --out``) and returns ``(rows checked, mismatches)``: each
:class:`Mismatch` names a row whose instance, placement, makespan, feasibility or
derived columns do not replay (``placegym bench --replay FILE``).

Anytime curves: best makespan found vs simulator calls. :func:`register_search_placer`
takes a :class:`SearchPlacer` (the handle ``sim`` draws its curve), a one-pass placer
(one point) or a :data:`SearchFunction` ``(graph, cluster, budget, seed, trace)`` that
reports its bests to a :class:`Trace`; :func:`run_anytime` runs registered placers (and
the built-in ``anneal`` and ``random_search``) over a suite split and seeds, and
:func:`write_anytime` writes the curves (``placegym anytime``)::

    from pathlib import Path
    from placegym.envs.suites import get_suite

    register_search_placer("mine", MySearch())
    runs, normalizer = run_anytime(get_suite("comm-heavy-v0"), "test", ["mine", "anneal"],
                                   budget=3000, seeds=[0, 1, 2])
    write_anytime(runs, Path("out"), budget=3000, normalizer=normalizer, title="mine")

Leaderboard: :func:`run_entry` runs a placer on a suite split here and stores it as a
:class:`LeaderboardEntry` under ``leaderboard/<suite>/<split>/`` with its simulator calls
and time *measured*; :func:`submit_entry` verifies a saved suite run (the suite's own
settings, every instance of the split and every declared seed present, every row replays
against the installed suite's bounds and best known) and stores it with its costs
*claimed*; :func:`leaderboard_table` ranks a split's entries (most feasible first, then the
geometric-mean ratio to the best known; a normalized score, 0 = random, 100 = best known)
and prints the command that reproduces each; :func:`verify_entries` re-verifies them all
(``placegym leaderboard run | submit | show | verify``)::

    entry = run_entry("mymod:LeastLoaded", suite="generalize-v0", split="test", folder="board")
    entry = submit_entry("out/results.json", name="least-loaded", folder="board")
    print(leaderboard_table("generalize-v0", "test", folder="board"))

Constants: :data:`DEFAULT_TEACHERS` (the teachers ``placegym bench`` runs by default),
:data:`REFERENCE` (``critical_path``: the teacher every ratio is taken against, always
run), :data:`ENTRY_POINT_GROUP` (``placegym.placers``, the plug-ins' entry-point group),
:data:`LEADERBOARD_DIR` (``leaderboard/``, where entries go by default); and the type
:data:`SearchFunction` of a function-form anytime search.

Layering: this module is the benchmark's one public face. Each name here is defined once,
in :mod:`placegym.train.harness` (``placers``, ``calls``, ``plugins``, ``evaluation``,
``suite_bench``, ``bench``, ``replay``, ``anytime``) or :mod:`placegym.train.leaderboard`,
and re-exported; the environments, teachers and agents never import it.
"""

from placegym.train.harness.anytime import (
    AnytimeRun,
    SearchFunction,
    Trace,
    TraceError,
    register_search_placer,
    run_anytime,
    write_anytime,
)
from placegym.train.harness.bench import DEFAULT_TEACHERS, REFERENCE
from placegym.train.harness.calls import BudgetExceeded, CallCounter, counting
from placegym.train.harness.evaluation import Results, evaluate
from placegym.train.harness.placers import (
    BestOf,
    Placer,
    SearchPlacer,
    Simulator,
    as_placer,
    with_budget,
)
from placegym.train.harness.plugins import ENTRY_POINT_GROUP, installed_placers, load_placer
from placegym.train.harness.replay import Mismatch, replay
from placegym.train.harness.suite_bench import SuiteRecord, run_suite
from placegym.train.leaderboard import (
    LEADERBOARD_DIR,
    LeaderboardEntry,
    entry_paths,
    leaderboard_table,
    run_entry,
    submit_entry,
    verify_entries,
    verify_entry,
)

__all__ = [
    "DEFAULT_TEACHERS",
    "ENTRY_POINT_GROUP",
    "LEADERBOARD_DIR",
    "REFERENCE",
    "AnytimeRun",
    "BestOf",
    "BudgetExceeded",
    "CallCounter",
    "LeaderboardEntry",
    "Mismatch",
    "Placer",
    "Results",
    "SearchFunction",
    "SearchPlacer",
    "Simulator",
    "SuiteRecord",
    "Trace",
    "TraceError",
    "as_placer",
    "counting",
    "entry_paths",
    "evaluate",
    "installed_placers",
    "leaderboard_table",
    "load_placer",
    "register_search_placer",
    "replay",
    "run_anytime",
    "run_entry",
    "run_suite",
    "submit_entry",
    "verify_entries",
    "verify_entry",
    "with_budget",
    "write_anytime",
]
