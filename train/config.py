"""The typed configuration of ``placegym train``, loaded from YAML with ``key=value`` overrides.

CleanRL style: every knob is a dataclass field with a docstring, grouped by role
(``policy``, ``data``, ``phase1``, ``phase2``, ``phase3``, ``eval``, ``wandb``). A YAML
file sets any subset of them; command-line overrides use dotted keys, with values parsed
as YAML::

    placegym train configs/quickstart.yaml phase2.updates=50 phase2.lr=3e-4 \\
        data.graphs=[ffnn,chainmm] wandb.mode=disabled

Unknown keys, wrong types and out-of-range values raise ``ValueError`` naming the dotted
key and the offending value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DataConfig",
    "EvalConfig",
    "GraphSpec",
    "ImitationConfig",
    "PolicySizes",
    "RLConfig",
    "RealRLConfig",
    "TrainConfig",
    "WandbConfig",
    "apply_overrides",
    "config_from_dict",
    "load_config",
]

PHASES = ("phase1", "phase2", "phase3")
LR_SCHEDULES = ("constant", "linear", "cosine")


@dataclass
class GraphSpec:
    """One graph: a workload generator name (see ``placegym graphs list``) or a graph JSON
    path, with generator parameters. In YAML a bare string ``"ffnn"`` is shorthand for
    ``{name: ffnn}``."""

    name: str = "ffnn"
    """Workload generator name or graph JSON file."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the generator (ignored for JSON files)."""

    @property
    def label(self) -> str:
        """A short name for tables and metric keys."""
        base = Path(self.name).stem if self.name.endswith(".json") else self.name
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{base}[{extra}]" if extra else base


@dataclass
class PolicySizes:
    """Sizes of the DOPPLER dual policy (:class:`placegym.agents.doppler.PolicyConfig`)."""

    hidden: int = 64
    """Embedding width of both encoders and heads."""
    layers: int = 3
    """Message-passing rounds per encoder."""
    learn: str = "both"
    """Phases the agent decides: ``both`` (the dual policy), ``select`` (SEL only, every
    PLC by the critical-path teacher) or ``place`` (PLC only, SEL by critical path), as
    :class:`placegym.envs.wrappers.SelectOnly` / ``PlaceOnly`` (DOPPLER's ablations)."""
    siblings: bool = True
    """Give the PLC head where each node's siblings (other producers of its consumers)
    already are; False for the ablation. It is what lets PLC clone a plan's device map:
    behaviour cloning of anneal's chainmm map (300 updates) ends at a PLC loss of 0.29
    with it and 0.64 without (greedy 0.80 vs 0.88 of critical_path)."""


@dataclass
class DataConfig:
    """What the agent is trained and evaluated on."""

    cluster: str = "p100x4"
    """Cluster preset name or cluster JSON file (training and evaluation)."""
    graphs: list[GraphSpec] = field(default_factory=lambda: [GraphSpec("ffnn")])
    """Training graphs."""
    heldout: list[GraphSpec] = field(default_factory=list)
    """Graphs only evaluated on (generalisation), never trained on."""
    memory_mask: bool = True
    """Mask devices whose memory the node's parameters would overflow."""
    dispatch: str = "priority"
    """Simulator dispatch rule: ``priority`` or ``fifo`` (DOPPLER's simulator)."""


