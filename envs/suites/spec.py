"""The data model of benchmark suites: graph recipes, instance specs, suites, built instances.

See :mod:`placegym.envs.suites` for how suites are built, versioned and checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from placegym.envs.core.cluster import Cluster, Links
from placegym.envs.core.graph import Graph
from placegym.envs.core.presets import load_cluster

__all__ = [
    "SPLITS",
    "GraphRecipe",
    "Instance",
    "InstanceSpec",
    "Suite",
    "digest",
    "model",
    "published",
    "workload",
]

SPLITS = ("train", "test")


@dataclass(frozen=True)
class GraphRecipe:
    """How an instance's graph is built.

    Attributes:
        kind: ``"workload"`` (:func:`~placegym.envs.workloads.make_graph`), ``"model"``
            (:func:`~placegym.envs.suites.models.trace_model`), ``"published"`` (a
            vendored published workload,
            :func:`~placegym.envs.importers.dnn_partitioning.from_dnn_partitioning`) or
            ``"pipedream"`` (a vendored PipeDream profile, ``data/pipedream/<name>``,
            :func:`~placegym.envs.importers.pipedream.from_pipedream`).
        name: the generator or model name, or the published file (relative to its data
            folder).
        params: its keyword arguments, as sorted ``(key, value)`` pairs.
        ccr: rescale the tensors to this CCR on the instance's cluster (None: as built).
        groups: add co-location groups of up to this many nodes
            (:func:`~placegym.envs.workloads.memory.add_groups`, seed 0; 0: none).
        resident: make memory bind: the graph's resident bytes become this share of the
            cluster's total memory, durations unchanged
            (:func:`~placegym.envs.workloads.memory.tighten`; None: as built).
        ratios: the devices' memory ratios with ``resident`` (cycled over the devices).
        training: make the graph one training step with this optimizer
            (:func:`~placegym.envs.workloads.training.to_training_step`: backward nodes,
            stash and gradient edges, each layer's forward and backward as a group,
            parameters + gradients + optimizer state resident; None: as built). Applied
            before ``groups`` and ``resident``.
        links: the instance cluster's links (``"pair"`` or ``"port"``,
            :attr:`~placegym.envs.core.cluster.Cluster.links`).
        live: make memory bind on live tensors: every device's memory becomes this
            slack (>= 1) times the largest simulated peak of contiguous stages, a
            placement so certified to fit
            (:func:`~placegym.envs.workloads.memory.fit_live`; None: as built).
        recompute: make memory bind so that only recomputation fits: every device's
            memory becomes this slack (>= 1) times the largest simulated peak of
            contiguous stages checkpointed, a placement with a recompute set so certified
            to fit, and no placement without one can
            (:func:`~placegym.envs.workloads.memory.fit_recompute`; None: as built).
    """

    kind: Literal["workload", "model", "published", "pipedream"]
    name: str
    params: tuple[tuple[str, Any], ...] = ()
    ccr: float | None = None
    groups: int = 0
    resident: float | None = None
    ratios: tuple[float, ...] = (1.0,)
    training: str | None = None
    links: Links = "pair"
    live: float | None = None
    recompute: float | None = None

    def build(self, cluster: Cluster) -> Graph:
        """Build the graph (rescaled for ``cluster`` when ``ccr`` is set)."""
        params = dict(self.params)
        if self.kind == "workload":
            from placegym.envs.workloads import make_graph

            graph = make_graph(self.name, **params)
        elif self.kind == "published":
            from placegym.envs.importers.dnn_partitioning import DATA_DIR, from_dnn_partitioning

            graph = from_dnn_partitioning(DATA_DIR / self.name)[0]
        elif self.kind == "pipedream":
            from placegym.envs.importers.pipedream import from_pipedream
            from placegym.envs.suites.reference import DATA

            graph = from_pipedream(DATA / "pipedream" / self.name / "graph.txt", name=self.name)
        else:
            from placegym.envs.suites.models import trace_model

            graph = trace_model(self.name, **params)
        if self.ccr is not None:
            from placegym.envs.analysis.ccr import scale_to_ccr

            graph = scale_to_ccr(graph, cluster, self.ccr)
        if self.training is not None:
            from placegym.envs.workloads.training import to_training_step

            graph = to_training_step(graph, optimizer=self.training)
        if self.groups:
            from placegym.envs.workloads.memory import add_groups

            graph = add_groups(graph, size=self.groups)
        return graph

    def tighten(self, graph: Graph, cluster: Cluster) -> tuple[Graph, Cluster]:
        """The instance's graph and cluster: made tight on live tensors when ``live`` is
        set (:func:`~placegym.envs.workloads.memory.fit_live`), so that only
        recomputation fits when ``recompute`` is set
        (:func:`~placegym.envs.workloads.memory.fit_recompute`), memory-tight when
        ``resident`` is set (:func:`~placegym.envs.workloads.memory.tighten`), else as
        they are; the cluster with :attr:`links`."""
        if self.links != cluster.links:
            cluster = cluster.with_links(self.links)
        if self.live is not None:
            from placegym.envs.workloads.memory import fit_live

            graph, cluster = fit_live(graph, cluster, slack=self.live)
        if self.recompute is not None:
            from placegym.envs.workloads.memory import fit_recompute

            graph, cluster = fit_recompute(graph, cluster, slack=self.recompute)
        if self.resident is None:
            return graph, cluster
        from placegym.envs.workloads.memory import tighten

        return tighten(graph, cluster, resident=self.resident, ratios=self.ratios)

    def to_dict(self) -> dict[str, Any]:
        """The recipe as a JSON-ready dict (``ccr`` only when set)."""
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "params": dict(self.params)}
        if self.ccr is not None:
            out["ccr"] = self.ccr
        if self.groups:
            out["groups"] = self.groups
        if self.resident is not None:
            out.update(resident=self.resident, ratios=list(self.ratios))
        if self.training is not None:
            out["training"] = self.training
        if self.links != "pair":
            out["links"] = self.links
        if self.live is not None:
            out["live"] = self.live
        if self.recompute is not None:
            out["recompute"] = self.recompute
        return out


def workload(name: str, ccr: float | None = None, **params: Any) -> GraphRecipe:
    """A generator's graph (``params`` sorted, tuples kept)."""
    return GraphRecipe("workload", name, tuple(sorted(params.items())), ccr)


