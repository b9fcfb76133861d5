r"""The typed configuration of ``placegym train``, loaded from YAML with ``key=value`` overrides.

CleanRL style: every knob is a dataclass field with a docstring, grouped by role. A YAML
file sets any subset of them; command-line overrides use dotted keys, with values parsed
as YAML::

    placegym train configs/quickstart.yaml phase2.updates=50 phase2.lr=3e-4 \
        data.graphs=[ffnn,chainmm] phase2.self_imitation.coef=1 wandb.mode=disabled

Sections: ``policy`` (:class:`~placegym.agents.doppler.config.PolicyConfig`, the policy's own
sizes), ``data``, ``phase1`` (:class:`ImitationConfig`), ``phase2``
(:class:`SimRLConfig`, with its ``self_imitation`` sub-section), ``phase3``
(:class:`RealRLConfig`), ``eval``, ``wandb``. The three phases share
:class:`PhaseConfig` (length, batches, optimiser); phases II and III share
:class:`RLConfig` (the policy-gradient algorithm); what only one phase uses is only in
its section, so every key does something.

Unknown keys, wrong types and out-of-range values raise ``ValueError`` naming the dotted
key and the offending value (:mod:`placegym.train.dataclass_io` reads the YAML); a key of
an earlier version names its new place (:data:`MOVED_KEYS`) or why it went
(:data:`REMOVED_KEYS`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from placegym.agents.doppler.config import RENAMED_FIELDS, PolicyConfig
from placegym.envs.core.validate import read_text
from placegym.train.config_checks import validate
from placegym.train.dataclass_io import build, set_dotted

if typing.TYPE_CHECKING:
    from placegym.envs import Graph

__all__ = [
    "MOVED_KEYS",
    "REMOVED_KEYS",
    "DataConfig",
    "EvalConfig",
    "GraphSpec",
    "ImitationConfig",
    "PhaseConfig",
    "PolicyConfig",
    "RLConfig",
    "RealRLConfig",
    "SelfImitationConfig",
    "SimRLConfig",
    "TrainConfig",
    "WandbConfig",
    "apply_overrides",
    "config_from_dict",
    "load_config",
    "load_preset",
    "presets_dir",
    "resolve_path",
]


_SELF_IMITATION = {
    "imitation_coef": "coef",
    "imitation_states": "states",
    "imitation_teacher": "teacher",
    "imitation_teacher_kwargs": "teacher_kwargs",
    "imitation_select_teacher": "select_teacher",
}
#: Keys of earlier versions that moved: old dotted key -> new dotted key.
MOVED_KEYS: dict[str, str] = {
    **{f"phase2.{old}": f"phase2.self_imitation.{new}" for old, new in _SELF_IMITATION.items()},
    **{f"policy.{old}": f"policy.{new}" for old, new in RENAMED_FIELDS.items()},
}
_NO_EXPERT_ITERATION = (
    "removed: annealing the policy's own placements into its plans did not make the "
    "policy better (see the README)"
)
#: Keys of earlier versions that are gone: old dotted key -> why.
REMOVED_KEYS: dict[str, str] = {
    "phase2.improve_every": _NO_EXPERT_ITERATION,
    "phase2.improve_budget": _NO_EXPERT_ITERATION,
    "phase3.improve_every": _NO_EXPERT_ITERATION,
    "phase3.improve_budget": _NO_EXPERT_ITERATION,
    "phase3.reward": "phase III rewards are always relative (measured makespans are not shaped)",
    **{
        f"phase3.{old}": "self-imitation is a phase II setting (phase2.self_imitation)"
        for old in _SELF_IMITATION
    },
}


def presets_dir() -> Path:
    """The folder of the shipped YAML presets (``configs/`` of the source tree, installed
    as the data package ``placegym.configs``).

    Raises:
        FileNotFoundError: the presets are not installed.
    """
    spec = importlib.util.find_spec("placegym.configs")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("presets: the package data placegym.configs is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def load_preset(name: str, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """The shipped preset ``name`` (``quickstart``, ``ffnn``, ...) with ``overrides``.

    Raises:
        ValueError: no preset of that name (listing them), or a bad override.
    """
    path = presets_dir() / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in presets_dir().glob("*.yaml"))
        raise ValueError(f"preset: unknown name {name!r} (presets: {', '.join(names)})")
    return load_config(path, overrides)


def resolve_path(path: str | Path, base: Path | None) -> Path:
    """``path`` as given when it exists (relative to the working directory), else relative
    to ``base`` (the config file's folder) when it exists there."""
    p = Path(path)
    if p.exists() or p.is_absolute() or base is None:
        return p
    return base / p if (base / p).exists() else p


@dataclass
class GraphSpec:
    """One graph: a workload generator name (see ``placegym graphs list``) or a graph JSON
    path, with generator parameters. In YAML a bare string ``"ffnn"`` is shorthand for
    ``{name: ffnn}``."""

    name: str = "ffnn"
    """Workload generator name, graph JSON file, ``SUITE/INSTANCE`` (a benchmark suite's
    instance, e.g. ``comm-heavy-v0/ffnn-3x2x4-ccr4@p100x4``, placed on its own cluster) or
    ``SUITE/SPLIT`` (every instance of ``train`` or ``test``, e.g. ``generalize-v0/train``;
    see :mod:`placegym.train.data`)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the generator (ignored for JSON files)."""
    cluster: str | None = None
    """Cluster preset or JSON file of this graph; default ``data.cluster`` (a suite
    instance's own cluster, which this must equal when set)."""

    @classmethod
    def from_str(cls, name: str) -> GraphSpec:
        """The YAML shorthand: a bare name or path."""
        return cls(name)

    @property
    def label(self) -> str:
        """A short name for tables and metric keys."""
        base = Path(self.name).stem if self.name.endswith(".json") else self.name
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{base}[{extra}]" if extra else base

    def graph(self, base: Path | None = None) -> Graph:
        """The graph: the JSON file (found relative to ``base``, the config file's folder,
        when not as given) or the generator's
        (:func:`placegym.envs.mdp.sources.resolve_graph`)."""
        from placegym.envs.mdp.sources import resolve_graph

        if self.suite_instance is not None:
            suite, instance = self.suite_instance
            return suite.instance(instance).graph
        spec = resolve_path(self.name, base) if self.name.endswith(".json") else self.name
        return resolve_graph(spec, self.params)

    @property
    def suite_instance(self) -> tuple[Any, str] | None:
        """``(suite, instance id)`` for a ``SUITE/INSTANCE`` name, else None."""
        from placegym.envs.suites import SUITES

        suite, sep, instance = self.name.partition("/")
        if not sep or suite not in SUITES or self.name.endswith(".json") or self.split:
            return None
        return SUITES[suite], instance

    @property
    def split(self) -> str | None:
        """``train`` or ``test`` for a ``SUITE/SPLIT`` name, else None."""
        from placegym.envs.suites import SUITES

        suite, _, split = self.name.partition("/")
        return split if suite in SUITES and split in ("train", "test") else None


@dataclass
class DataConfig:
    """What the agent is trained and evaluated on."""

    cluster: str = "p100x4"
    """Cluster preset name or cluster JSON file of the graphs that name none (suite
    instances bring their own)."""
    graphs: list[GraphSpec] = field(default_factory=lambda: [GraphSpec("ffnn")])
    """Training graphs."""
    heldout: list[GraphSpec] = field(default_factory=list)
    """Graphs only evaluated on (generalisation), never trained on."""
    memory_mask: bool | str = True
    """The environments' memory mask (:class:`~placegym.envs.mdp.env.PlacementEnv`): true masks
    devices whose memory the node's parameters would overflow; ``room`` also those that
    leave no room for the rest of the graph; false none."""
    dispatch: str = "priority"
    """Simulator dispatch rule: ``priority`` or ``fifo`` (DOPPLER's simulator)."""


@dataclass
class PhaseConfig:
    """What every phase has: its length, its batches and its optimiser (Adam)."""

    updates: int = 100
    """Gradient updates (one batch of episodes each; PPO: iterations)."""
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
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0 disables it)."""


@dataclass
class ImitationConfig(PhaseConfig):
    """Phase I: DAgger-style imitation of a teacher's tie sets."""

    teacher: str = "critical_path"
    """Teacher to imitate (``critical_path`` as in DOPPLER, ``nest`` or ``anneal``; any
    registered teacher with per-state tie sets works; ``best_list`` follows, per graph,
    the faster of critical_path and HEFT, :mod:`placegym.teachers.best_list`)."""
    teacher_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the teacher, e.g. ``{budget: 20000}`` for ``anneal``."""
    canonical_labels: bool = True
    """Imitate a plan teacher's (``anneal``, ``nest``) device labels up to the cluster's
    symmetries (:class:`placegym.teachers.canonical_plan.CanonicalPlanTeacher`): a plan's
    labels of interchangeable devices are arbitrary. False imitates them literally."""
    select_teacher: str | None = None
    """With a plan teacher and ``canonical_labels``: imitate SEL from this teacher's tie
    sets (e.g. ``critical_path``) and only PLC from the plan. A plan's device map carries
    most of its value and its order little, and a b-level order is easy to learn."""
    deterministic_teacher: bool = False
    """Label every state with one action, the first of the teacher's tie set
    (:class:`~placegym.teachers.base.FirstOfTies`). With a plan teacher, ``eps_end: 1``
    (pure behaviour cloning) and one episode per update, the greedy policy can then learn
    to reproduce the teacher's episode exactly (``configs/plan_imitation.yaml``)."""
    regret_coef: float = 0.0
    """Weight of the expected-regret term (:func:`placegym.train.losses.regret_loss`):
    with a teacher that prices every device (``lookahead``), each PLC miss also costs
    the relative makespan it loses. 0 imitates the tie sets alone."""
    eps_start: float = 1.0
    """Roll-in probability of following the teacher at the first update (1 = teacher)."""
    eps_end: float = 0.0
    """Roll-in probability at the end of the decay (0 = the learner's own actions)."""
    eps_decay: float = 0.5
    """Fraction of the updates over which the roll-in probability decays linearly."""


