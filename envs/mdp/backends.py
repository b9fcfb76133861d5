"""What prices a finished placement, as the environment sees it: the simulator (the
default) or real execution with torch.

A :class:`Backend` tells :class:`~placegym.envs.mdp.env.PlacementEnv`

- how its graphs are transformed before anything else sees them
  (:meth:`~Backend.transform_source`; :class:`TorchBackend` shrinks them by ``scale``);
- which cluster a spec names (:meth:`~Backend.resolve_cluster`: the default one for
  ``cluster=None``; :class:`TorchBackend` fits ``"calibrate"`` to its devices);
- ``T_ref``, the makespan of the reference placer's placement of a graph
  (:meth:`~Backend.reference_makespan`, asked once per graph);
- the makespan of a finished placement and any extra ``info`` keys
  (:meth:`~Backend.makespan`);
- whether its makespans are reproducible (:attr:`~Backend.deterministic`).

The environment itself simulates every finished placement (with its ``noise``,
``dispatch`` and ``np_random``) and hands the schedule to :meth:`~Backend.makespan`: the
schedule gives ``peak_memory``, ``oom`` and the rendering whatever the backend; the
backend decides the makespan that the reward uses.

The low-level real backend (:mod:`placegym.envs.real`: executor, kernels, calibration)
knows nothing of environments, rewards or graph sources; :class:`TorchBackend` is the
adapter between them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.core.presets import load_cluster
from placegym.envs.mdp.reward import ReferencePlacer, reference_makespan
from placegym.envs.mdp.sources import GraphSource
from placegym.envs.sim.simulator import Dispatch, Schedule

if TYPE_CHECKING:
    from placegym.envs.real.executor import Measurement, TorchExecutor

__all__ = ["BACKENDS", "Backend", "SimulatedBackend", "TorchBackend", "make_backend"]

#: The names ``PlacementEnv(backend=...)`` accepts besides a :class:`Backend` object.
BACKENDS = ("sim", "torch")


class Backend(ABC):
    """What the environment needs of whatever prices a finished placement (see the module
    docstring). Subclass it; :class:`SimulatedBackend` is the default."""

    #: Whether two runs with the same seed give equal makespans (ids with a backend that
    #: is not are registered ``nondeterministic=True``).
    deterministic: bool = True
    #: The cluster of ``cluster=None``.
    default_cluster: str = "p100x4"

    def transform_source(self, source: GraphSource) -> GraphSource:
        """The graphs as this backend runs them (default: ``source`` itself)."""
        return source

    def resolve_cluster(self, cluster: Cluster | str | None, graphs: Sequence[Graph]) -> Cluster:
        """The cluster ``cluster`` names (:attr:`default_cluster` for None) for the fixed
        ``graphs`` (already transformed; empty for a sampler)."""
        return load_cluster(self.default_cluster if cluster is None else cluster)

    @abstractmethod
    def reference_makespan(
        self,
        graph: Graph,
        cluster: Cluster,
        placer: ReferencePlacer,
        *,
        dispatch: Dispatch = "priority",
    ) -> float:
        """``T_ref``: the makespan of ``placer``'s placement of ``graph`` (> 0)."""

    @abstractmethod
    def makespan(
        self, graph: Graph, cluster: Cluster, placement: Placement, schedule: Schedule
    ) -> tuple[float, dict[str, Any]]:
        """The makespan of the finished ``placement`` (``schedule``: the environment's
        simulation of it) and the extra keys of the last step's ``info``."""


class SimulatedBackend(Backend):
    """The default: the makespan is the simulated one (the environment's ``noise`` and
    ``dispatch``), ``T_ref`` the noiseless simulated makespan of the reference placement;
    no extra ``info`` keys."""

    def reference_makespan(
        self,
        graph: Graph,
        cluster: Cluster,
        placer: ReferencePlacer,
        *,
        dispatch: Dispatch = "priority",
    ) -> float:
        """The simulated ``T_ref`` (:func:`~placegym.envs.mdp.reward.reference_makespan`)."""
        return reference_makespan(graph, cluster, placer, dispatch)

    def makespan(
        self, graph: Graph, cluster: Cluster, placement: Placement, schedule: Schedule
    ) -> tuple[float, dict[str, Any]]:
        """The simulated makespan."""
        return schedule.makespan, {}

    def __repr__(self) -> str:
        return "SimulatedBackend()"


