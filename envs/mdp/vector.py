"""A native Gymnasium ``VectorEnv`` of the placement MDP: ``B`` environments stepped in
one compiled call over batched numpy state.

``gym.make_vec(id, num_envs=B, vectorization_mode="vector_entry_point")`` (or no mode: an
id with a vector entry point uses it by default) returns a :class:`PlacementVectorEnv`
for every simulated placegym id. It behaves exactly as ``B`` :class:`~placegym.envs.mdp.env.
PlacementEnv` with same-step autoreset (``gym.vector.AutoresetMode.SAME_STEP``): the same
observations, rewards, terminations, infos and masks, step for step, given the same seeds
(environment ``i`` is seeded ``seed + i``, as Gymnasium's vector environments do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.error import InvalidAction
from gymnasium.spaces import Dict
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from placegym.envs.analysis.levels import step_costs
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp import _vector_kernel as K
from placegym.envs.mdp.backends import SimulatedBackend
from placegym.envs.mdp.env import PlacementEnv, step_limit
from placegym.envs.mdp.observation import observation_space
from placegym.envs.mdp.reward import scored_makespan, terminal_reward
from placegym.envs.mdp.state import LIVE_MASKS, memory_mask_mode
from placegym.envs.sim.simulator import simulate

__all__ = ["PlacementVectorEnv"]

_PHASES = np.array(["select", "place"], dtype=object)
_STATIC = ("node_static", "edge_index", "edge_attr", "node_mask", "edge_mask")


class PlacementVectorEnv(VectorEnv):
    """``num_envs`` placement environments with batched state (see the module docstring).

    ## Observations, actions, rewards
    As :class:`~placegym.envs.mdp.env.PlacementEnv` (its docstring is the specification),
    with a leading batch axis: observations are the ``Dict`` of ``(B, ...)`` arrays,
    actions a ``(B,)`` integer array, rewards, terminations and truncations ``(B,)``.
    ``info`` holds ``action_mask (B, A)``, ``phase`` and ``illegal_action`` for every
    environment; ``action_masks()`` gives the masks too.

    ## Autoreset (same step)
    When environment ``i`` ends, the returned observation and ``info["action_mask"][i]``
    are those of its next episode's first state, already reset; the last observation and
    info of the episode (``makespan``, ``placement``, ...) are in ``info["final_obs"][i]``
    and ``info["final_info"]`` (Gymnasium's ``_key`` masks mark which environments
    ended). Graph sources draw the next graph with the environment's own generator.

    ## Arguments
    ``num_envs``; every keyword of :class:`~placegym.envs.mdp.env.PlacementEnv` but
    ``backend`` (only the simulator: ``"sim"`` or a plain ``SimulatedBackend()``) and
    ``render_mode`` (no rendering); ``max_episode_steps`` truncates an episode after that
    many steps, illegal ones included (as ``TimeLimit``); ``copy`` (default True): every
    step returns fresh arrays; False returns the internal buffers, valid until the next
    step (faster on large graphs). Graphs with co-location groups (``placegym.graph/v2``)
    are refused with a ``ValueError``: the compiled steps do not apply the group mask
    (``gymnasium.vector.SyncVectorEnv`` over :class:`PlacementEnv` does); so is
    ``memory_mask="room"``, for the same reason.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": [],
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        *,
        max_episode_steps: int | None = None,
        copy: bool = True,
        **env_kwargs: Any,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise ValueError(f"num_envs: must be an integer >= 1, got {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs: must be an integer >= 1, got {num_envs}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ValueError(f"max_episode_steps: must be >= 1 or None, got {max_episode_steps}")
        for key in ("backend", "render_mode"):
            value = env_kwargs.get(key)
            if value is not None and value != "sim" and type(value) is not SimulatedBackend:
                raise ValueError(
                    f"{key}: the vector environment supports only the simulator without "
                    f"rendering, got {value!r} (use vectorization_mode='sync')"
                )
        self._proto = PlacementEnv(**env_kwargs)  # validates the arguments, prepares graphs
        proto = self._proto
        mode = memory_mask_mode(proto.memory_mask)
        if mode in ("room", *LIVE_MASKS):
            raise ValueError(
                f"memory_mask: {mode!r} is not compiled in PlacementVectorEnv; use "
                "gymnasium.vector.SyncVectorEnv over PlacementEnv (vectorization_mode='sync')"
            )
        self._memory_mask = mode == "resident"
        self.num_envs = int(num_envs)
        self.max_episode_steps = max_episode_steps
        self.copy = bool(copy)
        self.render_mode = None
        self.single_observation_space = proto.observation_space
        self.single_action_space = proto.action_space
        self.observation_space = batch_space(proto.observation_space, self.num_envs)
        self.action_space = batch_space(proto.action_space, self.num_envs)
        self._cluster = proto.cluster
        assert isinstance(proto.observation_space, Dict)
        self._obs_spaces = proto.observation_space.spaces
        self._rngs: list[np.random.Generator] = [seeding.np_random()[0] for _ in range(num_envs)]
        self._graphs: list[Graph | None] = [None] * self.num_envs
        self._graph_data: dict[int, tuple[Graph, dict[str, Any]]] = {}
        self._alloc()

    # ------------------------------------------------------------------ set-up
    def _alloc(self) -> None:
        b, n, e = self.num_envs, self._proto.max_nodes, self._proto.max_edges
        c = self._cluster
        d = c.num_devices
        off = ~np.eye(d, dtype=bool)
        self._c = (
            c.flops,
            c.mem_bandwidth,
            c.launch_overhead,
            c.memory,
            1.0 / c.memory,
            np.where(off, c.pair_latency, 0.0),
            np.where(off, 1.0 / c.pair_bandwidth, 0.0),
            np.array([min(lv.bandwidth for lv in c.levels)]),
        )
        i64, f64 = np.int64, np.float64
        self._g = (
            np.zeros(b, i64),  # n
            np.zeros((b, n + 1), i64),  # successor CSR
            np.zeros((b, max(e, 1)), i64),
            np.zeros((b, n + 1), i64),  # predecessor CSR
            np.zeros((b, max(e, 1)), i64),
            *(np.zeros((b, n), f64) for _ in range(5)),  # flops, io, out, param, in_total
            np.ones(b),  # cp
            np.ones(b),  # reference makespan
        )
        self._s = (
            *(np.full((b, n), -1, i64) for _ in range(4)),  # device, rank, order, unplaced
            np.zeros((b, n), bool),  # frontier
            np.zeros((b, n)),  # est_finish
            *(np.zeros((b, d)) for _ in range(4)),  # device_free, load, param_used, est_row
            *(np.zeros(b, i64) for _ in range(3)),  # selected, num_selected, num_placed
            np.zeros(b),  # cut
            np.zeros(b),  # phi
            np.zeros((b, n, 6), np.float32),  # node_dynamic
            np.zeros((b, d, 7), np.float32),  # device
        )
        full = observation_space(n, e, d).spaces  # the statics, even for compact envs
        boxes = {k: full[k] for k in _STATIC}
        self._static = {
            k: np.zeros((b, *(box.shape or ())), box.dtype) for k, box in boxes.items()
        }
        self._mask = np.zeros((b, self._proto.num_actions), np.int8)
        self._steps = np.zeros(b, np.int64)
        self._limits = np.full(b, -1, np.int64)  # the environment's step limit (-1: none)
        self._rewards = np.zeros(b)
        self._illegal = np.zeros(b, bool)

    def _data(self, graph: Graph) -> dict[str, Any]:
        """Per-graph arrays (observation statics, reference makespan), cached per graph
        (for a sampler, only the graphs of the live episodes are kept)."""
        hit = self._graph_data.get(id(graph))
        if hit is not None and hit[0] is graph:
            return hit[1]
        proto = self._proto
        builder, ref = proto.prepare(graph)
        data = {
            "static": builder.static,
            "cp": builder.cp,
            "ref": ref,
            "in_total": step_costs(graph, self._cluster).in_total,  # as PlacementState's
        }
        if len(self._graph_data) > 2 * self.num_envs:
            live = {id(g) for g in self._graphs}
            self._graph_data = {k: v for k, v in self._graph_data.items() if k in live}
        self._graph_data[id(graph)] = (graph, data)
        return data

    def _bind(self, i: int, graph: Graph) -> None:
        """Write ``graph``'s data into slot ``i`` (unless it is already there)."""
        self._proto.check_size(graph)
        if graph.groups:  # the compiled steps know no co-location mask
            raise ValueError(
                f"graph {graph.name!r} has co-location groups, which PlacementVectorEnv "
                "does not support; use gymnasium.vector.SyncVectorEnv over PlacementEnv"
            )
        if self._graphs[i] is graph:
            return
        data = self._data(graph)
        n, e = graph.num_nodes, graph.num_edges
        gs = self._g
        gs[0][i] = n
        for k, (ptr, idx) in ((1, graph.consumer_csr), (3, graph.producer_csr)):
            gs[k][i, : n + 1] = ptr
            gs[k + 1][i, :e] = idx
        for k, arr in zip(
            range(5, 10),
            (graph.flops, graph.io_bytes, graph.out_bytes, graph.param_bytes, data["in_total"]),
        ):
            gs[k][i, :n] = arr
        gs[10][i] = data["cp"]
        gs[11][i] = data["ref"]
        for key in _STATIC:
            self._static[key][i] = data["static"][key]
        self._graphs[i] = graph

    # ------------------------------------------------------------------ gym API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every environment; ``seed`` (an int: environment ``i`` gets ``seed + i``,
        or one seed per environment) reseeds their generators."""
        super().reset(seed=seed if isinstance(seed, int | None) else None)
        b = self.num_envs
        if isinstance(seed, int | np.integer):
            seeds: Sequence[int | None] = [int(seed) + i for i in range(b)]
        elif seed is None:
            seeds = [None] * b
        else:
            seeds = list(seed)
            if len(seeds) != b:
                raise ValueError(
                    f"seed: expected {b} seeds (one per environment), got {len(seeds)}"
                )
        for i, s in enumerate(seeds):
            if s is not None:
                self._rngs[i] = seeding.np_random(s)[0]
        self._reset_rows(np.arange(b))
        return self._observe(), self._infos()

    def step(self, actions: Any):
        """Step every environment with ``actions[i]``; ended ones reset in the same step."""
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,) or not np.issubdtype(acts.dtype, np.integer):
            raise ValueError(
                f"actions: expected {self.num_envs} integers (shape ({self.num_envs},)), got "
                f"shape {acts.shape} and dtype {acts.dtype}"
            )
        acts = acts.astype(np.int64, copy=False)
        proto = self._proto
        K.step_rows(
            acts,
            self._g,
            self._c,
            self._s,
            self._memory_mask,
            proto.reward_kind == "nest",
            proto.shaping_gamma,
            self._rewards,
            self._illegal,
        )
        if proto.illegal_action == "raise" and self._illegal.any():
            self._raise_illegal(acts)
        K.masks(self._g, self._c, self._s, self._memory_mask, self._mask)
        self._steps += 1
        rewards = self._rewards.copy()
        terminated = self._s[12] == self._g[0]  # every node placed
        truncated = ~terminated & (self._limits >= 0) & (self._steps >= self._limits)
        if self.max_episode_steps is not None:  # as TimeLimit: also on the last step
            truncated |= self._steps >= self.max_episode_steps
        ended = np.flatnonzero(terminated | truncated)
        if len(ended):
            for j in np.flatnonzero(terminated).tolist():  # the start state's mask
                graph = self._graphs[j]
                assert graph is not None
                self._mask[j] = 0
                self._mask[j, : graph.num_nodes] = graph.in_degree == 0
        infos = self._infos()
        if len(ended):
            final_obs = self._observe(copy=True)
            for i in ended.tolist():
                info = self._row_info(infos, i)
                if terminated[i]:
                    rewards[i] += self._finish(i, info)
                infos = self._add_info(
                    infos, {"final_obs": _row(final_obs, i), "final_info": info}, i
                )
            self._reset_rows(ended)
            infos.update(self._infos())  # the new episodes' masks and phases
        return self._observe(), rewards, terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """``(B, A)`` bool: the legal actions of every environment now."""
        return self._mask.astype(bool)

    def _add_info(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        """Gymnasium's merge of one environment's info, except that arrays whose shapes
        differ between environments (the placements of a sampler's graphs) go into an
        object array instead of failing."""
        for key, value in env_info.items():
            old = vector_infos.get(key)
            if (
                isinstance(value, np.ndarray)
                and isinstance(old, np.ndarray)
                and old.dtype != object
                and old.shape[1:] != value.shape
            ):
                merged = np.full(self.num_envs, None, dtype=object)
                for j in np.flatnonzero(vector_infos[f"_{key}"]):
                    merged[j] = old[j]
                vector_infos[key] = merged
        return super()._add_info(vector_infos, env_info, env_num)

    def close_extras(self, **kwargs: Any) -> None:
        """Drop the per-graph caches."""
        self._graph_data.clear()

    # ------------------------------------------------------------------ helpers
    def _reset_rows(self, rows: np.ndarray) -> None:
        for i in rows:
            self._bind(int(i), self._proto.source.draw(self._rngs[i]))
        K.reset_rows(rows.astype(np.int64), self._g, self._c, self._s)
        self._steps[rows] = 0
        factor = self._proto.step_limit_factor
        for i in rows:
            limit = step_limit(int(self._g[0][i]), factor)
            self._limits[i] = -1 if limit is None else limit
        K.masks(self._g, self._c, self._s, self._memory_mask, self._mask)

    def _observe(self, copy: bool | None = None) -> dict[str, np.ndarray]:
        copy = self.copy if copy is None else copy
        obs: dict[str, np.ndarray] = {}
        for key in self._obs_spaces:
            if key in self._static:
                arr = self._static[key]
            elif key == "node_dynamic":
                arr = self._s[15]
            elif key == "device":
                arr = self._s[16]
            elif key == "phase":
                arr = (self._s[10] >= 0).astype(np.int8)[:, None]
            else:
                arr = self._mask
            obs[key] = arr.copy() if copy else arr
        return obs

    def _infos(self) -> dict[str, Any]:
        b = self.num_envs
        ones = np.ones(b, bool)
        return {
            "action_mask": self._mask.astype(bool),
            "_action_mask": ones,
            "phase": _PHASES[(self._s[10] >= 0).astype(np.int64)],
            "_phase": ones.copy(),
            "illegal_action": self._illegal.copy(),
            "_illegal_action": ones.copy(),
        }

    def _row_info(self, infos: dict[str, Any], i: int) -> dict[str, Any]:
        return {
            "action_mask": infos["action_mask"][i].copy(),
            "phase": str(infos["phase"][i]),
            "illegal_action": bool(infos["illegal_action"][i]),
        }

    def _finish(self, i: int, info: dict[str, Any]) -> float:
        """Simulate environment ``i``'s finished placement; fill ``info`` as
        :class:`PlacementEnv` does and return the terminal reward."""
        proto, graph = self._proto, self._graphs[i]
        assert graph is not None
        n = graph.num_nodes
        device = self._s[0][i, :n].copy()
        order = self._s[2][i, :n].copy()
        s = simulate(
            graph,
            self._cluster,
            Placement(device=device, order=order),
            noise=proto.noise,
            rng=self._rngs[i] if proto.noise > 0 else None,
            dispatch=proto.dispatch,
        )
        ref = float(self._g[11][i])
        info.update(
            makespan=s.makespan,
            reference_makespan=ref,
            placement=device,
            order=order,
            peak_memory=s.peak_memory,
            oom=s.oom,
            infeasible=s.infeasibility,
        )
        return terminal_reward(proto.reward_kind, scored_makespan(s, s.makespan), ref)

    def _raise_illegal(self, acts: np.ndarray) -> None:
        i = int(np.flatnonzero(self._illegal)[0])
        phase = "select" if self._s[10][i] < 0 else "place"
        raise InvalidAction(
            f"environment {i}, phase {phase!r}: action {int(acts[i])} is illegal "
            f"({int(self._mask[i].sum())} legal actions)"
        )


def _row(obs: Mapping[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    return {k: v[i] for k, v in obs.items()}
