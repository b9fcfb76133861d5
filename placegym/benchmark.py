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
any object with ``place(graph, cluster)``), a trained agent
(:func:`placegym.train.evaluate.load_agent`), a function ``(graph, cluster, seed)``.

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
"b": B()}, ...)``.

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
budget ``budget``; the means compare placers over the instances every placer solved, and
say over how many.

Layering: this module re-exports :mod:`placegym.train.harness` (``placers``, ``calls``,
``plugins``, ``evaluation``, ``suite_bench``); the environments never import it.
"""

from placegym.train.harness.bench import DEFAULT_TEACHERS
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
from placegym.train.harness.suite_bench import SuiteRecord

__all__ = [
    "DEFAULT_TEACHERS",
    "ENTRY_POINT_GROUP",
    "BestOf",
    "BudgetExceeded",
    "CallCounter",
    "Placer",
    "Results",
    "SearchPlacer",
    "Simulator",
    "SuiteRecord",
    "as_placer",
    "counting",
    "evaluate",
    "installed_placers",
    "load_placer",
    "with_budget",
]
