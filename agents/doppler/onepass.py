"""The one-pass greedy decode of the dual policy: no simulator, incremental features.

:class:`OnePassDecoder` decodes the greedy placement of a
:class:`~placegym.agents.doppler.policy.DopplerPolicy` whose config reads no lookahead
prices, **exactly** as :meth:`Decoder.greedy <placegym.agents.doppler.decoder.Decoder.
greedy>` (hence :func:`~placegym.agents.doppler.episodes.play_episodes` with
``greedy=True``) decodes it from the same graph inputs, under the same memory mask: the
same placement, bit for bit (the heads read bit-identical inputs of the same shapes;
from :data:`~placegym.agents.doppler.heads.PARTED_MIN_DEVICES` devices the PLC head's
first layer is evaluated by parts, :class:`~placegym.agents.doppler.heads.PartedHead`,
whose logits equal the whole head's up to float32 rounding). It differs in how each
state's inputs are obtained:

- **encoders once**: both encoders, the static part of the SEL head and the graph
  inputs are computed once per decode (:meth:`OnePassDecoder.__init__`);
- **incremental features**: per step only what the step changes is updated; no feature
  is recomputed over all nodes. The readiness of a node (its inputs' estimated arrival,
  :func:`~placegym.agents.doppler.features.sel_context`) is fixed when it enters the
  frontier; per device, the sum of the PLC embeddings of its nodes (added in ascending
  node id, as :func:`~placegym.agents.doppler.features.placed_sums` adds them), the
  count of its nodes per hint group (:func:`~placegym.agents.doppler.hints.hint_share`)
  and its busy intervals (HEFT's insertion rule,
  :meth:`~placegym.envs.mdp.state.PlacementState.insertion_start`) are kept up to date;
  the observation's rows and the state's list schedule are those of
  :class:`~placegym.envs.mdp.observation.ObservationBuilder` and
  :class:`~placegym.envs.mdp.state.PlacementState`, which already update per step;
- **no simulator and no lookahead**: nothing is simulated while placing, neither prices
  (refused: ``PolicyConfig.prices``) nor the reserves of
  :func:`~placegym.agents.doppler.decoder.reserved_greedy`: the decode runs under the
  policy's memory mask alone (the room masks and the recompute set of a ``"room"`` or
  ``"live"`` :class:`~placegym.envs.mdp.state.PlacementState`). Hints are the teachers' placements
  where memory cannot bind (no teacher simulates there); where it may, the teachers'
  own placements are made to fit by simulation, and :func:`plain_hint_placements`
  gives instead their placements on a copy of the cluster whose memory cannot bind,
  unsimulated (the only inputs that differ from
  :class:`~placegym.agents.doppler.decoder.Decoder`'s, which reads the simulated ones).

**Per-step cost** (``k`` the node's producers, ``o`` its consumers, ``s`` its siblings,
``F`` the frontier, ``D`` devices, ``H`` the hidden width, ``K`` hints, ``I`` the busy
intervals a device's gap search passes):

- SEL: ``O(F · H²)``, the head on every frontier node (the policy scores them all),
  plus ``O(F)`` to write its inputs;
- PLC: ``O(k · D + s + D · (H² + K + I))``: the arrival of the node's inputs on every
  device (list-schedule and insertion-based estimates), its sibling shares, the gap
  search per device and the head on every device (``O(D · (W - 2H) · H + D · H²)``
  by parts on many devices, ``W`` its input width; with ``topology``, plus its
  ``O(D² · H)`` message passing; with ``successors``, plus ``O(o · (k' · D + D ·
  min(D, 16)))`` for HEFT's lookahead, ``k'`` a consumer's producers, compiled);
- placing the node: ``O(k · D + o · k + K + H)``: the state's and the observation's
  updates, the readiness of the consumers that enter the frontier, the hint counts and
  the device's embedding sum (added to in ``O(H)``, or summed again in ``O(n + c · H)``
  for the ``c`` nodes there in the rare case that a node of larger id is already
  there, to keep the ascending order of the sum);
- the memory mask: what :meth:`~placegym.envs.mdp.state.PlacementState.place_mask`
  costs, ``O(D)``, and where memory may bind with ``memory_mask="room"`` ``O(U + D)``
  for ``U`` units (the unopened units' bytes) plus its packing checks, with
  ``memory_mask="live"`` ``O(D)`` where the state's
  :class:`~placegym.envs.analysis.room.Headroom` bounds show every device with room,
  else ``O(E + n)`` (the live bytes of the partial placement), with ``"timed"`` ``O(n)``
  more (the held bytes on the device taken) and ``O(k · P)`` where a device's copies
  need the closer look (the node's ``k`` copies against the ``P`` runs placed).

No feature is recomputed over all nodes, so a decode costs ``O(n · (F + D) · H²)`` in
the heads and ``O(E · D)`` in the estimates; on one torch thread the benchmark
``tests/benchmarks/test_onepass_speed.py`` times ``onepass-v1`` per 1,000 nodes on
the suites' graphs of 600 to 9,313 nodes and up to 1,024 devices, and the set-up (the
hints' placements, the encoders) plus the decode of the largest, against targets of
1 s per 1,000 nodes and 10 s (on 1,024 devices, where memory is ample on every device
and the bounds answer the mask, the PLC head on every device, evaluated by parts there,
and the hints' placements dominate).

Policies it refuses (``ValueError`` naming the field): lookahead prices (``prices``:
simulated per device), hint qualities (``hint_quality``: the hints simulated per graph),
hints of teachers that simulate whatever the memory (outside :data:`ONE_PASS_HINTS`),
affinities (``affinity``: a max over every placed node per device, ``O(n · H)`` a
step), and policies that do not choose both their SEL and PLC actions.
"""

