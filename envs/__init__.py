"""placegym.envs: the data model, the work-conserving simulator and the environments.

Public API::

    from placegym.envs import load_graph, load_cluster, load_placement, simulate
    schedule = simulate(load_graph("g.json"), load_cluster("p100x4"),
                        load_placement("p.json"))
    schedule.makespan, schedule.start, schedule.finish, schedule.transfers

The package is in bands, each importing only the bands above it in this list:

1. :mod:`~placegym.envs.core`: the formats (graph, node specs, cluster and presets,
   placement, recomputation, costs, validation, caches).
2. :mod:`~placegym.envs.sim`: the simulator, its compiled kernel, the plain-Python
   oracle, Gantt charts.
3. :mod:`~placegym.envs.analysis`: levels, bounds, CCR, memory feasibility.
4. :mod:`~placegym.envs.workloads`: the workload generators and instance transforms.
5. :mod:`~placegym.envs.importers`: graphs from torch.fx, DOPPLER, dnn-partitioning and
   PipeDream files.
6. :mod:`~placegym.envs.suites`: the benchmark suites.
7. :mod:`~placegym.envs.real`: real execution with torch (CPU workers, GPUs).
8. :mod:`~placegym.envs.mdp`: the placement MDP (state, observation, reward, the
   Gymnasium environments, registration).

``placegym.envs.simulator``, ``.graph``, ``.cluster`` and ``.placement`` are the old
import paths of :mod:`placegym.envs.sim.simulator` and the three core modules, kept
working (the same module objects).
"""

from placegym.envs.core.cluster import CLUSTER_FORMAT, Cluster, Device, Level
from placegym.envs.core.graph import GRAPH_FORMAT, GRAPH_FORMAT_V2, Graph, load_graph
from placegym.envs.core.placement import PLACEMENT_FORMAT, Placement, load_placement
from placegym.envs.core.presets import (
    get_preset,
    list_presets,
    load_cluster,
    register_cluster_scheme,
)
from placegym.envs.mdp.env import PlacementEnv
from placegym.envs.mdp.registration import ENV_IDS, REAL_ENV_IDS, register_envs
from placegym.envs.mdp.sources import WorkloadSampler
from placegym.envs.sim.simulator import (
    BatchResult,
    Schedule,
    TransferTrace,
    simulate,
    simulate_batch,
    simulate_makespan,
)

# the accelerators of a vendored published workload, read by its importer on first use
register_cluster_scheme(
    "dnn-partitioning:", "placegym.envs.importers.dnn_partitioning:published_cluster"
)
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
    "register_cluster_scheme",
    "register_envs",
    "simulate",
    "simulate_batch",
    "simulate_makespan",
]
