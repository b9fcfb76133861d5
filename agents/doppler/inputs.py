"""What the dual policy reads, declared in one table per head.

**SEL** scores a (state, node) pair from the node's dynamic features (``node_dynamic``),
its readiness (:func:`~placegym.agents.doppler.features.sel_context`), the two as
:class:`~placegym.agents.doppler.features.SelPairs`, and then the
columns of each enabled entry of :data:`SEL_INPUTS`, in table order.

**PLC** scores each device of a state from one row of columns: always the selected
node's PLC embedding, the mean PLC embedding of the nodes already on the device and
``log1p`` of their count, the device's features ``dev``, their mean over the devices,
the device's lead in estimated start over the earliest, and the sibling share
(:func:`~placegym.agents.doppler.features.sibling_share`); then the columns of each
enabled entry of :data:`PLC_INPUTS`, in table order. The device features ``dev`` are the
observation's device row followed by the columns of each enabled entry of
:data:`DEVICE_INPUTS`: they are computed per state while episodes are played
(:func:`plc_devices`, ``numpy``, recorded with the episode), and the head reads them
twice (as they are and as their mean over the devices), as does the topology encoder
once.

Each optional input is one entry: its ``name``, the :class:`~placegym.agents.doppler.
config.PolicyConfig` field that enables it (``flag``: enabled when true or non-empty),
its ``width`` and how its columns are computed (``columns``) and from what:

- ``prepare``: per graph and cluster, the :class:`~placegym.agents.nn.encoder.
  GraphInputs` fields it reads, set once per graph by :func:`graph_inputs` (from a
  :class:`PrepareContext`, which computes what several entries share once);
- ``modules`` (:class:`PlcInput`): the learned layers it owns, which
  :class:`~placegym.agents.doppler.policy.DopplerPolicy` creates under these attribute
  names (the keys of its ``state_dict``) in table order, before the PLC head; ``encode``:
  what it adds to the per-graph :class:`~placegym.agents.doppler.encoding.Encoding`.

The widths of the heads' first layers (:func:`sel_width`, :func:`plc_width`), the device
rows (:func:`plc_devices`) and the concatenations (:func:`sel_columns`,
:func:`plc_columns`) follow from the tables, so an input is added by one entry here (its
column function beside it or in :mod:`~placegym.agents.doppler.features`). The order of
the tables is part of the trained weights: columns are concatenated, and modules
created, in that order.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from placegym.agents.doppler.config import (
    AFFINITY_FEATURES,
    INSERTION_FEATURES,
    LINK_FEATURES,
    PLC_RULES,
    PRICE_FEATURES,
    QUALITY_FEATURES,
    SEL_CONTEXT,
    SEL_PICK,
    SEL_RULES,
    SUCCESSOR_FEATURES,
    TOPOLOGY_CHANNELS,
    TOPOLOGY_ROUNDS,
)
from placegym.agents.doppler.features import (
    SelPairs,
    best_hint_share,
    cluster_links,
    device_affinity,
    insertion_features,
    placed_sums,
    plc_rules,
    price_features,
    quality_features,
    sel_pick,
    sel_rules,
    sibling_share,
    successor_features,
)
from placegym.agents.doppler.hints import (
    HINT_FEATURES,
    hint_groups,
    hint_placements,
    hint_quality,
    hint_share,
)
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs.analysis.levels import b_level
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.observation import DEVICE_FEATURES, NODE_DYNAMIC, time_unit
from placegym.envs.mdp.state import PlacementState
from placegym.teachers.lookahead import LookaheadTeacher

if TYPE_CHECKING:
    from placegym.agents.doppler.config import PolicyConfig
    from placegym.agents.doppler.encoding import Encoding, PlcPolicy

__all__ = [
    "DEVICE_INPUTS",
    "PLC_INPUTS",
    "SEL_INPUTS",
    "DeviceInput",
    "PlcBatch",
    "PlcInput",
    "PrepareContext",
    "SelInput",
    "device_width",
    "enabled",
    "graph_inputs",
    "plc_columns",
    "plc_devices",
    "plc_encode",
    "plc_modules",
    "plc_width",
    "sel_columns",
    "sel_picks",
    "sel_width",
]


# ---------------------------------------------------------------------- prepare context
class PrepareContext:
    """What the ``prepare`` hooks read for one graph and cluster: the policy's config and
    the values several entries share, each computed once (b-levels, hint placements)."""

    def __init__(self, graph: Graph, cluster: Cluster, config: Any) -> None:
        self.graph, self.cluster, self.config = graph, cluster, config

    @functools.cached_property
    def levels(self) -> np.ndarray:
        """``(n,)`` float64 b-levels: ``heft_rule``'s SEL key, as its completions'."""
        return b_level(self.graph, self.cluster)

    @functools.cached_property
    def unit(self) -> float:
        """The time unit of the observation's features (the critical-path length)."""
        return time_unit(self.levels)

    @functools.cached_property
    def placements(self) -> list[Placement]:
        """The placement of each of the config's ``hints``."""
        return hint_placements(self.graph, self.cluster, tuple(self.config.hints))


