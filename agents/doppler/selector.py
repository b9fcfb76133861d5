"""Choosing among a one-pass agent's proposals without a simulator.

A one-pass agent computes its hints' placements (NEST, METIS, HEFT, critical_path:
``PolicyConfig.hints``) for its inputs anyway; on many instances one of them is faster
than the agent's own greedy placement, and which one depends on the instance (NEST and
METIS where communication dominates, HEFT or critical_path where it does not). A
:class:`ProposalSelector` learns that choice: it predicts, from summaries computed
without a simulator, the log makespan ratio of each proposal to the agent's own
placement, and :func:`choose` keeps the agent's placement unless a proposal is predicted
faster by more than the selector's ``margin``.

**The summaries** (no simulator call; :mod:`~placegym.agents.doppler.summaries`): of
each placement, :func:`placement_summary` (two list schedules' estimated makespans, one
with copies queued on their channels or ports, and the compute, copy, device and memory
shares), and of the instance, :func:`instance_summary`; :func:`proposal_features` puts
them together, relative to the agent's own placement, with the proposal's name one-hot.
A selector made with ``contention`` also reads the contended estimates' ratios.

**Rollouts.** :func:`rule_proposals` adds further proposals where the selector scores
them: critical_path's, HEFT's and ``heft_lookahead``'s placements rolled out with PLC in
the agent's room (its memory mask's, live tensors and recompute set included), so that
where memory binds some proposals are made with it in view; no simulator call either.

**Memory.** Where memory may bind
(:func:`~placegym.envs.analysis.memory.memory_may_bind`) the hints are their rules'
placements on a cluster whose memory cannot bind
(:func:`~placegym.agents.doppler.onepass.plain_hint_placements`), so they may not fit.
A proposal is then taken only if (:func:`admit`) no schedule of it can exceed memory
(every device could hold all its nodes' parameters and outputs and every copy it
receives at once, :func:`fits_statically`, ``O(E log E)``), or else if it passes the
test the agent's own placement passes by construction: replayed in its priority order
through a :class:`~placegym.envs.mdp.state.PlacementState` under the agent's memory
mask, every node's device is legal when it is placed (:func:`fits_mask`, the cost of a
decode's masks); a replayed placement carries the mask's recompute set, as the agent's
does. A selector with a ``peak_margin`` also takes a proposal the replay refuses if it
carries no recompute set and its estimated peak
(:func:`~placegym.agents.doppler.summaries.estimated_peak`, ``O(n log n + E log E)``)
keeps that share of every device's memory free: an estimate, not a bound.

**Polish.** A selector with ``polish`` > 0 refines the kept placement by
:func:`~placegym.agents.doppler.polish.polish` (at most that many estimated schedules,
fewer on large graphs); where memory may bind its moves keep each device's estimated
peak within ``peak_margin`` and the result is admitted as a proposal is (:func:`admit`),
else the unpolished placement stays. No simulator call either.

**Relief** (``relieve``, ``weigh``: :func:`relieve_selected`,
:mod:`~placegym.agents.doppler.relief`): a training step's kept placement that carries a
recompute set or is estimated over memory, or any polished placement where memory may
bind, is weighed against staged placements, checkpointed to fit by estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import torch
from torch import nn

from placegym.agents.doppler.summaries import (
    CONTENTION_FEATURES,
    FEATURES,
    INSTANCE_FIELDS,
    PLACEMENT_FIELDS,
    copies,
    estimated_peak,
    instance_summary,
    placement_summary,
    proposal_features,
    ready_order,
)
from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.mdp.state import PlacementState

__all__ = [
    "INSTANCE_FIELDS",
    "PLACEMENT_FIELDS",
    "ROLLOUTS",
    "ROLLOUT_DEVICES",
    "ROOM",
    "SELECTOR_FORMAT",
    "ProposalSelector",
    "Selected",
    "admit",
    "check_selector",
    "choose",
    "fits_mask",
    "fits_statically",
    "gather_proposals",
    "instance_summary",
    "load_selector",
    "one_pass_select",
    "placement_summary",
    "polish_kept",
    "polish_selected",
    "proposal_features",
    "relieve_selected",
    "rule_proposals",
    "save_selector",
]

T = TypeVar("T")


def fits_statically(graph: Graph, cluster: Cluster, placement: Placement) -> bool:
    """Whether every device could hold, at once, everything its nodes ever hold: their
    parameters and outputs and every copy it receives (DESIGN §3: nothing else is
    allocated), so that no schedule of ``placement`` exceeds its memory; ``O(E log E)``."""
    d = cluster.num_devices
    dev = np.asarray(placement.device, dtype=np.int64)
    held = np.bincount(dev, weights=graph.param_bytes + graph.out_bytes, minlength=d)
    pairs = copies(graph, dev)
    held += np.bincount(pairs[:, 1], weights=graph.out_bytes[pairs[:, 0]], minlength=d)
    return bool((held <= cluster.memory).all())


class ProposalSelector(nn.Module):
    """Predicts each proposal's log makespan ratio to the agent's own placement.

    Args:
        names: the proposals it scores, by hint name, in order.
        hidden: width of each member's two hidden layers.
        members: networks of the ensemble whose mean prediction it takes (each fitted
            from its own initial weights and batches: :func:`~placegym.train.selector.
            fit_selector`).
        margin: :func:`choose` takes a proposal only if its prediction is below
            ``-margin`` (a log ratio: 0.02 is about 2% faster).
        contention: also read the contended list schedule's estimates
            (:func:`~placegym.agents.doppler.summaries.proposal_features`).
        peak_margin: where > 0, :func:`choose` also admits a proposal that neither fits
            statically nor replays under the mask if its estimated peak keeps this share
            of every device's memory free (:func:`admit`); 0: it does not.
        polish: where > 0, :func:`one_pass_select` polishes the kept placement with at
            most this many estimated schedules
            (:func:`~placegym.agents.doppler.polish.polish`); 0: it does not.
        polish_pairs: the polish also moves pairs of nodes along the chain once no
            single move helps (``pairs`` of :func:`~placegym.agents.doppler.polish.polish`).
        polish_starts: proposals (hint or rollout names) :func:`one_pass_select` also
            polishes where they are proposed and ``polish`` > 0, keeping the polished
            placement of least estimate (:func:`polish_selected`); none by default.
        relieve: :func:`one_pass_select` weighs a kept placement of a training step
            that carries a recompute set or whose estimated peak is over memory against
            checkpointed placements
            (:func:`relieve_selected`); False: it does not.
        polish_insert: where memory cannot bind, the polish's list schedule fills idle
            gaps (``insert`` of :func:`~placegym.agents.doppler.polish.polish`).
        weigh: where memory may bind, :func:`one_pass_select` also weighs the polished
            placement against those placements, polished
            (:func:`~placegym.agents.doppler.relief.weigh_polished`).

    Raises:
        ValueError: no names, a repeated name, ``hidden`` or ``members`` < 1, a
            negative margin or ``polish``, a repeated start.
    """

    def __init__(
        self,
        names: Sequence[str],
        hidden: int = 64,
        margin: float = 0.02,
        members: int = 5,
        contention: bool = False,
        peak_margin: float = 0.0,
        polish: int = 0,
        polish_starts: Sequence[str] = (),
        polish_pairs: bool = False,
        relieve: bool = False,
        weigh: bool = False,
        polish_insert: bool = False,
    ) -> None:
        super().__init__()
        names = tuple(names)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"names: expected distinct hint names, got {list(names)!r}")
        if hidden < 1:
            raise ValueError(f"hidden: must be >= 1, got {hidden}")
        if members < 1:
            raise ValueError(f"members: must be >= 1, got {members}")
        if not margin >= 0:
            raise ValueError(f"margin: must be >= 0, got {margin}")
        if not 0 <= peak_margin < 1:
            raise ValueError(f"peak_margin: must be in [0, 1), got {peak_margin}")
        if polish < 0:
            raise ValueError(f"polish: must be >= 0, got {polish}")
        polish_starts = tuple(polish_starts)
        if len(set(polish_starts)) != len(polish_starts):
            raise ValueError(
                f"polish_starts: expected distinct names, got {list(polish_starts)!r}"
            )
        self.names, self.hidden, self.margin = names, int(hidden), float(margin)
        self.members, self.contention = int(members), bool(contention)
        self.peak_margin, self.polish = float(peak_margin), int(polish)
        self.polish_starts = polish_starts
        self.polish_pairs = bool(polish_pairs)
        self.relieve, self.weigh = bool(relieve), bool(weigh)
        self.polish_insert = bool(polish_insert)
        width = FEATURES + len(names) + (CONTENTION_FEATURES if self.contention else 0)
        self.mean: torch.Tensor
        self.scale: torch.Tensor
        self.register_buffer("mean", torch.zeros(width))
        self.register_buffer("scale", torch.ones(width))
        self.nets = nn.ModuleList(
            nn.Sequential(
                nn.Linear(width, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, 1),
            )
            for _ in range(members)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``(k,)`` predicted log ratios of ``(k, width)`` features: the members' mean."""
        return self.each(features).mean(0)

    def each(self, features: torch.Tensor) -> torch.Tensor:
        """``(members, k)`` each member's predictions."""
        x = (features - self.mean) / self.scale
        return torch.stack([net(x).squeeze(-1) for net in self.nets])

    def set_scaling(self, features: np.ndarray) -> None:
        """Standardise inputs by the mean and spread of ``features`` (a training set)."""
        self.mean.copy_(torch.as_tensor(features.mean(0), dtype=torch.float32))
        self.scale.copy_(torch.as_tensor(features.std(0) + 1e-6, dtype=torch.float32))

    def predict(
        self,
        graph: Graph,
        cluster: Cluster,
        own: Placement,
        proposals: Mapping[str, Placement],
    ) -> np.ndarray:
        """``(len(names),)`` predicted log ratios of ``proposals`` (name to placement) to
        ``own``, in :attr:`names` order: ``inf`` for a name not proposed (a rollout left
        out on this instance: :func:`rule_proposals`); other proposals are ignored."""
        return self.scores(
            placement_summary(graph, cluster, own),
            {
                n: placement_summary(graph, cluster, proposals[n])
                for n in self.names
                if n in proposals
            },
            instance_summary(graph, cluster),
        )

    @torch.inference_mode()
    def scores(
        self, own: np.ndarray, summaries: Mapping[str, np.ndarray], instance: np.ndarray
    ) -> np.ndarray:
        """:meth:`predict` from the summaries: the agent's own, each proposal's by name,
        and the instance's."""
        k = len(self.names)
        present = [i for i, n in enumerate(self.names) if n in summaries]
        out = np.full(k, np.inf)
        if present:
            x = np.stack(
                [
                    proposal_features(
                        own, summaries[self.names[i]], i, k, instance, self.contention
                    )
                    for i in present
                ]
            )
            out[present] = self(torch.as_tensor(x)).numpy()
        return out

    def first(self, pred: np.ndarray, accept: Callable[[str], T | None]) -> tuple[str, T] | None:
        """The choice rule: the proposals in ascending order of ``pred`` (their predicted
        log ratios, in :attr:`names` order) while below ``-margin`` (a NaN prediction
        ends it too), the first one ``accept(name)`` answers for, with that answer; None
        where none."""
        for i in np.argsort(pred, kind="stable").tolist():
            if not float(pred[i]) < -self.margin:
                break
            got = accept(self.names[i])
            if got is not None:
                return self.names[i], got
        return None

    def spec(self) -> dict[str, Any]:
        """What rebuilds it: ``names``, ``hidden``, ``margin``, ``members`` and, where
        set, ``contention``, ``peak_margin``, ``polish``, ``polish_starts``,
        ``polish_pairs``, ``relieve``, ``weigh`` and ``polish_insert`` (a file without them
        has none)."""
        spec: dict[str, Any] = {
            "names": list(self.names),
            "hidden": self.hidden,
            "margin": self.margin,
            "members": self.members,
        }
        if self.contention:
            spec["contention"] = True
        if self.peak_margin:
            spec["peak_margin"] = self.peak_margin
        if self.polish:
            spec["polish"] = self.polish
        if self.polish_starts:
            spec["polish_starts"] = list(self.polish_starts)
        if self.polish_pairs:
            spec["polish_pairs"] = True
        for flag in ("relieve", "weigh", "polish_insert"):
            if getattr(self, flag):
                spec[flag] = True
        return spec


