"""Importers: build a :class:`~placegym.envs.Graph` from other descriptions of a model step.

- :func:`~placegym.envs.importers.fx.from_fx`: any ``torch.nn.Module``, traced with
  torch.fx (FLOP and bytes from shape propagation, optional block splitting of large
  matmuls; ``measure="cpu"`` times each node on this machine's CPU as a per-kind time).
- :func:`~placegym.envs.importers.doppler.from_doppler`: DOPPLER's published graph text
  files (use with the ``doppler-unit-4`` / ``doppler-unit-8`` cluster presets).
- :func:`~placegym.envs.importers.dnn_partitioning.from_dnn_partitioning`: the published
  workloads of Tarnawski et al. (NeurIPS 2020), a graph with measured times and
  co-location groups plus its cluster (``cpus=N``: CPU devices too, each node timed per
  device kind);
  :func:`~placegym.envs.importers.dnn_partitioning.expert_placement` their human-expert
  splits.
- :func:`~placegym.envs.importers.pipedream.from_pipedream`: the layer profiles
  (``graph.txt``) of PipeDream's profiler, measured forward times with the backward
  times kept for :func:`~placegym.envs.workloads.training.to_training_step`.

``from_fx`` is loaded on first access (PEP 562), so importing this package, and
``from_doppler``, ``from_dnn_partitioning`` or ``from_pipedream``, does not import torch.
"""

from __future__ import annotations

from typing import Any

from placegym.envs.importers.dnn_partitioning import (
    expert_for,
    expert_placement,
    from_dnn_partitioning,
    node_index,
    parse_dnn_partitioning,
)
from placegym.envs.importers.doppler import from_doppler, parse_doppler
from placegym.envs.importers.pipedream import from_pipedream, parse_pipedream


def __getattr__(name: str) -> Any:
    if name == "from_fx":
        from placegym.envs.importers.fx import from_fx

        return from_fx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "expert_for",
    "expert_placement",
    "from_dnn_partitioning",
    "from_doppler",
    "from_fx",
    "from_pipedream",
    "node_index",
    "parse_dnn_partitioning",
    "parse_doppler",
    "parse_pipedream",
]
