"""Typed dataclasses from nested dicts (parsed YAML), and dotted ``key=value`` overrides.

:func:`build` turns a nested dict into a dataclass, section by section, following the
field annotations: numbers from strings, ints as floats, lists, mappings, optional
values and nested dataclasses (a dataclass with a ``from_str`` classmethod also accepts
a bare string). :func:`set_dotted` writes one dotted key into such a dict. Every error is
a ``ValueError`` that names the dotted key and the offending value; an unknown key lists
the known ones and either the closest one or, from ``hint(key)``, why the key is not
there (a key that moved or was removed). :func:`check_nesting` refuses, before any of
that, parsed YAML that nests deeper than a config does (:data:`MAX_DEPTH`), holds itself
(an alias inside its own anchor) or expands to more than :data:`MAX_ITEMS` values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "Hint", "build", "check_nesting", "set_dotted"]

#: ``hint(dotted_key)``: why an unknown key is not there, or None.
Hint = Callable[[str], "str | None"]

#: The deepest nesting of mappings and lists :func:`check_nesting` accepts (a config's
#: sections nest 3 deep; keyword-argument mappings add a few levels).
MAX_DEPTH = 32
#: The most mappings, lists and values :func:`check_nesting` accepts, YAML aliases
#: counted each time they are used (a config holds a few hundred).
MAX_ITEMS = 100_000


def check_nesting(raw: Any, where: str = "") -> None:
    """Refuse ``raw`` (parsed YAML) when it nests deeper than :data:`MAX_DEPTH`, contains
    itself, or holds more than :data:`MAX_ITEMS` values once aliases are expanded: such
    input would otherwise end in a ``RecursionError`` or never finish building.

    Raises:
        ValueError: naming the dotted key (prefixed with ``where``) where it happens.
    """
    stack: list[tuple[Any, str, tuple[int, ...]]] = [(raw, where, ())]
    items = 0
    while stack:
        value, at, holders = stack.pop()
        items += 1
        if items > MAX_ITEMS:
            raise ValueError(
                f"{where or 'config'}: more than {MAX_ITEMS:,} values (YAML aliases expanded)"
            )
        if not isinstance(value, dict | list):
            continue
        if id(value) in holders:
            raise ValueError(f"{at or 'config'}: contains itself (a YAML alias in its anchor)")
        if len(holders) >= MAX_DEPTH:
            raise ValueError(f"{at or 'config'}: nested deeper than {MAX_DEPTH} levels")
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in pairs:
            sub = f"{at}[{key}]" if isinstance(value, list) else f"{at}.{key}" if at else str(key)
            stack.append((child, sub, (*holders, id(value))))


def build(cls: type, raw: Any, where: str = "", hint: Hint | None = None) -> Any:
    """The dataclass ``cls`` from the mapping ``raw`` (its fields coerced to their types).

    Raises:
        ValueError: an unknown key, a wrong type or value, or the dataclass's own checks
            (prefixed with the dotted key ``where``).
    """
    if isinstance(raw, cls):
        return raw
    if isinstance(raw, str) and hasattr(cls, "from_str"):
        return cls.from_str(raw)
    if not isinstance(raw, dict):
        raise ValueError(f"{where or 'config'}: expected a mapping, got {raw!r}")
    hints, names = _hints(cls), _names(cls)
    kwargs = {}
    for key, value in raw.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in names:
            raise ValueError(_unknown(path, str(key), names, hint))
        kwargs[key] = _coerce(value, hints[key], path, hint)
    try:
        return cls(**kwargs)
    except ValueError as e:  # a section's own checks (PolicyConfig) name the field
        raise ValueError(f"{where}.{e}" if where else str(e)) from None


def set_dotted(
    data: dict[str, Any], cls: type, key: str, value: Any, hint: Hint | None = None
) -> None:
    """Set ``data[a][b][c] = value`` for ``key = "a.b.c"``, checking each part against the
    fields of the dataclass ``cls`` that ``data`` describes (the value is checked later,
    by :func:`build`).

    Raises:
        ValueError: an unknown key, or a key below a field that is not a section.
    """
    node, parts = data, key.split(".")
    section: Any = cls  # the dataclass of the section ``node`` holds
    for i, part in enumerate(parts):
        names = _names(section)
        where = ".".join(parts[: i + 1])
        if part not in names:
            raise ValueError(_unknown(where, part, names, hint))
        if i == len(parts) - 1:
            node[part] = value
            return
        tp = _hints(section)[part]
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            raise ValueError(f"{where}: is a {_type_name(tp)}, it has no keys")
        node, section = node.setdefault(part, {}), tp


def _names(cls: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _unknown(where: str, part: str, names: list[str], hint: Hint | None) -> str:
    why = hint(where) if hint is not None else None
    if why is None:
        close = difflib.get_close_matches(part, names, n=1)
        why = f"did you mean {close[0]!r}?" if close else None
    return f"{where}: unknown key (expected one of {', '.join(names)})" + (
        f"; {why}" if why else ""
    )


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _coerce(value: Any, tp: Any, where: str, hint: Hint | None) -> Any:
    """``value`` as type ``tp`` (numbers from strings, ints as floats), else ValueError."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(value, inner[0], where, hint)
        for option in inner:  # the first type that takes the value (bool | str: true)
            with contextlib.suppress(ValueError):
                return _coerce(value, option, where, hint)
        kinds = " or ".join(_KINDS.get(option, _type_name(option)) for option in inner)
        raise ValueError(f"{where}: expected {kinds}, got {value!r}")
    if origin in (list, tuple):  # list[X] or tuple[X, ...]
        items = value if isinstance(value, list | tuple) else None
        if items is None:
            raise ValueError(f"{where}: expected a list, got {value!r}")
        out = [_coerce(v, args[0], f"{where}[{i}]", hint) for i, v in enumerate(items)]
        return out if origin is list else tuple(out)
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, where, hint)
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


#: How an error names what a scalar type takes.
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))