#: The rules :func:`rule_proposals` rolls out (teacher names).
ROLLOUTS = ("critical_path", "heft", "heft_lookahead")
#: The suffix of a rollout proposal's name: ``"heft@room"`` is HEFT rolled out in the
#: agent's room.
ROOM = "@room"
#: :func:`rule_proposals` rolls out on clusters of at most this many devices: on a
#: thousand, a rollout in a room takes seconds (``heft_lookahead``'s step costs
#: ``O(successors * D * min(D, 16))``), several times the decode's.
ROLLOUT_DEVICES = 64


def rule_proposals(
    graph: Graph, cluster: Cluster, memory_mask: bool | str = True
) -> dict[str, Placement]:
    """Further proposals, no simulator call: each rule of :data:`ROLLOUTS` rolled out
    with PLC in the agent's room, named ``RULE@room``.

    Where memory may bind, the room is the memory mask's: a
    :class:`~placegym.envs.analysis.room.Room` with no reserve, counting live tensors
    under a live mask (``"live"``, ``"timed"``), with the mask's recompute set, which
    the rollout then carries; there ``critical_path@room`` and ``heft@room`` differ from
    the plain hints, which are placed as if memory could not bind. Where it cannot bind
    (or with no mask) those two are the plain hints themselves and are left out. On a
    cluster of more than :data:`ROLLOUT_DEVICES` devices there are none. A rollout costs
    ``O(n * D)`` (critical_path), ``O(n * D + E)`` (HEFT's insertion schedule) and
    ``O(E * D * min(D, 16))`` (``heft_lookahead``), with the room's test per device
    where memory may bind."""
    from placegym.envs.analysis.room import Room
    from placegym.envs.mdp.state import LIVE_MASKS, mask_recompute, memory_mask_mode
    from placegym.teachers._memory import with_room
    from placegym.teachers.critical_path import CriticalPathTeacher
    from placegym.teachers.heft import HeftLookaheadTeacher, HeftTeacher

    mode = memory_mask_mode(memory_mask)
    if cluster.num_devices > ROLLOUT_DEVICES:
        return {}
    room = None
    if mode != "off" and memory_may_bind(graph, cluster):
        rc = mask_recompute(graph, cluster, memory_mask)
        zero = np.zeros(cluster.num_devices)
        room = Room(graph, cluster, zero, live=mode in LIVE_MASKS, recompute=rc)
    rollers: dict[str, Callable[[Graph, Cluster, Room | None], Placement]] = {
        "critical_path": CriticalPathTeacher().roll,
        "heft": HeftTeacher().roll,
        "heft_lookahead": HeftLookaheadTeacher().roll,
    }
    rules = ROLLOUTS if room is not None else ("heft_lookahead",)
    return {r + ROOM: with_room(rollers[r](graph, cluster, room), room) for r in rules}


