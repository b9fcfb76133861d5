"""Workload generators: block-decomposed graphs with real shapes and executable specs."""

from placegym.envs.workloads._builder import GraphBuilder, einsum_flops
from placegym.envs.workloads.ffnn import ffnn

__all__ = ["GraphBuilder", "einsum_flops", "ffnn"]