from __future__ import annotations

import copy
from bisect import insort
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler._kernels import (
    Intervals,
    device_sum_kernel,
    insertion_columns_kernel,
    insertion_kernel,
    plc_columns_kernel,
    sel_columns_kernel,
    sibling_kernel,
)
from placegym.agents.doppler.config import INSERTION_FEATURES, RULE_RTOL
from placegym.agents.doppler.decoder import decodes_like_episodes
from placegym.agents.doppler.episodes import greedy_pick
from placegym.agents.doppler.heads import PARTED_MIN_DEVICES, PartedHead, forward, head_layers
from placegym.agents.doppler.hints import plain_hint_placements, unbounded_memory
from placegym.agents.doppler.inputs import (
    DEVICE_INPUTS,
    PLC_INPUTS,
    SEL_INPUTS,
    device_width,
    enabled,
    graph_inputs,
    plc_width,
    sel_width,
)
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.observation import FEATURE_MAX, ObservationBuilder
from placegym.envs.mdp.state import PlacementState
from placegym.teachers._successor_kernel import arrival_kernel, successor_columns_kernel
from placegym.teachers.heft import LOOKAHEAD_WIDTH, successor_tail, transposed_links

__all__ = [
    "ONE_PASS_HINTS",
    "ONE_PASS_REFUSED",
    "OnePassDecoder",
    "check_one_pass",
    "one_pass_greedy",
    "one_pass_inputs",
    "plain_hint_placements",
    "unbounded_memory",
]

#: Config fields a one-pass decode refuses (module docstring).
ONE_PASS_REFUSED = ("prices", "hint_quality", "affinity")
#: Hints whose teachers place without a simulator call where memory cannot bind (the
#: others simulate whatever the memory: ``single_device`` its devices, the searches).
ONE_PASS_HINTS = ("critical_path", "heft", "heft_rule", "nest", "metis", "random", "round_robin")
#: The PLC inputs (:data:`~placegym.agents.doppler.inputs.PLC_INPUTS`) it computes.
_PLC_SUPPORTED = ("hints", "rules", "topology")
#: SEL inputs (:data:`~placegym.agents.doppler.inputs.SEL_INPUTS`) and device columns
#: (:data:`~placegym.agents.doppler.inputs.DEVICE_INPUTS`) it computes.
_SEL_SUPPORTED = ("rules",)
_DEVICE_SUPPORTED = ("insertion", "successors")
_B_LEVEL, _EST_FINISH, _EDGE_COMM = 3, 5, 0  # node_static, node_dynamic, edge_attr columns
_EST_START = 0  # device column: estimated start of the selected node / CP


