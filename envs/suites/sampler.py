"""Training instances at scale: a seeded, endless source drawn fresh across every family.

    from placegym.envs.suites.sampler import InstanceSampler
    sampler = InstanceSampler(0, nodes=(50, 5000), devices=(2, 64))
    for inst in sampler:                 # or sampler.sample(), or sampler.draw(index)
        inst.id, inst.graph, inst.cluster, inst.recipe, inst.certificate, inst.digest

Instance ``i`` of seed ``s`` is a pure function of ``(s, i)`` (its draws come from
``numpy.random.default_rng([s, 0, i])``), so a seed gives the same sequence everywhere and
workers can draw disjoint indices. Per instance, in this order:

1. **Family**: the families take turns: each run of ``F`` consecutive indices holds every
   family once, in a seeded order (so every family appears in any ``F`` draws).
2. **Cluster**: ``D`` log-uniform in ``devices``; accelerators from datasheet numbers
   (:data:`SKUS`: P100, T4, V100, A100, H100, TPU v4; FP32 or dense BF16 peaks, one
   precision per cluster), one type per cluster or, with probability
   ``heterogeneous_share``, two or three types (one per server; each device's ``kind``
   is its type); 1-16 devices per server, 1-16 servers per rack (paths ``[rack,
   node]``); intra-node PCIe (10-25 GB/s) or NVLink (25-450 GB/s), intra-rack 1.25-50
   GB/s with 5-200 us latency, inter-rack that over an oversubscription of 1-4; with
   probability ``port_share`` one send and one receive port per device and level
   (``links="port"``).
3. **Graph**: with probability ``training_share`` a training step (SGD, momentum or Adam,
   :func:`~placegym.envs.workloads.training.to_training_step`, ``2n`` nodes); a node
   count log-uniform in ``nodes`` (within what the family reaches); the family's shape
   drawn (widths, sequence lengths, heads, seeds, ...) and its size knobs solved from
   its node-count formula (generators) or by build-and-check, at most three traces
   (traced models of :mod:`placegym.envs.suites.models`).
4. **CCR**: log-uniform in ``ccr``, on the instance's own cluster
   (:func:`~placegym.envs.analysis.ccr.scale_to_ccr`, applied to the final graph: the
   instance's CCR is the drawn one). Not every CCR is reachable by scaling tensors (a
   latency floor where kernels are short, the roofline's ceiling where links are fast):
   up to :data:`CCR_TRIES` ratios are drawn for one graph and cluster, so the accepted
   CCR is log-uniform on the part of ``ccr`` the instance reaches.
5. **Memory**: with probability ``memory_share`` memory-tight: a training step, or a graph
   without resident bytes, is made tight on live tensors
   (:func:`~placegym.envs.workloads.memory.fit_live`, slack 1.05-1.5); another graph
   gets, half the time, co-location groups of 2-4 nodes
   (:func:`~placegym.envs.workloads.memory.add_groups`), then resident bytes 50-90% of
   the total memory (:func:`~placegym.envs.workloads.memory.tighten`; on devices that
   compute differently the same with per-kind measured times), the share lowered twice
   by 0.7 where no placement is found to fit.

Every instance is valid: its graph and cluster build, and wherever memory may bind (every
memory-tight instance, and a large graph on small devices) its ``certificate`` is a
placement shown by simulation to fit
(:func:`~placegym.envs.analysis.memory.live_certificate`); elsewhere it is ``None`` (no
placement can exceed memory). A draw that fails (no size in range, no reachable CCR, no
certificate, a held-out graph) is redrawn from the same generator; the recipe counts the
redraws by reason. The recipe describes the draw; :meth:`InstanceSampler.draw` rebuilds
the instance.

Held out: the test splits of every suite stay unseen. A drawn graph whose generator or
model and parameters (defaults filled in) are those of any test-split instance is
redrawn, whatever its cluster; and so is an instance whose digest
(:func:`~placegym.envs.suites.digest`) is a stored test-split digest
(:func:`held_out_digests`), or that equals a test-split instance up to names
(:func:`held_out_match`).

Families (:data:`FAMILIES`): the generators ``random_dag``, ``chainmm``, ``ffnn``,
``llama_block``, ``llama_layer``, ``moe`` and the traced models ``gpt_block`` (75-1,800
nodes: one block, sized by its 1-128 head groups), ``resnet_stage`` (39-5,600: 1-200
basic blocks), ``unet_block`` (18-6,000: 1-400 micro-batches) and ``moe_layer``
(55-4,100: 2-512 experts). A family is drawn
only at the node counts it reaches (a ``gpt_block`` graph has at most 1,800 nodes, its
training step 3,600); one that reaches none in ``nodes`` is left out
(:attr:`InstanceSampler.skipped` says why). Not drawn: the vendored published graphs
(``published-v0``'s dnn-partitioning files, ``pipedream-v0``'s profiles) and DOPPLER's
files, fixed lists of files rather than generators.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from placegym.envs.analysis.ccr import scale_to_ccr
from placegym.envs.analysis.levels import durations_on
from placegym.envs.analysis.memory import live_certificate, memory_may_bind
from placegym.envs.core import validate as V
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.suites._draws import (
    FAMILIES,
    SKUS,
    Family,
    Params,
    draw_cluster,
    log_uniform,
)
from placegym.envs.suites.catalog import SUITES
from placegym.envs.suites.reference import load_references
from placegym.envs.suites.spec import digest
from placegym.envs.workloads.memory import add_groups, fit_live, tight_name, tighten
from placegym.envs.workloads.training import to_training_step

__all__ = [
    "FAMILIES",
    "SKUS",
    "InstanceSampler",
    "SampledInstance",
    "held_out_digests",
    "held_out_match",
    "recipe_key",
]

OPTIMIZERS = ("sgd", "momentum", "adam")
#: CCRs drawn for one graph and cluster before the instance is redrawn.
CCR_TRIES = 8


@dataclass(frozen=True, eq=False)
class SampledInstance:
    """One drawn training instance.

    Attributes:
        id: ``s<seed>-<index>-<family>``, also the graph's name.
        graph: the graph (CCR, training step and memory transforms applied).
        cluster: the cluster.
        recipe: how it was drawn, JSON-ready: ``seed``, ``index``, ``family``, ``kind``,
            ``name`` and ``params`` (the generator's or model's), ``target_nodes``,
            ``nodes``, ``training`` (the optimizer or None), ``ccr``, ``memory`` (None,
            ``{"mode": "resident", "resident", "groups"}`` or ``{"mode": "live",
            "slack"}``), ``cluster`` (a summary) and ``redraws`` (by reason).
        certificate: a placement simulated to fit memory, or None where no placement
            can exceed it.
        digest: :func:`~placegym.envs.suites.digest` of the graph and cluster.
    """

    id: str
    graph: Graph
    cluster: Cluster
    recipe: Mapping[str, Any]
    certificate: Placement | None
    digest: str

    def __repr__(self) -> str:
        return f"SampledInstance({self.id}: {self.graph!r} on {self.cluster!r})"


# ------------------------------------------------------------------ held-out guards
@functools.cache
def held_out_digests() -> frozenset[str]:
    """The stored digest of every test-split instance of every suite (their reference
    files, :func:`~placegym.envs.suites.reference.load_references`)."""
    return frozenset(
        ref.digest
        for name in SUITES
        for ref in load_references(name).values()
        if ref.split == "test"
    )


def _norm(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_norm(v) for v in value)
    if isinstance(value, np.integer | np.floating):
        return value.item()
    return value


def recipe_key(kind: str, name: str, params: Mapping[str, Any]) -> tuple:
    """A graph recipe as a hashable key, every parameter present (defaults filled in,
    a generator's ``ccr`` options left out), so that equal graphs give equal keys.

    Raises:
        ValueError: an unknown kind, naming it.
    """
    if kind == "workload":
        from placegym.envs.workloads import WORKLOADS

        sig = inspect.signature(WORKLOADS[name])
        extra: dict[str, Any] = {}
    elif kind == "model":
        from placegym.envs.suites.models import MODELS, trace_model

        params = dict(params)
        opts = inspect.signature(trace_model).parameters
        extra = {k: params.pop(k, opts[k].default) for k in ("parts", "min_split_flops")}
        sig = inspect.signature(MODELS[name])
    else:
        raise V.fail("kind", "expected 'workload' or 'model'", kind)
    bound = sig.bind_partial(**params)
    bound.apply_defaults()
    items = {**bound.arguments, **extra}
    items = {k: _norm(v) for k, v in items.items() if k not in ("ccr", "ccr_cluster")}
    return (kind, name, tuple(sorted(items.items())))


@functools.cache
def _held_out_recipes(kind: str) -> frozenset[tuple]:
    """:func:`recipe_key` of every test-split graph of ``kind`` in every suite."""
    return frozenset(
        recipe_key(kind, spec.graph.name, dict(spec.graph.params))
        for suite in SUITES.values()
        for _, spec in suite.specs("test")
        if spec.graph.kind == kind
    )


@functools.cache
def _held_out_sizes() -> dict[tuple[int, int], tuple[tuple[str, str], ...]]:
    """``(nodes, edges) -> ((suite, id), ...)`` of the test-split instances."""
    out: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for name in SUITES:
        for iid, ref in load_references(name).items():
            if ref.split == "test":
                out.setdefault((ref.nodes, ref.edges), []).append((name, iid))
    return {k: tuple(v) for k, v in out.items()}


def _anonymous_digest(graph: Graph, cluster: Cluster) -> str:
    """:func:`digest` with the graph, cluster and device names blanked (and the device
    kinds, unless a profile reads them)."""
    keep = cluster.profile is not None
    devices = tuple(
        dataclasses.replace(d, name="", kind=d.kind if keep else None) for d in cluster.devices
    )
    return digest(
        dataclasses.replace(graph, name=""),
        dataclasses.replace(cluster, name="", devices=devices),
    )


@functools.lru_cache(maxsize=64)
def _held_out_digest(suite: str, instance_id: str) -> str:
    inst = SUITES[suite].instance(instance_id)
    return _anonymous_digest(inst.graph, inst.cluster)


def held_out_match(graph: Graph, cluster: Cluster) -> str | None:
    """``"<suite>/<id>"`` of a test-split instance equal to ``graph`` on ``cluster`` up to
    names (graph, cluster and device names, device kinds), or None. Only the instances
    with the same node and edge counts (stored in the reference files) are built."""
    candidates = _held_out_sizes().get((graph.num_nodes, graph.num_edges), ())
    if not candidates:
        return None
    mine = _anonymous_digest(graph, cluster)
    for suite, iid in candidates:
        if _held_out_digest(suite, iid) == mine:
            return f"{suite}/{iid}"
    return None


# ---------------------------------------------------------------- memory transforms
def _resident_tight(graph: Graph, cluster: Cluster, share: float) -> tuple[Graph, Cluster]:
    """:func:`~placegym.envs.workloads.memory.tighten` with ``ratios=(1.0,)`` (each
    device keeps its memory); on devices that compute differently, the same with each
    node's duration on each device kind as a measured per-kind time."""
    profiles = {(d.flops, d.mem_bandwidth, d.launch_overhead) for d in cluster.devices}
    if len(profiles) == 1:
        return tighten(graph, cluster, resident=share)
    dur = durations_on(graph, cluster)
    first: dict[str, int] = {}
    for d, dev in enumerate(cluster.devices):
        first.setdefault(str(dev.kind), d)
    kind_time = {k: dur[:, d] - cluster.launch_overhead[d] for k, d in first.items()}
    scale = share * float(cluster.memory.sum()) / float(graph.param_bytes.sum())
    graph = dataclasses.replace(
        graph,
        time=np.full(graph.num_nodes, np.nan),
        kind_time=kind_time,
        param_bytes=graph.param_bytes * scale,
    )
    return graph, dataclasses.replace(cluster, name=tight_name(cluster.name, share, (1.0,)))


def _memory_tight(
    rng: np.random.Generator, graph: Graph, cluster: Cluster, training: bool
) -> tuple[Graph, Cluster, Params, Placement] | None:
    """The memory-tight variant (module docstring, step 5) and its certificate, or None."""
    if training or float(graph.param_bytes.sum()) <= 0:
        slack = round(float(rng.uniform(1.05, 1.5)), 3)
        graph, cluster = fit_live(graph, cluster, slack=slack)
        cert = live_certificate(graph, cluster)
        return None if cert is None else (graph, cluster, {"mode": "live", "slack": slack}, cert)
    groups = 0
    if rng.random() < 0.5:
        groups = int(rng.integers(2, 5))
        share = round(float(rng.uniform(0.3, 0.8)), 2)
        graph = add_groups(graph, size=groups, share=share, seed=int(rng.integers(2**31 - 1)))
    resident = round(float(rng.uniform(0.5, 0.9)), 3)
    for share in (resident, resident * 0.7, resident * 0.49):
        tight, tc = _resident_tight(graph, cluster, round(share, 4))
        if not memory_may_bind(tight, tc):
            return None
        cert = live_certificate(tight, tc)
        if cert is not None:
            memory = {"mode": "resident", "resident": round(share, 4), "groups": groups}
            return tight, tc, memory, cert
    return None


# ------------------------------------------------------------------------ sampler
def _range(value: Any, field: str, lo: float, hi: float, integer: bool) -> tuple[Any, Any]:
    """A validated ``(low, high)`` pair with ``lo <= low <= high <= hi``."""
    what = "integers" if integer else "numbers"
    ok = isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
    if ok:
        kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
        ok = all(isinstance(x, kinds) and not isinstance(x, bool) for x in value)
    if ok:
        a, b = (int(x) for x in value) if integer else (float(x) for x in value)
        if math.isfinite(a) and math.isfinite(b) and lo <= a <= b <= hi:
            return a, b
    raise V.fail(field, f"expected ({what} low, high) with {lo:g} <= low <= high <= {hi:g}", value)


def _share(value: Any, field: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not (ok and 0.0 <= float(value) <= 1.0):
        raise V.fail(field, "expected a probability in [0, 1]", value)
    return float(value)


def _reach(family: Family, lo: int, hi: int, factor: int) -> tuple[int, int] | None:
    """The forward node counts in ``[lo, hi]`` (of the final graph, ``factor`` = 2 for a
    training step) that ``family`` reaches, or None."""
    a, b = max(-(-lo // factor), family.span[0]), min(hi // factor, family.span[1])
    return (a, b) if a <= b else None


class InstanceSampler:
    """A seeded, endless source of training instances (see the module docstring).

    Args:
        seed: the seed (an integer >= 0); instance ``i`` depends only on it and ``i``.
        nodes: ``(low, high)`` node counts of the final graph (training steps included).
        devices: ``(low, high)`` device counts, at least 2 (a CCR needs links).
        families: the families to draw (default: every family that reaches ``nodes``).
        ccr: ``(low, high)`` communication-to-computation ratios, drawn log-uniform.
        training_share: probability of a training step.
        memory_share: probability of a memory-tight variant.
        heterogeneous_share: probability of a cluster of two or three accelerator types.
        port_share: probability of ``links="port"``.
        max_redraws: failed draws allowed per instance before giving up.

    Attributes:
        families: the families in use, in order.
        skipped: the families left out, each with the reason.

    Raises:
        ValueError: a bad argument, naming it and its value; a family that reaches no
            node count in ``nodes``, naming its span.
    """

    def __init__(
        self,
        seed: int,
        *,
        nodes: tuple[int, int] = (50, 5000),
        devices: tuple[int, int] = (2, 64),
        families: Sequence[str] | None = None,
        ccr: tuple[float, float] = (0.1, 10.0),
        training_share: float = 0.25,
        memory_share: float = 0.3,
        heterogeneous_share: float = 0.5,
        port_share: float = 0.25,
        max_redraws: int = 50,
    ) -> None:
        self.seed = V.integer(seed, "seed", lo=0)
        self.nodes = _range(nodes, "nodes", 2, V.NODE_LIMIT, True)
        self.devices = _range(devices, "devices", 2, V.DEVICE_LIMIT, True)
        self.ccr = _range(ccr, "ccr", 1e-9, 1e9, False)
        self.training_share = _share(training_share, "training_share")
        self.memory_share = _share(memory_share, "memory_share")
        self.heterogeneous_share = _share(heterogeneous_share, "heterogeneous_share")
        self.port_share = _share(port_share, "port_share")
        self.max_redraws = V.integer(max_redraws, "max_redraws", lo=1)
        lo, hi = self.nodes
        self.skipped: dict[str, str] = {}
        if families is None:
            names = list(FAMILIES)
        elif isinstance(families, str) or not isinstance(families, Sequence) or not families:
            raise V.fail("families", "expected a non-empty list of family names", families)
        else:
            names = list(dict.fromkeys(families))
            for f in names:
                if f not in FAMILIES:
                    raise V.fail(
                        "families", f"unknown family (families: {', '.join(FAMILIES)})", f
                    )
        use = []
        for f in names:
            span = FAMILIES[f].span
            if _reach(FAMILIES[f], lo, hi, 1) is not None:
                use.append(f)
            elif families is not None:
                raise V.fail(
                    "families",
                    f"{f} reaches {span[0]}-{span[1]} nodes, none in nodes={self.nodes}",
                    f,
                )
            else:
                self.skipped[f] = f"reaches {span[0]}-{span[1]} nodes, none in {self.nodes}"
        if not use:
            raise V.fail("nodes", "no family reaches any node count in", self.nodes)
        self.families: tuple[str, ...] = tuple(use)
        self._digests = held_out_digests()
        self._next = 0

    def __repr__(self) -> str:
        return (
            f"InstanceSampler(seed={self.seed}, nodes={self.nodes}, devices={self.devices}, "
            f"families={len(self.families)})"
        )

    def __iter__(self) -> Iterator[SampledInstance]:
        return self

    def __next__(self) -> SampledInstance:
        return self.sample()

    def sample(self) -> SampledInstance:
        """The next instance (index 0, 1, 2, ... of this sampler)."""
        index = self._next
        self._next += 1
        return self.draw(index)

    def family_of(self, index: int) -> str:
        """The family of instance ``index`` (each run of ``F`` indices has each once)."""
        block, pos = divmod(index, len(self.families))
        order = np.random.default_rng([self.seed, 1, block]).permutation(len(self.families))
        return self.families[int(order[pos])]

    def draw(self, index: int) -> SampledInstance:
        """Instance ``index`` of this seed (a pure function of the seed and index).

        Raises:
            ValueError: a negative index.
            RuntimeError: ``max_redraws`` failed draws in a row, naming the reasons.
        """
        index = V.integer(index, "index", lo=0)
        rng = np.random.default_rng([self.seed, 0, index])
        family = self.family_of(index)
        reasons: Counter[str] = Counter()
        for attempt in range(self.max_redraws):
            if attempt and attempt >= self.max_redraws // 2:  # the family may be stuck
                family = self.families[int(rng.integers(len(self.families)))]
            got = self._attempt(rng, index, family, dict(reasons))
            if isinstance(got, SampledInstance):
                return got
            reasons[got] += 1
        raise RuntimeError(
            f"sampler: seed {self.seed}, index {index}: no valid instance in "
            f"{self.max_redraws} draws ({dict(reasons)})"
        )

    def _attempt(
        self, rng: np.random.Generator, index: int, name: str, redraws: dict[str, int]
    ) -> SampledInstance | str:
        """One draw (module docstring), or the reason it failed."""
        family = FAMILIES[name]
        lo, hi = self.nodes
        count = min(int(log_uniform(rng, self.devices[0], self.devices[1] + 1)), self.devices[1])
        cluster, summary = draw_cluster(rng, count, self.heterogeneous_share, self.port_share)
        training = None
        if rng.random() < self.training_share and _reach(family, lo, hi, 2) is not None:
            training = OPTIMIZERS[int(rng.integers(len(OPTIMIZERS)))]
        factor = 2 if training else 1
        span = _reach(family, lo, hi, factor)
        assert span is not None  # the family was kept because it reaches [lo, hi]
        target = min(max(round(log_uniform(rng, span[0], span[1])), span[0]), span[1])
        built = family.build(rng, target, -(-lo // factor), hi // factor)
        if built is None:
            return "size"
        graph, params = built
        if recipe_key(family.kind, family.name, params) in _held_out_recipes(family.kind):
            return "held-out graph"
        if training is not None:
            graph = to_training_step(graph, optimizer=training)
        for _ in range(CCR_TRIES):
            ratio = min(max(float(f"{log_uniform(rng, *self.ccr):.4g}"), self.ccr[0]), self.ccr[1])
            try:
                graph = scale_to_ccr(graph, cluster, ratio)
                break
            except ValueError:  # out of this graph's reach on this cluster
                continue
        else:
            return "ccr"
        memory, cert = None, None
        if rng.random() < self.memory_share:
            tight = _memory_tight(rng, graph, cluster, training is not None)
            if tight is None:
                return "memory"
            graph, cluster, memory, cert = tight
        elif memory_may_bind(graph, cluster):
            cert = live_certificate(graph, cluster)
            if cert is None:
                return "memory"
        iid = f"s{self.seed}-{index}-{name}"
        graph = dataclasses.replace(graph, name=iid)
        dg = digest(graph, cluster)
        if dg in self._digests or held_out_match(graph, cluster) is not None:
            return "held-out instance"
        recipe = {
            "seed": self.seed,
            "index": index,
            "family": name,
            "kind": family.kind,
            "name": family.name,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
            "target_nodes": target * factor,
            "nodes": graph.num_nodes,
            "training": training,
            "ccr": ratio,
            "memory": memory,
            "cluster": {**summary, "name": cluster.name},
            "redraws": redraws,
        }
        return SampledInstance(iid, graph, cluster, recipe, cert, dg)
