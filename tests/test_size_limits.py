"""Size limits: a small file asking for a huge graph or cluster gets one clear line,
checked before anything of that size is allocated."""

import json

import numpy as np
import pytest

from placegym.envs import Cluster, Device, Graph, Level, load_cluster
from placegym.envs.core import validate as V
from placegym.envs.importers.dnn_partitioning import parse_dnn_partitioning


def test_a_cluster_of_too_many_devices_is_refused_in_one_line():
    doc = {
        "format": "placegym.cluster/v1",
        "devices": [{"flops": 1e12, "memory": 1e9}] * (V.DEVICE_LIMIT + 1),
        "levels": [{"name": "link", "bandwidth": 1e9, "latency": 0.0}],
    }
    with pytest.raises(ValueError, match=r"^devices: 4,097 is over the limit of 4,096$"):
        load_cluster(doc)
    ok = Cluster(devices=(Device("gpu", 1e12, 1e9),) * 8, levels=(Level("link", 1e9, 0.0),))
    assert ok.num_devices == 8


def test_a_graph_over_the_node_or_edge_limit_is_refused(monkeypatch):
    monkeypatch.setattr(V, "NODE_LIMIT", 3)
    monkeypatch.setattr(V, "EDGE_LIMIT", 2)
    with pytest.raises(ValueError, match=r"^nodes: 4 is over the limit of 3$"):
        Graph(flops=np.ones(4), out_bytes=np.zeros(4), edges=[])
    with pytest.raises(ValueError, match=r"^edges: 3 is over the limit of 2$"):
        Graph(flops=np.ones(3), out_bytes=np.zeros(3), edges=[[0, 1], [1, 2], [0, 2]])
    assert Graph(flops=np.ones(3), out_bytes=np.zeros(3), edges=[[0, 1], [1, 2]]).num_edges == 2


def test_a_tiny_dnn_partitioning_file_asking_for_a_billion_accelerators_fails_at_once():
    doc = {
        "maxFPGAs": 10**9,
        "maxCPUs": 0,
        "maxSizePerFPGA": 1000.0,
        "nodes": [
            {
                "id": 0,
                "supportedOnFpga": 1,
                "cpuLatency": 1.0,
                "fpgaLatency": 1.0,
                "isBackwardNode": 0,
                "size": 1.0,
            }
        ],
        "edges": [],
    }
    with pytest.raises(ValueError, match=r"maxFPGAs: 1,000,000,000 is over the limit of 4,096"):
        parse_dnn_partitioning(json.loads(json.dumps(doc)))