def check_one_pass(policy: Any) -> None:
    """Raise ``ValueError`` unless ``policy`` can be decoded in one pass (module
    docstring), naming the field that prevents it."""
    if not isinstance(policy, DopplerPolicy) or not decodes_like_episodes(policy):
        raise ValueError(
            "policy: expected a DopplerPolicy that chooses its SEL and PLC actions (learn='both')"
        )
    config = policy.config
    for name in ONE_PASS_REFUSED:
        if getattr(config, name, False):
            raise ValueError(
                f"policy.{name}: a one-pass decode reads no simulated or O(n)-per-step "
                f"input; got {name}={getattr(config, name)!r}"
            )
    bad = [h for h in config.hints if h not in ONE_PASS_HINTS]
    if bad:
        raise ValueError(
            f"policy.hints: {bad} place by simulation; a one-pass decode reads hints of "
            f"{', '.join(ONE_PASS_HINTS)}"
        )
    tables = ((SEL_INPUTS, _SEL_SUPPORTED), (DEVICE_INPUTS, _DEVICE_SUPPORTED))
    for table, ok in (*tables, (PLC_INPUTS, _PLC_SUPPORTED)):
        for entry in table:
            if enabled(entry, config) and entry.name not in ok:
                raise ValueError(f"policy.{entry.flag}: no one-pass decode of {entry.name!r}")


def one_pass_inputs(
    policy: DopplerPolicy,
    obs: dict[str, Any],
    graph: Graph,
    cluster: Cluster,
    known: Mapping[str, Placement] | None = None,
) -> GraphInputs:
    """:func:`~placegym.agents.doppler.inputs.graph_inputs` with the hints of
    :func:`plain_hint_placements` (``known``: teachers' placements already made): the
    same inputs where memory cannot bind, and no simulator call anywhere."""
    return _inputs_and_hints(policy, obs, graph, cluster, known)[0]


def _inputs_and_hints(
    policy: DopplerPolicy,
    obs: dict[str, Any],
    graph: Graph,
    cluster: Cluster,
    known: Mapping[str, Placement] | None,
) -> tuple[GraphInputs, dict[str, Placement]]:
    """:func:`one_pass_inputs` and the hints' placements they read, by name."""
    names = tuple(policy.config.hints)
    plain = plain_hint_placements(graph, cluster, names, known) if names else None
    inputs = graph_inputs(policy, obs, graph, cluster, hint_placements=plain)
    return inputs, dict(zip(names, plain or ()))


def _plc_columns(config: Any) -> dict[str, int]:
    """The first column of each optional PLC input in the head's input (-1 where not
    enabled) and its width (``NAME_width``): after the fixed columns (``inputs.
    plc_columns``), in :data:`~placegym.agents.doppler.inputs.PLC_INPUTS` order."""
    col = 2 * config.hidden + 1 + 2 * device_width(config) + 2
    out = {name: -1 for name in _PLC_SUPPORTED}
    for entry in PLC_INPUTS:
        if enabled(entry, config):
            out[entry.name], out[f"{entry.name}_width"] = col, entry.width(config)
            col += entry.width(config)
    return out


