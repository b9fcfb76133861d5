"""Training a one-pass agent's :class:`~placegym.agents.doppler.selector.ProposalSelector`.

::

    python -m placegym.train.selector collect CHECKPOINT --seed 100 --count 1000 --rows R.jsonl
    python -m placegym.train.selector fit R.jsonl --out selector.pt --seed 0

``collect`` draws instances from an :class:`~placegym.envs.suites.sampler.InstanceSampler`
of the given seed (never a suite's instance: the sampler holds every suite's test
instances out), decodes the agent's greedy placement in one pass under its memory mask,
its hints' plain placements (:func:`~placegym.agents.doppler.onepass.
plain_hint_placements`) and the rules' rollouts in its room
(:func:`~placegym.agents.doppler.selector.rule_proposals`): the proposals. It summarises
each without a simulator (:func:`~placegym.agents.doppler.selector.placement_summary`),
records whether the choice would admit it
(:func:`~placegym.agents.doppler.selector.admit`) and simulates each once for the label;
a row per instance is appended to ``--rows`` (a killed run resumes at the next index).
``fit`` regresses each proposal's log makespan ratio to the agent's own
(clipped to ±:data:`CLIP`; -CLIP where only the agent's is over memory; +CLIP for a
proposal over memory that the choice would admit, where the agent's fits; any other
proposal over memory is left out, as the choice passes it over) with a Huber loss, and
saves the selector (:func:`~placegym.agents.doppler.selector.save_selector`);
``--contention`` makes one that also reads the contended estimates (rows collected
with them).
``--holdout`` keeps the last share of rows out of the fit and prints, on them, what the
selection gives against the agent alone (:func:`selection_report`).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.selector import (
    PLACEMENT_FIELDS,
    ROLLOUTS,
    ROOM,
    ProposalSelector,
    admit,
    instance_summary,
    placement_summary,
    proposal_features,
    rule_proposals,
    save_selector,
)

__all__ = ["CLIP", "collect", "collect_split", "dataset", "fit_selector", "selection_report"]

#: Labels are log ratios clipped to ±CLIP.
CLIP = 0.5


def collect(path: str | Path, seed: int, count: int, rows: Path, **sampler: Any) -> int:
    """Append rows for sampler instances ``0..count-1`` of ``seed`` not yet in ``rows``
    (module docstring) for the agent at ``path`` (a checkpoint or ``pretrained:NAME``);
    returns how many were added. ``sampler``: the sampler's keyword arguments."""
    from placegym.envs.suites.sampler import InstanceSampler

    source = InstanceSampler(seed, **sampler)
    draws = ((i, lambda i=i: source.draw(i)) for i in range(count))
    return _append(path, rows, draws)


def collect_split(path: str | Path, suite: str, split: str, rows: Path) -> int:
    """:func:`collect` on the instances of a suite's split (a validation set: never a
    test split for a selector that is evaluated on it)."""
    from placegym.envs.suites import get_suite

    insts = list(get_suite(suite).instances(split))
    return _append(path, rows, ((f"{suite}/{x.id}", lambda x=x: x) for x in insts))


def _append(path: str | Path, rows: Path, draws: Any) -> int:
    from placegym.agents.doppler.onepass import OnePassDecoder
    from placegym.agents.doppler.placer import torch_threads
    from placegym.envs.sim.simulator import simulate
    from placegym.train.evaluate import load_agent

    agent = load_agent(path, one_pass=True)
    hints = tuple(agent.policy.config.hints)
    if not hints:
        raise ValueError(f"{path}: the policy reads no hints, so there is nothing to select")
    names = (*hints, *(r + ROOM for r in ROLLOUTS))
    done = {json.loads(line)["index"] for line in rows.open()} if rows.exists() else set()
    added = 0
    with rows.open("a") as out:
        for index, draw in draws:
            if index in done:
                continue
            inst = draw()
            g, c = inst.graph, inst.cluster
            with torch_threads(1):
                dec = OnePassDecoder(agent.policy, g, c, agent.memory_mask)
                own, proposals = dec.greedy(), dict(dec.hints)
            proposals.update(rule_proposals(g, c, agent.memory_mask))
            row: dict[str, Any] = {"index": index, "id": inst.id, "names": list(names)}
            row["instance"] = instance_summary(g, c).tolist()
            for key, p in (("own", own), *proposals.items()):
                s = simulate(g, c, p)
                row[key] = {
                    "summary": placement_summary(g, c, p).tolist(),
                    "makespan": float(s.makespan),
                    "oom": bool(s.oom),
                }
                if key != "own":
                    row[key]["admitted"] = admit(g, c, p, agent.memory_mask) is not None
            out.write(json.dumps(row) + "\n")
            out.flush()
            added += 1
    return added


def _label(own: dict[str, Any], other: dict[str, Any]) -> float | None:
    """The log makespan ratio of a proposal to the agent's placement, clipped to
    ±:data:`CLIP`; -CLIP where only the agent's is over memory. A proposal over memory:
    +CLIP where the choice would admit it (its row's ``admitted``) and the agent's fits,
    so that the regression learns to leave it; else None (not a label), as the choice
    passes it over before any prediction counts."""
    if other["oom"]:
        return CLIP if other.get("admitted", False) and not own["oom"] else None
    if own["oom"]:
        return -CLIP
    return float(np.clip(math.log(other["makespan"] / own["makespan"]), -CLIP, CLIP))


