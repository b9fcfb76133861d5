"""Log-probabilities of recorded episodes, with gradients, for learning.

:func:`score` recomputes every step's log-probability and entropy of the episodes that
:func:`~placegym.agents.doppler.episodes.play_episodes` recorded, *with* gradients, in a
few batched calls per graph (encoders once, heads once over all the graph's steps), and
the log-probability of the teacher's tie set and the expected regret where the records
hold them (:class:`Scores`): the inputs of REINFORCE, PPO and imitation alike. Steps of
a phase the policy does not learn (``learns_selection`` / ``learns_placement`` False)
score log-probability 0 and entropy 0.

Device: the scores are computed on the device of the policy's parameters
(:func:`policy_device`). The SEL columns, data alone, are assembled on the CPU from the
records (as while the episodes were played) and copied there as one ``(K, F)`` tensor;
the PLC inputs and the other arrays of the records are copied there, and so are the
graph inputs (:meth:`~placegym.agents.nn.encoder.GraphInputs.to`: a copy, the records'
own inputs stay on the CPU). For a policy on the CPU nothing is copied: every tensor is
the one the CPU computation has always made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from placegym.agents.doppler.encoding import Encoding
from placegym.agents.doppler.episodes import EpisodeRecord
from placegym.agents.doppler.features import SelPairs
from placegym.agents.doppler.policy import DopplerPolicy

__all__ = [
    "BACKWARD_CELLS",
    "SEL_CHUNK",
    "Scores",
    "backward_by_group",
    "graph_groups",
    "policy_device",
    "score",
    "score_by_group",
    "scored_cells",
    "segment_log_softmax",
    "segment_logsumexp",
]


def segment_log_softmax(logits: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """Log-softmax of ``logits`` within each segment (``segment`` ids, any order)."""
    top = torch.full((num_segments,), -torch.inf, dtype=logits.dtype, device=logits.device)
    top = top.scatter_reduce(0, segment, logits.detach(), reduce="amax", include_self=True)
    z = logits - top[segment]
    zeros = torch.zeros(num_segments, dtype=logits.dtype, device=logits.device)
    total = zeros.index_add(0, segment, z.exp())
    return z - total.log()[segment]


@dataclass
class Scores:
    """Per-step log-probabilities of the taken actions and entropies, ``(2S,)`` each,
    interleaved SEL/PLC; ``teacher_logp`` is ``log π(teacher tie set)`` when recorded;
    ``plc_regret`` ``(S,)`` the policy's expected regret ``Σ_d π(d) regret(d)`` at each
    PLC step when the record has :attr:`EpisodeRecord.plc_regret`; ``plc_price_ce``
    ``(S,)``, with a ``price_temperature``, the cross-entropy ``-Σ_d q(d) log π(d)`` from
    the teacher's prices to the policy at each PLC step, ``q = softmax(-regret / T)`` over
    the legal devices (so the policy's PLC logits learn each device's price, in units of
    ``T``, and its greedy pick is the least predicted price)."""

    logp: Tensor
    entropy: Tensor
    teacher_logp: Tensor | None
    plc_regret: Tensor | None = None
    plc_price_ce: Tensor | None = None

    def detached(self) -> Scores:
        """The log-probabilities and entropies without their autograd tape (what a
        learning step keeps for its metrics once it has back-propagated)."""
        t = self.teacher_logp
        return Scores(self.logp.detach(), self.entropy.detach(), None if t is None else t.detach())


def policy_device(policy: torch.nn.Module) -> torch.device:
    """The device of ``policy``'s parameters (the CPU for a policy without any)."""
    param = next(policy.parameters(), None)
    return torch.device("cpu") if param is None else param.device


def score(
    policy: DopplerPolicy,
    records: list[EpisodeRecord],
    price_temperature: float | None = None,
    temperature: float = 1.0,
) -> list[Scores]:
    """Recompute log-probs (with gradients) for ``records``; encoders run once per graph
    and the heads once per graph over all its records' steps (concatenated), of the
    policy at ``temperature`` (``softmax(logits / temperature)``, as the episodes were
    sampled with :func:`~placegym.agents.doppler.episodes.play_episodes`). With a
    ``price_temperature`` (and records with regrets), also :attr:`Scores.plc_price_ce`.
    The scores are on the policy's device (:func:`policy_device`; the module docstring
    says what is copied there), wherever the records were played."""
    device = policy_device(policy)
    out: list[Scores | None] = [None] * len(records)
    for members in graph_groups(records):
        rs = [records[i] for i in members]
        enc = policy.encode(rs[0].graph.to(device))  # a copy there; the records' unchanged
        scores = _score_graph(policy, enc, rs, price_temperature, temperature, device)
        for i, sc in zip(members, scores):
            out[i] = sc
    return out  # type: ignore[return-value]


