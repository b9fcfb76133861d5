"""placegym.envs: the data model, the work-conserving simulator and the environments.

Public API::

    from placegym.envs import load_graph, load_cluster, load_placement, simulate
    schedule = simulate(load_graph("g.json"), load_cluster("p100x4"),
                        load_placement("p.json"))
    schedule.makespan, schedule.start, schedule.finish, schedule.transfers
"""

from placegym.envs.cluster import CLUSTER_FORMAT, Cluster, Device, Level
from placegym.envs.env import PlacementEnv
from placegym.envs.graph import GRAPH_FORMAT, GRAPH_FORMAT_V2, Graph, load_graph
from placegym.envs.placement import PLACEMENT_FORMAT, Placement, load_placement
from placegym.envs.presets import get_preset, list_presets, load_cluster
from placegym.envs.registration import ENV_IDS, REAL_ENV_IDS, register_envs
from placegym.envs.simulator import (
    BatchResult,
    Schedule,
    TransferTrace,
    simulate,
    simulate_batch,
    simulate_makespan,
)
from placegym.envs.sources import WorkloadSampler

register_envs()

__all__ = [
    "CLUSTER_FORMAT",
    "ENV_IDS",
    "GRAPH_FORMAT",
    "GRAPH_FORMAT_V2",
    "PLACEMENT_FORMAT",
    "REAL_ENV_IDS",
    "BatchResult",
    "Cluster",
    "Device",
    "Graph",
    "Level",
    "Placement",
    "PlacementEnv",
    "Schedule",
    "TransferTrace",
    "WorkloadSampler",
    "get_preset",
    "list_presets",
    "load_cluster",
    "load_graph",
    "load_placement",
    "register_envs",
    "simulate",
    "simulate_batch",
    "simulate_makespan",
]