def published(path: str) -> InstanceSpec:
    """The instance of a vendored published workload (``path`` under
    :data:`~placegym.envs.importers.dnn_partitioning.DATA_DIR`) on its own accelerators,
    named by :func:`~placegym.envs.importers.dnn_partitioning.dnn_partitioning_name`."""
    from placegym.envs.importers.dnn_partitioning import PUBLISHED, dnn_partitioning_name

    return InstanceSpec(
        dnn_partitioning_name(path), GraphRecipe("published", path), PUBLISHED + path
    )


def model(name: str, **params: Any) -> GraphRecipe:
    """A traced ``torch.nn`` model's graph (:data:`~placegym.envs.suites.models.MODELS`)."""
    return GraphRecipe("model", name, tuple(sorted(params.items())))


@dataclass(frozen=True)
class InstanceSpec:
    """One instance: an id unique in its suite, a graph recipe, a cluster preset name."""

    id: str
    graph: GraphRecipe
    cluster: str

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict."""
        return {"id": self.id, "graph": self.graph.to_dict(), "cluster": self.cluster}


def _round(x: Any) -> Any:
    """Numbers rounded to 12 significant digits, recursively (for :func:`digest`)."""
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, Mapping):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def digest(graph: Graph, cluster: Cluster) -> str:
    """16 hex digits of SHA-256 over the graph and cluster documents (rounded numbers)."""
    doc = {"graph": _round(graph.to_dict()), "cluster": _round(cluster.to_dict())}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Instance:
    """A built instance: its graph (named by the instance id) and cluster."""

    suite: str
    split: str
    spec: InstanceSpec
    graph: Graph
    cluster: Cluster

    @property
    def id(self) -> str:
        """The instance id, unique in its suite."""
        return self.spec.id

    @cached_property
    def digest(self) -> str:
        """:func:`digest` of the graph and cluster."""
        return digest(self.graph, self.cluster)

    def __repr__(self) -> str:
        return (
            f"Instance({self.suite}/{self.split}/{self.id}: {self.graph!r} on {self.cluster.name})"
        )


@dataclass(frozen=True)
class Suite:
    """A named, versioned instance set.

    Attributes:
        name: ``<family>-v<version>``.
        description: one line.
        splits: ``{"train": (...), "test": (...)}`` instance specs, in a fixed order.
        reference_budget: simulations per annealing run when the best-known placements
            are (re)computed (``placegym suites reference``).
        reference_seeds: the seeds of those annealing runs.
    """

    name: str
    description: str
    splits: Mapping[str, tuple[InstanceSpec, ...]] = field(default_factory=dict)
    reference_budget: int = 20000
    reference_seeds: tuple[int, ...] = (1, 2)

    def __post_init__(self) -> None:
        ids = [s.id for specs in self.splits.values() for s in specs]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None:
            raise ValueError(f"suite {self.name}: instance id {dup!r} appears twice")

    @property
    def version(self) -> int:
        """The ``k`` of the name's ``-v<k>``."""
        return int(self.name.rsplit("-v", 1)[1])

    def specs(self, split: str | None = None) -> list[tuple[str, InstanceSpec]]:
        """``(split, spec)`` pairs of one split, or of every split (``None``) in order.

        Raises:
            ValueError: an unknown split, naming the known ones.
        """
        if split is None:
            return [(s, spec) for s in self.splits for spec in self.splits[s]]
        if split not in self.splits:
            raise ValueError(
                f"split: unknown split {split!r} of suite {self.name} "
                f"(splits: {', '.join(self.splits)})"
            )
        return [(split, spec) for spec in self.splits[split]]

    def build(self, split: str, spec: InstanceSpec) -> Instance:
        """Build the instance of ``spec`` (of ``split``): its cluster, then its graph."""
        cluster = load_cluster(spec.cluster)
        graph, cluster = spec.graph.tighten(spec.graph.build(cluster), cluster)
        graph = dataclasses.replace(graph, name=spec.id)
        return Instance(self.name, split, spec, graph, cluster)

    def instances(self, split: str | None = None) -> Iterator[Instance]:
        """Build the instances of ``split`` (every split for ``None``), one at a time."""
        for s, spec in self.specs(split):
            yield self.build(s, spec)

    def instance(self, instance_id: str) -> Instance:
        """Build one instance by id.

        Raises:
            ValueError: no instance with that id (naming the suite).
        """
        for s, spec in self.specs():
            if spec.id == instance_id:
                return self.build(s, spec)
        raise ValueError(f"instance: suite {self.name} has no instance {instance_id!r}")
