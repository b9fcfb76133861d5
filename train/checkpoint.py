"""Checkpoints: atomic, resumable, and loadable with ``torch.load(weights_only=True)``.

A checkpoint is a dict of tensors and primitive containers only:

==================  ==========================================================
key                 content
==================  ==========================================================
``format``          :data:`CHECKPOINT_FORMAT`
``name``            the run name
``config``          the run's :class:`~placegym.train.config.TrainConfig` as a dict
``policy_config``   ``{"hidden": H, "layers": L, "learn": "both", "siblings": True}``
``policy``          the policy's ``state_dict``
``optimizer``       the current phase's Adam ``state_dict`` (None when finished)
``scheduler``       its ``LambdaLR`` ``state_dict`` (None when finished)
``progress``        ``phase_index``, ``update`` (done in that phase),
                    ``global_update``, ``episodes``, ``complete``
``rng``             ``numpy`` (the bit generator state), ``torch`` (CPU RNG state)
``best_plans``      self-imitation plans by training-graph index: ``device``,
                    ``order`` (int lists), ``makespan`` (may be absent or empty)
==================  ==========================================================

Every tensor of a checkpoint is on the CPU (:func:`cpu_state`: a learner trained on a GPU
saves copies), and :func:`load_checkpoint` maps whatever it reads there: a checkpoint
loads on any machine, and a run resumes on another device than it was saved on (Adam's
state goes to the device of the weights it steps when the optimiser loads it).

Versions: v2 gave the PLC head the sibling share (v1 files are refused: their weights
do not fit); v3 reshaped ``config`` (phase II's ``imitation_*`` keys became its
``self_imitation`` section; ``improve_*`` and phase III's RL-only keys went).
:func:`load_checkpoint` reads v2 files by converting their ``config``
(:func:`convert_v2_config`); everything else is unchanged.

:func:`save_checkpoint` writes to a temporary file in the same folder, flushes it to disk
and renames it over the target, so a run killed at any moment leaves either the old or
the new checkpoint, never a torn one.

A run resumes only with the config it was trained with: :func:`check_resume` compares
the config of a resume with the checkpoint's and raises :class:`ConfigChanged` naming the
keys that differ (old -> new), but for the keys that cannot change what the run computes
(:data:`RESUME_FREE_KEYS`: the name, folder, progress bars, W&B, threads, the training
device, Ray workers, checkpoint interval, Gantt images).

A Ctrl-C during training becomes :class:`Interrupted`, whose message is the one line
``placegym train`` prints: the update reached and the checkpoint the same command
resumes from.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.config import PolicyConfig
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.train.config import (
    MOVED_KEYS,
    REMOVED_KEYS,
    TrainConfig,
    config_from_dict,
    load_config,
    resolve_path,
)

CHECKPOINT_FORMAT = "placegym.checkpoint/v3"
_V2 = "placegym.checkpoint/v2"

#: Config keys (dotted; a section stands for all its keys) that a resume may change:
#: they cannot change the weights or results of the run (``threads`` and ``device`` but
#: for floating-point rounding: the same computation in another order or on other
#: hardware).
RESUME_FREE_KEYS = (
    "name",
    "out",
    "resume",
    "progress",
    "threads",
    "device",
    "workers",
    "checkpoint_every",
    "restarts",
    "wandb",
    "eval.gantt",
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "RESUME_FREE_KEYS",
    "ConfigChanged",
    "Interrupted",
    "Progress",
    "check_resume",
    "config_changes",
    "convert_v2_config",
    "cpu_state",
    "init_checkpoint",
    "init_weights",
    "load_checkpoint",
    "policy_from_checkpoint",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "training_checkpoint",
]


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``path`` atomically (temp file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``, check its format tag, and convert a
    v2 checkpoint to the current format.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a placegym checkpoint, or one of an unreadable version.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for foreign or torn files
        raise ValueError(
            f"{path}: not a placegym checkpoint (torch.load(weights_only=True) failed: "
            f"{type(e).__name__}); use a .pt file written by placegym train"
        ) from None
    tag = ckpt.get("format") if isinstance(ckpt, dict) else None
    if tag == _V2:
        ckpt = dict(ckpt, format=CHECKPOINT_FORMAT, config=convert_v2_config(ckpt["config"]))
    elif tag != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path}: format: expected {CHECKPOINT_FORMAT!r} (a placegym checkpoint), got {tag!r}"
        )
    return ckpt


def convert_v2_config(old: dict[str, Any]) -> dict[str, Any]:
    """A v2 checkpoint's ``config`` in the current shape: phase II's ``imitation_*`` keys
    go to its ``self_imitation`` section (:data:`~placegym.train.config.MOVED_KEYS`);
    the keys that are gone (:data:`~placegym.train.config.REMOVED_KEYS`) are dropped."""
    new = {k: dict(v) if isinstance(v, dict) else v for k, v in old.items()}
    for key, target in MOVED_KEYS.items():
        section, name = key.split(".")
        if name in new.get(section, {}):
            value = new[section].pop(name)
            *parents, field = target.split(".")  # policy.prices, phase2.self_imitation.coef
            node = new
            for part in parents:
                node = node.setdefault(part, {})
            node[field] = value
    for key in REMOVED_KEYS:
        section, name = key.split(".")
        new.get(section, {}).pop(name, None)
    return new


def policy_from_checkpoint(ckpt: dict[str, Any]) -> DopplerPolicy:
    """A :class:`DopplerPolicy` of the checkpoint's sizes with its weights, in eval mode."""
    policy = DopplerPolicy(PolicyConfig.from_dict(ckpt["policy_config"]))  # old names too
    policy.load_state_dict(ckpt["policy"])
    return policy.eval()


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The random states to store: numpy's bit generator and torch's CPU generator."""
    return {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state()}


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` stored (``rng`` in place)."""
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch"])


