"""The dataclasses of a training config: its sections and :class:`TrainConfig`.

Every knob of ``placegym train`` is a field here with its docstring, grouped by section
(see :mod:`placegym.train.config`, which loads them from YAML with overrides, and
:mod:`placegym.train.config_checks`, which checks their ranges and choices). Both import
them from here; :mod:`placegym.train.config` re-exports them.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from placegym.agents.doppler.config import PolicyConfig

if typing.TYPE_CHECKING:
    from placegym.envs import Graph
    from placegym.envs.suites.sampler import InstanceSampler

__all__ = [
    "DataConfig",
    "EvalConfig",
    "GraphEntry",
    "ImitationConfig",
    "PhaseConfig",
    "RLConfig",
    "RealRLConfig",
    "SelfImitationConfig",
    "SimRLConfig",
    "TrainConfig",
    "WandbConfig",
    "instance_sampler",
    "resolve_path",
]


def instance_sampler(seed: int, options: dict[str, Any] | None) -> InstanceSampler | None:
    """The instance sampler of ``data.sampler`` ``options`` (:attr:`DataConfig.sampler`;
    its ``seed`` defaults to the run's ``seed``), built alike wherever a run draws
    instances (the trainer, each Ray actor, the config check); None when ``options`` is
    empty.

    Raises:
        ValueError: an option the sampler refuses (its message names the option).
    """
    if not options:
        return None
    from placegym.envs.suites.sampler import InstanceSampler

    return InstanceSampler(**{"seed": seed, **options})


def resolve_path(path: str | Path, base: Path | None) -> Path:
    """``path`` as given when it exists (relative to the working directory), else relative
    to ``base`` (the config file's folder) when it exists there."""
    p = Path(path)
    if p.exists() or p.is_absolute() or base is None:
        return p
    return base / p if (base / p).exists() else p


@dataclass
class GraphEntry:
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
    def from_str(cls, name: str) -> GraphEntry:
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
    graphs: list[GraphEntry] = field(default_factory=lambda: [GraphEntry("ffnn")])
    """Training graphs."""
    heldout: list[GraphEntry] = field(default_factory=list)
    """Graphs only evaluated on (generalisation), never trained on."""
    sampler: dict[str, Any] = field(default_factory=dict)
    """Training instances drawn fresh instead of ``graphs``: keyword arguments of
    :class:`~placegym.envs.suites.sampler.InstanceSampler` (``seed`` defaults to the
    run's; e.g. ``{nodes: [50, 500], devices: [2, 16]}``); empty: off. Each update draws
    ``graphs_per_update`` new instances, those of indices ``global update ×
    graphs_per_update + i`` (so a resumed run draws what it would have drawn), each on its
    own cluster; ``graphs`` (which may then be empty) are only evaluated on, the
    validation set ``eval.keep_best`` selects on. Each Ray worker draws the same
    instances from its own sampler (:func:`instance_sampler`). With phase II
    self-imitation a plan lasts the update that drew its instance (expert iteration:
    each drawn graph's plan is the best of its teacher's placement and the update's
    sampled episodes)."""
    memory_mask: bool | str = True
    """The environments' memory mask (:class:`~placegym.envs.mdp.env.PlacementEnv`): true masks
    devices whose memory the node's parameters would overflow; ``room`` also those that
    leave no room for the rest of the graph; ``live`` those without room for the live
    bytes of the partial placement either (the teachers' rule); ``timed`` also those
    where the node's received copies would not fit beside the runs they share the device
    with (:mod:`placegym.envs.mdp.copies`); false none."""
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
    price_coef: float = 0.0
    """Weight of the price term (:func:`placegym.train.losses.price_loss`): with a teacher
    that prices every device (``lookahead``), the cross-entropy from the Boltzmann
    distribution of its prices (``softmax(-regret / price_temperature)``) to the policy's
    PLC distribution: every device's price is a target, not only the least. 0: off."""
    price_temperature: float = 0.05
    """Temperature of the price targets, in relative regret (0.05: a device 5% slower
    than the best gets ``1/e`` of its weight)."""
    eps_start: float = 1.0
    """Roll-in probability of following the teacher at the first update (1 = teacher)."""
    eps_end: float = 0.0
    """Roll-in probability at the end of the decay (0 = the learner's own actions)."""
    eps_decay: float = 0.5
    """Fraction of the updates over which the roll-in probability decays linearly."""
    rollin: str = "sample"
    """The learner's action in the roll-in steps the teacher does not take: ``sample``
    (drawn from the policy, as DOPPLER) or ``greedy`` (its argmax), so that the labelled
    states are those its greedy placement visits. Greedy episodes of one graph differ
    only by the teacher's steps: give ``eps_end`` > 0, or one episode per graph."""


@dataclass
class RLConfig(PhaseConfig):
    """Policy-gradient RL (phases II and III): REINFORCE or value-free PPO with a
    per-graph mean baseline (:mod:`placegym.train.rl`)."""

    updates: int = 200
    """Gradient updates (REINFORCE) or PPO iterations."""
    episodes_per_graph: int = 16
    """Sampled episodes per graph per update; with ``baseline: mean`` their mean return
    is the baseline."""
    lr: float = 3e-4
    """Adam learning rate at the start of the phase."""
    lr_schedule: str = "cosine"
    """``constant``, ``linear`` or ``cosine`` decay to ``lr * lr_end_factor``."""
    baseline: str = "mean"
    """Each episode's baseline: ``mean`` (the mean return of its graph's episodes in the
    batch, DOPPLER's) or ``greedy`` (the return of the policy's own greedy episode of the
    graph, played once per graph and update before the samples and not learned from: the
    self-critical baseline of Rennie et al., 2017, the rollout baseline of Kool et al.,
    2019). With ``greedy`` a sample's advantage is positive exactly when it beats the
    greedy pass, the placement the agent ships."""
    temperature: float = 1.0
    """Softmax temperature of the sampled episodes: actions are drawn from
    ``softmax(logits / temperature)``, and the gradient is that tempered policy's (its
    log-probabilities and entropy are scored at the same temperature). Below 1 the
    samples stay near the greedy pass, whose neighbours the advantages then compare."""
    algo: str = "reinforce"
    """``reinforce`` (DOPPLER's recipe) or ``ppo`` (value-free clipped surrogate)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (mean entropy per step)."""
    normalize_advantages: bool = True
    """Divide advantages by their standard deviation over the batch."""
    normalize_per_graph: bool = False
    """With ``normalize_advantages``: divide each graph's advantages by their own
    standard deviation instead of the batch's, so that a graph whose returns spread
    widely (a placement many times slower than the reference) does not drown the
    others' signal in the update."""
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
    """Start from these weights: a checkpoint (``.pt``), a config (``.yaml``) whose
    final checkpoint is used (trained first if it does not exist yet), or a shipped
    agent's, ``pretrained:NAME`` (:func:`placegym.agents.pretrained`): transfer."""
    checkpoint_every: int = 10
    """Save a resumable checkpoint every this many updates (and at every phase end)."""
    resume: bool = True
    """Continue from the run folder's latest checkpoint when there is one."""
    threads: int = 1
    """torch CPU threads (small per-step forwards are fastest single-threaded)."""
    device: str = "auto"
    """Where the learner trains (its weights, Adam, the scoring and the backward pass of
    every loss): ``auto`` (the current CUDA device when torch sees one, else the CPU),
    ``cpu``, ``cuda`` (the current CUDA device) or ``cuda:N``. Episodes (rollouts, greedy
    baselines, self-imitation's plan episodes, evaluation) always play on the CPU, whose
    tiny per-step forwards are fastest there: off the CPU, a CPU copy of the policy plays
    them and takes the learner's weights after every update. On the CPU the two are one
    policy, and the run is that of a CPU-only machine. A CUDA device that this machine
    lacks is refused when training starts
    (:func:`~placegym.train.config_checks.resolve_device`); a run may resume on another
    device than it was saved on."""
    workers: int = 0
    """Ray actors that play the simulator phases' episodes (:mod:`placegym.train.workers`;
    needs ``placegym[ray]``); 0 plays them in this process. Either way, same weights."""
    progress: bool | str = "auto"
    """Progress: ``auto`` shows tqdm bars when stderr is a terminal, else a plain line at
    most every 10 s (a log redirected to a file gets none of the bars' ``\\r`` updates);
    ``true`` always shows the bars, ``false`` shows nothing."""
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
