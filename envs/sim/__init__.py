"""Simulation: the work-conserving simulator (DESIGN §3) and what shows its schedules.

- :mod:`~placegym.envs.sim.simulator`: ``simulate``, ``simulate_batch``,
  ``simulate_makespan`` over the compiled kernel :mod:`~placegym.envs.sim._kernel`.
- :mod:`~placegym.envs.sim.oracle`: the same rules in plain Python, written for reading;
  the test oracle of the compiled kernel.
- :mod:`~placegym.envs.sim.gantt`: Gantt charts of a schedule.

It reads the core formats only.
"""
