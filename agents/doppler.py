"""The DOPPLER dual policy: separate SEL and PLC networks over a cached graph encoding.

- **SEL** scores every node from its SEL-encoder embedding ``h``, its critical-path
  embeddings (mean embedding along its longest path to a sink and from a source), its
  dynamic features (assigned, device, in frontier, selected, rank, estimated finish) and
  its *readiness* in the current state (:func:`sel_context`: when its inputs are
  estimated to be ready, locally and across the network, relative to the current
  estimated makespan and to the earliest-ready frontier node), so that structurally
  identical nodes are told apart by where and when their producers ran; the
  environment's mask keeps the frontier.
- **PLC** scores every device from the selected node's PLC-encoder embedding, the mean
  PLC embedding of the nodes already placed on that device (and how many), and the
  device's dynamic features (estimated start of the node there and its lead over the best
  device, share of its inputs already there, load, free time, memory use, speed) plus
  their mean over devices as context, and the share of the node's siblings' bytes (the
  other producers of its consumers) already there (:func:`sibling_share`): where its
  consumers will find their other inputs; with :attr:`PolicyConfig.hints`, also how the
  node's hint mates (nodes a heuristic puts with it) are spread over the devices
  (:func:`~placegym.agents.hints.hint_share`); with :attr:`PolicyConfig.topology`, also
  a per-device embedding from message passing over the cluster's links
  (:meth:`DopplerPolicy.device_topology`): where a device sits in the network relative to
  the devices in use.

Encoders run once per episode (their outputs are reused at every step), heads are small
MLPs applied per node / per device, so the policy works for any graph size and any
device count.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from placegym.agents._kernels import (
    placed_sums_grad_kernel,
    placed_sums_kernel,
    readiness_kernel,
    sibling_kernel,
)
from placegym.agents.nn.encoder import POSITION_FEATURES, GraphEncoder, GraphInputs
from placegym.agents.hints import HINT_FEATURES, hint_share
from placegym.envs.observation import DEVICE_FEATURES, NODE_DYNAMIC, NODE_STATIC
from placegym.teachers.base import TIE_RTOL

__all__ = [
    "SEL_CONTEXT",
    "DopplerPolicy",
    "Encoding",
    "PolicyConfig",
    "cluster_links",
    "sel_context",
]

#: Values of :attr:`PolicyConfig.learn`.
LEARN = ("both", "select", "place")
#: Number of :func:`sel_context` features.
SEL_CONTEXT = 3
#: Number of :func:`sel_rules` and of :func:`plc_rules` features (``PolicyConfig.rules``).
SEL_RULES, PLC_RULES = 2, 1
#: Relative tolerance of the rule features' "is the best" tests: well above float32
#: rounding of the observation, well below any difference a teacher would act on.
RULE_RTOL = 1e-5
#: Features per ordered device pair of :func:`cluster_links`, message channels per pair
#: and rounds of :meth:`DopplerPolicy.device_topology` (``PolicyConfig.topology``).
LINK_FEATURES, TOPOLOGY_CHANNELS, TOPOLOGY_ROUNDS = 2, 2, 2
#: Device columns that the rollout adds with ``PolicyConfig.insertion``
#: (:func:`placegym.agents.rollout.insertion_features`).
INSERTION_FEATURES = 3
#: Device columns that the rollout adds with ``PolicyConfig.rollout``
#: (:func:`placegym.agents.rollout.rollout_features`).
ROLLOUT_FEATURES = 2
#: SEL features with ``PolicyConfig.rollout`` (:func:`sel_pick`).
SEL_PICK = 1
_B_LEVEL = 3  # node_static column: b-level / CP
_EST_FINISH = 5  # node_dynamic column: estimated finish / CP (0 if unassigned)
_EDGE_COMM = 0  # edge_attr column: transfer time of the edge / CP


@dataclass(frozen=True)
class PolicyConfig:
    """Sizes of the dual policy (also the ``policy`` section of ``placegym train`` configs).

    Attributes:
        hidden: embedding width ``H`` of both encoders and heads.
        layers: message-passing rounds per encoder.
        learn: phases the policy decides: ``both`` (the dual policy); ``select`` (every
            PLC action is the critical-path teacher's) or ``place`` (every SEL action
            is), as the wrappers :class:`~placegym.teachers.wrappers.SelectOnly` /
            ``PlaceOnly`` do (DOPPLER's ablations).
        siblings: give PLC the share of the node's siblings' bytes on each device
            (:func:`sibling_share`); False feeds zeros (the ablation). It is what lets PLC
            clone a plan's device map: behaviour cloning of anneal's chainmm map (300
            updates) ends at a PLC loss of 0.29 with it and 0.64 without (greedy 0.80 vs
            0.88 of critical_path).
        hints: teachers whose placements PLC sees as hints (e.g. ``("nest", "metis")``;
            :mod:`placegym.agents.hints`), computed once per graph and cluster.
        positions: the encoders also read each node's depth and position within its
            depth level (:func:`~placegym.agents.nn.encoder.node_positions`).
        affinity: PLC also sees, per device, the largest and the mean learned affinity
            (a scaled dot product of query and key projections of the PLC embeddings)
            between the node and the nodes already there (:func:`device_affinity`): a
            learned "put me with these nodes" that can express any grouping.
        rules: both heads read the critical-path teacher's rule as features
            (:func:`sel_rules`, :func:`plc_rules`).
        hint_quality: PLC also sees, per hint, how good that hint's placement is on the
            graph (:func:`~placegym.agents.hints.hint_quality`: log of its simulated
            makespan over the best hint's, and whether it is the best, the same on every
            device) and the best hint's :func:`~placegym.agents.hints.hint_share`
            features again, so that it can learn to follow whichever hint is best on the
            graph (requires ``hints``; the ``best_list`` teacher with the hints as
            candidates labels exactly that).
        topology: PLC also reads a per-device embedding from
            :data:`TOPOLOGY_ROUNDS` rounds of message passing over the cluster's links
            (:meth:`DopplerPolicy.device_topology`), started from each device's features
            and the mean embedding of its nodes. Without it PLC sees the network only
            through the selected node's estimated start on each device, so two empty
            devices equally far from the devices in use look alike even where the rest of
            the network tells them apart (on ``v100x8`` no two devices are
            interchangeable once one is in use), and a plan that chose one of them
            cannot be cloned. Permutation-equivariant: it works on any cluster.
        insertion: PLC also reads HEFT's rule per device: the selected node's
            insertion-based estimated start there (it may start in an idle gap of the
            device, :meth:`~placegym.envs.state.PlacementState.insertion_start`), its
            finish's lead over the earliest one and whether it is the earliest
            (:func:`~placegym.agents.rollout.insertion_features`, added to the device
            rows by the rollout), beside the list-schedule estimate of the observation
            that the critical-path rule reads.
        rollout: PLC also reads, per device, what the rest of the placement would cost
            there: the simulated makespan of ``heft_rule``'s completion of the state
            with the selected node on the device, as its lead over the least one and
            whether it is the least (:func:`~placegym.agents.rollout.rollout_features`,
            the ``lookahead`` teacher's prices). Decoding then costs one simulator call
            per legal device per node (``n * D`` a placement, compiled completions),
            which :func:`~placegym.agents.search.policy_search` counts in its budget
            (the heuristic starts, its greedy pass, then annealing moves only). SEL also
            reads which node the completions select next (:func:`sel_pick`): a policy
            that selects it and places on a device of least price never ends slower
            than the least price it has seen, hence never slower than ``heft_rule``
            (the rollout algorithm's cost-improvement property).
        rollout_starts: with ``rollout``, the prices are the *fortified* lookahead's
            (:class:`~placegym.teachers.lookahead.LookaheadTeacher` with these
            ``starts``, e.g. ``("critical_path", "heft", "nest", "metis",
            "round_robin", "single_device")``): per device the lesser of ``heft_rule``'s
            completion and the incumbent's (the best placement known that extends the
            state; first the fastest of ``heft_rule``'s and those teachers' device maps
            in ``heft_rule``'s selection order). A policy that selects the pick and
            places on a device of least price is then never slower than any of them.
            Empty: the plain lookahead's prices.

    Raises:
        ValueError: a size out of range, an unknown ``learn`` or a hint that is not a
            single-pass teacher, naming the field.
    """

    hidden: int = 64
    layers: int = 3
    learn: str = "both"
    siblings: bool = True
    hints: tuple[str, ...] = ()
    positions: bool = False
    affinity: bool = False
    rules: bool = False
    hint_quality: bool = False
    topology: bool = False
    insertion: bool = False
    rollout: bool = False
    rollout_starts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden: must be >= 1, got {self.hidden!r}")
        if self.layers < 0:
            raise ValueError(f"layers: must be >= 0, got {self.layers!r}")
        if self.learn not in LEARN:
            raise ValueError(f"learn: expected one of {', '.join(LEARN)}, got {self.learn!r}")
        object.__setattr__(self, "hints", tuple(self.hints))
        if (
            "anneal" in self.hints
            or "optimal" in self.hints
            or len(set(self.hints)) != len(self.hints)
        ):
            raise ValueError(
                f"hints: expected distinct single-pass teachers, got {list(self.hints)}"
            )
        if self.hint_quality and not self.hints:
            raise ValueError("hint_quality: needs hints, got none")
        starts = self.rollout_starts
        starts = (starts,) if isinstance(starts, str) else tuple(starts)
        object.__setattr__(self, "rollout_starts", starts)
        if self.rollout_starts:
            from placegym.teachers import list_teachers, teacher_class
            from placegym.teachers.lookahead import LookaheadTeacher

            if not self.rollout:
                raise ValueError("rollout_starts: needs rollout, got rollout=False")
            bad = [
                t
                for t in self.rollout_starts
                if t not in list_teachers() or issubclass(teacher_class(t), LookaheadTeacher)
            ]
            if bad or len(set(self.rollout_starts)) != len(self.rollout_starts):
                raise ValueError(
                    f"rollout_starts: expected distinct registered teachers other than a "
                    f"lookahead, got {list(self.rollout_starts)}"
                )


@dataclass
class Encoding:
    """Per-graph encoder outputs: SEL ``h (n, H)``, ``cp (n, 2H)`` and their projection
    into the SEL head ``sel_static (n, H)``; PLC ``h (n, H)`` and, with affinities, its
    ``query`` and ``key`` projections ``(n, H)``."""

    sel_h: Tensor
    sel_cp: Tensor
    sel_static: Tensor
    plc_h: Tensor
    graph: GraphInputs | None = None
    query: Tensor | None = None
    key: Tensor | None = None


def sel_context(g: GraphInputs, dyn: Tensor, step: Tensor, node: Tensor) -> Tensor:
    """Readiness of scored (state, node) pairs, from the states' node_dynamic.

    For node v in state s (all of v's producers are placed when v is in the frontier),
    with ``f_u`` the estimated finish of producer u, ``c_uv`` the edge's transfer time
    and ``now_s`` the largest estimated finish so far (all divided by the graph's CP):

    - ``max_u f_u - now_s``: inputs ready on the producers' devices;
    - ``max_u (f_u + c_uv) - now_s``: inputs ready anywhere else;
    - ``max_u f_u - min_{w in pairs of s} max_u f_u``: lead over the earliest-ready
      scored node of the same state.

    Computed by a compiled kernel (:mod:`placegym.agents._kernels`), exactly as the
    ``torch`` scatter-max formulation kept in the tests; no gradient (inputs are data).

    Shapes:
        - input: ``dyn (S, n, 6)``, ``step (K,)`` and ``node (K,)`` long
        - output: ``(K, 3)``
    """
    src, dst = g.edge_index.numpy()
    out, ok = readiness_kernel(
        np.ascontiguousarray(dyn[..., _EST_FINISH].numpy()),
        src,
        dst,
        np.ascontiguousarray(g.edge_attr[:, _EDGE_COMM].numpy()),
        step.numpy(),
        node.numpy(),
    )
    if not ok:
        raise ValueError(
            f"step, node: pairs must index dyn of shape {tuple(dyn.shape)}, got steps in "
            f"[{int(step.min())}, {int(step.max())}] and nodes in "
            f"[{int(node.min())}, {int(node.max())}]"
        )
    return torch.from_numpy(out)


def sel_rules(g: GraphInputs, step: Tensor, node: Tensor) -> Tensor:
    """``(K, 2)``: for each scored (state, node) pair, ``b_max - b_v`` (b-levels / CP,
    ``b_max`` the largest over the pairs of the same state, i.e. its frontier) and
    whether that gap is within :data:`RULE_RTOL` of ``b_max`` (the critical-path
    teacher's SEL tie set)."""
    b = g.x[node, _B_LEVEL]
    states = int(step.max()) + 1 if len(step) else 0
    top = torch.full((states,), -torch.inf, dtype=b.dtype)
    top = top.scatter_reduce(0, step, b, reduce="amax", include_self=True)[step]
    gap = top - b
    return torch.stack([gap, (gap <= RULE_RTOL * top.abs()).to(b.dtype)], dim=-1)


def sel_pick(g: GraphInputs, step: Tensor, node: Tensor) -> Tensor:
    """``(K, 1)``: whether each scored (state, node) pair's node is the one ``heft_rule``
    selects in that state (the smallest id among the frontier nodes whose b-level is
    within :data:`~placegym.teachers.base.TIE_RTOL` of the largest, on the exact float64
    b-levels ``g.b_level``): the node that :func:`~placegym.agents.rollout.
    rollout_features`'s completions select next."""
    if g.b_level is None:
        raise ValueError("g: sel_pick needs the graph inputs' b_level (PolicyConfig.rollout)")
    b = g.b_level[node]
    states = int(step.max()) + 1 if len(step) else 0
    top = torch.full((states,), -torch.inf, dtype=b.dtype)
    top = top.scatter_reduce(0, step, b, reduce="amax", include_self=True)[step]
    tied = (b - top).abs() <= TIE_RTOL * top.abs().clamp_min(1e-300)
    big = torch.iinfo(node.dtype).max
    first = torch.full((states,), big, dtype=node.dtype)
    first = first.scatter_reduce(0, step, torch.where(tied, node, big), reduce="amin")[step]
    return (node == first).to(g.x.dtype).unsqueeze(-1)


def plc_rules(dev: Tensor) -> Tensor:
    """``(S, D, 1)``: whether each device's estimated start (``dev[..., 0]``) is within
    :data:`RULE_RTOL` of the state's earliest (the critical-path teacher's PLC tie set;
    devices the mask forbids are the caller's to drop)."""
    est = dev[..., :1]
    first = est.min(dim=1, keepdim=True).values
    return (est - first <= RULE_RTOL * first.abs()).to(dev.dtype)


#: Features per hint of :attr:`PolicyConfig.hint_quality`.
QUALITY_FEATURES = 2


def _hint_quality(g: GraphInputs | None, hints: int, dev: Tensor) -> Tensor:
    """``(S, D, 2K)``: per hint, the graph's hint quality ``q`` (log makespan over the
    best hint's) and whether it is the best (``q == 0``), on every device (zeros without
    it)."""
    s, d = dev.shape[:2]
    if g is None or g.quality is None:
        return dev.new_zeros(s, d, QUALITY_FEATURES * hints)
    q = g.quality.to(dev.dtype)
    x = torch.stack([q, (q <= 0).to(dev.dtype)], dim=-1).reshape(-1)
    return x.expand(s, d, QUALITY_FEATURES * hints)


def _best_hint(g: GraphInputs | None, shares: Tensor) -> Tensor:
    """``(S, D, 3)``: the :func:`~placegym.agents.hints.hint_share` features of the best
    hint (smallest quality, the first on ties; zeros without qualities)."""
    s, d = shares.shape[:2]
    if g is None or g.quality is None:
        return shares.new_zeros(s, d, HINT_FEATURES)
    k = int(torch.argmin(g.quality))  # argmin returns the first minimum
    return shares[..., HINT_FEATURES * k : HINT_FEATURES * (k + 1)]


def _mlp_tail(hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def sibling_share(
    g: GraphInputs | None, node: Tensor, placed: Tensor, d: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """``(S, D)``: for each scored state, the share of the node's siblings' bytes (other
    producers of its consumers) already placed on each device: where its consumers' other
    inputs are, hence where sending to them costs nothing. Zeros without sibling data.
    Computed by a compiled kernel (:mod:`placegym.agents._kernels`), bit for bit as
    ``index_add`` over the CSR entries (the formulation kept in the tests).

    Args:
        g: the graph's inputs (``g.siblings``: each node's siblings and their bytes).
        node: ``(S,)`` the node placed in each state.
        placed: ``(S, n)`` the device of each node in each state (-1: unplaced).
        d: the number of devices ``D``.
        dtype: of the result.

    Raises:
        ValueError: a device in ``placed`` not below ``d`` or a node id out of range.
    """
    s = placed.shape[0]
    if g is None or g.siblings is None:
        return torch.zeros(s, d, dtype=dtype)
    ptr, idx, weight = g.siblings
    share, ok = sibling_kernel(
        ptr.numpy(), idx.numpy(), weight.to(dtype).numpy(), node.numpy(), placed.numpy(), d
    )
    if not ok:
        _bad_states(node, placed, d)
    return torch.from_numpy(share)


def _bad_states(node: Tensor | None, placed: Tensor, d: int) -> None:
    """Raise the ``ValueError`` of a kernel that found a device in ``placed`` not below
    ``d`` or (``node`` given) a node id out of range."""
    n = placed.shape[1]
    if node is not None and (int(node.max()) >= n or int(node.min()) < 0):
        raise ValueError(
            f"node: ids must lie in [0, {n}), got [{int(node.min())}, {int(node.max())}]"
        )
    raise ValueError(f"placed: devices must be below {d}, got {int(placed.max())}")


def _sum_placed(
    placed: Tensor, values: Tensor, d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's sums and counts, and ``placed`` as the array it read."""
    p = np.ascontiguousarray(placed.numpy())
    sums, count, ok = placed_sums_kernel(p, np.ascontiguousarray(values.detach().numpy()), d)
    if not ok:
        _bad_states(None, placed, d)
    return sums, count, p


class _PlacedSums(torch.autograd.Function):
    """:func:`placed_sums` as one autograd node (gradient to ``values`` only)."""

    @staticmethod
    def forward(ctx: Any, placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
        sums, count, ctx.placed = _sum_placed(placed, values, d)
        counts = torch.from_numpy(count)
        ctx.mark_non_differentiable(counts)
        return torch.from_numpy(sums), counts

    @staticmethod
    def backward(ctx: Any, grad_sums: Tensor, _grad_count: Tensor) -> tuple[None, Tensor, None]:
        grad = np.ascontiguousarray(grad_sums.numpy())
        return None, torch.from_numpy(placed_sums_grad_kernel(ctx.placed, grad)), None


def placed_sums(placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
    """``(S, D, H)`` sums of ``values[v]`` over the nodes ``v`` placed on each device in
    each state, and ``(S, D)`` their counts (as ``values.dtype``), from ``placed (S, n)``
    (device, negative: unplaced), gradients to ``values``.

    Computed by compiled kernels (:mod:`placegym.agents._kernels`) in ``O(S · n · H)``
    without an ``(S · n, H)`` gather, bit for bit as ``index_add`` of the placed rows and
    its gradient (the formulation kept in the tests).

    Raises:
        ValueError: a device in ``placed`` not below ``d``.
    """
    if torch.is_grad_enabled() and values.requires_grad:
        return _PlacedSums.apply(placed, values, d)
    sums, count, _ = _sum_placed(placed, values, d)  # rollouts: no autograd node
    return torch.from_numpy(sums), torch.from_numpy(count)


#: Features per device of :func:`device_affinity`.
AFFINITY_FEATURES = 2


def device_affinity(enc: Encoding, node: Tensor, onehot: Tensor) -> Tensor:
    """``(S, D, 2)``: per state and device, the largest and the mean affinity
    ``q_v · k_u / sqrt(H)`` between the state's node v and the nodes u already on the
    device (0 on empty devices); ``(S, D, 0)`` when ``enc`` has no projections.

    Args:
        enc: the encoding (``query``, ``key``).
        node: ``(S,)`` the node placed in each state.
        onehot: ``(S, n, D)`` the placement of each state, one-hot over devices.
    """
    s, _, d = onehot.shape
    if enc.query is None or enc.key is None:
        return onehot.new_zeros(s, d, 0)
    a = enc.query[node] @ enc.key.T / enc.key.shape[1] ** 0.5  # (S, n)
    count = onehot.sum(dim=1)
    mean = torch.einsum("sn,snd->sd", a, onehot) / count.clamp(min=1)
    on = onehot > 0
    top = torch.where(on, a.unsqueeze(-1), torch.full_like(onehot, -torch.inf)).amax(dim=1)
    top = torch.where(count > 0, top, torch.zeros_like(top))
    return torch.stack([top, mean], dim=-1)


class DopplerPolicy(nn.Module):
    """Dual SEL/PLC policy (see the module docstring).

    Shapes (``K`` scored (node, state) pairs, ``S`` PLC states, ``n`` nodes, ``D`` devices):
        - :meth:`sel_inputs`: ``dyn (S, n, 6)``, ``step (K,)``, ``node (K,)`` -> ``(K, F)``,
          ``F`` = 9 (11 with ``rules``)
        - :meth:`sel_scores`: ``nodes (K,)``, ``x (K, F)`` (from :meth:`sel_inputs`) -> ``(K,)``
        - :meth:`plc_logits`: ``node (S,)``, ``placed (S, n)`` (device of each node, -1
          if unplaced), ``dev (S, D, 7)`` (+3 with ``insertion``, +2 with ``rollout``:
          the rollout's :func:`~placegym.agents.rollout.plc_devices`) -> ``(S, D)``
    """

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or PolicyConfig()
        h = self.config.hidden
        node_dim = NODE_STATIC + (POSITION_FEATURES if self.config.positions else 0)
        self.sel_encoder = GraphEncoder(h, self.config.layers, node_dim=node_dim)
        self.plc_encoder = GraphEncoder(h, self.config.layers, node_dim=node_dim)
        # SEL head: Linear([h, cp, dyn]) split into a per-graph static part and a per-step
        # dynamic part, so only (node, step) pairs in the frontier are ever scored.
        self.sel_static = nn.Linear(3 * h, h)
        sel_in = (
            NODE_DYNAMIC
            + SEL_CONTEXT
            + (SEL_RULES if self.config.rules else 0)
            + (SEL_PICK if self.config.rollout else 0)
        )
        self.sel_dynamic = nn.Linear(sel_in, h, bias=False)
        self.sel_tail = _mlp_tail(h)
        dev_in = (
            DEVICE_FEATURES
            + (INSERTION_FEATURES if self.config.insertion else 0)
            + (ROLLOUT_FEATURES if self.config.rollout else 0)
        )
        plc_in = 2 * h + 1 + 2 * dev_in + 2 + HINT_FEATURES * len(self.config.hints)
        if self.config.affinity:
            self.plc_query = nn.Linear(h, h)
            self.plc_key = nn.Linear(h, h)
            plc_in += AFFINITY_FEATURES
        if self.config.rules:
            plc_in += PLC_RULES
        if self.config.hint_quality:
            plc_in += QUALITY_FEATURES * len(self.config.hints) + HINT_FEATURES
        if self.config.topology:
            t = max(h // 2, 1)
            self.topo_in = nn.Linear(dev_in + 1 + h, t)
            self.topo_gate = nn.Sequential(
                nn.Linear(LINK_FEATURES, 16), nn.ReLU(), nn.Linear(16, TOPOLOGY_CHANNELS)
            )
            self.topo_rounds = nn.ModuleList(
                nn.Linear(t * (1 + TOPOLOGY_CHANNELS), t) for _ in range(TOPOLOGY_ROUNDS)
            )
            plc_in += t
        self.plc_head = nn.Sequential(nn.Linear(plc_in, h), _mlp_tail(h))

    @property
    def learns_selection(self) -> bool:
        """Whether SEL actions are the policy's (else :attr:`fixed_teacher`'s)."""
        return self.config.learn in ("both", "select")

    @property
    def learns_placement(self) -> bool:
        """Whether PLC actions are the policy's (else :attr:`fixed_teacher`'s)."""
        return self.config.learn in ("both", "place")

    @property
    def fixed_teacher(self):  # -> Teacher | None
        """The critical-path teacher answering the phase the policy does not learn (the
        first action of its tie set), or None for the dual policy."""
        if self.config.learn == "both":
            return None
        if getattr(self, "_fixed", None) is None:
            from placegym.teachers import get_teacher

            self._fixed = get_teacher("critical_path")
        return self._fixed

    def encode(self, g: GraphInputs) -> Encoding:
        """Both encoders' outputs and the static part of the SEL head (once per graph)."""
        if self.config.positions:
            if g.pos is None:
                raise ValueError("graph inputs: the policy reads node positions, got none")
            g = dataclasses.replace(g, x=torch.cat([g.x, g.pos], dim=-1))
        sel_h, sel_cp = self.sel_encoder(g)
        plc_h, _ = self.plc_encoder(g)
        static = self.sel_static(torch.cat([sel_h, sel_cp], -1))
        enc = Encoding(sel_h, sel_cp, static, plc_h, graph=g)
        if self.config.affinity:
            enc.query, enc.key = self.plc_query(plc_h), self.plc_key(plc_h)
        return enc

    def sel_inputs(self, g: GraphInputs, dyn: Tensor, step: Tensor, node: Tensor) -> Tensor:
        """Per-pair SEL inputs: the node's dynamic features, its :func:`sel_context` and,
        with ``rules``, its :func:`sel_rules`, with ``rollout`` its :func:`sel_pick`
        (``step`` groups the pairs by state, so each state's pairs must be its whole
        frontier)."""
        parts = [dyn[step, node], sel_context(g, dyn, step, node)]
        if self.config.rules:
            parts.append(sel_rules(g, step, node))
        if self.config.rollout:
            parts.append(sel_pick(g, step, node))
        return torch.cat(parts, dim=-1)

    def sel_scores(self, enc: Encoding, nodes: Tensor, x: Tensor) -> Tensor:
        """SEL scores ``(K,)`` of the (state, node) pairs ``x`` (from :meth:`sel_inputs`)."""
        return self.sel_tail(enc.sel_static[nodes] + self.sel_dynamic(x)).squeeze(-1)

    def plc_logits(self, enc: Encoding, node: Tensor, placed: Tensor, dev: Tensor) -> Tensor:
        """PLC logits ``(S, D)`` of the selected nodes on every device (see the class)."""
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
                enc.graph if self.config.siblings else None, node, placed, d, sums.dtype
            ).unsqueeze(-1),
        ]
        if self.config.hints or self.config.affinity:  # (S, n, D), rows of unplaced nodes 0
            onehot = (placed.unsqueeze(-1) == torch.arange(d, device=placed.device)).to(sums.dtype)
            groups = None if enc.graph is None else enc.graph.groups
            shares = hint_share(groups, node, onehot, len(self.config.hints))
            parts.append(shares)
            parts.append(device_affinity(enc, node, onehot))
        if self.config.rules:
            parts.append(plc_rules(dev))
        if self.config.hint_quality:
            parts.append(_hint_quality(enc.graph, len(self.config.hints), dev))
            parts.append(_best_hint(enc.graph, shares))
        if self.config.topology:
            links = None if enc.graph is None else enc.graph.links
            parts.append(self.device_topology(links, dev, count, agg))
        return self.plc_head(torch.cat(parts, dim=-1)).squeeze(-1)

    def device_topology(
        self, links: Tensor | None, dev: Tensor, count: Tensor, agg: Tensor
    ) -> Tensor:
        """``(S, D, T)`` per-device embeddings from message passing over the cluster's
        links (``PolicyConfig.topology``).

        Each device starts from its features ``dev (S, D, F)``, ``log1p`` of its node
        count ``(S, D)`` and the mean embedding of its nodes ``agg (S, D, H)``; each of
        :data:`TOPOLOGY_ROUNDS` rounds updates it from its own state and, per channel,
        the gated mean of the other devices' states, the gates a learned function of
        each pair's :func:`cluster_links` row (``links (D, D, 2)``).

        Raises:
            ValueError: no links in the graph inputs (built without the cluster).
        """
        if links is None:
            raise ValueError(
                "graph inputs: the policy reads the cluster's links (policy.topology), got "
                "none; build the inputs with placegym.agents.rollout.graph_inputs"
            )
        s, d, _ = dev.shape
        x = torch.relu(self.topo_in(torch.cat([dev, torch.log1p(count).unsqueeze(-1), agg], -1)))
        off = 1.0 - torch.eye(d, dtype=x.dtype, device=x.device)
        gate = self.topo_gate(links.to(x.dtype)) * off.unsqueeze(-1) / max(d - 1, 1)
        for layer in self.topo_rounds:
            msg = torch.einsum("dec,set->sdct", gate, x).reshape(s, d, -1)
            x = torch.relu(layer(torch.cat([x, msg], dim=-1)))
        return x


def cluster_links(cluster: Any) -> Tensor:
    """``(D, D, 2)`` float32 per ordered device pair: its bandwidth over the cluster's
    largest and its latency over the largest (0 where all are 0); 0 on the diagonal
    (``PolicyConfig.topology``)."""
    bw = np.asarray(cluster.pair_bandwidth, dtype=np.float64).copy()
    lat = np.asarray(cluster.pair_latency, dtype=np.float64).copy()
    off = ~np.eye(cluster.num_devices, dtype=bool)
    bw = np.where(off & np.isfinite(bw), bw, 0.0)
    lat = np.where(off, lat, 0.0)
    bw = bw / bw.max() if bw.max() > 0 else bw
    lat = lat / lat.max() if lat.max() > 0 else lat
    return torch.from_numpy(np.stack([bw, lat], axis=-1).astype(np.float32))
