"""Clusters: devices in a level-wise network, the ``placegym.cluster/v1`` format.

Each device has a compute rate, an optional memory bandwidth (for the roofline term), a
memory capacity, a launch overhead and a ``path``: its position in the hierarchy,
outermost first (``[rack, node]``). All paths have the same length ``L`` and ``levels``
has ``L + 1`` entries. The level of a device pair is ``L`` minus the length of the common
prefix of their paths (0 = same node). An optional ``level_matrix`` (D×D ints, each a
valid level index) overrides that rule for non-tree topologies; the diagonal is unused.

File format (DESIGN §2)::

    {"format": "placegym.cluster/v1", "name": "p100x4",
     "devices": [{"name": "gpu0", "flops": 9.3e12, "mem_bandwidth": 7.32e11,
                  "memory": 1.6e10, "launch_overhead": 5e-6, "path": [0, 0]}],
     "levels": [{"name": "intra-node", "bandwidth": 1.2e10, "latency": 5e-6}, ...],
     "level_matrix": [[0, 1, ...], ...],          # optional
     "links": "port"}                              # optional, default "pair"

Required per device: ``flops`` (> 0) and ``memory`` (> 0). Optional: ``name`` (default
``dev{i}``), ``mem_bandwidth`` (> 0; absent = no roofline term), ``launch_overhead``
(>= 0, default 0), ``path`` (default ``[]``), ``kind`` (the device's class for a
profile), ``memory_reserve`` (a fraction in [0, 1), default 0, left out of
:meth:`Cluster.to_dict` when 0).

What ``memory`` bounds: the peak of the *allocated* tensors on the device (resident
parameter bytes plus live outputs, stashes and received copies: the simulator's
``peak_memory``, DESIGN §3). A real allocator reserves more than it has allocated
(caching, fragmentation): measured plans of training systems show the reserved memory
5.8–22.5 % above the allocated peak per pipeline stage. ``memory_reserve`` models that
overhead: the bytes available to allocated tensors are ``memory × (1 − memory_reserve)``
(:attr:`Cluster.memory`; the device's own number is :attr:`Cluster.device_memory`), and
every consumer (the simulator's OOM test, the environment's masks, the teachers, the
bounds) reads :attr:`Cluster.memory`. So ``memory`` is the device's capacity as its
datasheet gives it, and ``memory_reserve`` (e.g. 0.1) the allocator's share of it.

Required per level: ``bandwidth`` (> 0); optional ``latency`` (>= 0, default 0) and
``name``.

Optional ``links`` (how transfers share the network; the simulator's rule 3,
:mod:`placegym.envs.sim.simulator`):

- ``"pair"`` (the default, left out of :meth:`Cluster.to_dict`): each ordered device pair
  ``(a, b)`` is one FIFO channel, independent of every other channel.
- ``"port"``: each device has one *send port* and one *receive port* per network level. A
  transfer from ``a`` to ``b`` at level ``l = pair_level[a, b]`` holds the send port
  ``(a, l)`` and the receive port ``(b, l)`` from its start to its arrival. Transfers take
  their ports in the order the simulator enqueues them (producer finish time, then rule 4's
  order among producers finishing together, then ascending destination); each starts at
  ``max(enqueue time, its send port's free time, its receive port's free time)``, a port's
  free time being the arrival of the last transfer that took it (0 before any). So a
  transfer never delays one enqueued before it, and one enqueued later never starts on a
  common port before it (no back-filling of idle port time). With at most two devices the
  two models coincide.

Optional ``profile`` (profiled kernel costs, DESIGN §6; :mod:`placegym.envs.core.costs`):
``{kind: {kernel signature: seconds}}``. A node whose kernel signature is in the profile
of its device's ``kind`` runs for the profiled seconds instead of the roofline term::

     "devices": [{"name": "cpu#0", ..., "kind": "cpu"}, ...],
     "profile": {"cpu": {"<signature>": 1.2e-4, ...}}
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from placegym.envs.core import validate as V

CLUSTER_FORMAT = "placegym.cluster/v1"

__all__ = ["CLUSTER_FORMAT", "LINKS", "Cluster", "Device", "Level", "Links"]

#: How transfers share the network (module docstring): the values of ``Cluster.links``.
Links = Literal["pair", "port"]
LINKS: tuple[Links, ...] = ("pair", "port")


@dataclass(frozen=True)
class Device:
    """One accelerator. ``mem_bandwidth=None`` disables the roofline memory term;
    ``kind`` names its class of identical devices in the cluster's ``profile``;
    ``memory_reserve`` is the allocator's share of ``memory`` (module docstring)."""

    name: str
    flops: float
    memory: float
    mem_bandwidth: float | None = None
    launch_overhead: float = 0.0
    path: tuple[int, ...] = ()
    kind: str | None = None
    memory_reserve: float = 0.0


