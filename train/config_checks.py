"""Range and choice checks of a training config (:func:`validate`), each naming the dotted
key and the offending value; :mod:`placegym.train.config` runs them on every config it
builds (the config's dataclasses are :mod:`placegym.train.config_schema`'s).

``device`` is checked in two steps: :func:`validate` checks its form (``auto``, ``cpu``,
``cuda`` or ``cuda:N``) wherever a config is built, and :func:`resolve_device` checks that
this machine has the device when training starts. A config names a device of the machine
that trains it, not of every machine that reads it: a checkpoint's config, or an ``init``
config, written on a GPU machine still loads on a CPU one."""

from __future__ import annotations

import inspect
import math
import re
from typing import TYPE_CHECKING, Any

from placegym.envs.mdp.state import MEMORY_MASKS

if TYPE_CHECKING:
    import torch

    from placegym.train.config_schema import (
        GraphEntry,
        ImitationConfig,
        PhaseConfig,
        RealRLConfig,
        RLConfig,
        SimRLConfig,
        TrainConfig,
    )

__all__ = [
    "DEVICES",
    "LR_SCHEDULES",
    "MAX_LR",
    "MAX_SEED",
    "TRAINING_PHASES",
    "resolve_device",
    "validate",
]

TRAINING_PHASES = ("phase1", "phase2", "phase3")
LR_SCHEDULES = ("constant", "linear", "cosine")
#: The largest learning rate a phase takes: Adam moves every weight by up to ``lr`` per
#: update, and the policy's weights are of order 1 (rates that train are 1e-4 to 1e-2).
MAX_LR = 1.0
#: The largest seed (torch and numpy take seeds below 2**63; restarts add to it).
MAX_SEED = 2**32 - 1
#: The forms of ``device`` (``N`` a CUDA device index).
DEVICES = ("auto", "cpu", "cuda", "cuda:N")
_DEVICE = re.compile(r"auto|cpu|cuda(:(0|[1-9][0-9]*))?")


def _check(ok: bool, where: str, expect: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"{where}: {expect}, got {value!r}")


def _finite(value: float, where: str, expect: str, ok: bool) -> None:
    """A number that is finite (not inf, not nan) and ``ok``."""
    _check(math.isfinite(value) and ok, where, expect, value)


def _one_of(value: Any, choices: tuple[str, ...], where: str) -> None:
    _check(value in choices, where, f"expected one of {', '.join(choices)}", value)


def validate(cfg: TrainConfig) -> None:
    """Range and choice checks; raises ``ValueError`` naming the key and value."""
    _check(bool(cfg.name) and "/" not in cfg.name, "name", "expected a name without '/'", cfg.name)
    _check(0 <= cfg.seed <= MAX_SEED, "seed", f"must be in [0, {MAX_SEED}]", cfg.seed)
    for i, p in enumerate(cfg.phases):
        _one_of(p, TRAINING_PHASES, f"phases[{i}]")
    _check(len(set(cfg.phases)) == len(cfg.phases), "phases", "expected no repeats", cfg.phases)
    _check(cfg.checkpoint_every >= 1, "checkpoint_every", "must be >= 1", cfg.checkpoint_every)
    _check(cfg.threads >= 1, "threads", "must be >= 1", cfg.threads)
    _check(cfg.workers >= 0, "workers", "must be >= 0", cfg.workers)
    _check_device_form(cfg.device)
    _check(cfg.restarts >= 1, "restarts", "must be >= 1", cfg.restarts)
    progress_ok = isinstance(cfg.progress, bool) or cfg.progress == "auto"
    _check(progress_ok, "progress", "expected true, false or auto", cfg.progress)
    if cfg.data.sampler:
        _validate_sampler(cfg)
    else:
        _check(
            bool(cfg.data.graphs), "data.graphs", "expected at least one graph", cfg.data.graphs
        )
    _one_of(cfg.data.dispatch, ("priority", "fifo"), "data.dispatch")
    mask_ok = isinstance(cfg.data.memory_mask, bool) or cfg.data.memory_mask in MEMORY_MASKS
    _check(
        mask_ok,
        "data.memory_mask",
        "expected true, false, resident, room, live or timed",
        cfg.data.memory_mask,
    )
    for where in ("graphs", "heldout"):
        for i, g in enumerate(getattr(cfg.data, where)):
            _validate_suite_graph(g, f"data.{where}[{i}]")
    _validate_phase1(cfg.phase1)
    _validate_phase2(cfg.phase2)
    _validate_phase3(cfg.phase3)
    _check(cfg.eval.every >= 0, "eval.every", "must be >= 0", cfg.eval.every)
    _check(cfg.eval.k >= 1, "eval.k", "must be >= 1", cfg.eval.k)
    _one_of(cfg.wandb.mode, ("auto", "online", "offline", "disabled"), "wandb.mode")