def dataset(
    rows: Sequence[dict[str, Any]], names: Sequence[str], contention: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of every (row, proposal) pair that has a label (:func:`_label`),
    with the contention features where ``contention``.

    Raises:
        ValueError: ``contention`` with a row collected before the contended estimate.
    """
    xs, ys = [], []
    for r in rows:
        inst, own = np.asarray(r["instance"]), np.asarray(r["own"]["summary"])
        if contention and len(own) < len(PLACEMENT_FIELDS):
            raise ValueError(
                f"rows: row {r['index']!r} has {len(own)} summary fields, contention reads "
                f"{len(PLACEMENT_FIELDS)} ({', '.join(PLACEMENT_FIELDS)}): collect it again"
            )
        for i, n in enumerate(names):
            if n not in r:  # not proposed on this instance
                continue
            y = _label(r["own"], r[n])
            if y is not None:
                x = np.asarray(r[n]["summary"])
                xs.append(proposal_features(own, x, i, len(names), inst, contention))
                ys.append(y)
    return np.stack(xs), np.asarray(ys, dtype=np.float32)


def fit_selector(
    rows: Sequence[dict[str, Any]],
    *,
    seed: int = 0,
    hidden: int = 64,
    margin: float = 0.02,
    members: int = 5,
    steps: int = 3000,
    batch: int = 512,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    contention: bool = False,
) -> ProposalSelector:
    """A selector fitted to ``rows`` (module docstring), from weights drawn with ``seed``:
    each member of the ensemble from its own initial weights and its own batches; with
    ``contention`` it also reads the contended estimates."""
    if not rows:
        raise ValueError("rows: none to fit")
    names = rows[0]["names"]
    x, y = dataset(rows, names, contention)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    sel = ProposalSelector(
        names, hidden=hidden, margin=margin, members=members, contention=contention
    )
    sel.set_scaling(x)
    opt = torch.optim.Adam(sel.parameters(), lr=lr, weight_decay=weight_decay)
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    for _ in range(steps):
        idx = torch.randint(0, len(xt), (members, batch), generator=gen)
        xb = (xt[idx] - sel.mean) / sel.scale  # (members, batch, width)
        pred = torch.stack([net(xb[m]).squeeze(-1) for m, net in enumerate(sel.nets)])
        loss = torch.nn.functional.huber_loss(pred, yt[idx], delta=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return sel.eval()


def _fits(row: dict[str, Any], name: str) -> dict[str, Any] | None:
    """Proposal ``name`` of ``row`` where the choice would keep it: where it passed
    :func:`~placegym.agents.doppler.selector.admit` when collected (rows of before that
    field: where it is within memory)."""
    got = row[name]
    return got if got.get("admitted", not got["oom"]) else None


def selection_report(rows: Sequence[dict[str, Any]], sel: ProposalSelector) -> dict[str, float]:
    """On ``rows``: the geometric mean of the kept placement's makespan over the agent's
    (where both fit), the share of instances where a proposal is taken, and how many kept
    placements and how many of the agent's own are over memory. The choice is
    :func:`~placegym.agents.doppler.selector.choose`'s on the summaries and admissions
    the rows recorded (:func:`_fits`; the kept makespan is the proposal's as simulated,
    before a replay's recompute set)."""
    logs, taken, oom, own_oom = [], 0, 0, 0
    for r in rows:
        summaries = {n: np.asarray(r[n]["summary"]) for n in sel.names if n in r}
        pred = sel.scores(np.asarray(r["own"]["summary"]), summaries, np.asarray(r["instance"]))
        got = sel.first(pred, functools.partial(_fits, r))
        kept = r["own"] if got is None else got[1]
        taken += kept is not r["own"]
        oom += kept["oom"]
        own_oom += r["own"]["oom"]
        if not kept["oom"] and not r["own"]["oom"]:
            logs.append(math.log(kept["makespan"] / r["own"]["makespan"]))
    return {
        "kept_over_own": math.exp(float(np.mean(logs))) if logs else math.nan,
        "taken": taken / len(rows),
        "over_memory": float(oom),
        "own_over_memory": float(own_oom),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m placegym.train.selector")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="label sampler instances for a selector")
    c.add_argument("checkpoint")
    c.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    c.add_argument("--count", type=int, default=1000)
    c.add_argument("--rows", type=Path, required=True)
    c.add_argument("--nodes", type=int, nargs=2, default=(50, 2000))
    c.add_argument("--devices", type=int, nargs=2, default=(2, 32))
    c.add_argument("--split", help="SUITE/SPLIT: label a suite's split instead of sampling")
    f = sub.add_parser("fit", help="fit a selector to collected rows")
    f.add_argument("rows", type=Path, nargs="+")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--margin", type=float, default=0.02)
    f.add_argument("--steps", type=int, default=3000)
    f.add_argument("--holdout", type=float, default=0.0, help="share of rows kept out")
    f.add_argument("--contention", action="store_true", help="also read the contended estimates")
    a = ap.parse_args(argv)
    if a.cmd == "collect" and a.split:
        suite, _, split = a.split.partition("/")
        n = collect_split(a.checkpoint, suite, split, a.rows)
        print(f"{n} rows added to {a.rows}")
        return
    if a.cmd == "collect":
        n = collect(a.checkpoint, a.seed, a.count, a.rows, nodes=a.nodes, devices=a.devices)
        print(f"{n} rows added to {a.rows}")
        return
    rows = [json.loads(line) for p in a.rows for line in p.open()]
    cut = len(rows) - round(a.holdout * len(rows))
    sel = fit_selector(
        rows[:cut], seed=a.seed, margin=a.margin, steps=a.steps, contention=a.contention
    )
    save_selector(sel, a.out)
    print(f"selector fitted to {cut} rows: {a.out}")
    if cut < len(rows):
        print("held out:", json.dumps(selection_report(rows[cut:], sel)))


if __name__ == "__main__":
    main()