@dataclass
class ImitationConfig:
    """Phase I: DAgger-style imitation of a teacher's tie sets."""

    updates: int = 100
    """Gradient updates (one batch of episodes each)."""
    teacher: str = "critical_path"
    """Teacher to imitate (``critical_path`` as in DOPPLER, ``nest`` or ``anneal``; any
    registered teacher with per-state tie sets works)."""
    teacher_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the teacher, e.g. ``{budget: 20000}`` for ``anneal``."""
    canonical_labels: bool = True
    """Imitate a plan teacher's (``anneal``, ``nest``) device labels up to the cluster's
    symmetries (:class:`placegym.train.plan_teacher.CanonicalPlanTeacher`): a plan's labels
    of interchangeable devices are arbitrary. False imitates them literally."""
    select_teacher: str | None = None
    """With a plan teacher and ``canonical_labels``: imitate SEL from this teacher's tie
    sets (e.g. ``critical_path``) and only PLC from the plan. A plan's device map carries
    most of its value and its order little, and a b-level order is easy to learn."""
    graphs_per_update: int = 1
    """Training graphs drawn per update (all of them if larger than their number)."""
    episodes_per_graph: int = 8
    """Episodes per drawn graph per update."""
    lr: float = 1e-3
    """Adam learning rate at the start of the phase."""
    lr_schedule: str = "constant"
    """``constant``, ``linear`` or ``cosine`` decay to ``lr * lr_end_factor``."""
    lr_end_factor: float = 0.1
    """Final learning rate as a fraction of ``lr`` (linear and cosine schedules)."""
    eps_start: float = 1.0
    """Roll-in probability of following the teacher at the first update (1 = teacher)."""
    eps_end: float = 0.0
    """Roll-in probability at the end of the decay (0 = the learner's own actions)."""
    eps_decay: float = 0.5
    """Fraction of the updates over which the roll-in probability decays linearly."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0 disables it)."""


@dataclass
class RLConfig:
    """Phase II: policy-gradient RL against the simulator environment."""

    updates: int = 200
    """Gradient updates (REINFORCE) or PPO iterations."""
    algo: str = "reinforce"
    """``reinforce`` (DOPPLER's recipe) or ``ppo`` (value-free clipped surrogate)."""
    reward: str = "relative"
    """Environment reward: ``relative`` (terminal) or ``nest`` (shaped; reward-to-go)."""
    graphs_per_update: int = 1
    """Training graphs drawn per update (all of them if larger than their number)."""
    episodes_per_graph: int = 16
    """Sampled episodes per graph per update; their mean return is the baseline."""
    lr: float = 3e-4
    """Adam learning rate at the start of the phase."""
    lr_schedule: str = "cosine"
    """``constant``, ``linear`` or ``cosine`` decay to ``lr * lr_end_factor``."""
    lr_end_factor: float = 0.1
    """Final learning rate as a fraction of ``lr`` (linear and cosine schedules)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (mean entropy per step)."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0 disables it)."""
    normalize_advantages: bool = True
    """Divide advantages by their standard deviation over the batch."""
    ppo_epochs: int = 4
    """PPO: passes over each batch."""
    ppo_minibatches: int = 2
    """PPO: minibatches (of whole episodes) per pass."""
    ppo_clip: float = 0.2
    """PPO: clipping range of the probability ratio."""
    target_kl: float | None = None
    """PPO: stop the passes early when the approximate KL exceeds this."""
    imitation_coef: float = 0.0
    """Self-imitation (expert iteration): weight of an imitation loss toward the best
    placement known per graph (``imitation_teacher``'s plan at first, replaced by every
    better sampled episode), label-invariant; 0 turns it off."""
    imitation_states: str = "sampled"
    """States the self-imitation loss is taken on: ``sampled`` (the batch's own episodes,
    labelled with the plan's tie sets, DAgger-style) or ``plan`` (one extra episode per
    graph that follows the plan, behaviour cloning along its own trajectory)."""
    imitation_teacher: str = "anneal"
    """Plan teacher whose placement is the first best-known placement of each graph."""
    imitation_teacher_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``imitation_teacher`` (``{budget: 20000}``)."""
    improve_every: int = 0
    """Expert iteration: every this many updates, anneal each graph's greedy and best
    sampled placements (``improve_budget`` simulations) and offer the result as the
    best-known plan (needs ``imitation_coef`` > 0); 0 turns it off."""
    improve_budget: int = 1000
    """Simulations per graph of each :attr:`improve_every` annealing."""
    imitation_select_teacher: str | None = None
    """Self-imitation of SEL from this teacher's tie sets (e.g. ``critical_path``)
    instead of the plan's order; see :attr:`ImitationConfig.select_teacher`."""


@dataclass
class RealRLConfig(RLConfig):
    """Phase III: the phase II algorithm with rewards from real execution
    (:mod:`placegym.envs.backend`): every episode's placement is run and timed."""

    updates: int = 5
    """Gradient updates on measured rewards (each costs real execution time)."""
    episodes_per_graph: int = 4
    """Sampled episodes per graph per update, each executed ``repeats`` times."""
    lr: float = 1e-4
    """Adam learning rate (small: fine-tuning a phase I/II policy)."""
    devices: str = "cpu#2"
    """Backend devices: ``cpu#k``, ``cuda:i``, ``cuda:i#k``, ``cuda:i%N``, comma-separated
    lists (``cuda:0,cpu#2``: a GPU with two CPU workers)."""
    scale: float = 4
    """Graphs run with every tensor dimension divided by this (1 = full size, < 1 grows
    them: 0.25 makes blocks 4× larger, so GPU kernels outlast their dispatch)."""
    repeats: int = 1
    """Timed executions per episode (the median is the measured makespan)."""
    cluster: str = "calibrate"
    """The cluster the policy observes: ``calibrate`` (fitted to ``devices`` once at the
    start of the phase) or a preset / JSON with as many devices as ``devices``."""
    profile: bool = True
    """With ``cluster: calibrate``: also time every distinct kernel of the training graphs
    on the devices, so the simulator and the observations use measured kernel costs."""


@dataclass
class EvalConfig:
    """Evaluation against the teachers on the training and held-out graphs."""

    every: int = 25
    """Evaluate every this many updates (0: only at the start and at phase ends)."""
    k: int = 16
    """Samples of the best-of-k evaluation."""
    teachers: list[str] = field(
        default_factory=lambda: ["critical_path", "heft", "nest", "anneal"]
    )
    """Teachers compared against (``critical_path`` is always computed, as reference)."""
    gantt: bool = True
    """Log a Gantt chart of the best placement found at each evaluation."""
    keep_best: bool = False
    """Keep the weights of the evaluation with the smallest geometric-mean greedy ratio
    on the training graphs (``checkpoints/best.pt``); the final checkpoint and results
    are those weights."""


@dataclass
class WandbConfig:
    """Weights & Biases logging."""

    mode: str = "auto"
    """``auto`` (``$WANDB_MODE`` if set, else online with an API key and offline without),
    ``online``, ``offline`` or ``disabled``."""
    project: str = "placegym"
    """W&B project."""
    entity: str | None = None
    """W&B entity (team or user); None for the default."""
    group: str | None = None
    """W&B run group."""
    tags: list[str] = field(default_factory=list)
    """W&B run tags."""


@dataclass
class TrainConfig:
    """A training run: which phases, on what, how long, and where results go."""

    name: str = "placegym"
    """Run name (defaults to the config file's stem); names the run folder and W&B run."""
    seed: int = 0
    """Seed of every random draw (torch, numpy generators, environment resets)."""
    out: str | None = None
    """Run folder (checkpoints, metrics, W&B files); default ``runs/<name>``."""
    phases: list[str] = field(default_factory=lambda: ["phase1", "phase2"])
    """Phases to run, in order: ``phase1`` (imitation), ``phase2`` (RL on the simulator),
    ``phase3`` (RL on the real backend); the default runs phases I and II."""
    init: str | None = None
    """Start from these weights: a checkpoint (``.pt``), or a config (``.yaml``) whose
    final checkpoint is used (trained first if it does not exist yet): transfer."""
    checkpoint_every: int = 10
    """Save a resumable checkpoint every this many updates (and at every phase end)."""
    resume: bool = True
    """Continue from the run folder's latest checkpoint when there is one."""
    threads: int = 1
    """torch CPU threads (small per-step forwards are fastest single-threaded)."""
    progress: bool = True
    """Show tqdm progress bars."""
    restarts: int = 1
    """Independent runs of this config with seeds ``seed, seed + 1, ...``, each in
    ``<run>/restart<i>``; the one of best final greedy makespan on the training graphs
    (geometric mean of the ratios to critical_path) becomes the run's result
    (:func:`placegym.train.restarts.train`). Seeds matter: see the README's figures."""
    policy: PolicySizes = field(default_factory=PolicySizes)
    data: DataConfig = field(default_factory=DataConfig)
    phase1: ImitationConfig = field(default_factory=ImitationConfig)
    phase2: RLConfig = field(default_factory=RLConfig)
    phase3: RealRLConfig = field(default_factory=RealRLConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)

    @property
    def run_dir(self) -> Path:
        return Path(self.out) if self.out else Path("runs") / self.name

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (YAML- and checkpoint-safe)."""
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


# ---------------------------------------------------------------------- loading
def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML config, apply ``key=value`` overrides, validate.

    Raises:
        ValueError: unknown key, wrong type or value (naming the dotted key).
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    text = path.read_text()
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of keys, got {type(raw).__name__}")
    raw.setdefault("name", path.stem)
    return apply_overrides(config_from_dict(raw), overrides)


def config_from_dict(raw: dict[str, Any]) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from a nested dict."""
    cfg = _build(TrainConfig, raw, "")
    validate(cfg)
    return cfg


def apply_overrides(cfg: TrainConfig, overrides: list[str] | tuple[str, ...]) -> TrainConfig:
    """Apply ``dotted.key=value`` strings (values parsed as YAML) and re-validate."""
    data = cfg.to_dict()
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"override: expected key=value, got {item!r}")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        _set_dotted(data, key, value)
    return config_from_dict(data)


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    node, cls, parts = data, TrainConfig, key.split(".")
    for i, part in enumerate(parts):
        names = {f.name: f for f in dataclasses.fields(cls)}
        where = ".".join(parts[: i + 1])
        if part not in names:
            raise ValueError(_unknown(where, part, names))
        if i == len(parts) - 1:
            node[part] = value
            return
        tp = _hints(cls)[part]
        if not dataclasses.is_dataclass(tp):
            raise ValueError(f"{where}: is a {_type_name(tp)}, it has no keys")
        sub = tp
        node, cls = node.setdefault(part, {}), sub


