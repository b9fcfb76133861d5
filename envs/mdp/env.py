"""The Gymnasium placement environment (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import InvalidAction

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.mdp.backends import Backend, make_backend
from placegym.envs.mdp.observation import ObservationBuilder, observation_space
from placegym.envs.mdp.reward import (
    DEFAULT_REFERENCE,
    REWARDS,
    NestPotential,
    ReferencePlacer,
    reference_placer,
    scored_makespan,
    terminal_reward,
)
from placegym.envs.mdp.sources import GraphSource, GraphSpec
from placegym.envs.mdp.state import PlacementState, memory_mask_mode
from placegym.envs.sim.simulator import Schedule, check_noise, simulate

__all__ = ["STEP_LIMIT_FACTOR", "PlacementEnv", "step_limit"]

#: Default episode step limit, as a multiple of the 2n steps of a legal episode.
STEP_LIMIT_FACTOR = 4


def step_limit(num_nodes: int, factor: int | None = STEP_LIMIT_FACTOR) -> int | None:
    """Steps after which an episode on an ``num_nodes``-node graph is truncated."""
    return None if factor is None else factor * 2 * num_nodes


_INTEGERS, _BOOLS = (int, np.integer), (bool, np.bool_)


def _as_int(action: Any) -> int | None:
    """``action`` as an int, or None when it is not an integer (a float, an array, ...)."""
    if isinstance(action, _INTEGERS) and not isinstance(action, _BOOLS):
        return int(action)
    if isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
        return int(action)
    return None


def _check_settings(
    render_modes: list[str],
    *,
    reward: str,
    illegal_action: str,
    dispatch: str,
    render_mode: str | None,
    noise: float,
    step_limit_factor: int | None,
    observation: str,
) -> None:
    """Check :class:`PlacementEnv`'s settings: ``ValueError`` naming the field and the
    value."""
    if reward not in REWARDS:
        raise ValueError(f"reward: expected one of {', '.join(REWARDS)}, got {reward!r}")
    if illegal_action not in ("penalize", "raise"):
        raise ValueError(f"illegal_action: expected 'penalize' or 'raise', got {illegal_action!r}")
    if dispatch not in ("priority", "fifo"):
        raise ValueError(f"dispatch: expected 'priority' or 'fifo', got {dispatch!r}")
    if render_mode is not None and render_mode not in render_modes:
        raise ValueError(f"render_mode: expected one of {render_modes}, got {render_mode!r}")
    check_noise(noise)
    if step_limit_factor is not None and (
        not isinstance(step_limit_factor, int | np.integer) or step_limit_factor < 1
    ):
        raise ValueError(
            f"step_limit_factor: expected an integer >= 1 or None, got {step_limit_factor!r}"
        )
    if observation not in ("full", "compact"):
        raise ValueError(f"observation: expected 'full' or 'compact', got {observation!r}")


def _padding(source: GraphSource, max_nodes: int | None, max_edges: int | None) -> tuple[int, int]:
    """``max_nodes`` and ``max_edges``, by default the largest fixed graph's."""
    sizes = source.fixed_sizes
    if sizes is None:
        if max_nodes is None or max_edges is None:
            raise ValueError(
                "max_nodes, max_edges: required when graph is a sampler, got "
                f"{max_nodes!r}, {max_edges!r}"
            )
        sizes = (max_nodes, max_edges)
    nodes = int(max_nodes if max_nodes is not None else sizes[0])
    edges = int(max_edges if max_edges is not None else sizes[1])
    if nodes < 1:
        raise ValueError(f"max_nodes: must be >= 1, got {nodes}")
    return nodes, edges