def fits_mask(
    graph: Graph, cluster: Cluster, placement: Placement, memory_mask: bool | str
) -> Placement | None:
    """``placement`` replayed under ``memory_mask`` (module docstring), with the mask's
    recompute set; None where some node's device is not legal when it is placed."""
    state = PlacementState(graph, cluster, memory_mask=memory_mask)
    dev = placement.device.tolist()
    for v in ready_order(state.costs, placement.rank):
        state.select(v, checked=False)
        if not state.place_mask(v)[dev[v]]:
            return None
        state.place(dev[v], checked=False)
    return state.to_placement()


def admit(
    graph: Graph,
    cluster: Cluster,
    placement: Placement,
    memory_mask: bool | str = True,
    peak_margin: float = 0.0,
) -> Placement | None:
    """The placement :func:`choose` keeps for a proposal it takes: ``placement`` where
    memory cannot bind or it fits by :func:`fits_statically`, else its :func:`fits_mask`
    replay; where that fails and ``peak_margin`` > 0, ``placement`` if it carries no
    recompute set and its :func:`~placegym.agents.doppler.summaries.estimated_peak` is
    at most ``1 - peak_margin`` of every device's memory; else None."""
    if not memory_may_bind(graph, cluster) or fits_statically(graph, cluster, placement):
        return placement
    replayed = fits_mask(graph, cluster, placement, memory_mask)
    if replayed is not None or peak_margin <= 0 or placement.recompute.size:
        return replayed
    peak = estimated_peak(graph, cluster, placement)
    return placement if bool((peak <= (1 - peak_margin) * cluster.memory).all()) else None