def _unknown(where: str, part: str, names: dict[str, Any]) -> str:
    close = difflib.get_close_matches(part, list(names), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{where}: unknown key (expected one of {', '.join(names)}){hint}"


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _build(cls: type, raw: Any, where: str) -> Any:
    if isinstance(raw, cls):
        return raw
    if cls is GraphSpec and isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"{where or 'config'}: expected a mapping, got {raw!r}")
    hints, names = _hints(cls), {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in raw.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in names:
            raise ValueError(_unknown(path, str(key), names))
        kwargs[key] = _coerce(value, hints[key], path)
    return cls(**kwargs)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """``value`` as type ``tp`` (numbers from strings, ints as floats), else ValueError."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is list:
        items = value if isinstance(value, list | tuple) else None
        if items is None:
            raise ValueError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(items)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    return _scalar(value, tp, where)


def _scalar(value: Any, tp: Any, where: str) -> Any:
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{where}: expected true or false, got {value!r}")
    if tp in (int, float):
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value) if tp is float else int(value)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and tp is int and float(value).is_integer():
            return int(value)
        if ok and tp is float:
            return float(value)
        raise ValueError(
            f"{where}: expected {'an integer' if tp is int else 'a number'}, got {value!r}"
        )
    if tp is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{where}: expected a string, got {value!r}")
    raise TypeError(f"{where}: unsupported field type {tp!r}")  # a bug in this module


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


# ---------------------------------------------------------------------- validation
def _check(ok: bool, where: str, expect: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"{where}: {expect}, got {value!r}")


def _one_of(value: Any, choices: tuple[str, ...], where: str) -> None:
    _check(value in choices, where, f"expected one of {', '.join(choices)}", value)


def validate(cfg: TrainConfig) -> None:
    """Range and choice checks; raises ``ValueError`` naming the key and value."""
    _check(bool(cfg.name) and "/" not in cfg.name, "name", "expected a name without '/'", cfg.name)
    for i, p in enumerate(cfg.phases):
        _one_of(p, PHASES, f"phases[{i}]")
    _check(len(set(cfg.phases)) == len(cfg.phases), "phases", "expected no repeats", cfg.phases)
    _check(cfg.checkpoint_every >= 1, "checkpoint_every", "must be >= 1", cfg.checkpoint_every)
    _check(cfg.threads >= 1, "threads", "must be >= 1", cfg.threads)
    _check(cfg.restarts >= 1, "restarts", "must be >= 1", cfg.restarts)
    _check(cfg.policy.hidden >= 1, "policy.hidden", "must be >= 1", cfg.policy.hidden)
    _check(cfg.policy.layers >= 0, "policy.layers", "must be >= 0", cfg.policy.layers)
    _one_of(cfg.policy.learn, ("both", "select", "place"), "policy.learn")
    _check(bool(cfg.data.graphs), "data.graphs", "expected at least one graph", cfg.data.graphs)
    _one_of(cfg.data.dispatch, ("priority", "fifo"), "data.dispatch")
    for name, ph in (("phase1", cfg.phase1), ("phase2", cfg.phase2), ("phase3", cfg.phase3)):
        _check(ph.updates >= 0, f"{name}.updates", "must be >= 0", ph.updates)
        _check(
            ph.graphs_per_update >= 1,
            f"{name}.graphs_per_update",
            "must be >= 1",
            ph.graphs_per_update,
        )
        _check(ph.lr > 0, f"{name}.lr", "must be > 0", ph.lr)
        _one_of(ph.lr_schedule, LR_SCHEDULES, f"{name}.lr_schedule")
        _check(
            0 <= ph.lr_end_factor <= 1,
            f"{name}.lr_end_factor",
            "must be in [0, 1]",
            ph.lr_end_factor,
        )
        _check(ph.max_grad_norm >= 0, f"{name}.max_grad_norm", "must be >= 0", ph.max_grad_norm)
    _validate_phase1(cfg.phase1)
    _validate_phase2(cfg.phase2, "phase2")
    _validate_phase2(cfg.phase3, "phase3")
    _validate_phase3(cfg.phase3)
    _check(cfg.eval.every >= 0, "eval.every", "must be >= 0", cfg.eval.every)
    _check(cfg.eval.k >= 1, "eval.k", "must be >= 1", cfg.eval.k)
    _one_of(cfg.wandb.mode, ("auto", "online", "offline", "disabled"), "wandb.mode")


def _validate_phase1(p: ImitationConfig) -> None:
    from placegym.teachers import list_teachers

    _one_of(p.teacher, tuple(list_teachers()), "phase1.teacher")
    if p.select_teacher is not None:
        _one_of(p.select_teacher, tuple(list_teachers()), "phase1.select_teacher")
    _check(
        p.episodes_per_graph >= 1,
        "phase1.episodes_per_graph",
        "must be >= 1",
        p.episodes_per_graph,
    )
    for key in ("eps_start", "eps_end", "eps_decay"):
        v = getattr(p, key)
        _check(0 <= v <= 1, f"phase1.{key}", "must be in [0, 1]", v)


def _validate_phase2(p: RLConfig, name: str) -> None:
    _one_of(p.algo, ("reinforce", "ppo"), f"{name}.algo")
    _one_of(p.reward, ("relative", "nest"), f"{name}.reward")
    _check(
        p.episodes_per_graph >= 2,
        f"{name}.episodes_per_graph",
        "must be >= 2 (the baseline is the mean return of a graph's episodes)",
        p.episodes_per_graph,
    )
    _check(p.entropy_coef >= 0, f"{name}.entropy_coef", "must be >= 0", p.entropy_coef)
    _check(p.imitation_coef >= 0, f"{name}.imitation_coef", "must be >= 0", p.imitation_coef)
    _one_of(p.imitation_states, ("sampled", "plan"), f"{name}.imitation_states")
    _check(p.improve_every >= 0, f"{name}.improve_every", "must be >= 0", p.improve_every)
    _check(p.improve_budget >= 2, f"{name}.improve_budget", "must be >= 2", p.improve_budget)
    if p.imitation_coef > 0:
        from placegym.teachers import list_teachers

        _one_of(p.imitation_teacher, tuple(list_teachers()), f"{name}.imitation_teacher")
        if p.imitation_select_teacher is not None:
            _one_of(
                p.imitation_select_teacher,
                tuple(list_teachers()),
                f"{name}.imitation_select_teacher",
            )
    _check(p.ppo_epochs >= 1, f"{name}.ppo_epochs", "must be >= 1", p.ppo_epochs)
    _check(p.ppo_minibatches >= 1, f"{name}.ppo_minibatches", "must be >= 1", p.ppo_minibatches)
    _check(p.ppo_clip > 0, f"{name}.ppo_clip", "must be > 0", p.ppo_clip)
    _check(
        p.target_kl is None or p.target_kl > 0,
        f"{name}.target_kl",
        "must be > 0 or null",
        p.target_kl,
    )


def _validate_phase3(p: RealRLConfig) -> None:
    from placegym.envs.backend.devices import parse_devices

    try:
        parse_devices(p.devices)
    except ValueError as e:
        raise ValueError(f"phase3.{e}") from None
    _check(p.scale > 0, "phase3.scale", "must be > 0", p.scale)
    _check(p.repeats >= 1, "phase3.repeats", "must be >= 1", p.repeats)
    _check(
        p.reward == "relative",
        "phase3.reward",
        "expected 'relative' (measured makespans have no per-step shaping)",
        p.reward,
    )