class PlacementEnv(gym.Env[dict, int]):
    """Place every node of a dataflow graph on a device of a cluster.

    ## Description
    One episode assigns every node of one graph once, in 2n steps that alternate two
    phases: **SEL** picks the next node among the *frontier* (unassigned nodes all of
    whose producers are assigned; the pick order becomes the node priorities) and **PLC**
    picks the device of the node just selected. When every node is placed, the placement
    is simulated on the work-conserving simulator (:func:`placegym.envs.simulate`) and the
    makespan (the simulated one, or the one the ``backend`` measures) determines the
    reward. This is DOPPLER's dual SEL/PLC MDP.

    ## Action Space
    ``Discrete(max(max_nodes, D))``, read by phase: a node id in SEL, a device index in
    PLC. Legal actions: ``env.unwrapped.action_masks()`` (sb3-contrib finds it through
    the wrappers), ``obs["action_mask"]`` and ``info["action_mask"]``, all from one
    function. SEL: the frontier. PLC: for a node of a co-location group (``group`` in a
    ``placegym.graph/v2`` graph) one of whose members is placed, that member's device
    alone; otherwise, with ``memory_mask=True`` (the default; also ``"resident"``), the
    devices whose resident params plus the node's own (for a group's first node: the
    whole group's) fit in memory; if that masks every device, none is masked (the OOM
    shows in the outcome). With ``memory_mask="room"``, of those the devices that leave
    room for the rest of the graph: the device keeps its resident bytes plus the largest
    working set (output and inputs) of a node it runs within memory, and the resident
    bytes of the nodes and groups not yet placed still pack into what every device has
    left (:func:`~placegym.envs.analysis.room.room_mask`); where no device has room, the
    ``True`` rule. It spares a policy the dead ends where a later node fits nowhere; live
    tensors beyond one node's working set can still exceed memory. With
    ``memory_mask="live"``, the devices with room for the live bytes of the partial
    placement too (outputs awaiting consumers, so a training step's stash, and the working
    sets to come: the teachers' rule, :class:`~placegym.envs.analysis.room.Room`); on a
    training step that provably fits no placement without recompute, the placement
    recomputes the checkpoint set of the smallest spacing whose kept stash is not
    provably over memory, and the room counts it
    (:func:`~placegym.envs.mdp.state.mask_recompute`). ``memory_mask="timed"`` narrows
    ``"live"`` to the devices where the node's received copies also fit beside the runs
    they would share the device with (:mod:`~placegym.envs.mdp.copies`).
    ``memory_mask=False`` masks no device for memory.
    Once the episode has terminated, the mask is that of
    its start state (the graph's sources), which is where a vector env's autoreset goes
    next: a masked policy always has an action, and the autoreset discards it.
    An action must be an integer (``int``, a numpy integer or a 0-d integer array); any
    other value, e.g. ``2.7``, is illegal.

    ## Observation Space
    A flat ``Dict`` of fixed-shape ``Box`` es padded to ``max_nodes`` / ``max_edges``; see
    :mod:`placegym.envs.mdp.observation` for the table of keys, shapes and features.
    ``edge_index`` is int64 (SB3 casts observations to float; cast back with ``.long()``;
    :func:`placegym.envs.mdp.observation.obs_to_pyg` / ``batch_to_pyg`` do it).

    ## Rewards
    With makespan ``T`` and ``T_ref`` the makespan of the ``reference`` placer's placement
    on the same graph and cluster (the ``critical_path`` teacher's by default; noiseless,
    computed once per graph):

    - ``"relative"`` (default): 0 until the end, then ``(T_ref - T) / T_ref`` (> 0 beats
      the teacher);
    - ``"makespan"``: 0 until the end, then ``-T / T_ref``;
    - ``"nest"``: the relative terminal reward plus ``γΦ(s') - Φ(s)`` at every step, with
      ``Φ(s) = -nest_cost(partial assignment) / T_ref``, ``Φ(initial) = Φ(terminal) = 0``;
      with ``shaping_gamma=1`` the shaping terms of an episode sum to exactly 0, so the
      return equals the ``relative`` one and the optimal policy is unchanged.

    An episode whose placement is over memory (the simulated peak of some device exceeds
    its ``memory``, DESIGN §3) is infeasible: its terminal reward reads ``T`` as at least
    the serial upper bound of the graph on the cluster
    (:func:`~placegym.envs.analysis.bounds.serial_upper_bound`: the summed largest durations of
    every node and transfer), which no feasible placement exceeds, so an infeasible
    episode never earns more than a feasible one.

    An illegal action with ``illegal_action="penalize"`` (default) leaves the state
    unchanged and gives reward -1 and ``info["illegal_action"] = True``;
    ``"raise"`` raises ``gymnasium.error.InvalidAction``.

    ## Starting State
    Nothing assigned, phase SEL; the graph is fixed, or drawn from the list or sampler
    with ``self.np_random`` at every reset.

    ## Episode End
    ``terminated`` when every node is placed; ``info`` then has ``makespan`` (the
    simulated or measured one, whatever the memory), ``reference_makespan``,
    ``placement`` (device per node), ``order``, ``recompute`` (the forward nodes it
    recomputes, :func:`~placegym.envs.mdp.state.mask_recompute`; empty but under
    ``memory_mask="live"``), ``peak_memory``, ``oom`` and
    ``infeasible`` (None, or why the placement is infeasible: the device over memory and
    by how much). ``truncated`` after ``step_limit_factor × 2n`` steps (default 4 × 2n, so
    up to 6n illegal steps beside the 2n legal ones) without the end, so that a policy
    stuck on illegal actions cannot loop forever; stepping on after that raises
    ``ResetNeeded``. Ids with a fixed graph (or a bounded sampler) also register that
    limit as ``max_episode_steps`` (Gymnasium's ``TimeLimit``, for the largest graph);
    ``placegym/Placement-v0`` and ``placegym/Real-v0``, whose graph comes by keyword,
    rely on this limit alone. With the simulator, no wall-clock value appears in
    ``info``: two runs with the same seed give equal infos.

    ## Arguments
    - ``graph``: a ``Graph``, a ``placegym.graph/v1`` dict, a graph JSON path, a workload
      name (with ``graph_params``), a list of those, or a sampler ``rng -> Graph``
      (``WorkloadSampler``).
    - ``cluster``: a ``Cluster``, a preset name or a cluster JSON path; default the
      backend's: ``"p100x4"`` with the simulator, ``"calibrate"`` with the torch backend.
    - ``max_nodes`` / ``max_edges``: padding sizes; default the largest graph's; required
      for samplers. A drawn graph that exceeds them raises ``ValueError``.
    - ``reward``: ``"relative"``, ``"makespan"`` or ``"nest"``; ``shaping_gamma``: γ of
      the NEST shaping (1 keeps returns unchanged).
    - ``reference``: the placer whose makespan is ``T_ref``: any object with
      ``place(graph, cluster) -> Placement`` (a teacher), or an import path
      ``"module:Class"`` of one built without arguments; default
      :data:`~placegym.envs.mdp.reward.DEFAULT_REFERENCE`, the ``critical_path`` teacher.
    - ``memory_mask``, ``illegal_action``, ``dispatch`` (``"priority"``/``"fifo"``),
      ``noise`` (σ of the simulator's compute noise, drawn from ``self.np_random``),
      ``render_mode`` (``"ansi"`` or ``"rgb_array"``; every frame of an env has the
      same size, set by its device count).
    - ``step_limit_factor``: truncate after ``step_limit_factor × 2n`` steps (``None``:
      never).
    - ``observation``: ``"full"`` (default) or ``"compact"``: every step leaves out the
      five per-graph keys (``node_static``, ``edge_index``, ``edge_attr``, ``node_mask``,
      ``edge_mask``), read once per episode, unpadded, from :meth:`graph_observation`
      (for large graphs, where copying them every step dominates).
    - ``backend``: what prices a finished placement (:mod:`placegym.envs.mdp.backends`), a
      ``Backend`` object or a name: ``"sim"`` (default, ``SimulatedBackend()``: the
      simulator, with ``noise`` and ``dispatch``) or ``"torch"`` (``TorchBackend()``: on
      ``cpu#2``, scale 1, 3 repeats). ``TorchBackend(devices, scale=1, repeats=3)``
      executes the final placement for real (:mod:`placegym.envs.real`) on
      ``devices`` (``"cpu#k"``, ``"cuda:i"``, ``"cuda:i#k"``, ``"cuda:0,cpu#2"``, ...),
      graphs shrunk by ``scale`` (grown when < 1), the median of ``repeats`` timed runs;
      the reward uses the measured makespans (the reference is the ``reference``
      placer's placement, measured once per graph), ``info`` carries ``makespan``
      (measured), ``measured_makespans`` and ``simulated_makespan``, and
      ``cluster="calibrate"`` fits the cluster to the devices first, with the kernels of
      fixed graphs profiled. Such runs are not reproducible (ids registered with
      ``nondeterministic=True``). Environments may share one backend object (they
      share its executors, calibrated cluster and measured references). The real ids
      (``placegym/Real-v0``, ``placegym/FFNN-CPU-v0``) take ``devices=``, ``scale=``
      and ``repeats=`` keywords instead and build the ``TorchBackend`` themselves. A
      custom backend subclasses ``Backend`` (the simulated schedule is always computed:
      ``peak_memory``, ``oom`` and rendering come from it).

    ## Version History
    - v0: initial release (before 0.1.0 shipped it also gained the step limit, the
      start-state mask at an episode's end and the rule that non-integer actions are
      illegal; later the co-location mask of ``placegym.graph/v2`` groups, and the
      scoring of infeasible episodes by the serial upper bound with ``info["infeasible"]``:
      episodes that fit in memory on graphs without groups are unchanged).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(
        self,
        graph: GraphSpec = "ffnn",
        cluster: Cluster | str | None = None,
        *,
        graph_params: Mapping[str, Any] | None = None,
        max_nodes: int | None = None,
        max_edges: int | None = None,
        reward: Literal["relative", "makespan", "nest"] = "relative",
        shaping_gamma: float = 1.0,
        reference: ReferencePlacer | str = DEFAULT_REFERENCE,
        memory_mask: bool | Literal["resident", "room", "live", "timed"] = True,
        illegal_action: Literal["penalize", "raise"] = "penalize",
        dispatch: Literal["priority", "fifo"] = "priority",
        noise: float = 0.0,
        render_mode: str | None = None,
        backend: Backend | Literal["sim", "torch"] = "sim",
        step_limit_factor: int | None = STEP_LIMIT_FACTOR,
        observation: Literal["full", "compact"] = "full",
    ) -> None:
        _check_settings(
            self.metadata["render_modes"],
            reward=reward,
            illegal_action=illegal_action,
            dispatch=dispatch,
            render_mode=render_mode,
            noise=noise,
            step_limit_factor=step_limit_factor,
            observation=observation,
        )
        self.backend = make_backend(backend)
        source = GraphSource(graph, graph_params)
        self.reference = reference_placer(reference)
        self.source = self.backend.transform_source(source)
        self.cluster = self.backend.resolve_cluster(cluster, self.source.graphs)
        self.max_nodes, self.max_edges = _padding(self.source, max_nodes, max_edges)
        self.reward_kind, self.shaping_gamma = reward, float(shaping_gamma)
        memory_mask_mode(memory_mask)  # raises on a bad value, naming the field
        self.memory_mask, self.illegal_action = memory_mask, illegal_action
        self.dispatch, self.noise, self.render_mode = dispatch, float(noise), render_mode
        self.step_limit_factor = step_limit_factor
        self.compact = observation == "compact"
        self._num_actions = max(self.max_nodes, self.cluster.num_devices)
        self.action_space = spaces.Discrete(self._num_actions)  # type: ignore[assignment]
        self.observation_space = observation_space(
            self.max_nodes, self.max_edges, self.cluster.num_devices, compact=self.compact
        )
        # per graph: its observation builder and T_ref (a sampler's: the current one only)
        self._prepared = IdentityCache(
            self._build_for, size=1 if self.source.sampler is not None else None
        )
        self.state: PlacementState | None = None
        self.max_steps: int | None = None  # of the current episode (set by reset)
        self._steps, self._truncated = 0, False
        self._schedule: Schedule | None = None
        self._potential: NestPotential | None = None

    # ------------------------------------------------------------------ public views
    @property
    def num_actions(self) -> int:
        """Size of the action space, ``max(max_nodes, D)``."""
        return self._num_actions

    @property
    def schedule(self) -> Schedule | None:
        """The simulated schedule of the finished episode, None before its end."""
        return self._schedule

    @property
    def potential(self) -> NestPotential | None:
        """The episode's NEST potential (``reward="nest"``, after reset), else None."""
        return self._potential

    @property
    def time_unit(self) -> float:
        """The current graph's time unit (its critical path's length): the observation's
        time features are in units of it."""
        if self.state is None:
            raise gym.error.ResetNeeded("time_unit: call reset() first")
        return self._builder.cp

    def check_size(self, graph: Graph) -> None:
        """Raise ``ValueError`` if ``graph`` exceeds ``max_nodes`` or ``max_edges``."""
        if graph.num_nodes > self.max_nodes or graph.num_edges > self.max_edges:
            raise ValueError(
                f"graph {graph.name!r} has {graph.num_nodes} nodes and {graph.num_edges} "
                f"edges, more than max_nodes={self.max_nodes} / max_edges={self.max_edges}"
            )

    def prepare(self, graph: Graph) -> tuple[ObservationBuilder, float]:
        """``graph``'s observation builder (nothing placed) and reference makespan
        ``T_ref``, built once per graph (for a sampler, the last graph's only)."""
        builder, ref = self._prepared(graph)
        builder.reset_dynamic()
        return builder, ref

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode: draw a graph (with ``self.np_random``), nothing placed."""
        super().reset(seed=seed)
        graph = self.source.draw(self.np_random)
        self.check_size(graph)
        self.graph = graph
        self._builder, self.reference_makespan = self.prepare(graph)
        self.state = PlacementState(graph, self.cluster, memory_mask=self.memory_mask)
        self._potential = (
            NestPotential(self.state, self.reference_makespan)
            if self.reward_kind == "nest"
            else None
        )
        self._schedule = None
        self._steps, self._truncated = 0, False
        self.max_steps = step_limit(graph.num_nodes, self.step_limit_factor)
        mask = self.action_masks()
        return self._builder.observe(mask, 0, compact=self.compact), self._info(mask)

    def step(self, action: int):
        """Take one SEL or PLC action (see the class docstring)."""
        if self.state is None:
            raise gym.error.ResetNeeded("step: call reset() first")
        if self.state.done:
            raise gym.error.ResetNeeded("step: the episode has terminated; call reset()")
        if self._truncated:
            raise gym.error.ResetNeeded(
                f"step: the episode was truncated at its step limit ({self.max_steps} "
                "steps); call reset()"
            )
        self._steps += 1
        a = _as_int(action)
        state = self.state
        if a is None or not state.is_legal(a):
            return self._illegal_step(action, a)
        reward = 0.0
        v = self._builder.act(state, a, checked=False)
        if v >= 0 and self._potential is not None:
            reward += self._potential.on_place(v, a, self.shaping_gamma, state.done)
        if self._potential is not None and state.selected >= 0:
            reward += self._potential.idle_step(self.shaping_gamma)
        mask = self.action_masks()
        info = self._info(mask)
        if state.done:
            reward += self._finish(state, info)
        return (
            self._builder.observe(mask, int(state.selected >= 0), compact=self.compact),
            float(reward),
            state.done,
            not state.done and self._truncate(),
            info,
        )

    def action_masks(self) -> np.ndarray:
        """Bool mask over ``Discrete(max(max_nodes, D))`` of the legal actions now (the one
        source of ``obs["action_mask"]`` and ``info["action_mask"]``)."""
        state = self.state
        if state is None:
            return np.zeros(self._num_actions, dtype=np.bool_)
        if state.done:  # the start state's mask: see "Action Space"
            legal = state.graph.in_degree == 0
        elif state.selected < 0:
            legal = state.frontier_mask
        else:
            legal = state.place_mask()
        if len(legal) == self._num_actions:
            return legal.copy()
        out = np.zeros(self._num_actions, dtype=np.bool_)
        out[: len(legal)] = legal
        return out

    def graph_observation(self) -> dict[str, np.ndarray]:
        """The current graph's per-graph observation keys, unpadded (``node_static``
        ``(n, 7)``, ``edge_index`` ``(2, e)``, ...): what ``observation="compact"``
        leaves out of every step's observation."""
        if self.state is None:
            raise gym.error.ResetNeeded("graph_observation: call reset() first")
        return self._builder.graph_observation()

    def render(self):
        """Text (``ansi``) or an RGB Gantt chart of the partial schedule (``rgb_array``)."""
        if self.render_mode == "ansi":
            return self._render_text()
        if self.render_mode == "rgb_array":
            from placegym.envs.mdp.render import schedule_rgb

            return schedule_rgb(self)
        return None

    # ------------------------------------------------------------------ helpers
    def _illegal_step(self, action: Any, a: int | None):
        """The step of an illegal ``action`` (``a``: it as an int, None if not one)."""
        state = self.state
        assert state is not None  # step() checked it
        mask = self.action_masks()
        if self.illegal_action == "raise":
            why = "not an integer" if a is None else f"{int(mask.sum())} legal actions"
            raise InvalidAction(f"phase {state.phase!r}: action {action!r} is illegal ({why})")
        info = self._info(mask)
        info["illegal_action"] = True
        obs = self._builder.observe(mask, int(state.selected >= 0), compact=self.compact)
        return obs, -1.0, False, self._truncate(), info

    def _truncate(self) -> bool:
        """Whether this step reached the episode's step limit (then the episode is over)."""
        self._truncated = self.max_steps is not None and self._steps >= self.max_steps
        return self._truncated

    def _finish(self, state: PlacementState, info: dict[str, Any]) -> float:
        """Price the finished placement (the schedule, the backend's makespan), fill the
        last ``info`` and return the terminal reward."""
        placement = state.to_placement()
        s = simulate(
            self.graph,
            self.cluster,
            placement,
            noise=self.noise,
            rng=self.np_random if self.noise > 0 else None,
            dispatch=self.dispatch,
        )
        self._schedule = s
        makespan, extra = self.backend.makespan(self.graph, self.cluster, placement, s)
        info.update(extra)
        info.update(
            makespan=makespan,
            reference_makespan=self.reference_makespan,
            placement=state.device.copy(),
            order=np.array(state.order),
            recompute=placement.recompute.copy(),
            peak_memory=s.peak_memory,
            oom=s.oom,
            infeasible=s.infeasibility,
        )
        scored = scored_makespan(s, makespan)
        return terminal_reward(self.reward_kind, scored, self.reference_makespan)

    def _build_for(self, graph: Graph) -> tuple[ObservationBuilder, float]:
        builder = ObservationBuilder(graph, self.cluster, self.max_nodes, self.max_edges)
        ref = self.backend.reference_makespan(
            graph, self.cluster, self.reference, dispatch=self.dispatch
        )
        return builder, ref

    def _info(self, mask: np.ndarray) -> dict[str, Any]:
        assert self.state is not None
        return {"action_mask": mask, "phase": self.state.phase, "illegal_action": False}

    def _render_text(self) -> str:
        s = self.state
        if s is None:
            return "PlacementEnv (call reset())"
        if s.done:
            status = "done"
        elif self._truncated:
            status = f"truncated at the step limit ({self.max_steps} steps)"
        else:
            status = f"phase {s.phase.upper()}" + (
                f" (node {s.selected} selected)" if s.selected >= 0 else ""
            )
        lines = [
            f"{self.graph.name} on {self.cluster.name}: {s.num_placed}/"
            f"{self.graph.num_nodes} placed, {status}"
        ]
        for d, dev in enumerate(self.cluster.devices):
            nodes = [v for v in s.order if s.device[v] == d]
            shown = " ".join(map(str, nodes[:16])) + (" ..." if len(nodes) > 16 else "")
            lines.append(f"  {dev.name:<8} load {s.load[d]:.3g}s  [{shown}]")
        if s.selected >= 0:  # PLC: the device choice at hand, and the frontier beside it
            legal = np.flatnonzero(s.place_mask())
            names = " ".join(self.cluster.devices[d].name for d in legal)
            lines.append(f"  node {s.selected}: legal devices {names}")
        lines.append(f"  frontier: {np.flatnonzero(s.frontier_mask)[:32].tolist()}")
        if self._schedule is not None:
            lines.append(
                f"  makespan {self._schedule.makespan:.6g}s "
                f"(reference {self.reference_makespan:.6g}s)"
            )
        return "\n".join(lines)