def choose(
    selector: ProposalSelector,
    graph: Graph,
    cluster: Cluster,
    own: Placement,
    proposals: Mapping[str, Placement],
    memory_mask: bool | str = True,
) -> tuple[str | None, Placement]:
    """The placement to keep: ``(None, own)``, or ``(name, placement)`` for the proposal
    of least prediction below ``-selector.margin`` that :func:`admit` keeps (where memory
    may bind: it fits by :func:`fits_statically`, or passes :func:`fits_mask`, whose
    replay with the mask's recompute set is kept, or with ``selector.peak_margin`` its
    estimated peak leaves that margin); the next one where it does not. No simulator
    call."""
    pred = selector.predict(graph, cluster, own, proposals)
    got = selector.first(
        pred, lambda n: admit(graph, cluster, proposals[n], memory_mask, selector.peak_margin)
    )
    return (None, own) if got is None else got


class Selected(NamedTuple):
    """The kept proposal's name (None: the policy's own), its placement, whether polished."""

    name: str | None
    placement: Placement
    polished: bool


def one_pass_select(
    policy: Any,
    selector: ProposalSelector,
    graph: Graph,
    cluster: Cluster,
    memory_mask: bool | str = True,
    known: Mapping[str, Placement] | None = None,
) -> Selected:
    """The policy's one-pass greedy placement
    (:class:`~placegym.agents.doppler.onepass.OnePassDecoder`) or the proposal
    :func:`choose` prefers to it (the hints' placements and, where the selector scores
    them, :func:`rule_proposals`), polished where the selector says so
    (:func:`polish_kept`); no simulator call. ``known``: teachers' placements already
    made, as the decoder reads them.

    Raises:
        ValueError: a selector scoring a hint the policy does not read, naming it.
    """
    from placegym.agents.doppler.onepass import OnePassDecoder

    check_selector(selector, policy)
    dec = OnePassDecoder(policy, graph, cluster, memory_mask, known=known)
    proposals = gather_proposals(selector, dec.hints, graph, cluster, memory_mask)
    name, kept = choose(selector, graph, cluster, dec.greedy(), proposals, memory_mask)
    relieved = relieve_selected(selector, graph, cluster, name, kept, proposals)
    if relieved is not None:
        return relieved
    got = polish_selected(selector, graph, cluster, name, kept, proposals, memory_mask)
    return relieve_selected(selector, graph, cluster, name, kept, proposals, got) or got


