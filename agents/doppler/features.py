"""The dual policy's per-state features: what SEL and PLC read beside the encoders.

Each function computes one group of columns from a batch of states (``torch``, in the
heads) or from one :class:`~placegym.envs.mdp.state.PlacementState` (``numpy``, the device
columns that :func:`~placegym.agents.doppler.inputs.plc_devices` adds while episodes are
played). Which of them the policy reads, and in which order, is declared in
:mod:`placegym.agents.doppler.inputs`.

- SEL: :func:`sel_pairs` (each scored pair's node_dynamic row and its readiness,
  :func:`sel_context`: all of a state that SEL reads), :func:`sel_rules` (the
  critical-path rule), :func:`sel_pick` (the node the lookahead's completions select
  next);
- PLC: :func:`placed_sums` (embeddings of the nodes on each device), :func:`sibling_share`,
  :func:`plc_rules`, :func:`device_affinity`, :func:`quality_features` and
  :func:`best_hint_share` (hint qualities), :func:`cluster_links` (the topology's
  per-cluster input);
- device columns: :func:`insertion_features` (HEFT's insertion rule) and
  :func:`price_features` (the lookahead's prices, Bertsekas's rollout algorithm over
  ``heft_rule``), with the pricers that compute them (:func:`new_pricer`,
  :func:`prices_with`).

The compiled kernels (:mod:`placegym.agents.doppler._kernels`) compute
:func:`sel_context`, :func:`sibling_share` and :func:`placed_sums` bit for bit as the
``torch`` formulations kept in the tests. They run on the CPU whatever the device of
their tensors (:func:`_host`: the tensors themselves on the CPU, copies from elsewhere)
and return their results on the device of the inputs (a learner on a GPU pays a copy
each way; :func:`placed_sums`'s kernel never builds the ``(S · n, H)`` gather that a
``torch`` formulation on the GPU would). Every other function computes on the device of
its tensors.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from placegym.agents.doppler._kernels import (
    placed_sums_grad_kernel,
    placed_sums_kernel,
    readiness_kernel,
    sibling_kernel,
)
from placegym.agents.doppler.config import QUALITY_FEATURES, RULE_RTOL
from placegym.agents.doppler.hints import HINT_FEATURES
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs.mdp.observation import FEATURE_MAX
from placegym.envs.mdp.state import PlacementState
from placegym.teachers.base import TIE_RTOL, Teacher
from placegym.teachers.heft import successor_finish, successor_tail
from placegym.teachers.lookahead import LookaheadTeacher

if TYPE_CHECKING:
    from placegym.agents.doppler.encoding import Encoding

__all__ = [
    "SelPairs",
    "best_hint_share",
    "cluster_links",
    "device_affinity",
    "insertion_features",
    "new_pricer",
    "placed_sums",
    "plc_rules",
    "price_features",
    "prices_with",
    "quality_features",
    "sel_context",
    "sel_pairs",
    "sel_pick",
    "sel_rules",
    "sibling_share",
]

_B_LEVEL = 3  # node_static column: b-level / CP
_EST_FINISH = 5  # node_dynamic column: estimated finish / CP (0 if unassigned)
_EDGE_COMM = 0  # edge_attr column: transfer time of the edge / CP


def _host(x: Tensor) -> np.ndarray:
    """``x`` as a ``numpy`` array for a compiled kernel: its own memory when it is on the
    CPU, else a copy there (no gradient either way)."""
    return x.detach().cpu().numpy()


# ---------------------------------------------------------------------- SEL
def sel_context(g: GraphInputs, dyn: Tensor, step: Tensor, node: Tensor) -> Tensor:
    """Readiness of scored (state, node) pairs, from the states' node_dynamic.

    For node v in state s (all of v's producers are placed when v is in the frontier),
    with ``f_u`` the estimated finish of producer u, ``c_uv`` the edge's transfer time
    and ``now_s`` the largest estimated finish so far (all divided by the graph's CP):

    - ``max_u f_u - now_s``: inputs ready on the producers' devices;
    - ``max_u (f_u + c_uv) - now_s``: inputs ready anywhere else;
    - ``max_u f_u - min_{w in pairs of s} max_u f_u``: lead over the earliest-ready
      scored node of the same state.

    Computed by a compiled kernel (:mod:`placegym.agents.doppler._kernels`), exactly as
    the ``torch`` scatter-max formulation kept in the tests; no gradient (inputs are data).

    Shapes:
        - input: ``dyn (S, n, 6)``, ``step (K,)`` and ``node (K,)`` long
        - output: ``(K, 3)``
    """
    src, dst = _host(g.edge_index)
    out, ok = readiness_kernel(
        np.ascontiguousarray(_host(dyn[..., _EST_FINISH])),
        src,
        dst,
        np.ascontiguousarray(_host(g.edge_attr[:, _EDGE_COMM])),
        _host(step),
        _host(node),
    )
    if not ok:
        raise ValueError(
            f"step, node: pairs must index dyn of shape {tuple(dyn.shape)}, got steps in "
            f"[{int(step.min())}, {int(step.max())}] and nodes in "
            f"[{int(node.min())}, {int(node.max())}]"
        )
    return torch.from_numpy(out).to(dyn.device)


class SelPairs(NamedTuple):
    """What SEL reads of the states, per scored (state, node) pair: ``rows (K, 6)`` the
    pair's node_dynamic row and ``ready (K, 3)`` its readiness (:func:`sel_context`).

    An episode's record keeps these for its frontier pairs only, ``36 · K`` bytes, where
    the states' whole node_dynamic (from which :func:`sel_pairs` takes them) is
    ``24 · S · n``: 550 MB for one episode of a 4,894-node graph."""

    rows: Tensor
    ready: Tensor


def sel_pairs(g: GraphInputs, dyn: Tensor, step: Tensor, node: Tensor) -> SelPairs:
    """:class:`SelPairs` of the pairs ``(step[k], node[k])`` of the states ``dyn (S, n, 6)``
    (each state's pairs must be its whole frontier, as :func:`sel_context` reads them)."""
    return SelPairs(dyn[step, node], sel_context(g, dyn, step, node))


def sel_rules(g: GraphInputs, step: Tensor, node: Tensor, picks: Tensor | None = None) -> Tensor:
    """``(K, 2)``: for each scored (state, node) pair, ``b_max - b_v`` (b-levels / CP,
    ``b_max`` the largest over the pairs of the same state, i.e. its frontier) and
    whether that gap is within :data:`~placegym.agents.doppler.config.RULE_RTOL` of
    ``b_max`` (the critical-path teacher's SEL tie set); ``picks`` is not read."""
    b = g.x[node, _B_LEVEL]
    states = int(step.max()) + 1 if len(step) else 0
    top = torch.full((states,), -torch.inf, dtype=b.dtype, device=b.device)
    top = top.scatter_reduce(0, step, b, reduce="amax", include_self=True)[step]
    gap = top - b
    return torch.stack([gap, (gap <= RULE_RTOL * top.abs()).to(b.dtype)], dim=-1)


def sel_pick(g: GraphInputs, step: Tensor, node: Tensor, picks: Tensor | None = None) -> Tensor:
    """``(K, 1)``: whether each scored (state, node) pair's node is the one ``heft_rule``
    selects in that state (the smallest id among the frontier nodes whose b-level is
    within :data:`~placegym.teachers.base.TIE_RTOL` of the largest, on the exact float64
    b-levels ``g.b_level``): the node that :func:`price_features`'s completions select
    next. ``picks`` ``(S,)``: instead, per state, the node the pricer selects next
    (``PolicyConfig.price_follow``: :meth:`~placegym.teachers.lookahead.LookaheadTeacher.
    select_actions`)."""
    if picks is not None:
        return (node == picks[step]).to(g.x.dtype).unsqueeze(-1)
    if g.b_level is None:
        raise ValueError("g: sel_pick needs the graph inputs' b_level (PolicyConfig.prices)")
    b = g.b_level[node]
    states = int(step.max()) + 1 if len(step) else 0
    top = torch.full((states,), -torch.inf, dtype=b.dtype, device=b.device)
    top = top.scatter_reduce(0, step, b, reduce="amax", include_self=True)[step]
    tied = (b - top).abs() <= TIE_RTOL * top.abs().clamp_min(1e-300)
    big = torch.iinfo(node.dtype).max
    first = torch.full((states,), big, dtype=node.dtype, device=node.device)
    first = first.scatter_reduce(0, step, torch.where(tied, node, big), reduce="amin")[step]
    return (node == first).to(g.x.dtype).unsqueeze(-1)


# ---------------------------------------------------------------------- PLC
def plc_rules(dev: Tensor) -> Tensor:
    """``(S, D, 1)``: whether each device's estimated start (``dev[..., 0]``) is within
    :data:`~placegym.agents.doppler.config.RULE_RTOL` of the state's earliest (the
    critical-path teacher's PLC tie set; devices the mask forbids are the caller's to
    drop)."""
    est = dev[..., :1]
    first = est.min(dim=1, keepdim=True).values
    return (est - first <= RULE_RTOL * first.abs()).to(dev.dtype)


def quality_features(g: GraphInputs | None, hints: int, dev: Tensor) -> Tensor:
    """``(S, D, 2K)``: per hint, the graph's hint quality ``q`` (log makespan over the
    best hint's) and whether it is the best (``q == 0``), on every device (zeros without
    it)."""
    s, d = dev.shape[:2]
    if g is None or g.quality is None:
        return dev.new_zeros(s, d, QUALITY_FEATURES * hints)
    q = g.quality.to(dev.dtype)
    x = torch.stack([q, (q <= 0).to(dev.dtype)], dim=-1).reshape(-1)
    return x.expand(s, d, QUALITY_FEATURES * hints)


def best_hint_share(g: GraphInputs | None, shares: Tensor) -> Tensor:
    """``(S, D, 3)``: the :func:`~placegym.agents.doppler.hints.hint_share` features of
    the best hint (smallest quality, the first on ties; zeros without qualities)."""
    s, d = shares.shape[:2]
    if g is None or g.quality is None:
        return shares.new_zeros(s, d, HINT_FEATURES)
    k = int(torch.argmin(g.quality))  # argmin returns the first minimum
    return shares[..., HINT_FEATURES * k : HINT_FEATURES * (k + 1)]


def sibling_share(
    g: GraphInputs | None, node: Tensor, placed: Tensor, d: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """``(S, D)``: for each scored state, the share of the node's siblings' bytes (other
    producers of its consumers) already placed on each device: where its consumers' other
    inputs are, hence where sending to them costs nothing. Zeros without sibling data.
    Computed by a compiled kernel (:mod:`placegym.agents.doppler._kernels`), bit for bit
    as ``index_add`` over the CSR entries (the formulation kept in the tests).

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
        return torch.zeros(s, d, dtype=dtype, device=placed.device)
    ptr, idx, weight = g.siblings
    share, ok = sibling_kernel(
        _host(ptr), _host(idx), _host(weight.to(dtype)), _host(node), _host(placed), d
    )
    if not ok:
        _bad_states(node, placed, d)
    return torch.from_numpy(share).to(placed.device)


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
    p = np.ascontiguousarray(_host(placed))
    sums, count, ok = placed_sums_kernel(p, np.ascontiguousarray(_host(values)), d)
    if not ok:
        _bad_states(None, placed, d)
    return sums, count, p


class _PlacedSums(torch.autograd.Function):
    """:func:`placed_sums` as one autograd node (gradient to ``values`` only)."""

    @staticmethod
    def forward(ctx: Any, placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
        sums, count, ctx.placed = _sum_placed(placed, values, d)
        counts = torch.from_numpy(count).to(values.device)
        ctx.mark_non_differentiable(counts)
        return torch.from_numpy(sums).to(values.device), counts

    @staticmethod
    def backward(ctx: Any, grad_sums: Tensor, _grad_count: Tensor) -> tuple[None, Tensor, None]:
        grad = np.ascontiguousarray(_host(grad_sums))
        out = torch.from_numpy(placed_sums_grad_kernel(ctx.placed, grad))
        return None, out.to(grad_sums.device), None


def placed_sums(placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
    """``(S, D, H)`` sums of ``values[v]`` over the nodes ``v`` placed on each device in
    each state, and ``(S, D)`` their counts (as ``values.dtype``), from ``placed (S, n)``
    (device, negative: unplaced), gradients to ``values``.

    Computed by compiled kernels (:mod:`placegym.agents.doppler._kernels`) in
    ``O(S · n · H)`` without an ``(S · n, H)`` gather, bit for bit as ``index_add`` of the
    placed rows and its gradient (the formulation kept in the tests).

    Raises:
        ValueError: a device in ``placed`` not below ``d``.
    """
    if torch.is_grad_enabled() and values.requires_grad:
        return _PlacedSums.apply(placed, values, d)
    sums, count, _ = _sum_placed(placed, values, d)  # episodes: no autograd node
    return torch.from_numpy(sums).to(values.device), torch.from_numpy(count).to(values.device)


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


# ---------------------------------------------------------------------- device columns
def insertion_features(state: PlacementState, scale: float) -> np.ndarray:
    """``(D, 3)`` float32 per device, for the selected node (``PolicyConfig.insertion``):
    its insertion-based estimated start (:meth:`PlacementState.insertion_start`) /
    ``scale``, its insertion-based finish there minus the earliest over the devices /
    ``scale``, and whether that lead is within
    :data:`~placegym.agents.doppler.config.RULE_RTOL` of the earliest (HEFT's tie set;
    devices the mask forbids are the caller's to drop)."""
    start = state.insertion_start()
    finish = start + state.costs.duration[state.selected]
    first = finish.min()
    lead = finish - first
    return np.stack(
        [
            np.minimum(start / scale, FEATURE_MAX),
            np.minimum(lead / scale, FEATURE_MAX),
            lead <= RULE_RTOL * abs(first),
        ],
        axis=-1,
    ).astype(np.float32)


def successor_features(state: PlacementState, scale: float) -> np.ndarray:
    """``(D, 2)`` float32 per device, for the selected node (``PolicyConfig.successors``):
    :func:`~placegym.teachers.heft.successor_finish` there (with the b-level tails of
    :class:`~placegym.teachers.heft.HeftLookaheadTeacher`) minus the least over the
    devices, / ``scale``, and whether it is within
    :data:`~placegym.agents.doppler.config.RULE_RTOL` of the least (the tie set of
    ``heft_lookahead``'s rule; devices the mask forbids are the caller's to drop)."""
    score = successor_finish(state, successor_tail(state.graph, state.cluster))
    first = score.min()
    lead = score - first
    return np.stack(
        [np.minimum(lead / scale, FEATURE_MAX), lead <= RULE_RTOL * abs(first)], axis=-1
    ).astype(np.float32)


@functools.cache
def _pricer(starts: tuple[str, ...] = (), follow: bool = False) -> LookaheadTeacher:
    """The lookahead teacher whose per-device prices :func:`price_features` reads (one
    per process, ``starts`` and ``follow``; it keeps the prices of recent states of a
    few graphs)."""
    return LookaheadTeacher("heft_rule", cache_size=4096, starts=starts, follow=follow)


def _price_spec(policy: Any) -> tuple[tuple[str, ...], bool]:
    """``(starts, follow)`` of ``policy``'s pricer (its ``PolicyConfig.price_starts`` and
    ``price_follow``; empty and False for any other policy)."""
    config = getattr(policy, "config", None)
    starts = tuple(getattr(config, "price_starts", ()))
    return starts, bool(starts) and bool(getattr(config, "price_follow", False))


def new_pricer(policy: Any, cache_size: int = 4096) -> LookaheadTeacher | None:
    """A fresh lookahead pricing ``policy``'s price inputs (None if it reads none): over
    ``heft_rule``, fortified with its ``PolicyConfig.price_starts``, following its
    incumbent with ``price_follow``."""
    config = getattr(policy, "config", None)
    if not getattr(config, "prices", False):
        return None
    starts, follow = _price_spec(policy)
    return LookaheadTeacher("heft_rule", cache_size=cache_size, starts=starts, follow=follow)


def prices_with(teacher: Teacher | None, policy: Any = None) -> LookaheadTeacher | None:
    """The lookahead that prices ``policy``'s price inputs while episodes are played:
    ``teacher`` itself when it is a :class:`~placegym.teachers.lookahead.
    LookaheadTeacher` over ``heft_rule`` with the policy's ``price_starts`` and
    ``price_follow``, no ``moves``, that caches its answers (its PLC labels and the
    :func:`price_features` are then one computation per state; the prices do not depend
    on its ``rtol``); else
    the process-wide pricer of those starts (None for a plain pricer, which
    :func:`price_features` finds itself)."""
    starts, follow = _price_spec(policy)
    if (
        isinstance(teacher, LookaheadTeacher)
        and teacher.base == "heft_rule"
        and teacher.starts == starts
        and teacher.follow == follow
        and not teacher.moves
        and teacher.cache_size > 0
    ):
        return teacher
    return _pricer(starts, follow) if starts else None


def price_features(
    state: PlacementState, scale: float, pricer: LookaheadTeacher | None = None
) -> np.ndarray:
    """``(D, 2)`` float32 per device, for the selected node (``PolicyConfig.prices``):
    the simulated makespan of ``heft_rule``'s completion of ``state`` with the node on
    the device (:meth:`~placegym.teachers.lookahead.LookaheadTeacher.place_costs`) minus
    the least over the legal devices, / ``scale``, and whether that lead is within
    :data:`~placegym.agents.doppler.config.RULE_RTOL` of the least (the lookahead's tie
    set). Devices the mask forbids get ``FEATURE_MAX`` and 0 (the caller drops them). One
    simulator call per legal device, unless the state's prices are cached.

    ``pricer``: the lookahead over ``heft_rule`` that prices the devices (its cache and
    its :attr:`~placegym.teachers.lookahead.LookaheadTeacher.calls`); the process-wide
    one by default. Any such pricer of the same ``starts`` gives the same features."""
    if pricer is None:
        pricer = _pricer()
    elif pricer.base != "heft_rule":
        raise ValueError(f"pricer: expected a lookahead over 'heft_rule', got {pricer!r}")
    cost = pricer.place_costs(state)
    best = cost.min()
    lead = cost - best
    return np.stack(
        [np.minimum(lead / scale, FEATURE_MAX), lead <= RULE_RTOL * abs(best)], axis=-1
    ).astype(np.float32)