def _check_device_form(value: Any) -> None:
    """``device`` is one of the forms of :data:`DEVICES` (else the named error)."""
    ok = isinstance(value, str) and _DEVICE.fullmatch(value) is not None
    _check(ok, "device", f"expected {', '.join(DEVICES)}", value)


def resolve_device(device: str) -> torch.device:
    """The torch device that ``device`` (a config's ``device``) names on this machine:
    ``auto`` is the current CUDA device when ``torch.cuda.is_available()``, else the CPU;
    ``cuda`` the current CUDA device; ``cuda:N`` that one; ``cpu`` the CPU. A CUDA device
    comes back with its index (``cuda:0``).

    Raises:
        ValueError: naming ``device`` and the value: not one of :data:`DEVICES`; CUDA asked
            for where torch sees none; an index at or beyond this machine's device count.
    """
    import torch

    _check_device_form(device)
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(
            f"device: {device!r} needs CUDA, which torch does not see on this machine "
            f"(torch.cuda.is_available() is False; torch {torch.__version__}); use cpu, "
            "or auto (a GPU where there is one)"
        )
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if device in ("auto", "cuda") else int(device[5:])
    if index >= count:
        devices = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise ValueError(
            f"device: {device!r} is not a CUDA device of this machine (it has {devices})"
        )
    return torch.device("cuda", index)


def _validate_sampler(cfg: TrainConfig) -> None:
    """``data.sampler`` builds an instance sampler; nothing keeps per-graph state."""
    from placegym.envs.suites.sampler import InstanceSampler
    from placegym.train.config_schema import instance_sampler

    options = list(inspect.signature(InstanceSampler).parameters)
    known = f"unknown (options: {', '.join(options)})"
    for key in cfg.data.sampler:
        _check(key in options, f"data.sampler.{key}", known, key)
    try:
        instance_sampler(cfg.seed, cfg.data.sampler)
    except ValueError as e:
        raise ValueError(f"data.sampler.{e}") from None


def _validate_suite_graph(g: GraphEntry, where: str) -> None:
    """A suite instance exists, and a ``cluster`` set on it is the instance's own."""
    if g.suite_instance is None:
        return
    suite, instance = g.suite_instance
    specs = {spec.id: spec for _, spec in suite.specs()}
    _check(instance in specs, f"{where}.name", f"suite {suite.name} has no such instance", g.name)
    want = specs[instance].cluster
    _check(g.cluster in (None, want), f"{where}.cluster", f"must be {want!r}", g.cluster)


