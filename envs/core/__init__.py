"""The core formats: what every other band of :mod:`placegym.envs` reads and writes.

- :mod:`~placegym.envs.core.graph`: :class:`~placegym.envs.core.graph.Graph` and its file
  format; :mod:`~placegym.envs.core.specs`: the executable node specs and
  :class:`~placegym.envs.core.specs.GraphBuilder`.
- :mod:`~placegym.envs.core.cluster`: devices and network levels;
  :mod:`~placegym.envs.core.presets`: named clusters and ``load_cluster``.
- :mod:`~placegym.envs.core.placement`: a device per node and a priority order;
  :mod:`~placegym.envs.core.recompute`: recomputation of forward nodes.
- :mod:`~placegym.envs.core.costs`: a node's duration on a device (DESIGN §3.1).
- :mod:`~placegym.envs.core.validate` (one clear line per bad field) and
  :mod:`~placegym.envs.core.cache` (per-object caches).

Nothing here imports another band.
"""