class OnePassDecoder:
    """The greedy placement of ``policy`` on ``graph`` and ``cluster`` in one pass
    (module docstring): encoders once, then per step incremental features and one small
    head evaluation, no simulator call.

    Args:
        policy: a dual policy without lookahead prices (:func:`check_one_pass`).
        graph: the graph to place.
        cluster: the devices to place it on.
        memory_mask: the mask decoded under (``True``, ``"resident"``, ``"room"``,
            ``"live"``, ``"timed"``, ``False``: :class:`~placegym.envs.mdp.state.
            PlacementState`); that of the policy's training for a trained policy.
        inputs: the graph inputs to read (default :func:`one_pass_inputs`); passing
            :class:`~placegym.agents.doppler.decoder.Decoder`'s gives its greedy
            placement, bit for bit, wherever memory binds or not.
        known: teachers' placements of ``graph`` on ``cluster`` already made (name to
            placement), read as hints by the default inputs where memory cannot bind
            instead of placing again (:func:`plain_hint_placements`).

    Raises:
        ValueError: a policy that cannot be decoded in one pass, naming the field.
    """

    def __init__(
        self,
        policy: DopplerPolicy,
        graph: Graph,
        cluster: Cluster,
        memory_mask: bool | str = True,
        *,
        inputs: GraphInputs | None = None,
        known: Mapping[str, Placement] | None = None,
    ) -> None:
        check_one_pass(policy)
        self.policy, self.graph, self.cluster = policy, graph, cluster
        self.memory_mask = memory_mask
        n, e = graph.num_nodes, graph.num_edges
        self._observer = ObservationBuilder(graph, cluster, max(n, 1), e)
        #: the hints' placements it read, by name (where it built its inputs)
        self.hints: dict[str, Placement] = {}
        if inputs is None:
            obs = self._observer.observe(np.zeros(1, dtype=bool), 0)
            inputs, self.hints = _inputs_and_hints(policy, obs, graph, cluster, known)
        self.inputs = inputs
        with torch.inference_mode():
            self.enc = policy.encode(inputs)
        g = inputs
        self._b_level = g.x[:, _B_LEVEL].numpy()
        self._comm = np.ascontiguousarray(g.edge_attr[:, _EDGE_COMM].numpy())
        src, dst = g.edge_index.numpy()
        order = np.argsort(dst, kind="stable")
        self._in_src = src[order].astype(np.int64)
        self._in_edge = order.astype(np.int64)
        self._in_ptr = np.searchsorted(dst[order], np.arange(n + 1)).astype(np.int64)
        self._pptr, self._pidx = (np.asarray(a, dtype=np.int64) for a in graph.producer_csr)
        cptr, cidx = graph.consumer_csr
        self._cptr_cidx = (np.asarray(cptr, dtype=np.int64), np.asarray(cidx, dtype=np.int64))
        self._siblings = None
        if policy.config.siblings and g.siblings is not None:
            ptr, idx, weight = g.siblings
            self._siblings = (ptr.numpy(), idx.numpy(), weight.to(torch.float32).numpy())
        self._groups = None if g.groups is None else np.ascontiguousarray(g.groups.numpy())
        self._plc_h = self.enc.plc_h.numpy()
        config = policy.config
        self._sel_width, self._plc_width = sel_width(config), plc_width(config)
        self._dev_width = device_width(config)
        self._sel_dyn = head_layers(policy.sel_dynamic)
        self._sel_tail = head_layers(policy.sel_tail)
        self._plc_head = head_layers(policy.plc_head)

    @torch.inference_mode()
    def greedy(self) -> Placement:
        """The policy's greedy placement (the class docstring); no simulator call."""
        return _Run(self).decode()