#: ``prepare(context)``: the :class:`GraphInputs` fields an entry reads, by name.
Prepare = Callable[[PrepareContext], dict[str, Any]]


@dataclass(frozen=True)
class SelInput:
    """An optional SEL input: ``columns(g, step, node, picks)`` gives ``(K, width)`` for
    the ``K`` scored (state, node) pairs (``step`` groups them by state; ``picks``, per
    state, the node the pricer selects next, or None: :func:`sel_columns`)."""

    name: str
    flag: str
    width: int
    columns: Callable[[GraphInputs, Tensor, Tensor, Tensor | None], Tensor]
    prepare: Prepare | None = None


@dataclass(frozen=True)
class DeviceInput:
    """An optional group of device columns: ``columns(state, unit, pricer)`` gives
    ``(D, width)`` float32 for the selected node of ``state``, ``unit`` the value of the
    graph inputs' field ``source`` (its time unit, set by ``prepare``); the columns are
    added for graph inputs where that field is set."""

    name: str
    flag: str
    width: int
    source: str
    columns: Callable[[PlacementState, float, LookaheadTeacher | None], np.ndarray]
    prepare: Prepare


@dataclass
class PlcBatch:
    """The states that PLC scores in one call, as the ``columns`` of :class:`PlcInput`
    read them: ``node (S,)``, ``placed (S, n)``, ``dev (S, D, F)``; ``count (S, D)`` and
    ``agg (S, D, H)`` the number and the mean PLC embedding of the nodes on each device."""

    policy: PlcPolicy
    enc: Encoding
    node: Tensor
    placed: Tensor
    dev: Tensor
    count: Tensor
    agg: Tensor

    @functools.cached_property
    def onehot(self) -> Tensor:
        """``(S, n, D)`` the placement of each state, one-hot (rows of unplaced nodes 0):
        ``S · n · D`` floats, made only for the ``affinity`` input."""
        d = self.dev.shape[1]
        arange = torch.arange(d, device=self.placed.device)
        return (self.placed.unsqueeze(-1) == arange).to(self.agg.dtype)

    @functools.cached_property
    def shares(self) -> Tensor:
        """``(S, D, 3K)`` :func:`~placegym.agents.doppler.hints.hint_share` features."""
        groups = None if self.enc.graph is None else self.enc.graph.groups
        d, hints = self.dev.shape[1], len(self.policy.config.hints)
        return hint_share(groups, self.node, self.placed, d, hints).to(self.agg.dtype)