@dataclass
class Progress:
    """Counters stored in every checkpoint."""

    phase_index: int = 0
    update: int = 0  # updates done in the phase at phase_index
    global_update: int = 0
    episodes: int = 0
    seconds: float = 0.0  # training wall time (evaluation excluded)
    complete: bool = False
    best_eval: float = math.inf  # best train greedy geomean ratio (eval.keep_best)


#: The prefix naming a shipped agent instead of a checkpoint file (``pretrained:NAME``).
PRETRAINED = "pretrained:"


def init_checkpoint(init: str, base_dir: Path | None) -> tuple[Path, TrainConfig | None]:
    """The checkpoint an ``init`` value names, and the config it names (or None).

    A ``.pt`` path is the checkpoint itself; a ``.yaml`` / ``.yml`` config names its
    run's ``checkpoints/final.pt``. Paths are found as given, else relative to
    ``base_dir`` (the config file's folder).
    """
    path = resolve_path(init, base_dir)
    if path.suffix in (".yaml", ".yml"):
        src = load_config(path)
        return src.run_dir / "checkpoints" / "final.pt", src
    return path, None


def cpu_state(value: Any) -> Any:
    """``value`` (a ``state_dict``, nested dicts, lists and tuples of tensors and
    primitives) with every tensor on the CPU: a tensor there already is kept as it is
    (not copied), one elsewhere is copied there; the containers are new (an
    ``OrderedDict`` stays one, with the ``_metadata`` of a module's ``state_dict``)."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, OrderedDict):
        out = OrderedDict((k, cpu_state(v)) for k, v in value.items())
        if hasattr(value, "_metadata"):
            out._metadata = value._metadata  # type: ignore[attr-defined]
        return out
    if isinstance(value, dict):
        return {k: cpu_state(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(cpu_state(v) for v in value)
    return value


def training_checkpoint(
    cfg: TrainConfig,
    policy: DopplerPolicy,
    opt: torch.optim.Optimizer | None,
    sched: Any | None,
    progress: Progress,
    rng: np.random.Generator,
    plans: dict[int, dict[str, Any]],
) -> dict[str, Any]:
    """The payload of a training run's checkpoint (the keys of the module docstring);
    ``opt`` and ``sched`` are None between phases and at the end. The weights and the
    optimiser's state are on the CPU (:func:`cpu_state`) wherever ``policy`` is."""
    return {
        "format": CHECKPOINT_FORMAT,
        "name": cfg.name,
        "config": cfg.to_dict(),
        "policy_config": asdict(cfg.policy),
        "policy": cpu_state(policy.state_dict()),
        "optimizer": None if opt is None else cpu_state(opt.state_dict()),
        "scheduler": None if sched is None else sched.state_dict(),
        "progress": asdict(progress),
        "rng": rng_state(rng),
        "best_plans": plans,
    }


def init_weights(
    init: str, base_dir: Path | None, policy: PolicyConfig
) -> tuple[Path, dict[str, torch.Tensor]]:
    """The checkpoint ``init`` names (:func:`init_checkpoint`) and its policy weights.

    Raises:
        FileNotFoundError: ``init`` names a config whose run has no final checkpoint yet.
        ValueError: the checkpoint's policy sizes differ from ``policy``'s.
    """
    if init.startswith(PRETRAINED):  # a shipped agent's weights (placegym.agents.zoo)
        from placegym.agents.zoo import ZOO, available, load_policy_file

        name = init[len(PRETRAINED) :]
        if name not in available():
            raise ValueError(
                f"init: no shipped agent {name!r} (shipped: {', '.join(available())})"
            )
        path = ZOO / name / "policy.pt"
        try:
            data = load_policy_file(path)
        except ValueError as e:
            raise ValueError(f"init: {e}") from None
        return path, _sized(data, policy)
    path, src = init_checkpoint(init, base_dir)
    if src is not None and not path.is_file():
        raise FileNotFoundError(
            f"init: {init} has no final checkpoint {path} yet; train it first "
            "(placegym train does)"
        )
    return path, _sized(load_checkpoint(path), policy)


