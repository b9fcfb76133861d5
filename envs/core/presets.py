"""Cluster presets, and :func:`load_cluster` (a preset name, a dict or a JSON file).
Each number carries its source.

Compute rates are the peak of the precision the preset models: FP32 for the DOPPLER-era
PCIe/NVLink machines (``p100x4``, ``v100x8``; DOPPLER's kernels are float32), dense
BF16 tensor-core peak for the LLM-scale presets (``h100*``, ``tpuv4*``, as in NEST).
Bandwidths are effective per direction of one channel; every preset has paths
``[rack, node]`` and three levels (intra-node, intra-rack, inter-rack), so hierarchical
teachers see one shape everywhere.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from functools import cache, partial
from pathlib import Path
from typing import Any

from placegym.envs.core import validate as V
from placegym.envs.core.cluster import Cluster, Device, Level

GB = 1e9

# P100 PCIe 16 GB (NVIDIA Tesla P100 datasheet): 9.3 TFLOP/s FP32, 732 GB/s HBM2, 16 GB.
# Kernel launch ~5 us (CUDA launch latency). PCIe 3.0 x16: 15.75 GB/s raw, ~12 GB/s
# achieved by cudaMemcpyPeer; the outer levels (100 GbE / EDR IB, oversubscribed uplink)
# only matter for multi-node variants. These are the numbers of DESIGN §2's example.
_P100 = Device("gpu", flops=9.3e12, memory=16 * GB, mem_bandwidth=732 * GB, launch_overhead=5e-6)
_PCIE_LEVELS = (
    Level("intra-node", bandwidth=12 * GB, latency=5e-6),
    Level("intra-rack", bandwidth=12.5 * GB, latency=1e-5),
    Level("inter-rack", bandwidth=6.25 * GB, latency=2e-5),
)

# V100 SXM2 16 GB (NVIDIA Tesla V100 datasheet): 15.7 TFLOP/s FP32, 900 GB/s HBM2.
# DGX-1V hybrid cube-mesh (`nvidia-smi topo -m` on a DGX-1V; DGX-1 system architecture
# white paper): NVLink 2.0 is 25 GB/s per direction per link; pairs joined by two links
# (NV2) get 50 GB/s, by one link (NV1) 25 GB/s, the rest go over PCIe and the QPI
# socket link (SYS), ~10 GB/s effective peer-to-peer.
_V100 = Device("gpu", flops=15.7e12, memory=16 * GB, mem_bandwidth=900 * GB, launch_overhead=5e-6)
_DGX1_LEVELS = (
    Level("nvlink-x2", bandwidth=50 * GB, latency=3e-6),
    Level("nvlink-x1", bandwidth=25 * GB, latency=3e-6),
    Level("pcie-qpi", bandwidth=10 * GB, latency=1e-5),
)
# Row a, column b: 0 = NV2, 1 = NV1, 2 = SYS (from `nvidia-smi topo -m`, DGX-1V).
_DGX1_TOPO = (
    "X 1 1 0 0 2 2 2",
    "1 X 0 1 2 0 2 2",
    "1 0 X 0 2 2 1 2",
    "0 1 0 X 2 2 2 1",
    "0 2 2 2 X 1 1 0",
    "2 0 2 2 1 X 0 1",
    "2 2 1 2 1 0 X 0",
    "2 2 2 1 0 1 0 X",
)
DGX1_LEVEL_MATRIX = tuple(
    tuple(0 if x == "X" else int(x) for x in row.split()) for row in _DGX1_TOPO
)

# H100 SXM5 80 GB (NVIDIA H100 datasheet): 989 TFLOP/s dense BF16, 3.35 TB/s HBM3.
# NVLink 4 through NVSwitch: 900 GB/s bidirectional per GPU = 450 GB/s per direction.
# Between nodes: one ConnectX-7 NDR InfiniBand port per GPU, 400 Gb/s = 50 GB/s.
_H100 = Device("gpu", flops=989e12, memory=80 * GB, mem_bandwidth=3350 * GB, launch_overhead=4e-6)
_DGX_H100_LEVELS = (
    Level("nvswitch", bandwidth=450 * GB, latency=3e-6),
    Level("infiniband", bandwidth=50 * GB, latency=1e-5),
    Level("infiniband-spine", bandwidth=50 * GB, latency=1.5e-5),
)

# NEST (MLSys 2026) evaluation settings: 8 devices per node, 4 nodes per rack, N/32 racks;
# per-level latency 1e-4 / 2e-4 / 3e-4 s (intra-node / intra-rack / inter-rack).
# TPU v4 fat-tree: 900 / 100 / 400 GB/s per level, 64 GB HBM per device (NEST's setting);
# 275 TFLOP/s BF16 and 1.2 TB/s HBM from the TPU v4 paper (Jouppi et al., ISCA 2023).
# H100 spine-leaf: 900 / 12.5 / 50 GB/s per level, 90 GB HBM per device (NEST's setting);
# compute and HBM bandwidth as the H100 SXM5 above.
_NEST_LATENCY = (1e-4, 2e-4, 3e-4)
_TPUV4 = Device("tpu", flops=275e12, memory=64 * GB, mem_bandwidth=1200 * GB, launch_overhead=5e-6)
_H100_NEST = Device(
    "gpu", flops=989e12, memory=90 * GB, mem_bandwidth=3350 * GB, launch_overhead=4e-6
)

# DOPPLER's public graph files give per-vertex costs in abstract units (comp_cost,
# comm_cost; see placegym.envs.importers.doppler). Devices of 1e10 FLOP/s and links of
# 1e10 B/s at every level, no latency, launch overhead or roofline term, and memory that
# never binds make a simulated second equal 1e10 of those units, DOPPLER's cost model.
_DOPPLER_UNIT = Device("gpu", flops=1e10, memory=1e18, launch_overhead=0.0)
_DOPPLER_LEVELS = tuple(
    Level(nm, bandwidth=1e10) for nm in ("intra-node", "intra-rack", "inter-rack")
)


def _nest_levels(bandwidths_gb: tuple[float, float, float]) -> tuple[Level, ...]:
    names = ("intra-node", "intra-rack", "inter-rack")
    return tuple(
        Level(nm, bw * GB, lat)
        for nm, bw, lat in zip(names, bandwidths_gb, _NEST_LATENCY, strict=True)
    )


def _nest(device: Device, bandwidths_gb: tuple[float, float, float], n: int, name: str):
    return lambda: Cluster.homogeneous(
        device, n, _nest_levels(bandwidths_gb), per_node=8, nodes_per_rack=4, name=name
    )


PRESETS: dict[str, tuple[str, Callable[[], Cluster]]] = {
    "p100x4": (
        "4x P100 16 GB over PCIe 3.0 (DOPPLER's setting)",
        lambda: Cluster.homogeneous(_P100, 4, _PCIE_LEVELS, name="p100x4"),
    ),
    "p100x2": (
        "2x P100 16 GB over PCIe 3.0 (p100x4's links, 2 devices)",
        lambda: Cluster.homogeneous(_P100, 2, _PCIE_LEVELS, name="p100x2"),
    ),
    "p100x8": (
        "8x P100 16 GB over PCIe 3.0 in one server (p100x4's links, 8 devices)",
        lambda: Cluster.homogeneous(_P100, 8, _PCIE_LEVELS, name="p100x8"),
    ),
    "v100x8": (
        "DGX-1V: 8x V100 16 GB, NVLink hybrid cube-mesh (level_matrix)",
        lambda: Cluster.homogeneous(
            _V100, 8, _DGX1_LEVELS, name="v100x8", level_matrix=DGX1_LEVEL_MATRIX
        ),
    ),
    "h100x8": (
        "DGX H100: 8x H100 80 GB on NVSwitch",
        lambda: Cluster.homogeneous(_H100, 8, _DGX_H100_LEVELS, per_node=8, name="h100x8"),
    ),
    "h100-2x8": (
        "2 DGX H100 nodes (16x H100) over NDR InfiniBand",
        lambda: Cluster.homogeneous(_H100, 16, _DGX_H100_LEVELS, per_node=8, name="h100-2x8"),
    ),
}
for _n in (4, 8):
    PRESETS[f"doppler-unit-{_n}"] = (
        f"{_n} devices in DOPPLER's cost units (1e10 FLOP/s, 1e10 B/s, no latency)",
        partial(
            Cluster.homogeneous, _DOPPLER_UNIT, _n, _DOPPLER_LEVELS, name=f"doppler-unit-{_n}"
        ),
    )
for _n in (64, 1024):
    PRESETS[f"tpuv4-fattree-{_n}"] = (
        f"NEST: {_n}x TPU v4, fat-tree, {_n // 32} racks",
        _nest(_TPUV4, (900, 100, 400), _n, f"tpuv4-fattree-{_n}"),
    )
    PRESETS[f"h100-spineleaf-{_n}"] = (
        f"NEST: {_n}x H100, spine-leaf, {_n // 32} racks",
        _nest(_H100_NEST, (900, 12.5, 50), _n, f"h100-spineleaf-{_n}"),
    )


@cache
def get_preset(name: str) -> Cluster:
    """The preset cluster ``name`` (built once, immutable)."""
    if name not in PRESETS:
        raise ValueError(f"cluster: unknown preset {name!r} (presets: {', '.join(PRESETS)})")
    return PRESETS[name][1]()


def list_presets() -> list[tuple[str, str]]:
    """``(name, description)`` for every preset."""
    return [(k, desc) for k, (desc, _) in PRESETS.items()]


#: Loaders of cluster sources ``"<scheme>:<rest>"``: scheme (with its colon) -> the
#: loader's ``"module:function"``, imported on first use, so that a scheme's format stays
#: in its own band. :mod:`placegym.envs` registers ``"dnn-partitioning:"`` (the
#: accelerators of a vendored published workload,
#: :func:`placegym.envs.importers.dnn_partitioning.published_cluster`).
CLUSTER_SCHEMES: dict[str, str] = {}


def register_cluster_scheme(scheme: str, loader: str) -> None:
    """Let :func:`load_cluster` read ``"<scheme><rest>"`` with ``loader(rest)``.

    Args:
        scheme: the prefix, ending in ``":"`` (e.g. ``"dnn-partitioning:"``).
        loader: ``"module:function"``; the function takes the rest of the source and
            returns a :class:`Cluster` (it is imported on the first such source).

    Raises:
        ValueError: a scheme without its colon, or a loader not written module:function.
    """
    if not isinstance(scheme, str) or not scheme.endswith(":") or len(scheme) < 2:
        raise V.fail("scheme", "expected a prefix ending in ':'", scheme)
    if not isinstance(loader, str) or loader.count(":") != 1:
        raise V.fail("loader", "expected 'module:function'", loader)
    CLUSTER_SCHEMES[scheme] = loader


def _from_scheme(source: str) -> Cluster | None:
    for scheme, loader in CLUSTER_SCHEMES.items():
        if source.startswith(scheme):
            module, _, attr = loader.partition(":")
            load: Callable[[str], Cluster] = getattr(importlib.import_module(module), attr)
            return load(source[len(scheme) :])
    return None


def load_cluster(source: Cluster | str | os.PathLike[str] | Mapping[str, Any]) -> Cluster:
    """Load a cluster from a :class:`Cluster`, a preset name (see ``placegym clusters``),
    ``"dnn-partitioning:<file>"`` (the accelerators of a vendored published workload; any
    scheme of :data:`CLUSTER_SCHEMES`), a dict, or a JSON file path."""
    if isinstance(source, Cluster):
        return source
    if isinstance(source, str) and source in PRESETS:
        return get_preset(source)
    if isinstance(source, str) and (schemed := _from_scheme(source)) is not None:
        return schemed
    if isinstance(source, str) and not Path(source).exists() and not source.endswith(".json"):
        raise ValueError(
            f"cluster: unknown preset or file {source!r} (presets: {', '.join(PRESETS)})"
        )
    return V.load_document(source, "cluster", Cluster.from_dict)
