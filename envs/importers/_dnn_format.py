"""Reading a dnn-partitioning workload document: one check per field, nodes in list
order (the format and its rules: :mod:`placegym.envs.importers.dnn_partitioning`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placegym.envs.core import validate as V
from placegym.envs.importers._common import find_cycle

__all__ = ["DnnDocument", "label", "parse"]


@dataclass(frozen=True)
class DnnDocument:
    """A checked workload document, nodes in list order."""

    ids: list[int]
    names: list[str | None]
    ms: list[float]
    cpu_ms: list[float]
    size: list[float]
    backward: list[bool]
    color: list[int | None]
    layer: list[int]
    edges: list[tuple[int, int]]
    out_cost: list[float | None]  # ms, None for a sink
    out_sizes: list[list[float]]  # the sizes of each node's out-edges, edge order
    ratios: list[float]  # size / cost of each edge with both > 0, edge order
    capacity: float
    count: int
    max_cpus: int

    @property
    def index(self) -> dict[int, int]:
        return {nid: i for i, nid in enumerate(self.ids)}


def _flag(value: Any, where: str) -> bool:
    """A boolean written as ``true``/``false`` or ``0``/``1``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise V.fail(where, "expected true/false or 0/1", value)


def parse(data: Mapping[str, Any]) -> DnnDocument:
    data = V.as_mapping(data, "workload")
    capacity = V.number(V.get(data, "maxSizePerFPGA", ""), "maxSizePerFPGA", positive=True)
    count = V.integer(V.get(data, "maxFPGAs", ""), "maxFPGAs", lo=1)
    V.size(count, "maxFPGAs", V.DEVICE_LIMIT)
    max_cpus = V.integer(V.get(data, "maxCPUs", ""), "maxCPUs", lo=0)
    V.size(max_cpus, "maxCPUs", V.DEVICE_LIMIT)
    nodes = V.as_list(V.get(data, "nodes", ""), "nodes")
    edges = V.as_list(V.get(data, "edges", ""), "edges")
    index: dict[int, int] = {}
    ids: list[int] = []
    names: list[str | None] = []
    ms: list[float] = []
    cpu_ms: list[float] = []
    size: list[float] = []
    backward: list[bool] = []
    color: list[int | None] = []
    layer: list[int] = []
    for i, raw in enumerate(nodes):
        w = f"nodes[{i}]"
        nd = V.as_mapping(raw, w)
        nid = V.integer(V.get(nd, "id", w), f"{w}.id", lo=0)
        if nid in index:
            raise V.fail(f"{w}.id", f"duplicate node id (nodes[{index[nid]}] has it too)", nid)
        index[nid] = i
        name = nd.get("name")
        if name is not None and not isinstance(name, str):
            raise V.fail(f"{w}.name", "expected a string", name)
        if not _flag(V.get(nd, "supportedOnFpga", w), f"{w}.supportedOnFpga"):
            raise V.fail(
                f"{w}.supportedOnFpga",
                f"node id {nid} cannot run on an accelerator, and a graph cannot keep a node "
                "off a device",
                nd["supportedOnFpga"],
            )
        cpu_ms.append(V.number(V.get(nd, "cpuLatency", w), f"{w}.cpuLatency"))
        ms.append(V.number(V.get(nd, "fpgaLatency", w), f"{w}.fpgaLatency"))
        backward.append(_flag(V.get(nd, "isBackwardNode", w), f"{w}.isBackwardNode"))
        size.append(V.number(V.get(nd, "size", w), f"{w}.size"))
        cc = nd.get("colorClass")
        color.append(None if cc is None else V.integer(cc, f"{w}.colorClass", lo=0))
        lay = nd.get("layerId")
        layer.append(-1 if lay is None else V.integer(lay, f"{w}.layerId", lo=0))
        ids.append(nid)
        names.append(name)
    n = len(ids)
    pairs: list[tuple[int, int]] = []
    seen: dict[tuple[int, int], int] = {}
    out_cost: list[float | None] = [None] * n
    first_edge = [-1] * n
    out_sizes: list[list[float]] = [[] for _ in range(n)]
    ratios: list[float] = []
    for k, raw in enumerate(edges):
        w = f"edges[{k}]"
        e = V.as_mapping(raw, w)
        ends = []
        for key in ("sourceId", "destId"):
            x = V.integer(V.get(e, key, w), f"{w}.{key}")
            if x not in index:
                raise V.fail(f"{w}.{key}", "no node has this id", x)
            ends.append(x)
        src, dst = ends
        if src == dst:
            raise V.fail(w, f"self-loop on node id {src}", dict(e))
        pair = (index[src], index[dst])
        if pair in seen:
            raise V.fail(w, f"duplicate of edges[{seen[pair]}] ({src} -> {dst})", dict(e))
        seen[pair] = k
        cost = V.number(V.get(e, "cost", w), f"{w}.cost")
        u = pair[0]
        if out_cost[u] is None:
            out_cost[u], first_edge[u] = cost, k
        elif out_cost[u] != cost:
            raise V.fail(
                f"{w}.cost",
                f"node id {src} ({label(names[u], src)}) sends its output at cost "
                f"{out_cost[u]} on edges[{first_edge[u]}]: every edge out of a node must "
                "have the same cost",
                cost,
            )
        if e.get("size") is not None:
            esize = V.number(e["size"], f"{w}.size")
            out_sizes[u].append(esize)
            if esize > 0 and cost > 0:
                ratios.append(esize / cost)
        pairs.append(pair)
    _check_acyclic(n, pairs, ids)
    return DnnDocument(
        ids,
        names,
        ms,
        cpu_ms,
        size,
        backward,
        color,
        layer,
        pairs,
        out_cost,
        out_sizes,
        ratios,
        capacity,
        count,
        max_cpus,
    )


def label(name: str | None, nid: int) -> str:
    return repr(name) if name is not None else f"'node{nid}'"


def _check_acyclic(n: int, pairs: list[tuple[int, int]], ids: list[int]) -> None:
    """Raise naming the file's node ids along a cycle of the edges, if there is one."""
    edges = find_cycle(n, pairs)
    if edges is None:
        return
    cycle = [ids[pairs[k][1]] for k in edges]
    raise ValueError(
        f"edges: the graph has a cycle through node ids {' -> '.join(map(str, cycle))} "
        f"-> {cycle[0]}"
    )