class TorchBackend(Backend):
    """Real execution (:mod:`placegym.envs.real`): every finished placement runs on
    ``devices`` and the makespan is the median of ``repeats`` timed runs.

    - graphs are shrunk by ``scale`` (grown when < 1; :func:`~placegym.envs.real.
      kernels.scale_graph`), each fixed graph once;
    - ``cluster=None`` means ``"calibrate"``: a cluster fitted to the devices (measured once
      per backend) with the kernels of the fixed graphs profiled; any other cluster must
      have as many devices;
    - ``T_ref`` is the measured makespan of the reference placement (once per graph,
      cluster and placer);
    - the last ``info`` also has ``measured_makespans`` (every timed run) and
      ``simulated_makespan``.

    Not reproducible (:attr:`deterministic` is False). Environments may share one
    backend: they share its executors (one per graph, the last 8 kept), its calibrated
    cluster and its measured references.

    Args:
        devices: device spec (``"cpu#k"``, ``"cuda:i"``, ``"cuda:i#k"``,
            ``"cuda:0,cpu#2"``, ...; :func:`~placegym.envs.real.parse_devices`).
        scale: tensor dimensions are divided by it.
        repeats: timed runs per measurement.
    """

    deterministic = False
    default_cluster = "calibrate"

    def __init__(self, devices: str = "cpu#2", *, scale: float = 1, repeats: int = 3) -> None:
        self.devices, self.scale, self.repeats = devices, scale, int(repeats)
        self._scaled = IdentityCache(self._scale, size=64)
        self._executors = IdentityCache(self._new_executor, size=8)
        self._references = IdentityCache(self._measure_reference, size=16)
        self._cluster: Cluster | None = None

    @property
    def num_devices(self) -> int:
        """Number of devices."""
        from placegym.envs.real.devices import parse_devices

        return len(parse_devices(self.devices))

    def transform_source(self, source: GraphSource) -> GraphSource:
        """``source`` with every graph scaled (the same scaled object for the same graph,
        so that environments sharing the backend share executors and references)."""
        return source if self.scale == 1 else source.transformed(self._scaled)

    def resolve_cluster(self, cluster: Cluster | str | None, graphs: Sequence[Graph]) -> Cluster:
        """The cluster (``"calibrate"``: :meth:`calibrated` on ``graphs``).

        Raises:
            ValueError: its device count is not the devices'.
        """
        if cluster is None or cluster == "calibrate":
            resolved = self.calibrated(graphs)
        else:
            resolved = load_cluster(cluster)
        if self.num_devices != resolved.num_devices:
            raise ValueError(
                f"devices: {self.devices!r} has {self.num_devices} devices but cluster "
                f"{resolved.name!r} has {resolved.num_devices}; they must match "
                f"(cluster='calibrate' fits one to the devices)"
            )
        return resolved

    def calibrated(self, graphs: Sequence[Graph] = ()) -> Cluster:
        """A cluster calibrated on the devices, with the kernels of ``graphs`` (as they
        run: scaled) profiled; measured on the first call."""
        if self._cluster is None:
            from placegym.envs.real.calibrate import calibrate

            self._cluster = calibrate(self.devices, graphs=graphs)
        return self._cluster

    def reference_makespan(
        self,
        graph: Graph,
        cluster: Cluster,
        placer: ReferencePlacer,
        *,
        dispatch: Dispatch = "priority",
    ) -> float:
        """The measured makespan of ``placer``'s placement (once per graph, cluster and
        placer; 1 when it is 0)."""
        return self._references(graph, cluster, placer)

    def makespan(
        self, graph: Graph, cluster: Cluster, placement: Placement, schedule: Schedule
    ) -> tuple[float, dict[str, Any]]:
        """The measured makespan; ``info`` gains ``simulated_makespan`` and
        ``measured_makespans``."""
        m = self.measure(graph, placement)
        return m.makespan, {
            "simulated_makespan": schedule.makespan,
            "measured_makespans": m.makespans,
        }

    def executor(self, graph: Graph) -> TorchExecutor:
        """The executor of ``graph`` (built once; the last 8 graphs' are kept)."""
        return self._executors(graph)

    def measure(self, graph: Graph, placement: Placement) -> Measurement:
        """Run ``placement`` of ``graph`` on the devices and time it."""
        return self.executor(graph).run(placement)

    def __repr__(self) -> str:
        return f"TorchBackend({self.devices!r}, scale={self.scale!r}, repeats={self.repeats})"

    def _scale(self, graph: Graph) -> Graph:
        from placegym.envs.real.kernels import scale_graph

        return scale_graph(graph, self.scale)

    def _new_executor(self, graph: Graph) -> TorchExecutor:
        from placegym.envs.real.executor import TorchExecutor

        return TorchExecutor(graph, self.devices, repeats=self.repeats)

    def _measure_reference(self, graph: Graph, cluster: Cluster, placer: ReferencePlacer) -> float:
        t = self.measure(graph, placer.place(graph, cluster)).makespan
        return t if t > 0 else 1.0


def make_backend(spec: Backend | str) -> Backend:
    """``spec`` itself, or for a name a new backend of its kind with default settings
    (``"torch"``: ``TorchBackend()``, on ``cpu#2``).

    Raises:
        ValueError: ``spec`` is neither a :class:`Backend` nor one of :data:`BACKENDS`.
    """
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, str) and spec in BACKENDS:
        return SimulatedBackend() if spec == "sim" else TorchBackend()
    raise ValueError(
        f"backend: expected 'sim', 'torch' or a Backend (placegym.envs.mdp.backends), got {spec!r}"
    )
