"""This project's experiments: the drivers that produce the README's agent figures.

- :mod:`~placegym.train.experiments.report`: the learned-agent report, which trains the
  presets (or loads finished runs) and prints the agent tables (``placegym report``);
- :mod:`~placegym.train.experiments.per_graph`: per-graph plan-imitation agents beside
  the heuristics, anneal and random search;
- :mod:`~placegym.train.experiments.generalist`: the rollout generalist zero-shot on
  unseen suite instances;
- :mod:`~placegym.train.experiments.sb3_recipe`: the Stable-Baselines3 recipe over seeds
  (``python -m placegym.train.experiments.sb3_recipe``);
- :mod:`~placegym.train.experiments.targets`: the milestone targets the reports check,
  in one table.

They are built on the benchmark harness (:mod:`placegym.train.harness`) and the trainer;
nothing in the library imports them.
"""