def graph_groups(records: list[EpisodeRecord], max_cells: int | None = None) -> list[list[int]]:
    """The indices of ``records`` grouped by graph inputs (the records of one graph
    object), in order of first appearance: the groups :func:`score` encodes once each.

    With ``max_cells``, each graph's records are split further, in order, into runs of at
    most ``max_cells`` :func:`scored_cells` (a record with more is a run of its own): the
    groups that a learning step scores and back-propagates one at a time
    (:data:`BACKWARD_CELLS`)."""
    groups: dict[int, list[list[int]]] = {}
    held: dict[int, int] = {}  # scored cells of each graph's last run
    for i, r in enumerate(records):
        runs, cells = groups.setdefault(id(r.graph), [[]]), scored_cells(r)
        if max_cells is not None and runs[-1] and held[id(r.graph)] + cells > max_cells:
            runs.append([])
            held[id(r.graph)] = 0
        runs[-1].append(i)
        held[id(r.graph)] = held.get(id(r.graph), 0) + cells
    return [run for runs in groups.values() for run in runs]


def scored_cells(record: EpisodeRecord) -> int:
    """What scoring ``record`` with gradients holds, in units of one SEL pair: its
    frontier pairs, and 8 per (PLC state, device), whose row of about 170 inputs and its
    hidden layer weigh some 8 times a pair's kept inputs and scores."""
    return len(record.sel_rows) + 8 * record.plc_mask.size


#: :func:`scored_cells` per group that a learning step (imitation, REINFORCE, PPO)
#: scores and back-propagates at a time (:func:`graph_groups`): 16 sampled episodes of a
#: 4,859-node MoE graph on 54 devices (68 million frontier pairs) held 23 GB scored at
#: once; at this bound each of them is a group of its own (the graph is encoded again
#: for each group).
BACKWARD_CELLS = 1 << 22


def backward_by_group(
    policy: DopplerPolicy,
    records: Sequence[EpisodeRecord],
    loss_of: Callable[[list[int], list[Scores]], Tensor],
    *,
    price_temperature: float | None = None,
    temperature: float = 1.0,
) -> list[Scores]:
    """Score ``records`` and back-propagate ``loss_of(members, scores)`` one group at a
    time (:func:`graph_groups` of at most :data:`BACKWARD_CELLS` scored cells;
    ``members`` the group's indices in ``records``), so that one group's autograd tape is
    held at a time: a learning step whose loss is a weighted sum over the groups gets the
    whole batch's gradients. Returns every record's scores, detached, in record order."""
    kept: list[Scores | None] = [None] * len(records)
    for members in graph_groups(list(records), BACKWARD_CELLS):
        rs = [records[i] for i in members]
        scores = score(policy, rs, price_temperature, temperature)
        loss_of(members, scores).backward()
        for i, s in zip(members, scores):
            kept[i] = s.detached()
        del scores
    return kept  # type: ignore[return-value]


@torch.no_grad()
def score_by_group(
    policy: DopplerPolicy, records: Sequence[EpisodeRecord], temperature: float = 1.0
) -> list[Scores]:
    """:func:`score` without gradients, by :func:`backward_by_group`'s groups: scoring
    holds the groups' inputs, with or without a tape."""
    out: list[Scores | None] = [None] * len(records)
    for members in graph_groups(list(records), BACKWARD_CELLS):
        for i, s in zip(members, score(policy, [records[i] for i in members], None, temperature)):
            out[i] = s
    return out  # type: ignore[return-value]


#: (state, node) pairs per checkpointed chunk of the SEL head when :func:`score` runs
#: with gradients: a wide frontier (a 4,500-node MoE graph: 3.2 million pairs in one
#: episode) would otherwise keep about 1 KB of activations per pair for the backward pass.
SEL_CHUNK = 1 << 18


def _sel_scores(policy: DopplerPolicy, enc: Encoding, node: Tensor, x: Tensor) -> Tensor:
    """:meth:`DopplerPolicy.sel_scores` of the pairs; with gradients and more than
    :data:`SEL_CHUNK` pairs, by chunks whose activations are recomputed in the backward
    pass (:func:`torch.utils.checkpoint.checkpoint`) rather than kept: the same values
    and gradients, only the pairs' inputs held between the passes."""
    if not torch.is_grad_enabled() or len(node) <= SEL_CHUNK:
        return policy.sel_scores(enc, node, x)

    def head(nodes: Tensor, inputs: Tensor) -> Tensor:
        return policy.sel_scores(enc, nodes, inputs)

    return torch.cat(
        [
            checkpoint(head, node[i : i + SEL_CHUNK], x[i : i + SEL_CHUNK], use_reentrant=False)
            for i in range(0, len(node), SEL_CHUNK)
        ]
    )


def _cat(records: list[EpisodeRecord], key: str, device: torch.device | None = None) -> Tensor:
    """The records' arrays ``key``, concatenated, as a tensor (on ``device``, when given;
    else on the CPU, sharing the concatenation's memory)."""
    x = torch.from_numpy(np.concatenate([getattr(r, key) for r in records]))
    return x if device is None else x.to(device)


