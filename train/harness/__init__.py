"""The benchmark harness: what a user of the placement benchmark calls, re-exported as
one public module, :mod:`placegym.benchmark` (each name defined once, here or in
:mod:`placegym.train.leaderboard`).

- :mod:`~placegym.train.harness.bench`: placers (teachers, trained agents) × workloads ×
  clusters × seeds, simulated and tabulated (``placegym bench``);
- :mod:`~placegym.train.harness.suite_bench`: placers over a benchmark suite's split, with
  gaps to the certified bound and the best known (``placegym bench --suite``);
- :mod:`~placegym.train.harness.replay`: re-simulates every row of a results file
  (``placegym bench --replay``);
- :mod:`~placegym.train.harness.anytime`: best makespan vs simulator calls of search
  placers, the search-placer API (``placegym anytime``);
- :mod:`~placegym.train.harness.ray_bench`: the grid's cells as Ray tasks
  (``placegym bench --ray``);
- :mod:`~placegym.train.harness.suite_reference`: computes a suite's lower bounds and
  best-known placements (``placegym suites reference``);
- :mod:`~placegym.train.harness.feasibility`: the one definition of an infeasible row
  (over memory, a split co-location group, a placer that raised or was stopped at its
  budget) and how every table marks it, counts it and leaves it out of ratios,
  geometric means and bests;
- :mod:`~placegym.train.harness.placers`: the ``Placer`` and ``SearchPlacer`` protocols
  every placer is run through, the budgeted simulator handle of a search, the adapters
  (teachers, functions, best-of);
- :mod:`~placegym.train.harness.calls`: the simulator calls every placer makes, counted
  at the simulator's entry points (the ``calls`` column), and budgets;
- :mod:`~placegym.train.harness.plugins`: ``--placer MODULE:ATTRIBUTE`` and the
  ``placegym.placers`` entry points;
- :mod:`~placegym.train.harness.evaluation`: ``evaluate`` and its results, the Python
  side of ``placegym bench --suite``.

This project's own report drivers, which use the harness, live in
:mod:`placegym.train.experiments`; the harness never imports them.
"""