def relieve_selected(
    selector: ProposalSelector,
    graph: Graph,
    cluster: Cluster,
    name: str | None,
    kept: Placement,
    proposals: Mapping[str, Placement],
    polished: Selected | None = None,
) -> Selected | None:
    """Before the polish (``polished`` None) where ``selector.relieve``, the placement
    :func:`~placegym.agents.doppler.relief.relieve_kept` takes instead of ``kept`` (a
    training step's kept placement that carries a recompute set or is estimated over
    memory, weighed against checkpointed placements within ``selector.peak_margin``),
    polished with ``selector.polish`` schedules; after it where ``selector.weigh``, the
    one :func:`~placegym.agents.doppler.relief.weigh_polished` takes instead of
    ``polished``; else None. No simulator call."""
    from placegym.agents.doppler import relief

    if not (selector.relieve if polished is None else selector.weigh):
        return None
    room = relief.Settings(selector.peak_margin, selector.polish, selector.polish_pairs)
    if polished is None:
        got = relief.relieve_kept(graph, cluster, name, kept, proposals, room)
    else:
        got = relief.weigh_polished(graph, cluster, *polished[:2], proposals, room)
    return None if got is None else Selected(*got)


def polish_selected(
    selector: ProposalSelector,
    graph: Graph,
    cluster: Cluster,
    name: str | None,
    kept: Placement,
    proposals: Mapping[str, Placement],
    memory_mask: bool | str = True,
) -> Selected:
    """The kept placement (``name``: the proposal it is, None for the policy's own) and
    each of ``selector.polish_starts`` that ``proposals`` holds, polished
    (:func:`polish_kept`): the one of least estimate
    (:func:`~placegym.agents.doppler.polish.eager_makespan`), the kept one on a tie; a
    start whose polish changes nothing or is not admitted is left out. Each start costs
    one more polish and estimate; no simulator call."""
    from placegym.agents.doppler.polish import eager_makespan

    better = polish_kept(selector, graph, cluster, kept, memory_mask)
    best = Selected(name, kept, False) if better is None else Selected(name, better, True)
    if not selector.polish or not selector.polish_starts:
        return best
    insert = selector.polish_insert and not memory_may_bind(graph, cluster)
    least = eager_makespan(graph, cluster, best.placement, insert)
    for start in selector.polish_starts:
        if start == name or start not in proposals:
            continue
        moved = polish_kept(selector, graph, cluster, proposals[start], memory_mask)
        if moved is None:
            continue
        estimate = eager_makespan(graph, cluster, moved, insert)
        if estimate < least * (1 - 1e-9):
            best, least = Selected(start, moved, True), estimate
    return best


