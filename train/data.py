"""The training graphs of a config as (label, graph, cluster) triples.

A ``data.graphs`` entry is one graph or, as ``SUITE/SPLIT`` (``generalize-v0/train``), every
instance of a benchmark suite's split. Each graph is placed on its own cluster:

- a suite instance (``SUITE/INSTANCE``) on the instance's cluster;
- any other graph on its ``cluster`` when set, else on ``data.cluster``.

So one run may train on graphs of clusters with different device counts (the dual policy
handles any count; each update's rollout and scoring group episodes per graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from placegym.envs import Cluster, Graph, load_cluster

if TYPE_CHECKING:
    from placegym.train.config import GraphEntry

__all__ = ["TrainingGraph", "expand_graphs", "load_graphs", "spec_cluster"]


def expand_graphs(specs: Sequence[GraphEntry]) -> list[GraphEntry]:
    """``specs`` with every ``SUITE/SPLIT`` entry replaced by its instances, in the
    suite's order (``SUITE/INSTANCE`` names)."""
    from placegym.envs.suites import SUITES

    out: list[GraphEntry] = []
    for spec in specs:
        if spec.split is None:
            out.append(spec)
            continue
        suite = SUITES[spec.name.partition("/")[0]]
        out += [replace(spec, name=f"{suite.name}/{i.id}") for _, i in suite.specs(spec.split)]
    return out


def spec_cluster(spec: GraphEntry, default: str) -> str:
    """The cluster ``spec``'s graph is placed on: a suite instance's own, else
    ``spec.cluster``, else ``default`` (``data.cluster``).

    Raises:
        ValueError: a suite instance whose ``cluster`` is set to another cluster.
    """
    inst = spec.suite_instance
    if inst is None:
        return spec.cluster or default
    suite, iid = inst
    own = {s.id: s.cluster for _, s in suite.specs()}.get(iid)
    if own is None:
        raise ValueError(f"data.graphs: suite {suite.name} has no instance {iid!r}")
    if spec.cluster not in (None, own):
        raise ValueError(
            f"data.graphs: {spec.name}.cluster: must be {own!r}, got {spec.cluster!r}"
        )
    return own


@dataclass
class TrainingGraph:
    """One graph of a run: its label (tables, metric keys), graph and cluster."""

    label: str
    graph: Graph
    cluster: Cluster


def load_graphs(
    specs: Sequence[GraphEntry], default_cluster: str, base: Path | None
) -> list[TrainingGraph]:
    """The graphs of ``specs`` (``SUITE/SPLIT`` entries expanded), each with its cluster;
    clusters of the same name are one object. Paths are found as given, else relative to
    ``base`` (the config file's folder)."""
    from placegym.train.config import resolve_path

    clusters: dict[str, Cluster] = {}
    out = []
    for spec in expand_graphs(specs):
        name = spec_cluster(spec, default_cluster)
        if spec.suite_instance is not None:  # its own graph and cluster, as the suite builds
            suite, iid = spec.suite_instance
            inst = suite.instance(iid)
            graph, cluster = inst.graph, clusters.setdefault(inst.cluster.name, inst.cluster)
        else:
            if name not in clusters:
                clusters[name] = load_cluster(str(resolve_path(name, base)))
            graph, cluster = spec.graph(base), clusters[name]
        out.append(TrainingGraph(spec.label, graph, cluster))
    return out
