"""Typed workload parameters from strings (``--param k=v`` on the command line).

A value is converted by the type of the parameter's default in the generator's signature:
``bool`` (``true/false/yes/no/1/0``), ``int``, ``float``, ``str``, or a tuple/list of ints
written ``1024,2048`` (brackets and spaces allowed); a ``None`` default (``ccr``) takes a
number. Values that are not strings pass through unchanged, so Python callers keep their
own types.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float) or default is None:
        return "a number"
    return "a comma-separated list of integers"


def _convert(text: str, default: Any, where: str) -> Any:
    """``text`` as the type of ``default``; raises ValueError naming ``where``."""
    s = text.strip()
    try:
        if isinstance(default, bool):
            if s.lower() not in _TRUE | _FALSE:
                raise ValueError
            return s.lower() in _TRUE
        if isinstance(default, int):
            return int(s)
        if isinstance(default, float) or default is None:
            return float(s)
        if isinstance(default, tuple | list):
            items = s.strip("()[]").replace(" ", "").split(",")
            return tuple(int(x) for x in items if x)
    except ValueError:
        raise ValueError(f"{where}: expected {_kind(default)}, got {text!r}") from None
    return s


def bind_params(name: str, fn: Callable[..., Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``params`` against ``fn``'s signature and convert string values.

    Raises:
        ValueError: ``workload NAME: unknown parameter 'k' (parameters: ...)`` or
            ``workload NAME: parameter k: expected an integer, got 'x'``.
    """
    sig = inspect.signature(fn).parameters
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in sig:
            raise ValueError(
                f"workload {name}: unknown parameter {key!r} (parameters: {', '.join(sig)})"
            )
        default = sig[key].default
        if isinstance(value, str) and default is not inspect.Parameter.empty:
            value = _convert(value, default, f"workload {name}: parameter {key}")
        out[key] = value
    return out


def format_defaults(fn: Callable[..., Any]) -> str:
    """``fn``'s parameters with their defaults as ``--param`` takes them
    (``batch=1024 dims=2048,4096 dtype=float32``)."""
    parts = []
    for key, p in inspect.signature(fn).parameters.items():
        d = p.default
        if isinstance(d, bool):
            text = str(d).lower()
        elif isinstance(d, tuple | list):
            text = ",".join(map(str, d))
        else:
            text = str(d)
        parts.append(f"{key}={text}")
    return " ".join(parts)


def parse_assignments(items: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` → ``{"k": "v"}``; a later key wins.

    Raises:
        ValueError: ``--param: expected k=v, got 'x'`` for an item without ``=`` or key.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--param: expected k=v, got {item!r}")
        out[key.strip()] = value
    return out