def polish_kept(
    selector: ProposalSelector,
    graph: Graph,
    cluster: Cluster,
    kept: Placement,
    memory_mask: bool | str = True,
) -> Placement | None:
    """``kept`` polished with ``selector.polish`` estimated schedules
    (:func:`~placegym.agents.doppler.polish.polish`); where memory may bind, its moves
    keep each device's estimated peak within ``1 - selector.peak_margin`` of its memory
    (or within its peak before, where that is higher), and the result is admitted as a
    proposal is (:func:`admit`). None where the selector does not polish, no move helps
    or the moved placement is not admitted."""
    from placegym.agents.doppler.polish import polish

    if not selector.polish:
        return None
    if not memory_may_bind(graph, cluster):
        insert, pairs = selector.polish_insert, selector.polish_pairs
        moved = polish(graph, cluster, kept, selector.polish, insert=insert, pairs=pairs)
        return None if moved is kept else moved
    room = (1 - selector.peak_margin) * np.asarray(cluster.memory, dtype=np.float64)
    moved = polish(graph, cluster, kept, selector.polish, memory=room, pairs=selector.polish_pairs)
    if moved is kept:
        return None
    return admit(graph, cluster, moved, memory_mask, selector.peak_margin)


def gather_proposals(
    selector: ProposalSelector,
    hints: Mapping[str, Placement],
    graph: Graph,
    cluster: Cluster,
    memory_mask: bool | str = True,
) -> dict[str, Placement]:
    """What ``selector`` chooses among: the ``hints``' placements (the decoder's) and,
    where it scores any rollout, :func:`rule_proposals`."""
    proposals = dict(hints)
    if any(n.endswith(ROOM) for n in selector.names):
        proposals.update(rule_proposals(graph, cluster, memory_mask))
    return proposals


def check_selector(selector: ProposalSelector, policy: Any) -> None:
    """Raise ``ValueError`` unless every name ``selector`` scores is a hint ``policy``
    reads or a rollout of :func:`rule_proposals`."""
    rollouts = {r + ROOM for r in ROLLOUTS}
    missing = [
        n
        for n in (*selector.names, *selector.polish_starts)
        if n not in policy.config.hints and n not in rollouts
    ]
    if missing:
        raise ValueError(
            f"selector: scores or polishes hints {missing} the policy does not read "
            f"(policy.hints={list(policy.config.hints)}; rollouts: {sorted(rollouts)})"
        )


#: The format tag of a saved selector.
SELECTOR_FORMAT = "placegym.proposal-selector/v1"


def save_selector(selector: ProposalSelector, path: str | Path) -> None:
    """Write ``selector`` (its :meth:`~ProposalSelector.spec` and weights) to ``path``."""
    blob = {"format": SELECTOR_FORMAT, "spec": selector.spec(), "state": selector.state_dict()}
    torch.save(blob, path)


def load_selector(path: str | Path) -> ProposalSelector:
    """The selector :func:`save_selector` wrote to ``path`` (``weights_only`` load).

    Raises:
        ValueError: a file of another format, naming it.
    """
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != SELECTOR_FORMAT:
        raise ValueError(f"{path}: format: expected {SELECTOR_FORMAT!r}")
    selector = ProposalSelector(**blob["spec"])
    selector.load_state_dict(blob["state"])
    return selector.eval()
