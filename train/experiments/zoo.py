r"""Ship a trained agent with placegym, and check a shipped one (:mod:`placegym.agents.zoo`).

::

    python -m placegym.train.experiments.zoo add generalist-v1 \
        --checkpoint runs/generalist_rollout/checkpoints/final.pt \
        --evaluate generalize-v0/test --description "..."
    python -m placegym.train.experiments.zoo check            # every shipped agent
    python -m placegym.train.experiments.zoo refresh generalist-v2
    python -m placegym.train.experiments.zoo add onepass-v1 --one-pass ...
    python -m placegym.train.experiments.zoo add onepass-v3 --one-pass --selector S.pt ...

``add`` writes ``agents/zoo/<name>/policy.pt`` (the weights and sizes only) and
``card.json``: the training config of the checkpoint, the digests of every instance of the
suite splits it trained on (its ``data.graphs`` entries of the form ``SUITE/SPLIT``), and
its greedy results on every instance of ``--evaluate``, run by
:func:`placegym.benchmark.evaluate` beside critical_path (seed 0). The suite results file
of that run is written beside them (``results.json``: a leaderboard can enter it).
``check`` re-runs each shipped agent's recorded results: :func:`reproduce` returns the
instances whose makespan or feasibility differs (an instance whose suite digest changed
is reported as such, never compared). ``refresh`` re-records an agent's results with
today's code (for agents whose greedy pass prices devices with the teachers' rules, when
those rules change), naming what changed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placegym.agents.doppler.selector import load_selector, save_selector
from placegym.agents.zoo import CARD_FORMAT, ZOO, Pretrained, available, pretrained, save_policy
from placegym.envs.suites import get_suite
from placegym.train.checkpoint import load_checkpoint, policy_from_checkpoint
from placegym.train.evaluate import AgentPlacer, trained_mask
from placegym.train.harness.evaluation import Results, evaluate
from placegym.train.harness.replay import close
from placegym.train.stats import geomean

__all__ = ["add", "main", "refresh", "reproduce"]


def _split(spec: str) -> tuple[str, str]:
    suite, _, split = spec.partition("/")
    if not split:
        raise ValueError(f"--evaluate: expected SUITE/SPLIT, got {spec!r}")
    get_suite(suite)
    return suite, split


def _run(agent: AgentPlacer, suite: str, split: str) -> Results:
    """The greedy results of ``agent`` (a shipped one decodes under its training mask, in
    one pass where its card says so)."""
    return evaluate({"agent": agent}, suite=suite, split=split, seeds=(0,))


def _results(results: Results) -> dict[str, dict[str, Any]]:
    return {
        r.instance: {"digest": r.digest, "makespan": r.makespan, "feasible": r.feasible}
        for r in results.records
        if r.placer == "agent"
    }


def _summary(results: Results) -> dict[str, Any]:
    rows = [r for r in results.records if r.placer == "agent"]
    ratios = [r.ratio_to_critical_path for r in rows if r.ratio_to_critical_path is not None]
    gaps = [1 + r.gap_to_best for r in rows if r.gap_to_best is not None]
    return {
        "instances": len(rows),
        "feasible": sum(r.feasible for r in rows),
        "geomean_ratio_to_critical_path": geomean(ratios) if ratios else None,
        "geomean_ratio_to_best_known": geomean(gaps) if gaps else None,
        "calls": sum(r.calls for r in rows),
    }


def _trained_on(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for entry in config.get("data", {}).get("graphs", []):
        name = entry if isinstance(entry, str) else entry.get("name", "")
        suite, _, split = str(name).partition("/")
        if split in ("train", "test"):
            out[name] = {i.id: i.digest for i in get_suite(suite).instances(split)}
    return out


def add(
    name: str,
    checkpoint: str | Path,
    evaluate_on: str,
    description: str,
    folder: Path = ZOO,
    one_pass: bool = False,
    selector: str | Path | None = None,
) -> dict[str, Any]:
    """Ship ``checkpoint`` as agent ``name`` (module docstring); returns the card. With
    ``one_pass`` the agent places by the one-pass decode (no simulator call), its card
    says so and its results are that decode's; with ``selector`` (a saved
    :class:`~placegym.agents.doppler.selector.ProposalSelector`, ``one_pass`` only) its
    one-pass placements go through it: it is shipped as ``selector.pt`` and named by the
    card."""
    ckpt = load_checkpoint(checkpoint)
    policy = policy_from_checkpoint(ckpt)
    suite, split = _split(evaluate_on)
    mask = trained_mask(ckpt.get("config"))
    chosen = load_selector(selector) if selector is not None else None
    placer = AgentPlacer(policy, memory_mask=mask, one_pass=one_pass, selector=chosen)
    results = _run(placer, suite, split)
    out = folder / name
    out.mkdir(parents=True, exist_ok=True)
    save_policy(policy, out / "policy.pt")
    if chosen is not None:
        save_selector(chosen, out / "selector.pt")
    results.save(out / "results.json")
    card = {
        "format": CARD_FORMAT,
        "name": name,
        "description": description,
        "created": datetime.date.today().isoformat(),
        "config": ckpt.get("config", {}),
        "trained_on": _trained_on(ckpt.get("config", {})),
        "evaluated_on": {"suite": suite, "split": split, "mode": "greedy", "seed": 0},
        "results": _results(results),
        "summary": _summary(results),
    }
    if one_pass:
        card["one_pass"] = True
    if chosen is not None:
        card["selector"] = "selector.pt"
    (out / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    return card


def reproduce(agent: Pretrained) -> list[str]:
    """The recorded results of ``agent`` that today's code does not reproduce (empty: all
    do): a makespan beyond a relative 1e-9 or a different feasibility, naming the
    instance; an instance whose suite digest changed is named as stale."""
    on = agent.evaluated_on
    results = _results(_run(agent, str(on["suite"]), str(on["split"])))
    bad = []
    for inst, rec in agent.results.items():
        now = results.get(inst)
        if now is None:
            bad.append(f"{inst}: no longer in {on['suite']}/{on['split']}")
        elif now["digest"] != rec["digest"]:
            bad.append(f"{inst}: stale (suite digest {rec['digest']} is now {now['digest']})")
        elif now["feasible"] != rec["feasible"] or not close(now["makespan"], rec["makespan"]):
            bad.append(
                f"{inst}: recorded {rec['makespan']} (feasible {rec['feasible']}), "
                f"now {now['makespan']} (feasible {now['feasible']})"
            )
    return bad


def refresh(name: str) -> list[str]:
    """Re-run shipped agent ``name``'s recorded results with today's code and store them
    (its card's ``results`` and ``summary``, and ``results.json``; the weights and the
    training config stay): for an agent whose greedy pass calls the teachers (lookahead
    prices), when their rules change. Returns what differed (:func:`reproduce`)."""
    agent = pretrained(name)
    bad = reproduce(agent)
    on = agent.evaluated_on
    results = _run(agent, str(on["suite"]), str(on["split"]))
    path = ZOO / name / "card.json"
    card = json.loads(path.read_text())
    card["results"] = _results(results)
    card["summary"] = _summary(results)
    card["refreshed"] = datetime.date.today().isoformat()
    results.save(ZOO / name / "results.json")
    path.write_text(json.dumps(card, indent=1) + "\n")
    return bad


def main(argv: Sequence[str] | None = None) -> int:
    """``add`` or ``check`` (module docstring); exit status 1 when a check fails."""
    p = argparse.ArgumentParser(prog="python -m placegym.train.experiments.zoo")
    sub = p.add_subparsers(dest="op", required=True)
    a = sub.add_parser("add", help="ship a checkpoint as a pretrained agent")
    a.add_argument("name")
    a.add_argument("--checkpoint", required=True)
    a.add_argument("--evaluate", required=True, help="SUITE/SPLIT of the recorded results")
    a.add_argument("--description", required=True)
    a.add_argument(
        "--one-pass", action="store_true", help="the agent places by the one-pass decode"
    )
    a.add_argument("--selector", help="a saved proposal selector its one-pass placements use")
    c = sub.add_parser("check", help="reproduce every shipped agent's recorded results")
    c.add_argument("names", nargs="*", help="agents (default: all)")
    r = sub.add_parser("refresh", help="re-record shipped agents' results with today's code")
    r.add_argument("names", nargs="+", help="agents")
    args = p.parse_args(argv)
    if args.op == "add":
        card = add(
            args.name,
            args.checkpoint,
            args.evaluate,
            args.description,
            one_pass=args.one_pass,
            selector=args.selector,
        )
        print(json.dumps(card["summary"]))
        return 0
    if args.op == "refresh":
        for name in args.names:
            changed = refresh(name)
            print(f"{name}: {len(changed)} result(s) re-recorded")
            for line in changed:
                print(f"  {line}")
        return 0
    status = 0
    for name in args.names or available():
        bad = reproduce(pretrained(name))
        print(f"{name}: {'ok' if not bad else f'{len(bad)} differ'}")
        for line in bad:
            print(f"  {line}")
        status |= bool(bad)
    return status


if __name__ == "__main__":
    sys.exit(main())
