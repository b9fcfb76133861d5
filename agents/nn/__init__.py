"""Graph neural network layers (one per module, PyG style) and the graph encoder that both
agent wings (:mod:`placegym.agents.doppler`, :mod:`placegym.agents.sb3`) build on."""

from placegym.agents.nn.critical_path import CriticalPathPool, critical_path_pointers
from placegym.agents.nn.dag_conv import DAGConv
from placegym.agents.nn.encoder import GraphEncoder, GraphInputs

__all__ = ["CriticalPathPool", "DAGConv", "GraphEncoder", "GraphInputs", "critical_path_pointers"]
