"""A trained agent's searches as anytime search placers: its policy search
(``placegym anytime --agents``, :func:`agent_search_placer`) and annealing warm-started
from its greedy placement (``--warm``, :func:`agent_anneal_placer`).

The search (:func:`~placegym.agents.doppler.search.policy_search`) counts its own calls;
the run's budget, a hard cap on the calls actually made
(:mod:`placegym.train.harness.anytime`), also covers what it spends beyond that count:
the simulations inside its heuristic starts and the repair of an over-memory best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.memory import memory_may_bind
from placegym.teachers._memory import MAX_REPAIR_CALLS
from placegym.train.harness.anytime import SearchFunction, Trace, anneal_search
from placegym.train.harness.calls import counting, uncounted

if TYPE_CHECKING:
    from placegym.agents.doppler.placer import AgentPlacer

__all__ = ["REPAIR_CALLS", "agent_anneal_placer", "agent_search_placer", "warm_anneal"]

#: The most simulator calls :func:`~placegym.teachers.make_feasible` makes
#: (:data:`placegym.teachers._memory.MAX_REPAIR_CALLS`), and the search's look-up of the
#: answer: what an agent's search may spend repairing an over-memory best.
REPAIR_CALLS = MAX_REPAIR_CALLS + 1


def agent_search_placer(path: str | Path, threads: int | None = 1) -> tuple[str, SearchFunction]:
    """A trained agent's :func:`~placegym.agents.doppler.search.policy_search` (default stages)
    as a search placer, named ``<run>-search`` (``path``: a checkpoint, or
    ``pretrained:NAME`` for a shipped agent); its curve is the search's own anytime
    curve (every simulated placement counts one call, a pricing policy's lookahead calls
    included). It decodes under the memory mask the policy was trained under
    (``data.memory_mask`` of its checkpoint's config or its card), as
    :func:`~placegym.train.evaluate.load_agent` does, with ``threads`` torch threads
    (None: the process's setting).

    The run's budget covers what the search spends beyond its own count: the simulations
    inside its heuristic starts (measured on the instance beforehand, uncounted, and
    added to every point of the curve) and, where memory may bind, a repair of an
    over-memory best (:data:`REPAIR_CALLS` set aside)."""
    from placegym.agents.doppler.placer import torch_threads
    from placegym.agents.doppler.search import SearchConfig, check_budget, policy_search
    from placegym.teachers import get_teacher
    from placegym.train.evaluate import load_agent

    agent = load_agent(path, threads=threads)
    policy, name, mask = agent.policy, agent.name, agent.memory_mask

    def search(graph: Graph, cluster: Cluster, budget: int, seed: int, trace: Trace):
        with uncounted(), counting() as starts:  # what the starts simulate inside
            for t in SearchConfig().starts:
                get_teacher(t).place(graph, cluster)
        spare = REPAIR_CALLS if memory_may_bind(graph, cluster) else 0
        cfg = SearchConfig(budget=max(budget - starts.calls - spare, 1), memory_mask=mask)
        with torch_threads(threads):
            res = policy_search(policy, graph, cluster, cfg, seed=seed)
        for calls, best in enumerate(res.curve.tolist(), start=1 + starts.calls):
            if math.isfinite(best):  # calls before any placement is known (counted prices)
                trace.report(calls, best)
        return res.placement

    def check(graph: Graph, cluster: Cluster, budget: int) -> None:
        check_budget(policy, graph, cluster, budget)

    search.check = check  # type: ignore[attr-defined]  # run_anytime asks before any run
    return f"{name}-search", search


def agent_anneal_placer(path: str | Path, threads: int | None = 1) -> tuple[str, SearchFunction]:
    """The ``anneal`` search placer warm-started by a trained agent, named
    ``<run>-anneal`` (``path``: a checkpoint, or ``pretrained:NAME``): its starts are the
    heuristic teachers' placements and the agent's greedy placement, decoded inside the
    run (its wall time counts; so do its simulator calls, none for a policy the one-pass
    decode takes, :func:`~placegym.agents.doppler.onepass.check_one_pass`, which reads
    the starts as its hints where memory cannot bind), then anneal with the calls left.
    The agent decodes under the memory mask it was trained under, with ``threads`` torch
    threads (None: the process's setting); its placement is a start like the others,
    ranked after any that fits where it is over memory."""
    from placegym.train.evaluate import load_agent

    agent = load_agent(path, threads=threads)
    return f"{agent.name}-anneal", warm_anneal(agent, threads)


def warm_anneal(agent: AgentPlacer, threads: int | None = 1) -> SearchFunction:
    """:func:`agent_anneal_placer`'s search for a loaded agent (its policy and its mask)."""
    from placegym.agents.doppler.onepass import check_one_pass, one_pass_greedy
    from placegym.agents.doppler.placer import torch_threads
    from placegym.agents.doppler.selector import one_pass_select

    try:
        check_one_pass(agent.policy)
        one_pass = True
    except ValueError:  # a priced policy: its greedy pass, counted
        one_pass = False

    def search(graph: Graph, cluster: Cluster, budget: int, seed: int, trace: Trace):
        def proposals(g: Graph, c: Cluster, starts: Mapping[str, Placement]) -> list[Placement]:
            if not one_pass:
                return [agent.place(g, c, seed)]
            with torch_threads(threads):  # the starts are its hints where memory cannot bind
                if agent.selector is not None:
                    args = (agent.policy, agent.selector, g, c, agent.memory_mask)
                    return [one_pass_select(*args, known=starts).placement]
                return [one_pass_greedy(agent.policy, g, c, agent.memory_mask, known=starts)]

        return anneal_search(graph, cluster, budget, seed, trace, proposals=proposals)

    return search
