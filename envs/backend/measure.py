"""The real backend as the environment sees it: scaled graphs, executors, references."""

from __future__ import annotations

from collections.abc import Sequence

from placegym.envs.backend.executor import Measurement, TorchExecutor
from placegym.envs.backend.kernels import scale_graph
from placegym.envs.cache import IdentityCache
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement
from placegym.envs.reward import ReferencePlacer
from placegym.envs.sources import GraphSource

__all__ = ["RealBackend"]


class RealBackend:
    """Executors per graph (built once), the scale knob and measured references.

    Args:
        devices: backend device spec (``"cpu#2"``, ``"cuda:0#4"``, ...).
        scale: tensor dimensions are divided by it (:func:`scale_graph`; < 1 grows them).
        repeats: timed runs per measurement (the median is reported).
        reference: the placer whose measured makespan is the reference of the rewards.
    """

    def __init__(
        self, devices: str, *, scale: float = 1, repeats: int = 3, reference: ReferencePlacer
    ) -> None:
        self.devices, self.scale, self.repeats = devices, scale, int(repeats)
        self.placer = reference
        self._executors = IdentityCache(self._new_executor, size=8)
        self._references = IdentityCache(self._measure_reference, size=16)
        self._cluster: Cluster | None = None

    @property
    def num_devices(self) -> int:
        """Number of backend devices."""
        from placegym.envs.backend.devices import parse_devices

        return len(parse_devices(self.devices))

    def calibrated(self, graphs: Sequence[Graph] = ()) -> Cluster:
        """A cluster calibrated on the devices, with the kernels of ``graphs`` (as they
        run: scaled) profiled; measured on the first call."""
        if self._cluster is None:
            from placegym.envs.backend.calibrate import calibrate

            self._cluster = calibrate(self.devices, graphs=graphs)
        return self._cluster

    def wrap_source(self, source: GraphSource) -> GraphSource:
        """The same source with every graph scaled (each fixed graph scaled once)."""
        if self.scale == 1:
            return source
        scaled = GraphSource.__new__(GraphSource)
        scaled.graphs = [scale_graph(g, self.scale) for g in source.graphs]
        sampler = source.sampler
        scaled.sampler = None if sampler is None else _ScaledSampler(sampler, self.scale)
        return scaled

    def executor(self, graph: Graph) -> TorchExecutor:
        """The executor of ``graph`` (built once; the last 8 graphs' are kept)."""
        return self._executors(graph)

    def measure(self, graph: Graph, placement: Placement) -> Measurement:
        """Run ``placement`` of ``graph`` on the devices and time it."""
        return self.executor(graph).run(placement)

    def reference(self, graph: Graph, cluster: Cluster) -> float:
        """The measured makespan of the reference placer's placement (once per pair)."""
        return self._references(graph, cluster)

    def _new_executor(self, graph: Graph) -> TorchExecutor:
        return TorchExecutor(graph, self.devices, repeats=self.repeats)

    def _measure_reference(self, graph: Graph, cluster: Cluster) -> float:
        t = self.measure(graph, self.placer.place(graph, cluster)).makespan
        return t if t > 0 else 1.0


class _ScaledSampler:
    def __init__(self, sampler, scale: float) -> None:
        self.sampler, self.scale = sampler, scale

    def __call__(self, rng):
        return scale_graph(self.sampler(rng), self.scale)
