"""The benchmark and report harness: placers compared on workloads, agents reported.

- :mod:`~placegym.train.harness.bench`: placers (teachers, trained agents) × workloads ×
  clusters × seeds, simulated and tabulated (``placegym bench``);
- :mod:`~placegym.train.harness.report`: the learned-agent report, which trains the
  presets (or loads finished runs) and prints the README's agent tables
  (``placegym report``).
"""