@dataclass(frozen=True)
class Level:
    """One network level: effective per-channel bandwidth (B/s) and latency (s)."""

    name: str
    bandwidth: float
    latency: float = 0.0


@dataclass(frozen=True, eq=False)
class Cluster:
    """An immutable, validated cluster.

    ``links`` is ``"pair"`` (one independent FIFO channel per ordered device pair) or
    ``"port"`` (one send and one receive port per device and network level, shared by
    every transfer of that device at that level); the module docstring gives the rule.

    Raises:
        ValueError: naming the field (``devices[2].flops``, ``levels``, ``level_matrix[1][3]``)
            and the bad value.
    """

    devices: tuple[Device, ...]
    levels: tuple[Level, ...]
    level_matrix: np.ndarray | None = None
    name: str = "cluster"
    profile: Mapping[str, Mapping[str, float]] | None = None
    links: Links = "pair"

    def __post_init__(self) -> None:
        devs = tuple(self.devices)
        V.size(len(devs), "devices", V.DEVICE_LIMIT)
        levels = tuple(self.levels)
        object.__setattr__(self, "devices", devs)
        object.__setattr__(self, "levels", levels)
        if not devs:
            raise V.fail("devices", "at least one device is required", [])
        if not levels:
            raise V.fail("levels", "at least one level is required", [])
        for i, d in enumerate(devs):
            w = f"devices[{i}]"
            V.number(d.flops, f"{w}.flops", positive=True)
            V.number(d.memory, f"{w}.memory", positive=True)
            r = V.number(d.memory_reserve, f"{w}.memory_reserve")
            if not r < 1.0:
                raise V.fail(f"{w}.memory_reserve", "must be a fraction in [0, 1)", r)
            if d.mem_bandwidth is not None:
                V.number(d.mem_bandwidth, f"{w}.mem_bandwidth", positive=True)
            V.number(d.launch_overhead, f"{w}.launch_overhead")
            if d.kind is not None and (not isinstance(d.kind, str) or not d.kind):
                raise V.fail(f"{w}.kind", "expected a non-empty string", d.kind)
            for j, p in enumerate(d.path):
                V.integer(p, f"{w}.path[{j}]", lo=0)
            if len(d.path) != len(devs[0].path):
                raise V.fail(
                    f"{w}.path",
                    f"all device paths must have the same length "
                    f"(devices[0].path has {len(devs[0].path)})",
                    list(d.path),
                )
        for k, lv in enumerate(levels):
            V.number(lv.bandwidth, f"levels[{k}].bandwidth", positive=True)
            V.number(lv.latency, f"levels[{k}].latency")
        depth = len(devs[0].path)
        if len(levels) != depth + 1:
            raise V.fail(
                "levels",
                f"device paths have length {depth}, so {depth + 1} levels "
                f"are needed; number of levels",
                len(levels),
            )
        if self.level_matrix is not None:
            object.__setattr__(self, "level_matrix", self._check_matrix(self.level_matrix))
        if self.profile is not None:
            object.__setattr__(self, "profile", _check_profile(self.profile))
        if not isinstance(self.links, str) or self.links not in LINKS:
            raise V.fail("links", "expected 'pair' or 'port'", self.links)

    def _check_matrix(self, m: Any) -> np.ndarray:
        d = len(self.devices)
        rows = V.as_list(m.tolist() if isinstance(m, np.ndarray) else m, "level_matrix")
        if len(rows) != d:
            raise V.fail("level_matrix", f"expected {d} rows (one per device)", len(rows))
        out = np.zeros((d, d), dtype=np.int64)
        for a, row in enumerate(rows):
            row = V.as_list(row, f"level_matrix[{a}]")
            if len(row) != d:
                raise V.fail(f"level_matrix[{a}]", f"expected {d} entries", len(row))
            for b, x in enumerate(row):
                out[a, b] = V.integer(x, f"level_matrix[{a}][{b}]", lo=0, hi=len(self.levels))
        out.setflags(write=False)
        return out

    # ------------------------------------------------------------------ arrays
    @cached_property
    def num_devices(self) -> int:
        """Number of devices ``D``."""
        return len(self.devices)

    def __len__(self) -> int:
        return len(self.devices)

    def __repr__(self) -> str:
        links = "" if self.links == "pair" else f", links={self.links!r}"
        return (
            f"Cluster(name={self.name!r}, devices={self.num_devices}, "
            f"levels={[lv.name for lv in self.levels]}{links})"
        )

    @cached_property
    def flops(self) -> np.ndarray:
        """``(D,)`` FLOP/s per device."""
        return _ro(np.array([d.flops for d in self.devices], dtype=np.float64))

    @cached_property
    def mem_bandwidth(self) -> np.ndarray:
        """``(D,)`` bytes/s per device, ``inf`` where none is given (no roofline term)."""
        bw = [np.inf if d.mem_bandwidth is None else d.mem_bandwidth for d in self.devices]
        return _ro(np.array(bw, dtype=np.float64))

    @cached_property
    def memory(self) -> np.ndarray:
        """``(D,)`` bytes available to allocated tensors: ``memory × (1 −
        memory_reserve)`` (module docstring); the device's ``memory`` where no reserve is
        given."""
        return _ro(
            np.array([d.memory * (1.0 - d.memory_reserve) for d in self.devices], np.float64)
        )

    @cached_property
    def device_memory(self) -> np.ndarray:
        """``(D,)`` each device's ``memory`` as given (its capacity, reserve included)."""
        return _ro(np.array([d.memory for d in self.devices], dtype=np.float64))

    @cached_property
    def launch_overhead(self) -> np.ndarray:
        """``(D,)`` kernel launch overhead of each device (seconds)."""
        return _ro(np.array([d.launch_overhead for d in self.devices], dtype=np.float64))

    @cached_property
    def profile_kinds(self) -> tuple[str, ...]:
        """The device kinds that have a profile, in order of their first device."""
        prof = self.profile or {}
        kinds = dict.fromkeys(d.kind for d in self.devices if d.kind in prof)
        return tuple(k for k in kinds if k is not None)

    @cached_property
    def profile_class(self) -> np.ndarray:
        """``(D,)`` index of each device's kind in :attr:`profile_kinds` (-1: none)."""
        index = {k: i for i, k in enumerate(self.profile_kinds)}
        kinds = [-1 if d.kind is None else index.get(d.kind, -1) for d in self.devices]
        return _ro(np.array(kinds, dtype=np.int64))

    @cached_property
    def device_traits(self) -> np.ndarray:
        """``(D, 5)`` FLOP/s, memory bandwidth, launch overhead, memory and kind class of
        each device (the index of its ``kind`` among the cluster's kinds, -1 for none:
        a graph's per-kind times or a profile may time two kinds differently): devices
        with equal rows compute alike (their network aside)."""
        kinds = {k: i for i, k in enumerate(dict.fromkeys(d.kind for d in self.devices if d.kind))}
        kind = np.array([kinds.get(d.kind, -1) if d.kind else -1 for d in self.devices])
        cols = [self.flops, self.mem_bandwidth, self.launch_overhead, self.memory]
        return _ro(np.stack([*cols, kind.astype(np.float64)], axis=1))

    @cached_property
    def paths(self) -> np.ndarray:
        """``(D, L)`` int device positions in the hierarchy."""
        depth = len(self.devices[0].path)
        out = np.zeros((len(self.devices), depth), dtype=np.int64)
        for i, d in enumerate(self.devices):
            out[i] = d.path
        return _ro(out)

    @cached_property
    def pair_level(self) -> np.ndarray:
        """``(D, D)`` network level of each ordered device pair."""
        if self.level_matrix is not None:
            return self.level_matrix
        p = self.paths
        d, depth = p.shape
        level = np.full((d, d), depth, dtype=np.int64)  # depth less the shared prefix
        same = np.ones((d, d), dtype=bool)
        for k in range(depth):
            same &= p[:, None, k] == p[None, :, k]
            level -= same
        return _ro(level)

    @cached_property
    def pair_latency(self) -> np.ndarray:
        """``(D, D)`` latency of each device pair's network level."""
        lat = np.array([lv.latency for lv in self.levels], dtype=np.float64)
        return _ro(lat[self.pair_level])

    @cached_property
    def pair_bandwidth(self) -> np.ndarray:
        """``(D, D)`` bandwidth of each device pair's network level."""
        bw = np.array([lv.bandwidth for lv in self.levels], dtype=np.float64)
        return _ro(bw[self.pair_level])

    def with_links(self, links: Links) -> Cluster:
        """This cluster with ``links`` set (``"pair"`` or ``"port"``), all else equal.

        Raises:
            ValueError: ``links`` is neither, naming the value.
        """
        return dataclasses.replace(self, links=links)

    def transfer_time(self, src: int, dst: int, nbytes: float) -> float:
        """``latency_l + bytes / bandwidth_l`` for the pair's level (0 on the same device)."""
        if src == dst:
            return 0.0
        return float(self.pair_latency[src, dst] + nbytes / self.pair_bandwidth[src, dst])

    # ------------------------------------------------------------------ I/O
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        """Parse and validate a ``placegym.cluster/v1`` document."""
        data = V.as_mapping(data, "cluster")
        V.check_format(data, CLUSTER_FORMAT)
        devs = []
        for i, raw in enumerate(V.as_list(V.get(data, "devices", ""), "devices")):
            w = f"devices[{i}]"
            d = V.as_mapping(raw, w)
            mbw = d.get("mem_bandwidth")
            path = V.as_list(d.get("path", []), f"{w}.path")
            devs.append(
                Device(
                    name=str(d.get("name", f"dev{i}")),
                    flops=V.number(V.get(d, "flops", w), f"{w}.flops", positive=True),
                    memory=V.number(V.get(d, "memory", w), f"{w}.memory", positive=True),
                    mem_bandwidth=None
                    if mbw is None
                    else V.number(mbw, f"{w}.mem_bandwidth", positive=True),
                    launch_overhead=V.number(
                        d.get("launch_overhead", 0.0), f"{w}.launch_overhead"
                    ),
                    path=tuple(V.integer(p, f"{w}.path[{j}]", lo=0) for j, p in enumerate(path)),
                    kind=d.get("kind"),
                    memory_reserve=V.number(d.get("memory_reserve", 0.0), f"{w}.memory_reserve"),
                )
            )
        levels = []
        for k, raw in enumerate(V.as_list(V.get(data, "levels", ""), "levels")):
            w = f"levels[{k}]"
            lv = V.as_mapping(raw, w)
            levels.append(
                Level(
                    name=str(lv.get("name", f"level{k}")),
                    bandwidth=V.number(V.get(lv, "bandwidth", w), f"{w}.bandwidth", positive=True),
                    latency=V.number(lv.get("latency", 0.0), f"{w}.latency"),
                )
            )
        return cls(
            devices=tuple(devs),
            levels=tuple(levels),
            level_matrix=data.get("level_matrix"),
            name=str(data.get("name", "cluster")),
            profile=data.get("profile"),
            links=data.get("links", "pair"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``placegym.cluster/v1`` JSON document."""
        devs = []
        for d in self.devices:
            nd: dict[str, Any] = {"name": d.name, "flops": d.flops}
            if d.mem_bandwidth is not None:
                nd["mem_bandwidth"] = d.mem_bandwidth
            nd.update(memory=d.memory, launch_overhead=d.launch_overhead, path=list(d.path))
            if d.kind is not None:
                nd["kind"] = d.kind
            if d.memory_reserve:
                nd["memory_reserve"] = d.memory_reserve
            devs.append(nd)
        out: dict[str, Any] = {
            "format": CLUSTER_FORMAT,
            "name": self.name,
            "devices": devs,
            "levels": [
                {"name": lv.name, "bandwidth": lv.bandwidth, "latency": lv.latency}
                for lv in self.levels
            ],
        }
        if self.level_matrix is not None:
            out["level_matrix"] = self.level_matrix.tolist()
        if self.profile is not None:
            out["profile"] = {k: dict(t) for k, t in self.profile.items()}
        if self.links != "pair":
            out["links"] = self.links
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the cluster JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def homogeneous(
        cls,
        device: Device,
        count: int,
        levels: Sequence[Level],
        *,
        per_node: int | None = None,
        nodes_per_rack: int | None = None,
        name: str = "cluster",
        level_matrix: Any = None,
        links: Links = "pair",
    ) -> Cluster:
        """``count`` copies of ``device`` named ``{name}{i}``, placed ``per_node`` to a node and
        ``nodes_per_rack`` nodes to a rack (paths ``[rack, node]``, node index within its rack).
        Without ``per_node`` every device is on node 0 of rack 0; ``links`` as in the
        class docstring."""
        per_node = per_node or count
        nodes_per_rack = nodes_per_rack or max(1, -(-count // per_node))
        prefix = device.name
        devs = []
        for i in range(count):
            node = i // per_node
            path = (node // nodes_per_rack, node % nodes_per_rack)
            devs.append(
                Device(
                    f"{prefix}{i}",
                    device.flops,
                    device.memory,
                    device.mem_bandwidth,
                    device.launch_overhead,
                    path,
                    device.kind,
                    device.memory_reserve,
                )
            )
        return cls(
            devices=tuple(devs),
            levels=tuple(levels),
            level_matrix=level_matrix,
            name=name,
            links=links,
        )


def _check_profile(profile: Any) -> dict[str, dict[str, float]]:
    """A validated copy of ``{kind: {signature: seconds}}``."""
    out: dict[str, dict[str, float]] = {}
    for kind, table in V.as_mapping(profile, "profile").items():
        w = f"profile[{kind!r}]"
        out[str(kind)] = {
            str(sig): V.number(t, f"{w}[{sig!r}]") for sig, t in V.as_mapping(table, w).items()
        }
    return out


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a
