"""placegym.train: training agents, the benchmark harness, the experiments, the command line.

Five parts:

- **Training** (this package's modules), read in this order:
  :mod:`~placegym.train.config` (the typed config of ``placegym train``: its dataclasses
  in :mod:`~placegym.train.config_schema`, read by :mod:`~placegym.train.dataclass_io`,
  checked by :mod:`~placegym.train.config_checks`),
  :mod:`~placegym.train.restarts` (the run layer: an ``init`` config trained first,
  restarts), :mod:`~placegym.train.trainer` (one run: the orchestrator of phases,
  checkpoints, evaluation and logging), and the pieces it calls:
  :mod:`~placegym.train.players` (who plays an update's episodes: in process, or on Ray
  actors, :mod:`~placegym.train.workers`), :mod:`~placegym.train.imitation` (phase I),
  :mod:`~placegym.train.rl` (phases II and III), :mod:`~placegym.train.losses` (what
  both share), :mod:`~placegym.train.self_imitation` (phase II's best-known plans),
  :mod:`~placegym.train.phase3` (the real backend's environments),
  :mod:`~placegym.train.evaluator` (a run's evaluation),
  :mod:`~placegym.train.evaluate` (evaluation of policies, agents as placers),
  :mod:`~placegym.train.checkpoint`, :mod:`~placegym.train.optim`,
  :mod:`~placegym.train.tracking` (``metrics.jsonl`` and W&B),
  :mod:`~placegym.train.stats`.
- **Harness** (:mod:`placegym.train.harness`): the placement benchmark a user calls.
- **Experiments** (:mod:`placegym.train.experiments`): this project's report drivers and
  the SB3 recipe, with their targets; built on the harness, which never imports them.
- **Machine tooling** (:mod:`placegym.train.machine`): the GPU check and the wheelhouse.
- **Command line** (:mod:`placegym.train.cli`): ``placegym``, a module per subcommand.
"""