@dataclass(frozen=True)
class PlcInput:
    """An optional PLC input: ``columns(batch)`` gives ``(S, D, width(config))``."""

    name: str
    flag: str
    width: Callable[[PolicyConfig], int]
    columns: Callable[[PlcBatch], Tensor]
    prepare: Prepare | None = None
    modules: Callable[[PolicyConfig, int], dict[str, nn.Module]] | None = None
    encode: Callable[[PlcPolicy, Encoding], None] | None = None


def enabled(entry: SelInput | DeviceInput | PlcInput, config: Any) -> bool:
    """Whether ``config`` (any object; a missing field is off) enables ``entry``."""
    return bool(getattr(config, entry.flag, False))


# ---------------------------------------------------------------------- SEL entries
def _b_levels(src: PrepareContext) -> dict[str, Any]:
    return {"b_level": torch.from_numpy(src.levels.copy())}


#: The optional SEL inputs, in column order.
SEL_INPUTS: tuple[SelInput, ...] = (
    SelInput(name="rules", flag="rules", width=SEL_RULES, columns=sel_rules),
    SelInput(name="pick", flag="prices", width=SEL_PICK, columns=sel_pick, prepare=_b_levels),
)


# ---------------------------------------------------------------------- device columns
def _insertion(state: PlacementState, unit: float, pricer: LookaheadTeacher | None) -> np.ndarray:
    return insertion_features(state, unit)


#: The optional device columns, in column order (after the observation's).
DEVICE_INPUTS: tuple[DeviceInput, ...] = (
    DeviceInput(
        name="insertion",
        flag="insertion",
        width=INSERTION_FEATURES,
        source="scale",
        columns=_insertion,
        prepare=lambda src: {"scale": src.unit},
    ),
    DeviceInput(
        name="prices",
        flag="prices",
        width=PRICE_FEATURES,
        source="price_scale",
        columns=price_features,
        prepare=lambda src: {"price_scale": src.unit},
    ),
    DeviceInput(
        name="successors",
        flag="successors",
        width=SUCCESSOR_FEATURES,
        source="successor_scale",
        columns=lambda state, unit, pricer: successor_features(state, unit),
        prepare=lambda src: {"successor_scale": src.unit},
    ),
)


# ---------------------------------------------------------------------- PLC entries
def _hint_groups(src: PrepareContext) -> dict[str, Any]:
    groups = hint_groups(src.graph, src.cluster, tuple(src.config.hints), src.placements)
    return {"groups": torch.from_numpy(groups)}


def _affinity_modules(config: PolicyConfig, dev_width: int) -> dict[str, nn.Module]:
    h = config.hidden
    return {"plc_query": nn.Linear(h, h), "plc_key": nn.Linear(h, h)}


def _affinity_encode(policy: PlcPolicy, enc: Encoding) -> None:
    enc.query, enc.key = policy.plc_query(enc.plc_h), policy.plc_key(enc.plc_h)


def _quality_columns(b: PlcBatch) -> Tensor:
    g = b.enc.graph
    quality = quality_features(g, len(b.policy.config.hints), b.dev)
    return torch.cat([quality, best_hint_share(g, b.shares)], dim=-1)


