"""placegym.train: training agents, the benchmark and report harness, the command line.

Three parts:

- **Training** (this package's modules), read in this order:
  :mod:`~placegym.train.config` (the typed config of ``placegym train``, read by
  :mod:`~placegym.train.dataclass_io`),
  :mod:`~placegym.train.restarts` (the run layer: an ``init`` config trained first,
  restarts), :mod:`~placegym.train.trainer` (one run: the orchestrator of phases,
  checkpoints, evaluation and logging), and the pieces it calls:
  :mod:`~placegym.train.imitation` (phase I), :mod:`~placegym.train.rl` (phases II and
  III), :mod:`~placegym.train.losses` (what both share),
  :mod:`~placegym.train.self_imitation` (phase II's best-known plans),
  :mod:`~placegym.train.evaluate` (run evaluation, agents as placers),
  :mod:`~placegym.train.checkpoint`, :mod:`~placegym.train.optim`,
  :mod:`~placegym.train.tracking` (``metrics.jsonl`` and W&B).
- **Harness** (:mod:`placegym.train.harness`): the placement benchmark and the
  learned-agent report.
- **Command line** (:mod:`placegym.train.cli`): ``placegym``, a module per subcommand.
"""