def _validate_phase(p: PhaseConfig, name: str, min_episodes: int, why: str = "") -> None:
    """Checks of the fields every phase has."""
    _check(p.updates >= 0, f"{name}.updates", "must be >= 0", p.updates)
    _check(
        p.graphs_per_update >= 1, f"{name}.graphs_per_update", "must be >= 1", p.graphs_per_update
    )
    _check(
        p.episodes_per_graph >= min_episodes,
        f"{name}.episodes_per_graph",
        f"must be >= {min_episodes}{why}",
        p.episodes_per_graph,
    )
    lr_why = f"must be in (0, {MAX_LR:g}] (Adam moves each weight by up to lr per update)"
    _finite(p.lr, f"{name}.lr", lr_why, 0 < p.lr <= MAX_LR)
    _one_of(p.lr_schedule, LR_SCHEDULES, f"{name}.lr_schedule")
    _check(
        0 <= p.lr_end_factor <= 1, f"{name}.lr_end_factor", "must be in [0, 1]", p.lr_end_factor
    )
    _finite(p.max_grad_norm, f"{name}.max_grad_norm", "must be >= 0", p.max_grad_norm >= 0)


def _teacher_name(value: str, where: str) -> None:
    from placegym.teachers import list_teachers

    _one_of(value, tuple(list_teachers()), where)


def _validate_phase1(p: ImitationConfig) -> None:
    _validate_phase(p, "phase1", 1)
    _teacher_name(p.teacher, "phase1.teacher")
    if p.select_teacher is not None:
        _teacher_name(p.select_teacher, "phase1.select_teacher")
    for key in ("eps_start", "eps_end", "eps_decay"):
        v = getattr(p, key)
        _check(0 <= v <= 1, f"phase1.{key}", "must be in [0, 1]", v)
    _one_of(p.rollin, ("sample", "greedy"), "phase1.rollin")
    _finite(p.regret_coef, "phase1.regret_coef", "must be >= 0", p.regret_coef >= 0)
    _finite(p.price_coef, "phase1.price_coef", "must be >= 0", p.price_coef >= 0)
    _finite(
        p.price_temperature,
        "phase1.price_temperature",
        "must be > 0",
        p.price_temperature > 0,
    )


def _validate_rl(p: RLConfig, name: str) -> None:
    """Checks of the policy-gradient fields of phases II and III."""
    _one_of(p.baseline, ("mean", "greedy"), f"{name}.baseline")
    if p.baseline == "mean":
        why = " (the baseline is the mean return of a graph's episodes)"
        _validate_phase(p, name, 2, why)
    else:
        _validate_phase(p, name, 1)
    _finite(p.temperature, f"{name}.temperature", "must be > 0", p.temperature > 0)
    _one_of(p.algo, ("reinforce", "ppo"), f"{name}.algo")
    _finite(p.entropy_coef, f"{name}.entropy_coef", "must be >= 0", p.entropy_coef >= 0)
    _check(p.ppo_epochs >= 1, f"{name}.ppo_epochs", "must be >= 1", p.ppo_epochs)
    _check(p.ppo_minibatches >= 1, f"{name}.ppo_minibatches", "must be >= 1", p.ppo_minibatches)
    _finite(p.ppo_clip, f"{name}.ppo_clip", "must be > 0", p.ppo_clip > 0)
    _check(
        p.target_kl is None or p.target_kl > 0,
        f"{name}.target_kl",
        "must be > 0 or null",
        p.target_kl,
    )


def _validate_phase2(p: SimRLConfig) -> None:
    _validate_rl(p, "phase2")
    _one_of(p.reward, ("relative", "nest"), "phase2.reward")
    si, where = p.self_imitation, "phase2.self_imitation"
    _finite(si.coef, f"{where}.coef", "must be >= 0", si.coef >= 0)
    _one_of(si.states, ("sampled", "plan"), f"{where}.states")
    if si.coef > 0:
        _teacher_name(si.teacher, f"{where}.teacher")
        if si.select_teacher is not None:
            _teacher_name(si.select_teacher, f"{where}.select_teacher")


def _validate_phase3(p: RealRLConfig) -> None:
    from placegym.envs.real.devices import parse_devices

    _validate_rl(p, "phase3")
    try:
        parse_devices(p.devices)
    except ValueError as e:
        raise ValueError(f"phase3.{e}") from None
    _finite(p.scale, "phase3.scale", "must be > 0", p.scale > 0)
    _check(p.repeats >= 1, "phase3.repeats", "must be >= 1", p.repeats)
