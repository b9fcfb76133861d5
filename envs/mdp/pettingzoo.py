"""The placement MDP as a PettingZoo AEC environment: a ``selector`` and a ``placer``.

The SEL/PLC alternation of :class:`~placegym.envs.mdp.env.PlacementEnv` read as two agents
taking turns: the ``selector`` picks a frontier node (SEL), the ``placer`` a device for
it (PLC). One :class:`PlacementEnv` runs underneath and is the specification of states,
masks, rewards and episode ends; this view only routes its steps::

    from placegym.envs.mdp.pettingzoo import env

    aec = env(graph="ffnn", cluster="p100x4")
    aec.reset(seed=0)
    for agent in aec.agent_iter():
        obs, reward, terminated, truncated, info = aec.last()
        action = None if terminated or truncated else aec.action_space(agent).sample(
            obs["action_mask"])
        aec.step(action)

- **Turns.** The agent to act is the one whose phase the environment is in: after a
  legal SEL step the ``placer``, after a legal PLC step the ``selector``. An illegal
  action (penalised with -1 by the environment) leaves the phase, so the same agent acts
  again.
- **Spaces.** ``action_space("selector")`` is ``Discrete(max_nodes)``,
  ``action_space("placer")`` is ``Discrete(D)``. Both observe the environment's
  observation; its ``action_mask`` is cut to the agent's action space and is all zeros
  when it is not that agent's turn (at an episode's end the selector's is the start
  state's, as in :class:`PlacementEnv`).
- **Shared reward.** Every step's reward goes to both agents, so each agent's return is
  the single-agent episode return.
- **End.** When the environment terminates (every node placed) or truncates (its step
  limit), both agents are terminated (or truncated) at once and leave after one
  ``step(None)`` each, as PettingZoo's AEC API requires; ``infos`` then carry the
  environment's final info (``makespan``, ``placement``, ...).

Requires the ``pettingzoo`` package (``pip install 'placegym[pettingzoo]'``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

try:
    from pettingzoo import AECEnv
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "placegym.envs.mdp.pettingzoo needs the pettingzoo package: "
        "pip install 'placegym[pettingzoo]'"
    ) from err

from placegym.envs.mdp.env import PlacementEnv

__all__ = ["AGENTS", "PlacementAECEnv", "env"]

#: The two agents, in the order of an episode's first turns.
AGENTS = ("selector", "placer")
_PHASE_AGENT = {"select": "selector", "place": "placer"}


def env(**kwargs: Any) -> PlacementAECEnv:
    """A :class:`PlacementAECEnv`; every keyword is :class:`PlacementEnv`'s (``graph``,
    ``cluster``, ``reward``, ``render_mode``, ...)."""
    return PlacementAECEnv(**kwargs)


class PlacementAECEnv(AECEnv):
    """Two-agent AEC view of one :class:`PlacementEnv` (see the module docstring).

    Args:
        **kwargs: the keywords of :class:`PlacementEnv`.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": ["ansi", "rgb_array"],
        "name": "placegym_placement_v0",
        "is_parallelizable": False,
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.env = PlacementEnv(**kwargs)
        self.render_mode = self.env.render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        sizes = {"selector": self.env.max_nodes, "placer": self.env.cluster.num_devices}
        self._sizes = sizes
        self._action_spaces = {a: spaces.Discrete(k) for a, k in sizes.items()}
        assert isinstance(self.env.observation_space, spaces.Dict)
        base = self.env.observation_space.spaces
        self._observation_spaces = {
            a: spaces.Dict({**base, "action_mask": spaces.Box(0, 1, (k,), np.int8)})
            for a, k in sizes.items()
        }
        self._obs: dict[str, np.ndarray] = {}
        self._phase = "select"

    def observation_space(self, agent: str) -> spaces.Space:
        """The agent's ``Dict`` observation space (its ``action_mask`` cut to its actions)."""
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """``Discrete(max_nodes)`` for the selector, ``Discrete(D)`` for the placer."""
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """Start an episode of the underlying environment; the selector acts first."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._record(obs, info)

    def step(self, action: Any) -> None:
        """Apply the acting agent's ``action`` (``None`` once it is terminated or
        truncated)."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        obs, reward, terminated, truncated, info = self.env.step(action)
        for a in self.agents:
            self.rewards[a] = float(reward)
            self.terminations[a] = bool(terminated)
            self.truncations[a] = bool(truncated)
        self._record(obs, info)
        self._accumulate_rewards()

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """The environment's last observation with ``agent``'s action mask."""
        return {**self._obs, "action_mask": self._agent_mask(agent)}

    def render(self) -> Any:
        """The underlying environment's render (``ansi`` text or an RGB Gantt chart)."""
        return self.env.render()

    def close(self) -> None:
        """Close the underlying environment."""
        self.env.close()

    # ------------------------------------------------------------------ helpers
    def _record(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """Keep the environment's observation and pass its info to both agents."""
        self._obs = obs
        self._phase = info["phase"]
        self.agent_selection = _PHASE_AGENT[self._phase]
        self.infos = {a: {**info, "action_mask": self._agent_mask(a)} for a in self.agents}

    def _agent_mask(self, agent: str) -> np.ndarray:
        k = self._sizes[agent]
        if _PHASE_AGENT[self._phase] != agent:
            return np.zeros(k, np.int8)
        return np.ascontiguousarray(self._obs["action_mask"][:k])
