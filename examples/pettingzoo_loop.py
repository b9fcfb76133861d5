"""The placement MDP as two PettingZoo agents: a ``selector`` and a ``placer``.

``placegym.envs.mdp.pettingzoo.env(...)`` is the PettingZoo AEC view of the single-agent
environment (``pip install 'placegym[pettingzoo]'``): the ``selector`` picks a frontier
node (SEL, ``Discrete(max_nodes)``), then the ``placer`` its device (PLC,
``Discrete(D)``), turn by turn. Each agent's observation is the environment's, with an
``action_mask`` cut to that agent's actions (all zeros when it is not its turn); each
step's reward goes to both agents, so each agent's return is the episode's. When every
node is placed, both agents are terminated and leave after one ``step(None)`` each, and
their infos carry the final ``makespan``.

The script plays the standard AEC loop with two teams of agents:

- ``random``: each agent picks a uniformly random legal action (its own seeded
  generator);
- ``heuristic``: the selector picks the legal node of largest b-level (the longest
  path from the node to a sink, ``node_static[:, 3]``), the placer the device where the
  selected node can start earliest (``device[:, 0]``): the critical-path rule, read off
  the observation.

It prints every episode's makespan and return, then the best of each team next to the
critical-path teacher's placement of the same graph (``placegym.teachers``).

Run (``--fast`` plays fewer episodes, for CI)::

    python examples/pettingzoo_loop.py
    python examples/pettingzoo_loop.py --fast
    python examples/pettingzoo_loop.py --graph llama_block --cluster v100x8 --episodes 50
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from placegym.envs import simulate
from placegym.envs.mdp.pettingzoo import env as placement_aec
from placegym.teachers import get_teacher

#: An agent's policy: (its observation, its legal-action mask) -> an action.
Policy = Callable[[dict[str, np.ndarray], np.ndarray], int]


def random_policy(rng: np.random.Generator) -> Policy:
    """A uniformly random legal action, drawn from ``rng``."""

    def act(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        return int(rng.choice(np.flatnonzero(mask)))

    return act


def largest_b_level(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
    """The legal node of largest b-level (lowest id among equals)."""
    b_level = obs["node_static"][: len(mask), 3]
    return int(np.flatnonzero(mask)[np.argmax(b_level[mask.astype(bool)])])


def earliest_start(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
    """The legal device on which the selected node can start first (lowest index among
    equals)."""
    start = obs["device"][:, 0]
    return int(np.flatnonzero(mask)[np.argmin(start[mask.astype(bool)])])


def play(aec, policies: dict[str, Policy], seed: int) -> tuple[float, dict[str, float]]:
    """One episode of the AEC loop; returns the makespan and each agent's return."""
    aec.reset(seed=seed)
    returns = dict.fromkeys(aec.possible_agents, 0.0)
    makespan = float("nan")
    for agent in aec.agent_iter():
        obs, reward, terminated, truncated, info = aec.last()
        returns[agent] += reward
        if terminated or truncated:
            makespan = info.get("makespan", makespan)  # absent only when truncated
            action = None  # a finished agent leaves with step(None)
        else:
            action = policies[agent](obs, obs["action_mask"])
        aec.step(action)
    return float(makespan), returns


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="ffnn", help="a workload name or a graph JSON path")
    p.add_argument("--cluster", default="p100x4", help="a cluster preset or JSON path")
    p.add_argument("--episodes", type=int, default=20, help="episodes of the random team")
    p.add_argument("--seed", type=int, default=0, help="seed of the agents and the env")
    p.add_argument("--fast", action="store_true", help="few episodes: seconds, for CI")
    args = p.parse_args()
    if args.episodes < 1:
        p.error(f"--episodes: must be >= 1, got {args.episodes}")
    if args.fast:
        args.episodes = 2
    return args


def main() -> None:
    """Play both teams and compare them with the critical-path teacher."""
    args = parse_args()
    aec = placement_aec(graph=args.graph, cluster=args.cluster)
    rng = np.random.default_rng(args.seed)
    teams = {
        "random": (
            {"selector": random_policy(rng), "placer": random_policy(rng)},
            args.episodes,
        ),
        # deterministic: one episode says everything
        "heuristic": ({"selector": largest_b_level, "placer": earliest_start}, 1),
    }
    best: dict[str, float] = {}
    for team, (policies, episodes) in teams.items():
        makespans = []
        for episode in range(episodes):
            makespan, returns = play(aec, policies, seed=args.seed + episode)
            makespans.append(makespan)
            shown = ", ".join(f"{a} {r:+.4f}" for a, r in returns.items())
            print(f"{team} episode {episode}: makespan {makespan * 1e3:.3f} ms, returns {shown}")
        best[team] = min(makespans)
        if episodes > 1:
            print(
                f"{team}: mean {np.mean(makespans) * 1e3:.3f} ms, best {best[team] * 1e3:.3f} "
                f"ms over {episodes} episodes"
            )

    graph, cluster = aec.env.graph, aec.env.cluster  # the underlying PlacementEnv's
    aec.close()
    placement = get_teacher("critical_path").place(graph, cluster)
    teacher = simulate(graph, cluster, placement).makespan
    print(f"graph {graph.name} ({graph.num_nodes} nodes) on {cluster.name}")
    for team, makespan in best.items():
        print(f"final makespan: {makespan * 1e3:.6f} ms ({team} agents)")
    print(f"teacher makespan: {teacher * 1e3:.6f} ms (critical_path)")


if __name__ == "__main__":
    main()
