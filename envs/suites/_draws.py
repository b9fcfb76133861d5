"""The draws of :mod:`placegym.envs.suites.sampler`: graph families sized to a node count,
and clusters (heterogeneous accelerators in a rack / server hierarchy).

Every function takes the ``numpy`` Generator it draws from; the order of its draws is
fixed, so a seed gives the same graphs and clusters everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from placegym.envs.core.cluster import LINKS, Cluster, Device, Level
from placegym.envs.core.graph import Graph

Params = dict[str, Any]
#: A candidate size is accepted at once within this factor of the target node count.
TOLERANCE = 1.25
GB = 1e9


def log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    """A draw with ``log x`` uniform on ``[log lo, log hi]``."""
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _choice(rng: np.random.Generator, options: tuple[Any, ...]) -> Any:
    return options[int(rng.integers(len(options)))]


def _pick(
    rng: np.random.Generator, cands: list[tuple[int, Params]], target: int, lo: int, hi: int
) -> tuple[int, Params] | None:
    """One candidate ``(nodes, params)`` with nodes in ``[lo, hi]``: uniform among those
    within :data:`TOLERANCE` of ``target``, else the nearest (in log); None if none fits."""
    ok = [(n, p) for n, p in cands if lo <= n <= hi]
    if not ok:
        return None
    err = np.array([abs(math.log(n / target)) for n, _ in ok])
    near = np.flatnonzero(err <= math.log(TOLERANCE))
    return ok[int(rng.choice(near)) if near.size else int(np.argmin(err))]


def _solve(target: int, const: int, per: int, lo: int, hi: int) -> list[int]:
    """Repeat counts ``k`` in ``[lo, hi]`` around ``(target - const) / per``."""
    x = (target - const) / per
    return sorted({min(max(k, lo), hi) for k in (math.floor(x), math.ceil(x))})


# ----------------------------------------------------------------- generator families
def _random_dag(rng: np.random.Generator, target: int) -> list[tuple[int, Params]]:
    width = min(target, round(log_uniform(rng, 4, 64)))
    params = {
        "nodes": target,
        "width": max(1, width),
        "fan_in": round(float(rng.uniform(1.5, 3.5)), 2),
        "window": int(rng.integers(1, 5)),
        "rows": _choice(rng, (64, 128, 256, 512)),
        "dim": _choice(rng, (256, 512, 1024, 2048, 4096)),
        "dim_sigma": round(float(rng.uniform(0.2, 0.8)), 2),
        "seed": int(rng.integers(2**31 - 1)),
    }
    return [(target, params)]


def _chainmm(rng: np.random.Generator, target: int) -> list[tuple[int, Params]]:
    r = _choice(rng, (128, 256, 512, 1024))
    out = []
    for b in range(1, 9):  # nodes k·b² + (k − 1)(b³ + b²) = k(2b² + b³) − b³ − b²
        for k in _solve(target, -(b**3 + b**2), 2 * b * b + b**3, 2, 4000):
            n = k * b * b + (k - 1) * (b**3 + b * b)
            out.append((n, {"matrices": k, "blocks": b, "dim": b * r}))
    return out


def _ffnn(rng: np.random.Generator, target: int) -> list[tuple[int, Params]]:
    rows = _choice(rng, (64, 128, 256))
    widths = [_choice(rng, (512, 1024, 2048, 4096, 8192)) for _ in range(49)]
    out = []
    for rb in (1, 2, 4, 8):
        for fb in (1, 2, 4, 8, 16):  # nodes rb·fb·(1 + L·(fb + 1))
            per = rb * fb
            for layers in _solve(target, per, per * (fb + 1), 1, 48):
                params = {
                    "batch": rb * rows,
                    "dims": tuple(widths[: layers + 1]),
                    "batch_blocks": rb,
                    "feature_blocks": fb,
                }
                out.append((per * (1 + layers * (fb + 1)), params))
    return out


def _llama_shape(rng: np.random.Generator) -> Params:
    return {
        "batch": _choice(rng, (1, 2, 4)),
        "seq": _choice(rng, (512, 1024, 2048, 4096)),
        "heads": _choice(rng, (8, 16, 32, 64)),
        "head_dim": _choice(rng, (64, 128)),
    }


def _llama_block(rng: np.random.Generator, target: int) -> list[tuple[int, Params]]:
    shape = _llama_shape(rng)
    out = []
    for g in (1, 2, 4, 8, 16, 32, 64):  # nodes 1 + layers·(2 + 7G)
        if g <= shape["heads"]:
            for layers in _solve(target, 1, 2 + 7 * g, 1, 96):
                params = {**shape, "head_groups": g, "layers": layers}
                out.append((1 + layers * (2 + 7 * g), params))
    return out


def _llama_layer(rng: np.random.Generator, target: int) -> list[tuple[int, Params]]:
    shape = _llama_shape(rng)
    d = shape["heads"] * shape["head_dim"]
    out = []
    for g in (1, 2, 4, 8, 16, 32, 64):  # nodes 1 + layers·(4 + 7G + 5F)
        for f in (1, 2, 4, 8, 16, 32, 64):
            per = 4 + 7 * g + 5 * f
            if g > shape["heads"]:
                continue
            hidden = f * max(16, round(2.6875 * d / f / 16) * 16)  # Llama's 11008 / 4096
            for layers in _solve(target, 1, per, 1, 96):
                params = {**shape, "head_groups": g, "mlp_blocks": f, "hidden": hidden}
                out.append((1 + layers * per, {**params, "layers": layers}))
    return out


def _moe(rng: np.random.Generator, target: int) -> list[tuple[int, Params]]:
    d = _choice(rng, (1024, 2048, 4096))
    base = {
        "tokens": _choice(rng, (1024, 2048, 4096, 8192)),
        "d_model": d,
        "top_k": _choice(rng, (1, 2)),
        "balance": round(log_uniform(rng, 0.3, 10.0), 3),
        "seed": int(rng.integers(2**31 - 1)),
    }
    out = []
    for f in (1, 2, 4, 8, 16):  # nodes 4 + E·(3F + 2)
        hidden = f * max(16, round(3.5 * d / f / 16) * 16)  # Mixtral's 14336 / 4096
        for e in _solve(target, 4, 3 * f + 2, 2, 1024):
            out.append(
                (4 + e * (3 * f + 2), {**base, "hidden": hidden, "experts": e, "expert_blocks": f})
            )
    return out


# ------------------------------------------------------------------- traced models
def _trace_sized(
    name: str,
    fixed: Params,
    knob: str,
    sizes: Callable[[int], Params],
    line: tuple[float, float],
    bounds: tuple[int, int],
    target: int,
    lo: int,
    hi: int,
) -> tuple[Graph, Params] | None:
    """Build and check: trace ``name`` with ``knob`` set from the line ``nodes ≈ a + b·k``,
    correct ``b`` from what the trace gave, at most three traces; the one in ``[lo, hi]``
    nearest the target (None when none is)."""
    from placegym.envs.suites.models import trace_model

    a, b = line
    k = min(max(round((target - a) / b), bounds[0]), bounds[1])
    best: tuple[float, Graph, Params] | None = None
    for _ in range(3):
        params = {**fixed, **sizes(k), knob: k}
        graph = trace_model(name, **params)
        n = graph.num_nodes
        err = abs(math.log(n / target))
        if lo <= n <= hi and (best is None or err < best[0]):
            best = (err, graph, params)
        if err <= math.log(TOLERANCE):
            break
        b = max((n - a) / k, 1e-3)
        nxt = min(max(round((target - a) / b), bounds[0]), bounds[1])
        if nxt == k:
            break
        k = nxt
    return None if best is None else (best[1], best[2])


def _gpt_block(rng: np.random.Generator, target: int, lo: int, hi: int):
    parts = _choice(rng, (2, 4, 8))
    head_dim, mult = _choice(rng, (64, 128)), _choice(rng, (1, 2, 4))
    fixed = {
        "parts": parts,
        "batch": _choice(rng, (1, 2, 4)),
        "seq": _choice(rng, (256, 512, 1024, 2048)),
    }

    def sizes(groups: int) -> Params:
        heads = groups * (mult if groups * mult <= 128 else 1)
        return {"heads": heads, "d_model": heads * head_dim}

    line = (28.0, 14.0 + 2.0 * parts)
    return _trace_sized("gpt_block", fixed, "groups", sizes, line, (1, 128), target, lo, hi)


def _resnet_stage(rng: np.random.Generator, target: int, lo: int, hi: int):
    cin = _choice(rng, (32, 64, 128))
    fixed = {
        "cin": cin,
        "cout": cin * _choice(rng, (1, 2)),
        "size": _choice(rng, (28, 56)),
        "batch": _choice(rng, (8, 16, 32)),
    }
    return _trace_sized(
        "resnet_stage", fixed, "blocks", lambda k: {}, (11.0, 28.0), (1, 200), target, lo, hi
    )


def _unet_block(rng: np.random.Generator, target: int, lo: int, hi: int):
    per = _choice(rng, (1, 2))  # samples per micro-batch (the batch is chunked)
    fixed = {"size": _choice(rng, (32, 64, 128)), "channels": _choice(rng, (16, 32, 64))}
    return _trace_sized(
        "unet_block",
        fixed,
        "micro_batches",
        lambda k: {"batch": per * k},
        (3.0, 15.0),
        (1, 400),
        target,
        lo,
        hi,
    )


def _moe_layer(rng: np.random.Generator, target: int, lo: int, hi: int):
    parts, d = _choice(rng, (2, 4, 8)), _choice(rng, (512, 1024, 2048))
    fixed = {"parts": parts, "d_model": d, "hidden": 4 * d}
    tokens = _choice(rng, (1024, 2048, 4096, 8192))
    return _trace_sized(
        "moe_layer",
        fixed,
        "experts",
        lambda e: {"tokens": max(tokens, e)},
        (5.0, 8.0 + 2.0 * parts),
        (2, 512),
        target,
        lo,
        hi,
    )


@dataclass(frozen=True)
class Family:
    """A graph family: a workload generator sized by its node-count formula, or a traced
    model sized by build-and-check.

    Attributes:
        name: the generator or model name.
        kind: ``"workload"`` or ``"model"`` (as :class:`~placegym.envs.suites.GraphRecipe`).
        span: forward node counts that every drawn shape of the family reaches (for a
            traced model, measured at the ends of its knob's range; some shapes reach
            further).
    """

    name: str
    kind: Literal["workload", "model"]
    span: tuple[int, int]
    sizes: Callable[..., Any]

    def build(
        self, rng: np.random.Generator, target: int, lo: int, hi: int
    ) -> tuple[Graph, Params] | None:
        """A graph of this family with ``lo <= nodes <= hi`` near ``target``, and its
        parameters; None when the drawn shape reaches no count in range."""
        if self.kind == "model":
            return self.sizes(rng, target, lo, hi)
        from placegym.envs.workloads import make_graph

        picked = _pick(rng, self.sizes(rng, target), target, lo, hi)
        if picked is None:
            return None
        return make_graph(self.name, **picked[1]), picked[1]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("random_dag", "workload", (2, 1_000_000), _random_dag),
        Family("chainmm", "workload", (4, 1_000_000), _chainmm),
        Family("ffnn", "workload", (3, 104_576), _ffnn),
        Family("llama_block", "workload", (10, 43_201), _llama_block),
        Family("llama_layer", "workload", (17, 74_113), _llama_layer),
        Family("moe", "workload", (14, 51_204), _moe),
        Family("gpt_block", "model", (75, 1_800), _gpt_block),
        Family("resnet_stage", "model", (39, 5_600), _resnet_stage),
        Family("unet_block", "model", (18, 6_000), _unet_block),
        Family("moe_layer", "model", (55, 4_100), _moe_layer),
    )
}


# ----------------------------------------------------------------------- clusters
#: Accelerators: (FP32 FLOP/s or None, dense BF16/FP16 tensor FLOP/s, HBM B/s, memory B,
#: launch s), from the vendors' datasheets (P100 PCIe; T4; V100 SXM2; A100 SXM4 40 and
#: 80 GB; H100 SXM5) and the TPU v4 paper (Jouppi et al., ISCA 2023; no FP32 peak given).
SKUS: dict[str, tuple[float | None, float, float, float, float]] = {
    "p100-16gb": (9.3e12, 18.7e12, 732 * GB, 16 * GB, 5e-6),
    "t4-16gb": (8.1e12, 65e12, 320 * GB, 16 * GB, 5e-6),
    "v100-16gb": (15.7e12, 125e12, 900 * GB, 16 * GB, 5e-6),
    "v100-32gb": (15.7e12, 125e12, 900 * GB, 32 * GB, 5e-6),
    "a100-40gb": (19.5e12, 312e12, 1555 * GB, 40 * GB, 4e-6),
    "a100-80gb": (19.5e12, 312e12, 2039 * GB, 80 * GB, 4e-6),
    "h100-80gb": (67e12, 989e12, 3350 * GB, 80 * GB, 4e-6),
    "tpuv4-32gb": (None, 275e12, 1200 * GB, 32 * GB, 5e-6),
}


def _levels(rng: np.random.Generator) -> tuple[tuple[Level, ...], str]:
    """Intra-node (PCIe 3/4 peer-to-peer 10-25 GB/s, or NVLink/NVSwitch 25-450 GB/s per
    direction), intra-rack (10 GbE to NDR InfiniBand, 1.25-50 GB/s, at most the
    intra-node rate) and inter-rack (the rack's rate over an oversubscription of 1-4)."""
    fabric = _choice(rng, ("pcie", "nvlink"))
    if fabric == "pcie":
        bw0, lat0 = log_uniform(rng, 10 * GB, 25 * GB), float(rng.uniform(5e-6, 1e-5))
    else:
        bw0, lat0 = log_uniform(rng, 25 * GB, 450 * GB), float(rng.uniform(2e-6, 5e-6))
    bw1 = log_uniform(rng, 1.25 * GB, min(50 * GB, bw0))
    lat1 = log_uniform(rng, 5e-6, 2e-4)
    bw2, lat2 = bw1 / float(rng.uniform(1.0, 4.0)), lat1 * float(rng.uniform(1.2, 3.0))
    levels = (
        Level("intra-node", bw0, lat0),
        Level("intra-rack", bw1, lat1),
        Level("inter-rack", bw2, lat2),
    )
    return levels, fabric


def draw_cluster(
    rng: np.random.Generator, count: int, hetero_share: float, port_share: float
) -> tuple[Cluster, Params]:
    """``count`` devices, ``per_node`` to a server and ``nodes_per_rack`` servers to a rack
    (paths ``[rack, node]``), one accelerator type per cluster or, with probability
    ``hetero_share``, two or three types by server (by device blocks in one server);
    each device's ``kind`` is its type. Returns the cluster and a summary for the recipe."""
    precision = _choice(rng, ("fp32", "bf16"))
    skus = [s for s, spec in SKUS.items() if precision == "bf16" or spec[0] is not None]
    per_node = min(count, _choice(rng, (1, 2, 4, 8, 8, 16)))
    nodes_per_rack = _choice(rng, (1, 2, 4, 8, 16))
    servers = -(-count // per_node)
    kinds = 1
    if count > 1 and rng.random() < hetero_share:
        kinds = min(_choice(rng, (2, 2, 3)), count)
    types = [skus[i] for i in rng.choice(len(skus), size=kinds, replace=False).tolist()]
    levels, fabric = _levels(rng)
    links = LINKS[1] if rng.random() < port_share else LINKS[0]
    devices = []
    for i in range(count):
        node = i // per_node
        sku = types[node % kinds] if servers >= kinds else types[i * kinds // count]
        fp32, tensor, hbm, memory, launch = SKUS[sku]
        flops = tensor if precision == "bf16" else float(fp32 or tensor)
        devices.append(
            Device(
                f"d{i}",
                flops,
                memory,
                hbm,
                launch,
                (node // nodes_per_rack, node % nodes_per_rack),
                sku,
            )
        )
    used = sorted({d.kind for d in devices if d.kind})
    name = f"{'+'.join(used)}-x{count}"
    cluster = Cluster(tuple(devices), levels, name=name, links=links)
    summary = {
        "devices": count,
        "types": used,
        "precision": precision,
        "per_node": per_node,
        "nodes_per_rack": nodes_per_rack,
        "intra_node": fabric,
        "bandwidth": [lv.bandwidth for lv in levels],
        "latency": [lv.latency for lv in levels],
        "links": links,
    }
    return cluster, summary
