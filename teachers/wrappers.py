"""One-phase views of :class:`~placegym.envs.mdp.env.PlacementEnv` (DOPPLER's ablations).

- :class:`SelectOnly`: the agent picks SEL actions (``Discrete(max_nodes)``); every PLC
  step is answered by a placer teacher (default ``critical_path``).
- :class:`PlaceOnly`: the agent picks PLC actions (``Discrete(D)``); every SEL step is
  answered by a selector teacher (default ``critical_path``).

One wrapper step is the agent's step plus the teacher's; rewards of both are summed.
``obs["action_mask"]`` and ``action_masks()`` are cut to the wrapper's action space.
They live with the teachers, not with the environment, because a teacher plays one phase.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placegym.envs import PlacementEnv
from placegym.envs.mdp.state import PlacementState
from placegym.teachers import Teacher, get_teacher

__all__ = ["PlaceOnly", "SelectOnly"]


class _OnePhase(gym.Wrapper):
    agent_phase = "select"

    def __init__(self, env: gym.Env, teacher: Teacher | str) -> None:
        super().__init__(env)
        base = self.placement_env
        self.teacher = get_teacher(teacher) if isinstance(teacher, str) else teacher
        n = base.max_nodes if self.agent_phase == "select" else base.cluster.num_devices
        self._n = n
        self.action_space = spaces.Discrete(n)
        obs_spaces = dict(cast(spaces.Dict, env.observation_space).spaces)
        obs_spaces["action_mask"] = spaces.Box(0, 1, (n,), np.int8)
        self.observation_space = spaces.Dict(obs_spaces)

    @property
    def placement_env(self) -> PlacementEnv:
        """The :class:`~placegym.envs.mdp.env.PlacementEnv` underneath."""
        return cast(PlacementEnv, self.env.unwrapped)

    def _state(self) -> PlacementState:
        state = self.placement_env.state
        assert state is not None, "reset() first"
        return state

    def _cut(self, obs: dict[str, Any], info: dict[str, Any]):
        n = self._n
        obs = dict(obs)
        obs["action_mask"] = obs["action_mask"][:n]
        info = dict(info)
        info["action_mask"] = info["action_mask"][:n]
        return obs, info

    def _teacher_action(self) -> int:
        state = self._state()
        acts = (
            self.teacher.select_actions(state)
            if state.phase == "select"
            else self.teacher.place_actions(state)
        )
        return int(acts[0])

    def _advance(self, obs, reward, term, trunc, info):
        """Let the teacher act until it is the agent's phase again (or the end)."""
        state = self._state()
        while (
            not (term or trunc or info.get("illegal_action")) and state.phase != self.agent_phase
        ):
            obs, r, term, trunc, info = self.env.step(self._teacher_action())
            reward += r
        return obs, reward, term, trunc, info

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        obs, _, _, _, info = self._advance(obs, 0.0, False, False, info)
        return self._cut(obs, info)

    def step(self, action):
        out = self._advance(*self.env.step(action))
        obs, info = self._cut(out[0], out[4])
        return obs, float(out[1]), out[2], out[3], info

    def action_masks(self) -> np.ndarray:
        """The legal actions of the agent's phase (the environment's mask, cut)."""
        return self.placement_env.action_masks()[: self._n]


class SelectOnly(_OnePhase):
    """The agent selects nodes; ``placer`` (a teacher or its name) places them."""

    agent_phase = "select"

    def __init__(self, env: gym.Env, placer: Teacher | str = "critical_path") -> None:
        super().__init__(env, placer)


class PlaceOnly(_OnePhase):
    """The agent places nodes; ``selector`` (a teacher or its name) selects them."""

    agent_phase = "place"

    def __init__(self, env: gym.Env, selector: Teacher | str = "critical_path") -> None:
        super().__init__(env, selector)
