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
its section, so every key does something. The dataclasses are defined in
:mod:`placegym.train.config_schema` (which :mod:`placegym.train.config_checks` checks)
and re-exported here.

Unknown keys, wrong types and out-of-range values raise ``ValueError`` naming the dotted
key and the offending value (:mod:`placegym.train.dataclass_io` reads the YAML); a key of
an earlier version names its new place (:data:`MOVED_KEYS`) or why it went
(:data:`REMOVED_KEYS`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import yaml

from placegym.agents.doppler.config import RENAMED_FIELDS, PolicyConfig
from placegym.envs.core.validate import read_text
from placegym.train.config_checks import validate
from placegym.train.config_schema import (
    DataConfig,
    EvalConfig,
    GraphEntry,
    ImitationConfig,
    PhaseConfig,
    RealRLConfig,
    RLConfig,
    SelfImitationConfig,
    SimRLConfig,
    TrainConfig,
    WandbConfig,
    resolve_path,
)
from placegym.train.dataclass_io import MAX_DEPTH, build, check_nesting, set_dotted

__all__ = [
    "MOVED_KEYS",
    "REMOVED_KEYS",
    "DataConfig",
    "EvalConfig",
    "GraphEntry",
    "ImitationConfig",
    "InitCycle",
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


# ---------------------------------------------------------------------- loading
def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML config, apply ``key=value`` overrides, validate; then the same for the
    config its ``init`` names, if any, and so on down the chain.

    Raises:
        ValueError: unknown key, wrong type or value (naming the dotted key), YAML that
            does not parse or nests too deep (:func:`~placegym.train.dataclass_io.
            check_nesting`), an ``init`` chain that loops (naming it) or a bad config in
            the chain (naming its ``init``).
        FileNotFoundError: ``path`` does not exist.
    """
    return _load(Path(path), overrides, (), str(path))


class InitCycle(ValueError):
    """A chain of ``init`` configs that comes back to one of its configs."""


def _load(
    path: Path,
    overrides: list[str] | tuple[str, ...],
    chain: tuple[tuple[Path, str], ...],
    label: str,
) -> TrainConfig:
    """:func:`load_config` of ``path`` (named ``label``: as given, or as an ``init``
    names it), reached through the ``init`` of each config of ``chain`` (resolved path,
    label)."""
    raw = _parse(read_text(path, "YAML config"), f"{path}: not valid YAML")
    if raw is None or raw == {}:
        raise ValueError(
            f"{path}: the config is empty; expected a mapping of keys "
            f"(phases, data, phase1, ...; see configs/quickstart.yaml)"
        )
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of keys, got {type(raw).__name__}")
    check_nesting(raw)
    raw.setdefault("name", path.stem)
    cfg = apply_overrides(config_from_dict(raw), overrides)
    if not cfg.init or Path(cfg.init).suffix not in (".yaml", ".yml"):
        return cfg
    here = path.resolve()
    chain = (*chain, (here, label))
    nxt = resolve_path(cfg.init, here.parent).resolve()
    seen = [p for p, _ in chain]
    if nxt in seen:
        loop = " -> ".join([name for _, name in chain[seen.index(nxt) :]] + [cfg.init])
        raise InitCycle(f"init: the configs' init chain loops: {loop}")
    try:
        _load(nxt, (), chain, cfg.init)
    except InitCycle:
        raise
    except ValueError as e:
        raise ValueError(f"init: {cfg.init}: {e}") from None
    except FileNotFoundError as e:
        raise FileNotFoundError(f"init: {cfg.init}: {e}") from None
    return cfg


def _parse(text: str, what: str) -> Any:
    """``yaml.safe_load(text)``; a YAML error or nesting too deep for the parser is a
    ``ValueError`` starting with ``what``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{what}: {e}") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise ValueError(f"{what}: nested deeper than {MAX_DEPTH} levels") from None


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
            value = text  # not YAML: the string as written
        except RecursionError:  # the parser recurses once per level of nesting
            raise ValueError(f"{key}: nested deeper than {MAX_DEPTH} levels") from None
        check_nesting(value, key)
        set_dotted(data, TrainConfig, key, value, hint=_hint)
    return config_from_dict(data)


def _hint(where: str) -> str | None:
    """Where a key of an earlier version went, or why it was removed."""
    if where in MOVED_KEYS:
        return f"it is {MOVED_KEYS[where]} now"
    return REMOVED_KEYS.get(where)
