"""Where an environment's graphs come from: one graph, a list, or a sampler.

- a :class:`~placegym.envs.core.graph.Graph`, a ``placegym.graph/v1`` document (a dict), a
  graph JSON path, or a workload name (with ``graph_params``): the same graph every
  episode;
- a list/tuple of those: one drawn uniformly at every reset;
- a :class:`WorkloadSampler` (or any picklable callable ``rng -> Graph``): a new graph at
  every reset, drawn with the environment's ``np_random``.

:func:`resolve_graph` is the one place where a name or a file becomes a graph (the
environment, ``placegym train``'s ``data.graphs`` and ``placegym bench --workloads`` use
it).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from placegym.envs.core.graph import Graph, load_graph

GraphSpec = (
    Graph
    | str
    | Path
    | Mapping[str, Any]
    | Sequence[Graph | str | Path | Mapping[str, Any]]
    | Callable[[np.random.Generator], Graph]
)

__all__ = ["GraphSource", "WorkloadSampler", "resolve_graph"]


@dataclass(frozen=True)
class WorkloadSampler:
    """Samples ``make_graph(name, seed=<drawn>, **params, **<drawn ranges>)`` at every call.

    ``ranges`` maps an integer parameter to an inclusive ``(low, high)`` range drawn
    uniformly at every call (e.g. ``{"nodes": (64, 160)}``). Draw order: ranges in key
    order, then the seed. Picklable, so vector environments can ship it to workers.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def __call__(self, rng: np.random.Generator) -> Graph:
        """A new graph drawn with ``rng``."""
        from placegym.envs.workloads import make_graph

        drawn = {k: int(rng.integers(lo, hi + 1)) for k, (lo, hi) in sorted(self.ranges.items())}
        return make_graph(self.name, seed=int(rng.integers(2**31 - 1)), **self.params, **drawn)


def resolve_graph(
    spec: Graph | str | os.PathLike[str] | Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
    *,
    seed: int | None = None,
) -> Graph:
    """The graph ``spec`` names: itself, a graph document (dict), a graph JSON file, or a
    workload generator's.

    A path object is loaded, and so is a string that ends in ``.json`` or is a file; any
    other string is a workload name (``placegym graphs list``) built with ``params``, and
    with ``seed`` too when it is given and the generator takes one (``params`` win).

    Raises:
        ValueError: an unknown workload (listing the known ones) or parameter, a bad file
            or document (``graph: nodes[3].flops: ...``), a spec of another type.
        FileNotFoundError: a path that does not exist.
    """
    if isinstance(spec, Graph | os.PathLike):
        return load_graph(spec)
    if isinstance(spec, Mapping):
        try:
            return load_graph(spec)
        except ValueError as e:
            raise ValueError(f"graph: {e}") from None
    if not isinstance(spec, str):
        raise ValueError(
            "graph: expected a Graph, a graph document (dict), a JSON path or a workload "
            f"name, got {type(spec).__name__}"
        )
    text = spec
    if text.endswith(".json") or Path(text).is_file():
        return load_graph(text)
    from placegym.envs.workloads import WORKLOADS, make_graph

    if text not in WORKLOADS:
        raise ValueError(
            f"graph: unknown workload or file {text!r} (workloads: {', '.join(WORKLOADS)})"
        )
    kwargs = dict(params or {})
    if seed is not None and "seed" in inspect.signature(WORKLOADS[text]).parameters:
        kwargs.setdefault("seed", seed)
    return make_graph(text, **kwargs)


class GraphSource:
    """Resolves a graph specification once and draws a graph per episode."""

    def __init__(self, spec: GraphSpec, params: Mapping[str, Any] | None = None) -> None:
        params = dict(params or {})
        self.sampler: Callable[[np.random.Generator], Graph] | None = None
        self.graphs: list[Graph] = []
        if callable(spec) and not isinstance(spec, Graph):
            self.sampler = spec
        elif isinstance(spec, list | tuple):
            if not spec:
                raise ValueError("graph: expected at least one graph, got []")
            self.graphs = [resolve_graph(s, params) for s in spec]
        else:
            self.graphs = [
                resolve_graph(cast("Graph | str | Path | Mapping[str, Any]", spec), params)
            ]

    @property
    def fixed_sizes(self) -> tuple[int, int] | None:
        """Largest node and edge counts, or None for a sampler (sizes unknown)."""
        if self.sampler is not None:
            return None
        return (max(g.num_nodes for g in self.graphs), max(g.num_edges for g in self.graphs))

    def transformed(self, fn: Callable[[Graph], Graph]) -> GraphSource:
        """The same source with every graph passed through ``fn``: each fixed graph once,
        now; each sampled graph as it is drawn (``fn`` picklable keeps the sampler so)."""
        new = object.__new__(GraphSource)
        new.graphs = [fn(g) for g in self.graphs]
        new.sampler = None if self.sampler is None else _Mapped(self.sampler, fn)
        return new

    def draw(self, rng: np.random.Generator) -> Graph:
        """This episode's graph (a sampler's, or one of the fixed graphs, drawn with ``rng``)."""
        if self.sampler is not None:
            return self.sampler(rng)
        if len(self.graphs) == 1:
            return self.graphs[0]
        return self.graphs[int(rng.integers(len(self.graphs)))]


@dataclass(frozen=True)
class _Mapped:
    """``fn(sampler(rng))``: a sampler whose graphs go through ``fn``."""

    sampler: Callable[[np.random.Generator], Graph]
    fn: Callable[[Graph], Graph]

    def __call__(self, rng: np.random.Generator) -> Graph:
        return self.fn(self.sampler(rng))