@dataclass
class RLConfig(PhaseConfig):
    """Policy-gradient RL (phases II and III): REINFORCE or value-free PPO with a
    per-graph mean baseline (:mod:`placegym.train.rl`)."""

    updates: int = 200
    """Gradient updates (REINFORCE) or PPO iterations."""
    episodes_per_graph: int = 16
    """Sampled episodes per graph per update; their mean return is the baseline."""
    lr: float = 3e-4
    """Adam learning rate at the start of the phase."""
    lr_schedule: str = "cosine"
    """``constant``, ``linear`` or ``cosine`` decay to ``lr * lr_end_factor``."""
    algo: str = "reinforce"
    """``reinforce`` (DOPPLER's recipe) or ``ppo`` (value-free clipped surrogate)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (mean entropy per step)."""
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


@dataclass
class SelfImitationConfig:
    """Phase II self-imitation (expert iteration, :mod:`placegym.train.self_imitation`):
    an imitation loss toward the best placement known per graph, label-invariant."""

    coef: float = 0.0
    """Weight of the imitation loss in the RL loss; 0 turns self-imitation off."""
    states: str = "sampled"
    """States the loss is taken on: ``sampled`` (the batch's own episodes, labelled with
    the plan's tie sets, DAgger-style) or ``plan`` (one extra episode per graph that
    follows the plan, behaviour cloning along its own trajectory)."""
    teacher: str = "anneal"
    """Plan teacher whose placement is each graph's first best-known placement."""
    teacher_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``teacher`` (``{budget: 20000}``)."""
    select_teacher: str | None = None
    """Imitate SEL from this teacher's tie sets (e.g. ``critical_path``) instead of the
    plan's order; see :attr:`ImitationConfig.select_teacher`."""