class _Run:
    """One decode's mutable state (:class:`OnePassDecoder`)."""

    def __init__(self, dec: OnePassDecoder) -> None:
        self.dec = dec
        graph, cluster = dec.graph, dec.cluster
        n, d = graph.num_nodes, cluster.num_devices
        self.n, self.d = n, d
        self.state = PlacementState(graph, cluster, memory_mask=dec.memory_mask)
        obs = copy.copy(dec._observer)
        obs.dynamic, obs.devices = dec._observer.dynamic.copy(), dec._observer.devices.copy()
        obs.reset_dynamic()
        self.obs = obs
        costs = self.state.costs
        self.duration, self.latency, self.inv_bw = (
            costs.duration,
            costs.latency,
            costs.inv_bandwidth,
        )
        self.out_bytes = np.ascontiguousarray(graph.out_bytes, dtype=np.float64)
        # SEL: readiness of each frontier node, fixed when it enters the frontier
        self.local = np.zeros(n, dtype=np.float32)
        self.remote = np.zeros(n, dtype=np.float32)
        self.now = np.float32(0.0)
        self.frontier: list[int] = np.flatnonzero(graph.in_degree == 0).tolist()
        self._entered = set(self.frontier)
        # PLC: per-device sums of the PLC embeddings (ascending node id) and counts
        h = self.h = dec._plc_h.shape[1]
        self.sel_width, self.plc_width, self.dev_width = (
            dec._sel_width,
            dec._plc_width,
            dec._dev_width,
        )
        self.dev_rows = np.zeros((d, self.dev_width), dtype=np.float32)
        self.no_siblings = np.zeros(d, dtype=np.float32)
        self.node = np.zeros(1, dtype=np.int64)
        self.placed = self.state.device[None, :]  # a view: (1, n) of the state's devices
        self.plc_cols = _plc_columns(dec.policy.config)
        # the PLC head's input, kept between steps: only what a step changes is written
        self.plc_buf = torch.empty((1, d, self.plc_width), dtype=torch.float32)
        # SEL's input rows, a prefix per step (a frontier has at most n nodes)
        self.sel_buf = torch.empty((max(n, 1), self.sel_width), dtype=torch.float32)
        self.dirty = -1  # the device whose mean embedding changed (-1: every device)
        self.sel_rules = bool(dec.policy.config.rules)
        self.sel_dyn, self.sel_tail, self.plc_head = dec._sel_dyn, dec._sel_tail, dec._plc_head
        self.sums = np.zeros((d, h), dtype=np.float32)
        self.count = np.zeros(d, dtype=np.float32)
        self.top = np.full(d, -1, dtype=np.int64)  # largest node id on each device
        # hints: nodes per (hint, hint device, device) and per (hint, hint device)
        self.groups = dec._groups
        k = 0 if self.groups is None else self.groups.shape[1]
        size = int(self.groups.max()) + 1 if self.groups is not None and self.groups.size else 1
        self.mates = np.zeros((k, size, d), dtype=np.int32)
        self.mates_total = np.zeros((k, size), dtype=np.int64)
        self.no_hint = np.zeros(0, dtype=np.int64)
        self.hint_index = np.arange(k)
        # insertion: busy intervals per device and each placed node's finish there
        self.scale = dec.inputs.scale
        self.intervals = Intervals(d) if self.scale is not None else None
        self.ins_finish = np.full(n, np.nan)
        self.ins_start = np.zeros(d)
        self.ready = np.zeros(d)
        self.succ_scale = dec.inputs.successor_scale  # successors: HEFT's lookahead
        self.tail = successor_tail(graph, cluster) if self.succ_scale is not None else None
        self.links_t = transposed_links(costs)
        col_mean = 2 * h + 1 + self.dev_width  # the head by parts on many devices
        self.parted = (
            PartedHead(
                self.plc_head,
                dec._plc_h,
                h=h,
                col_mean=col_mean,
                col_rest=col_mean + self.dev_width,
                d=d,
            )
            if d >= PARTED_MIN_DEVICES
            else None
        )

    # ------------------------------------------------------------------ SEL
    def select(self) -> int:
        """The greedy SEL action: the frontier's columns (:func:`~placegym.agents.doppler.
        inputs.sel_columns`) written into one buffer, the head on every frontier node."""
        dec = self.dec
        nodes = np.array(self.frontier, dtype=np.int64)
        buf = self.sel_buf[: len(nodes)]
        b = dec._b_level[nodes]
        sel_columns_kernel(
            buf.numpy(),
            nodes,
            self.obs.dynamic,
            self.local,
            self.remote,
            self.now,
            b,
            self.sel_rules,
            np.float32(RULE_RTOL),
        )
        node_t = torch.from_numpy(nodes)
        scores = forward(self.sel_tail, dec.enc.sel_static[node_t] + forward(self.sel_dyn, buf))
        return int(nodes[greedy_pick(scores.squeeze(-1).numpy(), -b)])

    # ------------------------------------------------------------------ PLC
    def insertion_columns(self, v: int, out: np.ndarray) -> None:
        """Write :func:`~placegym.agents.doppler.features.insertion_features` of ``v``
        (the same operations, on the busy intervals kept per device) into ``out (D, 3)``."""
        iv = self.intervals
        assert iv is not None and self.scale is not None
        arrival_kernel(
            self.dec._pptr,
            self.dec._pidx,
            v,
            self.state.device,
            self.ins_finish,
            self.out_bytes,
            self.latency,
            self.inv_bw,
            self.ready,
        )
        dur = self.duration[v]
        insertion_kernel(iv.ts, iv.tf, iv.off, iv.size, self.ready, dur, self.ins_start)
        insertion_columns_kernel(self.ins_start, dur, self.scale, FEATURE_MAX, RULE_RTOL, out)

    def successor_columns(self, v: int, out: np.ndarray) -> None:
        """Write :func:`~placegym.agents.doppler.features.successor_features` of ``v``
        (the same operations, on the schedule kept here, after :meth:`insertion_columns`)
        into ``out (D, 2)``."""
        iv, dec = self.intervals, self.dec
        assert iv is not None and self.tail is not None and self.succ_scale is not None
        (cptr, cidx), (lat_t, ibw_t) = dec._cptr_cidx, self.links_t
        successor_columns_kernel(
            v, cptr, cidx, dec._pptr, dec._pidx, self.state.device, self.ins_finish,
            self.out_bytes, self.latency, self.inv_bw, lat_t, ibw_t, self.duration, self.tail,
            LOOKAHEAD_WIDTH, self.ins_start + self.duration[v], iv.tf, iv.off, iv.size,
            self.succ_scale, FEATURE_MAX, RULE_RTOL, out,
        )  # fmt: skip

    def place(self, v: int) -> int:
        """The greedy PLC action for ``v``: the columns of :func:`~placegym.agents.
        doppler.inputs.plc_columns` written into one ``(1, D, W)`` buffer (element-wise
        columns by :func:`~placegym.agents.doppler._kernels.plc_columns_kernel`, the
        others by the same ``torch`` calls), the head on every device."""
        dec, policy = self.dec, self.dec.policy
        d, h, f = self.d, self.h, self.dev_width
        obs_width = self.obs.devices.shape[1]
        dev_np = self.dev_rows
        dev_np[:, :obs_width] = self.obs.devices
        if self.intervals is not None:
            self.insertion_columns(v, dev_np[:, obs_width : obs_width + INSERTION_FEATURES])
        if self.succ_scale is not None:
            self.successor_columns(v, dev_np[:, obs_width + INSERTION_FEATURES :])
        buf = self.plc_buf
        x = buf.numpy()[0]
        col_dev = 2 * h + 1  # node embedding, mean device embedding, log1p(count)
        col_lead = col_dev + 2 * f  # after the device rows and their mean
        cols = self.plc_cols
        g = self.groups[v] if cols["hints"] >= 0 and self.groups is not None else self.no_hint
        plc_columns_kernel(
            x,
            dec._plc_h[v],
            self.sums,
            self.count,
            self.dirty,
            dev_np,
            col_dev,
            col_lead,
            self.sibling_share(v),
            cols["hints"] if self.groups is not None else -1,
            self.mates,
            self.mates_total,
            g,
            cols["rules"],
            np.float32(RULE_RTOL),
        )
        if cols["hints"] >= 0 and self.groups is None:
            x[:, cols["hints"] : cols["hints"] + cols["hints_width"]] = 0.0
        dev = torch.from_numpy(dev_np).unsqueeze(0)
        count = torch.from_numpy(self.count).unsqueeze(0)
        x[:, 2 * h] = torch.log1p(count).numpy()[0]
        x[:, col_dev + f : col_lead] = dev.mean(dim=1, keepdim=True).numpy()[0]
        if cols["topology"] >= 0:
            col, width = cols["topology"], cols["topology_width"]
            agg = torch.from_numpy(x[:, h : 2 * h].copy()).unsqueeze(0)
            topo = policy.device_topology(dec.inputs.links, dev, count, agg)
            x[:, col : col + width] = topo.numpy()[0]
        head = self.parted
        logits = (
            forward(self.plc_head, buf).squeeze(-1)[0]
            if head is None
            else head(buf[0], v, self.dirty)
        ).numpy()
        self.dirty = d  # no device's embeddings changed yet (commit names it)
        state = self.state
        if state.unbounded and state.group_device(v) < 0:  # every device is legal
            return greedy_pick(logits, dev_np[:, _EST_START])
        legal = np.flatnonzero(state.place_mask())
        return int(legal[greedy_pick(logits[legal], dev_np[legal, _EST_START])])

    def sibling_share(self, v: int) -> np.ndarray:
        """``(D,)``: :func:`~placegym.agents.doppler.features.sibling_share` of ``v``."""
        if self.dec._siblings is None:
            return self.no_siblings
        ptr, idx, weight = self.dec._siblings
        self.node[0] = v
        share, _ = sibling_kernel(ptr, idx, weight, self.node, self.placed, self.d)
        return share[0]

    def commit(self, v: int, device: int) -> None:
        """Place ``v`` on ``device`` and bring every incremental feature up to date."""
        state, obs = self.state, self.obs
        state.place(device, checked=False)
        obs.on_place(state, v, device)
        est = obs.dynamic[v, _EST_FINISH]
        if est > self.now:
            self.now = est
        # embedding sums, in ascending node id
        if v > self.top[device]:
            self.sums[device] += self.dec._plc_h[v]
            self.top[device] = v
        else:
            device_sum_kernel(state.device, self.dec._plc_h, device, self.sums[device])
        self.count[device] += 1
        self.dirty = device
        if self.groups is not None and self.groups.shape[1]:
            g = self.groups[v]
            k = self.hint_index
            self.mates[k, g, device] += 1
            self.mates_total[k, g] += 1
        if self.intervals is not None:
            start = float(self.ins_start[device])
            finish = start + float(self.duration[v, device])
            self.intervals.insert(device, start, finish)
            self.ins_finish[v] = finish
        # successors that entered the frontier: their readiness is fixed from now on
        frontier = state.frontier_mask
        est_all = obs.dynamic[:, _EST_FINISH]
        dec = self.dec
        for c in state.costs.successors[v]:
            if frontier[c] and c not in self._entered:
                lo, hi = dec._in_ptr[c], dec._in_ptr[c + 1]
                f = est_all[dec._in_src[lo:hi]]
                zero = np.float32(0.0)
                self.local[c] = max(zero, f.max()) if hi > lo else zero
                rem = f + dec._comm[dec._in_edge[lo:hi]]
                self.remote[c] = max(zero, rem.max()) if hi > lo else zero
                self._entered.add(c)
                insort(self.frontier, c)

    def decode(self) -> Placement:
        state, obs = self.state, self.obs
        for _ in range(self.n):
            v = self.select()
            state.select(v, checked=False)
            obs.on_select(state, v)
            self.frontier.remove(v)
            self.commit(v, self.place(v))
        return state.to_placement()


def one_pass_greedy(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    memory_mask: bool | str = True,
    known: Mapping[str, Placement] | None = None,
) -> Placement:
    """The greedy placement of ``policy`` decoded in one pass (:class:`OnePassDecoder`),
    on the process's torch threads (one is fastest: :func:`~placegym.agents.doppler.
    placer.torch_threads`, as :class:`~placegym.agents.doppler.placer.AgentPlacer`
    places with ``one_pass=True``); ``known``: teachers' placements the caller already
    has, read as hints where memory cannot bind (:func:`plain_hint_placements`)."""
    return OnePassDecoder(policy, graph, cluster, memory_mask, known=known).greedy()