def _score_graph(
    policy: DopplerPolicy,
    enc: Encoding,
    rs: list[EpisodeRecord],
    price_temperature: float | None = None,
    temperature: float = 1.0,
    device: torch.device | None = None,
) -> list[Scores]:
    """Scores of records of one graph; their steps are stacked (``s`` steps each). The
    SEL columns are assembled on the CPU (from the records' CPU graph inputs), the rest
    on ``device`` (default the CPU), that of ``enc``."""
    device = torch.device("cpu") if device is None else device
    s, m = len(rs[0].sel_action), len(rs)
    total = s * m  # stacked SEL steps (= PLC steps)
    cpu_step, cpu_node = (
        torch.from_numpy(x) for x in np.nonzero(np.concatenate([r.sel_mask for r in rs]))
    )
    step, node = cpu_step.to(device), cpu_node.to(device)
    learns_sel = getattr(policy, "learns_selection", True)
    if learns_sel:
        picks = _cat(rs, "sel_pick") if rs[0].sel_pick is not None else None
        pairs = SelPairs(_cat(rs, "sel_rows"), _cat(rs, "sel_ready"))
        x = policy.sel_inputs(rs[0].graph, pairs, cpu_step, cpu_node, picks)
        sel = _sel_scores(policy, enc, node, x.to(device))
    else:
        sel = torch.zeros(len(node), device=device)
    if temperature != 1.0:
        sel = sel / temperature
    logp_all = segment_log_softmax(sel, step, total)
    chosen = node == _cat(rs, "sel_action", device)[step]
    zeros = torch.zeros(total, dtype=logp_all.dtype, device=device)
    sel_logp = zeros.index_add(0, step[chosen], logp_all[chosen])
    sel_ent = -zeros.index_add(0, step, logp_all.exp() * logp_all)
    plc = policy.plc_logits(
        enc,
        _cat(rs, "plc_node", device),
        _cat(rs, "plc_placed", device),
        _cat(rs, "plc_dev", device),
    )
    if temperature != 1.0:
        plc = plc / temperature
    plc = plc.masked_fill(~_cat(rs, "plc_mask", device), -torch.inf)
    plc_logp_all = torch.log_softmax(plc, dim=-1)
    plc_logp = plc_logp_all.gather(1, _cat(rs, "plc_action", device)[:, None]).squeeze(1)
    plc_ent = -(plc_logp_all.exp() * plc_logp_all.nan_to_num(neginf=0.0)).sum(dim=1)
    if not learns_sel:  # SEL by a fixed rule: probability 1
        sel_logp = sel_ent = torch.zeros_like(plc_logp)
    if not getattr(policy, "learns_placement", True):  # PLC by a fixed rule
        plc_logp = plc_ent = torch.zeros_like(sel_logp)
    logp = torch.stack([sel_logp, plc_logp], dim=1).reshape(m, 2 * s)
    entropy = torch.stack([sel_ent, plc_ent], dim=1).reshape(m, 2 * s)
    teacher_logp = None
    if all(r.sel_teacher is not None and r.plc_teacher is not None for r in rs):
        in_ties = _cat(rs, "sel_teacher", device)[step, node]
        t_sel = segment_logsumexp(logp_all.masked_fill(~in_ties, -torch.inf), step, total)
        t_plc = torch.logsumexp(
            plc_logp_all.masked_fill(~_cat(rs, "plc_teacher", device), -torch.inf), dim=1
        )
        if not learns_sel:
            t_sel = torch.zeros_like(t_plc)
        if not getattr(policy, "learns_placement", True):
            t_plc = torch.zeros_like(t_sel)
        teacher_logp = torch.stack([t_sel, t_plc], dim=1).reshape(m, 2 * s)
    regret = price_ce = None
    if all(r.plc_regret is not None for r in rs):
        probs = plc_logp_all.exp()  # 0 on illegal devices, whose regret is 0 too
        regrets = _cat(rs, "plc_regret", device).to(probs.dtype)
        regret = (probs * regrets).sum(dim=1).reshape(m, s)
        if price_temperature is not None:
            legal = _cat(rs, "plc_mask", device)
            target = torch.softmax(
                (-regrets / price_temperature).masked_fill(~legal, -torch.inf), 1
            )
            logp_legal = plc_logp_all.masked_fill(~legal, 0.0)
            price_ce = -(target * logp_legal).sum(dim=1).reshape(m, s)
    return [
        Scores(
            logp[k],
            entropy[k],
            None if teacher_logp is None else teacher_logp[k],
            None if regret is None else regret[k],
            None if price_ce is None else price_ce[k],
        )
        for k in range(m)
    ]


def segment_logsumexp(x: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """``log Σ exp(x)`` within each segment (entries may be ``-inf``)."""
    top = torch.full((num_segments,), -torch.inf, dtype=x.dtype, device=x.device)
    top = top.scatter_reduce(0, segment, x.detach(), reduce="amax", include_self=True)
    safe_top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.zeros(num_segments, dtype=x.dtype, device=x.device).index_add(
        0, segment, (x - safe_top[segment]).exp()
    )
    return total.log() + safe_top