def _sized(ckpt: dict[str, Any], policy: PolicyConfig) -> dict[str, torch.Tensor]:
    """The weights of ``ckpt`` when its policy sizes are ``policy``'s."""
    mine = {"hidden": policy.hidden, "layers": policy.layers}
    if {k: ckpt["policy_config"].get(k) for k in mine} != mine:
        raise ValueError(
            f"init: the checkpoint's policy sizes {dict(ckpt['policy_config'])} differ "
            f"from this config's policy {mine}"
        )
    return ckpt["policy"]


class ConfigChanged(ValueError):
    """A resume's config differs from the one its run was trained with."""


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": value}`` of a config (its sections: dataclasses, or the dicts of a config
    this version cannot read); other values, lists and mappings included, are leaves."""
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        items = [(f.name, getattr(data, f.name)) for f in dataclasses.fields(data)]
    else:
        items = list(data.items())
    out: dict[str, Any] = {}
    for key, value in items:
        where = f"{prefix}{key}"
        section = dataclasses.is_dataclass(value) or (isinstance(value, dict) and not prefix)
        if section:
            out.update(_flat(value, f"{where}."))
        else:
            out[where] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _free(key: str) -> bool:
    return any(key == k or key.startswith(f"{k}.") for k in RESUME_FREE_KEYS)


def _brief(value: Any) -> Any:
    """``value`` as shown: a graph given by name alone (``{name: ffnn}``) as its name."""
    if isinstance(value, list):
        return [_brief(v) for v in value]
    graph = isinstance(value, dict) and set(value) == {"name", "params", "cluster"}
    if graph and not value["params"] and value["cluster"] is None:
        return value["name"]
    return value


def _show(value: Any) -> str:
    value = _brief(value)
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 200 else f"{text[:120]} ... {text[-75:]}"


def config_changes(saved: dict[str, Any], cfg: TrainConfig) -> list[str]:
    """``key: old -> new`` for each key whose value in ``cfg`` differs from the saved
    config ``saved`` (a checkpoint's ``config``), but for :data:`RESUME_FREE_KEYS`.

    ``saved`` is completed with the defaults of keys it lacks (a config of an earlier
    version) before the comparison."""
    try:
        old = _flat(config_from_dict(saved))
    except ValueError:  # a config this version refuses: compare it as it is
        old = _flat(saved)
    new = _flat(cfg)
    missing = "(not set)"
    keys = list(new) + [k for k in old if k not in new]  # in the config's order
    return [
        f"{key}: {_show(old.get(key, missing))} -> {_show(new.get(key, missing))}"
        for key in keys
        if not _free(key) and old.get(key, missing) != new.get(key, missing)
    ]


def check_resume(cfg: TrainConfig, saved: dict[str, Any] | None = None) -> None:
    """Refuse to resume ``cfg``'s run with a config other than the one it was trained
    with: ``saved`` (a checkpoint's ``config``), by default that of the run folder's
    ``checkpoints/latest.pt`` (nothing to check without one, or with ``resume: false``).

    Raises:
        ConfigChanged: one line naming the run folder and each differing key (old ->
            new), and what to do instead (``out=`` another folder, or ``resume=false``).
    """
    if not cfg.resume:
        return
    if saved is None:
        latest = cfg.run_dir / "checkpoints" / "latest.pt"
        if not latest.is_file():
            return
        saved = load_checkpoint(latest)["config"]
    changes = config_changes(saved, cfg)
    if changes:
        raise ConfigChanged(
            f"{cfg.run_dir}: this run was trained with another config "
            f"({'; '.join(changes)}); resuming would mix the two. Train a new run with "
            f"out=<another folder>, or start this one over with resume=false"
        )


class Interrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C; ``str()`` is the line to print.

    Args:
        update: the global update reached (None: not known).
        latest: the run's ``checkpoints/latest.pt`` (None: not known).
    """

    def __init__(self, update: int | None = None, latest: Path | None = None) -> None:
        at = "" if update is None else f" at update {update}"
        super().__init__(f"interrupted{at}; {_resume_hint(latest)}")


def _resume_hint(latest: Path | None) -> str:
    """What running the same command again does, by the checkpoint ``latest``."""
    if latest is None:
        return "run the same command to resume from the run's latest checkpoint"
    if not latest.is_file():
        return f"no checkpoint yet ({latest}): the same command starts the run over"
    try:
        done = load_checkpoint(latest)["progress"]["global_update"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"run the same command to resume from {latest}"
    return f"run the same command to resume from {latest} (update {done})"
