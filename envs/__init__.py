"""placegym.envs: the data model, the work-conserving simulator and (soon) the environments.

Public API::

    from placegym.envs import load_graph, load_cluster, load_placement, simulate
    schedule = simulate(load_graph("g.json"), load_cluster("p100x4"),
                        load_placement("p.json"))
    schedule.makespan, schedule.start, schedule.finish, schedule.transfers
"""

from placegym.envs.cluster import CLUSTER_FORMAT, Cluster, Device, Level, load_cluster
from placegym.envs.graph import GRAPH_FORMAT, Graph, load_graph
from placegym.envs.placement import PLACEMENT_FORMAT, Placement, load_placement
from placegym.envs.presets import get_preset, list_presets
from placegym.envs.simulator import (
    BatchResult,
    Schedule,
    TransferTrace,
    simulate,
    simulate_batch,
)

__all__ = [
    "CLUSTER_FORMAT",
    "GRAPH_FORMAT",
    "PLACEMENT_FORMAT",
    "BatchResult",
    "Cluster",
    "Device",
    "Graph",
    "Level",
    "Placement",
    "Schedule",
    "TransferTrace",
    "get_preset",
    "list_presets",
    "load_cluster",
    "load_graph",
    "load_placement",
    "simulate",
    "simulate_batch",
]
