"""Pretrained agents shipped with placegym: ``placegym.agents.pretrained(NAME)``.

Each agent is a folder of this package, ``agents/zoo/<name>/`` (package data), holding

- ``policy.pt``: ``{"format": "placegym.pretrained/v1", "policy_config": {...}, "policy":
  state_dict}``, loadable with ``torch.load(weights_only=True)``;
- ``card.json``: what it is and how it was made and measured::

    {"format": "placegym.pretrained-card/v1", "name": "generalist-v1",
     "description": "...", "config": {...the training config...},
     "trained_on": {"generalize-v0/train": {"<instance>": "<digest>", ...}},
     "evaluated_on": {"suite": "generalize-v0", "split": "test", "mode": "greedy",
                      "seed": 0},
     "results": {"<instance>": {"digest": "...", "makespan": 0.0123,
                                "feasible": true}, ...},
     "summary": {...}, "one_pass": true}

(``one_pass``, optional: the agent places by the one-pass decode unless told otherwise;
``selector``, optional: the file, in the folder, of the
:class:`~placegym.agents.doppler.selector.ProposalSelector` its one-pass placements go
through.)

``results`` are the greedy makespans the agent gets on every instance of
``evaluated_on`` (recorded by ``python -m placegym.train.experiments.zoo``); a test
re-runs them on every clone and requires the same numbers, and an instance whose digest
differs from the suite as installed (a new suite version) is reported, not compared.

:func:`pretrained` returns a :class:`Pretrained`: a placer
(:class:`~placegym.agents.doppler.placer.AgentPlacer`, greedy) ``place(graph, cluster,
seed=0) -> Placement`` that decodes under the memory mask the agent was trained under
(:attr:`~Pretrained.memory_mask`, ``data.memory_mask`` of the card's training config)
on one torch thread (``pretrained(NAME, threads=N)``:
:func:`~placegym.agents.doppler.placer.torch_threads`), with its
:attr:`~Pretrained.policy` (a :class:`~placegym.agents.doppler.DopplerPolicy` in eval
mode) and its :attr:`~Pretrained.card`. It goes into the benchmark as it is
(``placegym.benchmark.evaluate(pretrained(NAME), ...)``), or from the command line as
``placegym bench --agents pretrained:NAME``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.placer import THREADS, AgentPlacer, check_threads, trained_mask
from placegym.agents.doppler.selector import ProposalSelector, load_selector

__all__ = [
    "CARD_FORMAT",
    "POLICY_FORMAT",
    "ZOO",
    "Pretrained",
    "available",
    "load_policy_file",
    "pretrained",
    "save_policy",
]

ZOO = Path(__file__).resolve().parent
POLICY_FORMAT = "placegym.pretrained/v1"
CARD_FORMAT = "placegym.pretrained-card/v1"


class Pretrained(AgentPlacer):
    """A shipped agent: a greedy :class:`~placegym.agents.doppler.placer.AgentPlacer`
    named after it, decoding under the memory mask it was trained under, with its card
    (module docstring).

    Args:
        name: the agent's name (its folder), also its label in benchmark tables.
        policy: its policy (put in eval mode).
        card: its card; ``card["config"]["data"]["memory_mask"]`` is the mask it decodes
            under (True where the card names none).
        threads: torch threads while it places (default 1; None: the process's
            setting); the caller's count is restored after each placement.
        one_pass: place by the one-pass decode, no simulator call
            (:class:`~placegym.agents.doppler.placer.AgentPlacer`'s ``one_pass``).
        selector: the proposal selector of its one-pass placements (``one_pass`` only).

    Attributes:
        card: the card (module docstring).
    """

    def __init__(
        self,
        name: str,
        policy: DopplerPolicy,
        card: dict[str, Any],
        *,
        threads: int | None = THREADS,
        one_pass: bool = False,
        selector: ProposalSelector | None = None,
    ) -> None:
        mask = trained_mask(card.get("config"))
        super().__init__(
            policy,
            name=name,
            memory_mask=mask,
            threads=threads,
            one_pass=one_pass,
            selector=selector,
        )
        self.card = card

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """The recorded results per instance of :attr:`evaluated_on`."""
        return dict(self.card.get("results", {}))

    @property
    def evaluated_on(self) -> dict[str, Any]:
        """``suite``, ``split``, ``mode`` and ``seed`` of the recorded results."""
        return dict(self.card.get("evaluated_on", {}))

    def __repr__(self) -> str:
        return f"Pretrained({self.name!r}, memory_mask={self.memory_mask!r})"


def available() -> list[str]:
    """The names of the shipped agents."""
    return sorted(p.parent.name for p in ZOO.glob("*/card.json"))


def pretrained(
    name: str, *, threads: int | None = THREADS, one_pass: bool | None = None
) -> Pretrained:
    """The shipped agent ``name`` (see :func:`available`) as a placer: greedy, decoding
    under the memory mask it was trained under, its card attached (:class:`Pretrained`),
    placing with ``threads`` torch threads (default 1; None: the process's setting);
    with ``one_pass``, by the one-pass decode (no simulator call, no repair; agents
    that read lookahead prices refuse it), through the card's ``selector`` if it names
    one. ``one_pass=None`` takes the card's
    ``"one_pass"`` (an agent made to place in one pass, e.g. ``onepass-v1``, says true),
    else False.

    Raises:
        ValueError: an unknown name (naming the shipped ones), a file of another format,
            ``one_pass`` for an agent that reads lookahead prices,
            or ``threads`` not an integer >= 1.
    """
    check_threads(threads)
    folder = ZOO / name
    if name not in available():
        raise ValueError(
            f"pretrained: no agent {name!r} (shipped: {', '.join(available()) or 'none'})"
        )
    card = json.loads((folder / "card.json").read_text())
    if card.get("format") != CARD_FORMAT:
        raise ValueError(f"{folder / 'card.json'}: format: expected {CARD_FORMAT!r}")
    data = load_policy_file(folder / "policy.pt")
    policy = DopplerPolicy(PolicyConfig.from_dict(data["policy_config"]))
    policy.load_state_dict(data["policy"])
    if one_pass is None:
        one_pass = bool(card.get("one_pass", False))
    selector = None
    if one_pass and card.get("selector"):
        selector = load_selector(folder / card["selector"])
    return Pretrained(name, policy, card, threads=threads, one_pass=one_pass, selector=selector)


def load_policy_file(path: Path) -> dict[str, Any]:
    """A shipped ``policy.pt`` (its ``policy_config`` and ``policy`` weights), loaded with
    ``weights_only=True``.

    Raises:
        ValueError: a file of another format, naming it.
    """
    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
        raise ValueError(f"{path}: format: expected {POLICY_FORMAT!r}")
    return data


def save_policy(policy: DopplerPolicy, path: Path) -> None:
    """Write ``policy`` as a shipped ``policy.pt`` (weights and sizes only)."""
    torch.save(
        {
            "format": POLICY_FORMAT,
            "policy_config": dataclasses.asdict(policy.config),
            "policy": policy.state_dict(),
        },
        path,
    )
