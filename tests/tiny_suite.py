"""A two-instance suite for harness tests, registered for the test's duration by ``tiny``."""

import pytest

from placegym.envs.suites import InstanceSpec, Suite, catalog, workload

TINY = Suite(
    "tiny-v0",
    "two small instances",
    {
        "train": (InstanceSpec("dag@p100x4", workload("random_dag", nodes=24, seed=1), "p100x4"),),
        "test": (
            InstanceSpec(
                "dag-ccr4@doppler-unit-4",
                workload("random_dag", nodes=30, seed=2, ccr=4.0),
                "doppler-unit-4",
            ),
        ),
    },
)


@pytest.fixture
def tiny(monkeypatch):
    """:data:`TINY`, findable by ``get_suite("tiny-v0")`` (replay rebuilds through it)."""
    monkeypatch.setitem(catalog.SUITES, TINY.name, TINY)
    return TINY


# ---------------------------------------------------------------------- memory and groups
#: A hand-built fork-join of 8 unit kernels on two unit devices of 40 bytes: every kernel
#: holds 4 resident bytes and sends 6 (transfers dominate), nodes 0 and 4 form
#: co-location group 0. :data:`ZEROS` (one device) is the fastest placement and over
#: memory; :data:`SPLIT` splits the group; :data:`GOOD` (metis's map) is feasible.
EDGES = [(0, 1), (1, 2), (2, 3), (0, 4), (4, 5), (5, 6), (3, 7), (6, 7)]
ZEROS = [0] * 8
SPLIT = [0, 0, 0, 0, 1, 1, 1, 1]
GOOD = [1, 0, 0, 0, 1, 1, 1, 0]


def hand_graph(name: str, scale: float = 1.0, memory: float = 40.0):
    """``(graph, cluster)`` of the hand-built instance (``scale``: kernel FLOP)."""
    from simcases import unit_cluster

    from placegym.envs import Graph

    graph = Graph(
        flops=[scale] * 8,
        out_bytes=[6.0] * 8,
        param_bytes=[4.0] * 8,
        edges=EDGES,
        group=[0, -1, -1, -1, 0, -1, -1, -1],
        name=name,
    )
    return graph, unit_cluster(2, memory=memory)


class HandSuite(Suite):
    """A suite whose instances are :func:`hand_graph` (kernel FLOP by instance)."""

    def build(self, split, spec):
        from placegym.envs.suites import Instance

        graph, cluster = hand_graph(spec.id, SCALES[spec.id])
        return Instance(self.name, split, spec, graph, cluster)


SCALES = {"i0@unit": 1.0, "i1@unit": 1.5, "i2@unit": 2.0}
MEMORY = HandSuite(
    "tiny-memory-v0",
    "three hand-built instances where memory and a co-location group bind",
    {
        "train": (),
        "test": tuple(InstanceSpec(i, workload("hand"), "unit") for i in SCALES),
    },
)


class Fixed:
    """A placer of fixed device maps (by graph name, else ``default``), topological
    order: ``place(graph, cluster)``, and as a benchmark placer ``(graph, cluster, seed)``."""

    def __init__(self, default, **by_name):
        self.default, self.by_name = default, by_name

    def place(self, graph, cluster):
        import numpy as np

        from placegym.envs import Placement

        device = self.by_name.get(graph.name.split("@")[0], self.default)
        return Placement(device=np.array(device), order=graph.topological_order.copy())

    def __call__(self, graph, cluster, seed):
        return self.place(graph, cluster)


@pytest.fixture
def memory_suite(monkeypatch):
    """:data:`MEMORY`, findable by ``get_suite("tiny-memory-v0")``."""
    monkeypatch.setitem(catalog.SUITES, MEMORY.name, MEMORY)
    return MEMORY
