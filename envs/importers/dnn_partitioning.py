"""Import the dnn-partitioning workloads (Tarnawski et al., NeurIPS 2020) and their expert splits.

The published files of "Efficient Algorithms for Device Placement of DNN Graph Operators"
ship with placegym (:data:`DATA_DIR`, MIT licence, provenance in its ``README.md``): 24
workloads (:data:`INPUTS`) and 6 human-expert splits (:data:`EXPERTS`). One workload is
one JSON object::

    {"maxSizePerFPGA": 629145600.0, "maxFPGAs": 5, "maxCPUs": 8,
     "nodes": [{"id": 3, "name": "node3", "supportedOnFpga": 1, "cpuLatency": 6.96,
                "fpgaLatency": 0.696, "isBackwardNode": false, "colorClass": 3,
                "layerId": 3, "size": 131325952.0}, ...],
     "edges": [{"sourceId": 3, "destId": 5, "cost": 1.953125, "size": 4194304.0}, ...]}

:func:`from_dnn_partitioning` turns it into a :class:`~placegym.envs.core.graph.Graph`
(``placegym.graph/v2``) and a :class:`~placegym.envs.core.cluster.Cluster` by these rules:

- Nodes: one per entry of ``nodes``, in the file's list order (node ``i`` is
  ``nodes[i]``). The file's ids need not be contiguous or sorted; :func:`node_index`
  gives the id -> node map, and each node's ``spec`` is ``{"kind": "opaque",
  "source_id": <the file's id>}`` (the files carry times, not kernels), so a saved graph
  keeps the ids. Edges keep the file's order. Graph and cluster are named by
  :func:`dnn_partitioning_name` (``throughput-layer-bert24_training``).
- ``op`` is the node's ``name`` when present, else ``"node<id>"``; a backward node
  (``isBackwardNode`` true) gets the prefix ``"bw:"`` (``"bw:node3grad"``). This is
  informational only. ``layer`` is ``layerId`` when present, else none.
- Time: ``fpgaLatency`` (milliseconds) / 1000 is the node's measured ``time`` in seconds,
  the same on every accelerator (not a roofline estimate); ``flops`` is 0. With CPU
  devices (``cpus > 0``, below) the time is per device kind instead (``placegym.graph/v2``
  ``{"accelerator": fpgaLatency / 1000, "cpu": cpuLatency / 1000}``, no default).
- Memory: ``size`` is the bytes the node takes on an accelerator, its output included
  (in the activation-heavy files ``size`` equals the out-edge ``size``: ResNet50's and
  InceptionV3's layer graphs sum to within 1% of their outputs). The simulator counts an
  output while it lives (DESIGN §3), so the resident ``param_bytes`` is the rest:
  ``max(size - out_bytes, 0)``; a sink (``out_bytes`` 0) keeps its whole ``size``.
  Counting ``size`` as resident too would hold every output twice.
- Co-location: each ``colorClass`` shared by two or more nodes becomes a ``group``,
  numbered 0, 1, ... in order of first appearance in ``nodes``; a node alone in its class,
  or without one, is in no group.
- Cluster: ``maxFPGAs`` identical accelerators ``acc0 ... acc{k-1}`` with ``memory =
  maxSizePerFPGA``, launch overhead 0, no device ``kind``, and a nominal
  :data:`NOMINAL_FLOPS` (unused: every node has a measured time). By default
  (``cpus=0``) CPUs are not modelled: ``maxCPUs`` and ``cpuLatency`` are checked and
  ignored. ``cpus=N`` (or ``"file"``: the file's ``maxCPUs``) adds N CPU devices ``cpu0
  ... cpu{N-1}`` after the accelerators, of kind :data:`CPU_KIND` (the accelerators then
  have kind :data:`ACCELERATOR_KIND`), nominal FLOP/s and launch overhead 0, each of
  memory ``cpu_memory``: the format gives CPUs no memory limit (its solvers bound only
  the accelerators), so the default is the graph's resident plus output bytes, which no
  placement can exceed. A node with ``supportedOnFpga`` false is refused either way
  (a graph cannot forbid a device to a node); the published files have none.
- Link: one network level of latency 0 and bandwidth ``B`` (bytes per second), fitted so
  that every edge's ``cost`` (milliseconds to move the producer's output, which must be
  the same on every edge out of a node) is reproduced: ``B`` is 1000 times the ratio
  ``size / cost`` shared by the most edges with a positive ``size`` and ``cost`` (ties:
  the ratio seen first, in edge order), or :data:`DEFAULT_BANDWIDTH` when no edge has
  both. A producer's ``out_bytes`` is the ``size`` of its first out-edge whose ``size /
  B`` equals ``cost / 1000`` exactly (so it equals the edge size wherever the file's
  ratio holds), else ``cost x B / 1000``, moved by up to two units in the last place
  where that makes ``out_bytes / B`` equal ``cost / 1000`` exactly; a sink's is 0. A
  transfer then takes exactly ``cost / 1000`` seconds on every edge of the published
  files. In them ``B`` is 2^31 B/s (the latency inputs and all operator graphs) or
  1000 x 2^31 B/s (the throughput layer graphs). With CPU devices the accelerators have
  paths ``[0] ... [k-1]`` and every CPU the path ``[k]`` (one host); pairs on one host
  are level 0, ``"host"`` (latency 0, :data:`HOST_BANDWIDTH`: CPU cores share memory,
  as the upstream solvers charge nothing between them), every other pair level 1, the
  link above (CPU <-> accelerator transfers cost the edge's ``cost``).

:func:`expert_placement` reads a split ``{"cpus": [{"nodes": [...]}, ...], "fpgas":
[{"nodes": [ids]}, ...]}`` of a workload:

- the nodes of ``fpgas[k]`` go on accelerator ``k``; a split that puts nodes on an
  accelerator ``k >= maxFPGAs`` is refused, as is any node listed under ``cpus`` (the
  published splits list none, and the format does not say which CPU core runs what);
- a node the split does not list takes the accelerator of its co-location group. This is
  how a training workload uses its inference split: its forward nodes have the inference
  graph's ids, and each backward node shares its forward node's ``colorClass`` (in the
  published files the training experts are exactly this). A node that is neither listed
  nor grouped with a listed node, and a group whose listed nodes are on two accelerators,
  are refused;
- the priority order is descending :func:`~placegym.envs.analysis.levels.b_level` on the
  imported cluster (the critical-path order), ties by node index.

:func:`expert_for` names the split of each published workload that has one.

Errors are ``ValueError`` naming the file, the field and the bad value, one per problem
(``PATH: nodes[3].fpgaLatency: must be >= 0, got -1``): a missing field, a wrong type, a
negative number, a duplicate node id, an edge endpoint that is no node's id, a
self-loop, a duplicate edge, out-edges of one node with different costs, a cycle.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs.core import validate as V
from placegym.envs.core.cluster import Cluster, Device, Level
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.importers._dnn_format import DnnDocument, label, parse

__all__ = [
    "ACCELERATOR_KIND",
    "CPU_KIND",
    "DATA_DIR",
    "DEFAULT_BANDWIDTH",
    "EXPERTS",
    "HOST_BANDWIDTH",
    "INPUTS",
    "NOMINAL_FLOPS",
    "ExpertPlacer",
    "dnn_partitioning_name",
    "expert_for",
    "expert_placement",
    "from_dnn_partitioning",
    "node_index",
    "parse_dnn_partitioning",
]

#: The vendored data set (package data of ``placegym.envs.suites``).
DATA_DIR = Path(__file__).resolve().parents[1] / "suites" / "data" / "dnn-partitioning"

#: Link bandwidth (bytes/s) when no edge gives both a size and a cost: 2 GiB/s, the
#: fitted bandwidth of the latency inputs.
DEFAULT_BANDWIDTH = float(2**31)

#: FLOP/s of the imported accelerators; unused, since every node has a measured time.
NOMINAL_FLOPS = 1e12

#: Device kinds of the accelerators and the CPUs when CPU devices are imported.
ACCELERATOR_KIND, CPU_KIND = "accelerator", "cpu"

#: Bytes/s between two CPU devices (one host, shared memory): a GB moves in 1e-21 s.
HOST_BANDWIDTH = 1e30

_LAYER = "latency-inputs/LayerGraphs"
_LAYER_T = "throughput-inputs/LayerGraphs"
_OPS = "latency-inputs/OperatorGraphs"
_OPS_T = "throughput-inputs/OperatorGraphs"

#: The 24 workloads, relative to :data:`DATA_DIR`.
INPUTS: tuple[str, ...] = (
    *(f"{_LAYER}/{m}_inference.json" for m in ("bert24", "gnmt", "inceptionv3", "resnet50")),
    *(f"{_OPS}/{m}_inference.json" for m in ("bert_l-12", "bert_l-3", "bert_l-6", "resnet50")),
    *(
        f"{_LAYER_T}/{m}_{mode}.json"
        for m in ("bert24", "gnmt", "inceptionv3", "resnet50")
        for mode in ("inference", "training")
    ),
    f"{_OPS_T}/bert_L-12_training.json",
    f"{_OPS_T}/bert_l-12_inference.json",
    *(
        f"{_OPS_T}/{m}_{mode}.json"
        for m in ("bert_l-3", "bert_l-6", "resnet50")
        for mode in ("inference", "training")
    ),
)

#: The expert split of each workload that has one (paths relative to :data:`DATA_DIR`).
#: The splits use 6 accelerators: the latency bert24 layer graph (5 accelerators) has
#: none. InceptionV3 and ResNet50 training use their inference split (module docstring).
EXPERTS: dict[str, str] = {
    f"{_LAYER}/gnmt_inference.json": "human-experts/gnmt_inference_expert.json",
    f"{_LAYER}/inceptionv3_inference.json": "human-experts/inceptionv3_inference_expert.json",
    f"{_LAYER}/resnet50_inference.json": "human-experts/resnet50_inference_expert.json",
    f"{_LAYER_T}/bert24_inference.json": "human-experts/bert24_inference_expert.json",
    f"{_LAYER_T}/bert24_training.json": "human-experts/bert24_training_expert.json",
    f"{_LAYER_T}/gnmt_inference.json": "human-experts/gnmt_inference_expert.json",
    f"{_LAYER_T}/gnmt_training.json": "human-experts/gnmt_training_expert.json",
    f"{_LAYER_T}/inceptionv3_inference.json": "human-experts/inceptionv3_inference_expert.json",
    f"{_LAYER_T}/inceptionv3_training.json": "human-experts/inceptionv3_inference_expert.json",
    f"{_LAYER_T}/resnet50_inference.json": "human-experts/resnet50_inference_expert.json",
    f"{_LAYER_T}/resnet50_training.json": "human-experts/resnet50_inference_expert.json",
}

_SETTINGS = ("latency-inputs", "throughput-inputs")
_KINDS = ("LayerGraphs", "OperatorGraphs")


# ------------------------------------------------------------------ conversion
def _bandwidth(inst: DnnDocument) -> float:
    """Bytes/s: 1000 x the most common ``size / cost`` of the edges (module docstring)."""
    if not inst.ratios:
        return DEFAULT_BANDWIDTH
    # most_common lists equal counts in first-seen order: ties go to the first edge
    return Counter(inst.ratios).most_common(1)[0][0] * 1000.0


def _out_bytes(cost_ms: float | None, sizes: list[float], bandwidth: float) -> float:
    """Bytes whose transfer at ``bandwidth`` takes ``cost_ms / 1000`` seconds exactly."""
    if not cost_ms:
        return 0.0
    seconds = cost_ms / 1000.0
    for s in sizes:
        if s / bandwidth == seconds:
            return s
    x = cost_ms * (bandwidth / 1000.0)
    lo = hi = x
    candidates = [x]
    for _ in range(2):  # x's neighbours within two units in the last place
        hi, lo = math.nextafter(hi, math.inf), math.nextafter(lo, 0.0)
        candidates += [hi, lo]
    return next((c for c in candidates if c / bandwidth == seconds), x)


def _groups(color: list[int | None]) -> list[int]:
    """Group id per node: classes of 2+ nodes, numbered by first appearance; -1 else."""
    counts = Counter(c for c in color if c is not None)
    number: dict[int, int] = {}
    out = []
    for c in color:
        if c is None or counts[c] < 2:
            out.append(-1)
        else:
            out.append(number.setdefault(c, len(number)))
    return out


def _cpu_count(cpus: int | str, inst: DnnDocument) -> int:
    """The number of CPU devices ``cpus`` asks for (``"file"``: the file's ``maxCPUs``)."""
    if cpus == "file":
        return inst.max_cpus
    if isinstance(cpus, str):
        raise V.fail("cpus", "expected a number of CPU devices >= 0 or 'file'", cpus)
    return V.integer(cpus, "cpus", lo=0)


def _build(
    inst: DnnDocument, name: str, cpus: int | str = 0, cpu_memory: float | None = None
) -> tuple[Graph, Cluster]:
    n_cpu = _cpu_count(cpus, inst)
    if cpu_memory is not None:
        cpu_memory = V.number(cpu_memory, "cpu_memory", positive=True)
    bandwidth = _bandwidth(inst)
    n = len(inst.ids)
    seconds = [t / 1000.0 for t in inst.ms]
    cpu_seconds = [t / 1000.0 for t in inst.cpu_ms]
    ops = []
    for nid, nm, bw in zip(inst.ids, inst.names, inst.backward, strict=True):
        op = nm if nm is not None else f"node{nid}"
        ops.append(f"bw:{op}" if bw else op)
    out = np.array([_out_bytes(inst.out_cost[u], inst.out_sizes[u], bandwidth) for u in range(n)])
    graph = Graph(
        flops=np.zeros(n),
        out_bytes=out,
        param_bytes=np.maximum(np.asarray(inst.size, dtype=np.float64) - out, 0.0),
        edges=np.array(inst.edges, dtype=np.int64).reshape(-1, 2),
        layer=inst.layer,
        op=ops,
        spec=[{"kind": "opaque", "source_id": nid} for nid in inst.ids],
        name=name,
        time=None if n_cpu else seconds,
        group=_groups(inst.color),
        kind_time={ACCELERATOR_KIND: seconds, CPU_KIND: cpu_seconds} if n_cpu else None,
    )
    link = Level("link", bandwidth, 0.0)
    if not n_cpu:
        devices = tuple(Device(f"acc{k}", NOMINAL_FLOPS, inst.capacity) for k in range(inst.count))
        return graph, Cluster(devices=devices, levels=(link,), name=name)
    memory = cpu_memory or max(1.0, float(graph.param_bytes.sum() + graph.out_bytes.sum()))
    devices = (
        *(
            Device(f"acc{k}", NOMINAL_FLOPS, inst.capacity, path=(k,), kind=ACCELERATOR_KIND)
            for k in range(inst.count)
        ),
        *(
            Device(f"cpu{j}", NOMINAL_FLOPS, memory, path=(inst.count,), kind=CPU_KIND)
            for j in range(n_cpu)
        ),
    )
    host = Level("host", HOST_BANDWIDTH, 0.0)
    return graph, Cluster(devices=devices, levels=(host, link), name=name)


def _read(path: str | os.PathLike[str]) -> DnnDocument:
    return V.load_document(path, "dnn-partitioning workload", parse)


def dnn_partitioning_name(path: str | os.PathLike[str]) -> str:
    """The graph name of a workload file: its stem, prefixed by the setting and graph kind
    when the file sits in the upstream layout
    (``throughput-inputs/LayerGraphs/bert24_training.json`` ->
    ``throughput-layer-bert24_training``), so the 24 names are distinct."""
    p = Path(path)
    setting, kind = p.parent.parent.name, p.parent.name
    if setting in _SETTINGS and kind in _KINDS:
        return f"{setting.split('-')[0]}-{kind.removesuffix('Graphs').lower()}-{p.stem}"
    return p.stem


def parse_dnn_partitioning(
    data: Mapping[str, Any],
    name: str = "dnn-partitioning",
    *,
    cpus: int | str = 0,
    cpu_memory: float | None = None,
) -> tuple[Graph, Cluster]:
    """The graph and cluster of a parsed workload document (see the module docstring).

    Args:
        data: the workload's JSON object.
        name: the name of the graph and the cluster.
        cpus: CPU devices to add after the accelerators (``"file"``: ``maxCPUs``); 0
            models none, and the nodes' times are then the accelerators' alone.
        cpu_memory: bytes of each CPU device (default: the graph's resident plus output
            bytes, so CPUs never run out of memory, as in the format's model).

    Raises:
        ValueError: ``<field>: <problem>, got <value>`` (``cpus`` and ``cpu_memory`` too).
    """
    return _build(parse(data), name, cpus, cpu_memory)


def from_dnn_partitioning(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    cpus: int | str = 0,
    cpu_memory: float | None = None,
) -> tuple[Graph, Cluster]:
    """Read a dnn-partitioning workload file (see the module docstring).

    Args:
        path: the JSON file.
        name: the name of the graph and the cluster (default :func:`dnn_partitioning_name`).
        cpus: CPU devices to add, as in :func:`parse_dnn_partitioning`.
        cpu_memory: bytes of each CPU device, as in :func:`parse_dnn_partitioning`.

    Returns:
        The graph (nodes in the file's order) and its cluster: the accelerators, then
        the CPUs.

    Raises:
        FileNotFoundError: no such file.
        ValueError: ``PATH: <field>: <problem>, got <value>``.
    """
    return _build(_read(path), name or dnn_partitioning_name(path), cpus, cpu_memory)


#: Prefix of a cluster source naming a vendored published workload's accelerators:
#: ``"dnn-partitioning:<file under DATA_DIR>"`` (``load_cluster`` reads it through
#: :func:`published_cluster`).
PUBLISHED = "dnn-partitioning:"


@cache
def published_cluster(path: str) -> Cluster:
    """The cluster of the vendored published workload ``path`` (relative to
    :data:`DATA_DIR`): what ``load_cluster("dnn-partitioning:<path>")`` returns."""
    file = DATA_DIR / path
    if not file.is_file():
        raise ValueError(f"cluster: no published workload {path!r} under {DATA_DIR}")
    return from_dnn_partitioning(file)[1]


def node_index(path: str | os.PathLike[str]) -> dict[int, int]:
    """The file's node id -> node index (list position) map of a workload file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a valid workload.
    """
    return _read(path).index


# ------------------------------------------------------------------ expert splits
def _expert_devices(data: Mapping[str, Any], inst: DnnDocument, source: str) -> np.ndarray:
    """Accelerator of each node under an expert split (module docstring)."""
    data = V.as_mapping(data, "expert split")
    for k, raw in enumerate(V.as_list(data.get("cpus", []), "cpus")):
        w = f"cpus[{k}]"
        nodes = V.as_list(V.get(V.as_mapping(raw, w), "nodes", w), f"{w}.nodes")
        if nodes:
            raise V.fail(
                f"{w}.nodes", "nodes on CPUs cannot be placed (a split names no CPU device)", nodes
            )
    index = inst.index
    n = len(inst.ids)
    device = np.full(n, -1, dtype=np.int64)
    where: dict[int, str] = {}
    for k, raw in enumerate(V.as_list(V.get(data, "fpgas", ""), "fpgas")):
        w = f"fpgas[{k}]"
        nodes = V.as_list(V.get(V.as_mapping(raw, w), "nodes", w), f"{w}.nodes")
        if nodes and k >= inst.count:
            raise V.fail(
                f"{w}.nodes",
                f"accelerator {k} does not exist: {source} has maxFPGAs = {inst.count}",
                nodes,
            )
        for j, x in enumerate(nodes):
            wj = f"{w}.nodes[{j}]"
            nid = V.integer(x, wj)
            if nid not in index:
                raise V.fail(wj, f"no node of {source} has this id", nid)
            v = index[nid]
            if device[v] >= 0:
                raise V.fail(wj, f"node id {nid} is already placed by {where[v]}", nid)
            device[v], where[v] = k, wj
    groups = _groups(inst.color)
    group_dev: dict[int, tuple[int, int]] = {}  # group -> (device, the node that set it)
    for v in range(n):
        g = groups[v]
        if g < 0 or device[v] < 0:
            continue
        if g not in group_dev:
            group_dev[g] = (int(device[v]), v)
            continue
        d, u = group_dev[g]
        if d != device[v]:
            raise V.fail(
                where[v],
                f"node id {inst.ids[v]} is on accelerator {device[v]} but node id "
                f"{inst.ids[u]} of the same colorClass {inst.color[v]} is on accelerator "
                f"{d} ({where[u]}): a colour class shares one accelerator",
                inst.ids[v],
            )
    for v in np.flatnonzero(device < 0).tolist():
        g = groups[v]
        if g < 0 or g not in group_dev:
            raise ValueError(
                f"fpgas: node id {inst.ids[v]} ({label(inst.names[v], inst.ids[v])}) is "
                "on no accelerator: the split does not list it or any node of its colorClass"
            )
        device[v] = group_dev[g][0]
    return device


def expert_placement(
    graph_path: str | os.PathLike[str],
    expert_path: str | os.PathLike[str],
    *,
    cpus: int | str = 0,
    cpu_memory: float | None = None,
) -> Placement:
    """The placement of a workload under a human-expert split (module docstring).

    Args:
        graph_path: the workload file (as read by :func:`from_dnn_partitioning`).
        expert_path: the split, ``{"cpus": [...], "fpgas": [{"nodes": [ids]}, ...]}``.
        cpus: the CPU devices of the cluster the placement is for (as in
            :func:`from_dnn_partitioning`): the split uses only accelerators, but the
            priority order is the b-level on that cluster.
        cpu_memory: bytes of each CPU device of that cluster.

    Returns:
        Devices by the split, priority by descending b-level on the imported cluster
        (ties by node index).

    Raises:
        FileNotFoundError: either file is missing.
        ValueError: ``PATH: <field>: <problem>, got <value>`` for either file, naming the
            split's field for a node it cannot place.
    """
    from placegym.envs.analysis.levels import b_level

    inst = _read(graph_path)
    graph, cluster = _build(inst, dnn_partitioning_name(graph_path), cpus, cpu_memory)
    device = V.load_document(
        expert_path,
        "dnn-partitioning expert",
        lambda d: _expert_devices(d, inst, os.fspath(graph_path)),
    )
    level = b_level(graph, cluster)
    order = np.lexsort((np.arange(graph.num_nodes), -level))
    placement = Placement(device=device, order=order)
    placement.check(graph, cluster)
    return placement


def expert_for(workload: str | os.PathLike[str]) -> Path | None:
    """The expert split of a published workload, or None when it has none.

    Args:
        workload: a workload file in the upstream layout (its last three path parts, such
            as ``throughput-inputs/LayerGraphs/resnet50_training.json``, are matched), or
            its :func:`dnn_partitioning_name` (``throughput-layer-resnet50_training``).

    Returns:
        The split's path in :data:`DATA_DIR` (see :data:`EXPERTS`).
    """
    key = "/".join(Path(workload).parts[-3:])
    if key not in EXPERTS:
        by_name = {dnn_partitioning_name(k): k for k in EXPERTS}
        key = by_name.get(os.fspath(workload), key)
    rel = EXPERTS.get(key)
    return None if rel is None else DATA_DIR / rel


class ExpertPlacer:
    """The human-expert split of a published workload as a placer
    (``place(graph, cluster, seed)``, :mod:`placegym.benchmark`): the graph is recognised
    by its name (:func:`dnn_partitioning_name`, as the suites and the importer name it), the split
    is :func:`expert_placement`'s. ``placegym bench --suite published-v0 --placer
    placegym.envs.importers.dnn_partitioning:ExpertPlacer`` adds an ``expert`` column.

    Raises:
        ValueError: for a graph without an expert split (the benchmark marks its row
            failed) or whose cluster does not fit the split.
    """

    name = "expert"

    def place(self, graph: Any, cluster: Any, seed: int = 0) -> Placement:
        """The expert placement of ``graph`` (``seed`` is not used)."""
        expert = expert_for(graph.name)
        inputs = {dnn_partitioning_name(rel): rel for rel in INPUTS}
        if expert is None or graph.name not in inputs:
            raise ValueError(f"graph: no expert split for {graph.name!r}")
        placement = expert_placement(DATA_DIR / inputs[graph.name], expert)
        placement.check(graph, cluster)
        return placement
