"""Graph neural network layers (one per module, PyG style)."""

from placegym.agents.nn.critical_path import CriticalPathPool, critical_path_pointers
from placegym.agents.nn.dag_conv import DAGConv

__all__ = ["CriticalPathPool", "DAGConv", "critical_path_pointers"]