@dataclass
class SimRLConfig(RLConfig):
    """Phase II: RL against the simulator environment."""

    reward: str = "relative"
    """Environment reward: ``relative`` (terminal) or ``nest`` (shaped; reward-to-go)."""
    self_imitation: SelfImitationConfig = field(default_factory=SelfImitationConfig)
    """Self-imitation of the best placement found so far (off by default)."""


@dataclass
class RealRLConfig(RLConfig):
    """Phase III: RL with rewards from real execution (:mod:`placegym.envs.real`):
    every episode's placement is run and timed; the reward is ``relative`` to the
    measured makespan of critical_path's placement."""

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
    workers: int = 0
    """Ray actors that play the simulator phases' episodes (:mod:`placegym.train.workers`;
    needs ``placegym[ray]``); 0 plays them in this process. Either way, same weights."""
    progress: bool | str = "auto"
    """tqdm progress bars: ``auto`` shows them only when stderr is a terminal (a log
    redirected to a file gets none of their ``\\r`` updates), ``true`` / ``false``
    always / never."""
    restarts: int = 1
    """Independent runs of this config with seeds ``seed, seed + 1, ...``, each in
    ``<run>/restart<i>``; the one of best final greedy makespan on the training graphs
    (geometric mean of the ratios to critical_path) becomes the run's result
    (:func:`placegym.train.restarts.train`). Seeds matter: see the README's figures."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    data: DataConfig = field(default_factory=DataConfig)
    phase1: ImitationConfig = field(default_factory=ImitationConfig)
    phase2: SimRLConfig = field(default_factory=SimRLConfig)
    phase3: RealRLConfig = field(default_factory=RealRLConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)

    @property
    def run_dir(self) -> Path:
        """The run folder: ``out``, else ``runs/<name>``."""
        return Path(self.out) if self.out else Path("runs") / self.name

    def phase_config(self, phase: str) -> ImitationConfig | SimRLConfig | RealRLConfig:
        """The section of ``phase`` (``phase1``, ``phase2`` or ``phase3``)."""
        sections: dict[str, ImitationConfig | SimRLConfig | RealRLConfig] = {
            "phase1": self.phase1,
            "phase2": self.phase2,
            "phase3": self.phase3,
        }
        if phase not in sections:
            raise ValueError(f"phases: expected phase1, phase2 or phase3, got {phase!r}")
        return sections[phase]

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (YAML- and checkpoint-safe: tuples become lists)."""
        return _plain(dataclasses.asdict(self))

    def to_yaml(self) -> str:
        """The config as YAML (loads back to an equal config)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------------- loading
def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML config, apply ``key=value`` overrides, validate.

    Raises:
        ValueError: unknown key, wrong type or value (naming the dotted key).
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    text = read_text(path, "YAML config")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None
    if raw is None or raw == {}:
        raise ValueError(
            f"{path}: the config is empty; expected a mapping of keys "
            f"(phases, data, phase1, ...; see configs/quickstart.yaml)"
        )
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of keys, got {type(raw).__name__}")
    raw.setdefault("name", path.stem)
    return apply_overrides(config_from_dict(raw), overrides)


def config_from_dict(raw: dict[str, Any]) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from a nested dict."""
    cfg = build(TrainConfig, raw, hint=_hint)
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
        set_dotted(data, TrainConfig, key, value, hint=_hint)
    return config_from_dict(data)


def _hint(where: str) -> str | None:
    """Where a key of an earlier version went, or why it was removed."""
    if where in MOVED_KEYS:
        return f"it is {MOVED_KEYS[where]} now"
    return REMOVED_KEYS.get(where)