def _topology_width(config: PolicyConfig) -> int:
    return max(config.hidden // 2, 1)


def _topology_modules(config: PolicyConfig, dev_width: int) -> dict[str, nn.Module]:
    h, t = config.hidden, _topology_width(config)
    return {
        "topo_in": nn.Linear(dev_width + 1 + h, t),
        "topo_gate": nn.Sequential(
            nn.Linear(LINK_FEATURES, 16), nn.ReLU(), nn.Linear(16, TOPOLOGY_CHANNELS)
        ),
        "topo_rounds": nn.ModuleList(
            nn.Linear(t * (1 + TOPOLOGY_CHANNELS), t) for _ in range(TOPOLOGY_ROUNDS)
        ),
    }


def _topology_columns(b: PlcBatch) -> Tensor:
    links = None if b.enc.graph is None else b.enc.graph.links
    return b.policy.device_topology(links, b.dev, b.count, b.agg)


#: The optional PLC inputs, in column order (after the fixed columns).
PLC_INPUTS: tuple[PlcInput, ...] = (
    PlcInput(
        name="hints",
        flag="hints",
        width=lambda c: HINT_FEATURES * len(c.hints),
        columns=lambda b: b.shares,
        prepare=_hint_groups,
    ),
    PlcInput(
        name="affinity",
        flag="affinity",
        width=lambda c: AFFINITY_FEATURES,
        columns=lambda b: device_affinity(b.enc, b.node, b.onehot),
        modules=_affinity_modules,
        encode=_affinity_encode,
    ),
    PlcInput(
        name="rules",
        flag="rules",
        width=lambda c: PLC_RULES,
        columns=lambda b: plc_rules(b.dev),
    ),
    PlcInput(
        name="hint_quality",
        flag="hint_quality",
        width=lambda c: QUALITY_FEATURES * len(c.hints) + HINT_FEATURES,
        columns=_quality_columns,
        prepare=lambda src: {
            "quality": torch.from_numpy(hint_quality(src.graph, src.cluster, src.placements))
        },
    ),
    PlcInput(
        name="topology",
        flag="topology",
        width=_topology_width,
        columns=_topology_columns,
        prepare=lambda src: {"links": cluster_links(src.cluster)},
        modules=_topology_modules,
    ),
)


# ---------------------------------------------------------------------- derived
def sel_width(config: PolicyConfig) -> int:
    """Columns per pair of :func:`sel_columns`."""
    extra = sum(e.width for e in SEL_INPUTS if enabled(e, config))
    return NODE_DYNAMIC + SEL_CONTEXT + extra


def device_width(config: Any) -> int:
    """Device features per device (the observation's and the :data:`DEVICE_INPUTS`)."""
    return DEVICE_FEATURES + sum(e.width for e in DEVICE_INPUTS if enabled(e, config))


def plc_width(config: PolicyConfig) -> int:
    """Columns per device of :func:`plc_columns`."""
    # node and mean device embeddings, log1p(count), dev and its mean, lead, sibling share
    fixed = 2 * config.hidden + 1 + 2 * device_width(config) + 2
    return fixed + sum(e.width(config) for e in PLC_INPUTS if enabled(e, config))


def plc_modules(config: PolicyConfig) -> list[tuple[str, nn.Module]]:
    """The learned layers of the enabled PLC inputs, by attribute name, in table order."""
    out: list[tuple[str, nn.Module]] = []
    for entry in PLC_INPUTS:
        if entry.modules is not None and enabled(entry, config):
            out.extend(entry.modules(config, device_width(config)).items())
    return out


def plc_encode(policy: PlcPolicy, enc: Encoding) -> None:
    """Add to the per-graph ``enc`` what the enabled PLC inputs compute once per graph
    (their ``encode``, in table order)."""
    for entry in PLC_INPUTS:
        if entry.encode is not None and enabled(entry, policy.config):
            entry.encode(policy, enc)


def graph_inputs(
    policy: Any,
    obs: dict[str, Any],
    graph: Graph,
    cluster: Cluster,
    hint_placements: Any = None,
) -> GraphInputs:
    """The static inputs of ``policy`` for ``graph`` on ``cluster``: those of the first
    observation ``obs``, plus what the inputs that ``policy.config`` enables read per
    graph (their ``prepare``: hint groups and qualities, the cluster's links, time units
    and b-levels). Any policy: a config without a field enables nothing of it.
    ``hint_placements``, when given, are the hint teachers' placements the hints read
    instead of their own ``place`` (the one-pass decode's, made without the simulator)."""
    inputs = GraphInputs.from_obs(obs)
    config = getattr(policy, "config", None)
    src = PrepareContext(graph, cluster, config)
    if hint_placements is not None:
        src.__dict__["placements"] = hint_placements
    fields: dict[str, Any] = {}
    entries: tuple[SelInput | DeviceInput | PlcInput, ...] = (
        *SEL_INPUTS,
        *DEVICE_INPUTS,
        *PLC_INPUTS,
    )
    for entry in entries:
        if entry.prepare is not None and enabled(entry, config):
            fields.update(entry.prepare(src))
    return dataclasses.replace(inputs, **fields) if fields else inputs


def sel_picks(state: PlacementState, pricer: LookaheadTeacher | None) -> int | None:
    """The node a following pricer (``PolicyConfig.price_follow``) selects next in the
    SEL-phase ``state``, which the ``pick`` column flags; None for any other pricer (the
    column then reads ``heft_rule``'s pick from the graph inputs)."""
    if pricer is None or not pricer.follow:
        return None
    return int(pricer.select_actions(state)[0])


def plc_devices(
    graph: GraphInputs,
    state: PlacementState,
    devices: np.ndarray,
    pricer: LookaheadTeacher | None = None,
) -> np.ndarray:
    """The PLC's device features in ``state``: the observation's ``device`` rows and the
    columns of each :data:`DEVICE_INPUTS` entry whose field the graph inputs set (the
    :func:`~placegym.agents.doppler.features.insertion_features` with a ``scale``, the
    :func:`~placegym.agents.doppler.features.price_features` with a ``price_scale``,
    priced by ``pricer``, the :func:`~placegym.agents.doppler.features.
    successor_features` with a ``successor_scale``); a new array."""
    parts = [devices]
    for entry in DEVICE_INPUTS:
        unit = getattr(graph, entry.source)
        if unit is not None:
            parts.append(entry.columns(state, unit, pricer))
    return np.concatenate(parts, axis=1) if len(parts) > 1 else devices.copy()


def sel_columns(
    config: PolicyConfig,
    g: GraphInputs,
    pairs: SelPairs,
    step: Tensor,
    node: Tensor,
    picks: Tensor | None = None,
) -> Tensor:
    """``(K, sel_width(config))``: each pair's dynamic features and its readiness
    (``pairs``, :func:`~placegym.agents.doppler.features.sel_pairs`) and the enabled
    :data:`SEL_INPUTS`. ``picks`` ``(S,)``: per state, the node the policy's pricer
    selects next (``PolicyConfig.price_follow``; :func:`sel_picks`), which the ``pick``
    column flags; None: ``heft_rule``'s, from the graph inputs."""
    parts = [pairs.rows, pairs.ready]
    for entry in SEL_INPUTS:
        if enabled(entry, config):
            parts.append(entry.columns(g, step, node, picks))
    return torch.cat(parts, dim=-1)


def plc_columns(
    policy: PlcPolicy, enc: Encoding, node: Tensor, placed: Tensor, dev: Tensor
) -> Tensor:
    """``(S, D, plc_width(config))``: the fixed columns (module docstring) and the
    enabled :data:`PLC_INPUTS` of every device of each state."""
    config = policy.config
    d = dev.shape[1]
    sums, count = placed_sums(placed, enc.plc_h, d)  # (S, D, H), (S, D)
    agg = sums / count.clamp(min=1).unsqueeze(-1)
    lead = dev[..., :1] - dev[..., :1].min(dim=1, keepdim=True).values
    context = dev.mean(dim=1, keepdim=True).expand(-1, d, -1)
    parts = [
        enc.plc_h[node].unsqueeze(1).expand(-1, d, -1),
        agg,
        torch.log1p(count).unsqueeze(-1),
        dev,
        context,
        lead,
        sibling_share(
            enc.graph if config.siblings else None, node, placed, d, sums.dtype
        ).unsqueeze(-1),
    ]
    batch = PlcBatch(policy, enc, node, placed, dev, count, agg)
    for entry in PLC_INPUTS:
        if enabled(entry, config):
            parts.append(entry.columns(batch))
    return torch.cat(parts, dim=-1)
