"""Placers named on the command line: ``--placer SPEC`` of ``placegym bench`` and
``placegym anytime``.

A spec is ``TARGET`` or ``TARGET=JSON``:

- ``TARGET`` is ``module:attribute`` (``mypkg.placers:Greedy``; the attribute may be
  dotted) or the name of an installed plug-in: an entry point of the group
  :data:`ENTRY_POINT_GROUP` (``placegym.placers``), declared by a package as::

      [project.entry-points."placegym.placers"]
      theirname = "theirpkg.placers:TheirPlacer"

  The current directory is put on ``sys.path`` first, as ``python -m`` does, so
  ``file_module:Class`` finds ``file_module.py`` in the directory the command runs in.
- ``JSON`` is an object of keyword arguments (``'mymod:Greedy={"k": 3}'``): a class is
  instantiated with them (without ``JSON``: with none), a function is a placer
  ``(graph, cluster, seed)`` called with them as keywords, and an object is used as it is
  (it takes no keyword arguments).

The result must be a :class:`~placegym.train.harness.placers.Placer` or a
:class:`~placegym.train.harness.placers.SearchPlacer` (a teacher, with ``place(graph,
cluster)``, is a Placer too). Every bad spec raises one ``ValueError`` naming the spec and
the problem: a module that is not found, an import that fails, an attribute that is
missing, an unknown plug-in, JSON that is not an object, a constructor that refuses the
arguments, a result that is not a placer.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import sys
from importlib.metadata import entry_points
from typing import Any

from placegym.train.harness.placers import as_placer, placer_name, unique_name

__all__ = ["ENTRY_POINT_GROUP", "installed_placers", "load_placer", "load_placers"]

#: The entry-point group of placer plug-ins.
ENTRY_POINT_GROUP = "placegym.placers"


def installed_placers() -> dict[str, str]:
    """Installed plug-ins: entry-point name -> ``module:attribute`` (the first of two
    distributions that declare the same name wins)."""
    out: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, ep.value)
    return out


def _split(spec: str) -> tuple[str, dict[str, Any] | None]:
    target, sep, text = spec.partition("=")
    target = target.strip()
    if not target:
        raise ValueError(f"placer {spec!r}: expected MODULE:ATTRIBUTE or a plug-in name")
    if not sep:
        return target, None
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"placer {spec!r}: keyword arguments are not valid JSON ({e})") from None
    if not isinstance(kwargs, dict):
        kind = type(kwargs).__name__
        raise ValueError(f"placer {spec!r}: keyword arguments must be a JSON object, got {kind}")
    return target, kwargs


def _import(spec: str, module: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does: modules of the current directory
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
            raise ValueError(
                f"placer {spec!r}: no module named {e.name!r} (not installed, and no "
                f"{e.name.split('.')[0]}.py in {cwd})"
            ) from None
        raise ValueError(f"placer {spec!r}: importing {module!r} failed: {e}") from None
    except Exception as e:  # the user's module raised on import
        raise ValueError(
            f"placer {spec!r}: importing {module!r} raised {type(e).__name__}: {e}"
        ) from None


def _resolve(spec: str, target: str) -> tuple[Any, str | None]:
    """The object ``target`` names, and its plug-in name (None for a module path)."""
    plugin = None
    if ":" not in target:
        found = installed_placers()
        if target not in found:
            known = ", ".join(sorted(found)) or "none installed"
            raise ValueError(
                f"placer {spec!r}: not MODULE:ATTRIBUTE, and no {ENTRY_POINT_GROUP!r} "
                f"plug-in of that name (plug-ins: {known})"
            )
        plugin, target = target, found[target]
    module, _, attr = target.partition(":")
    obj = _import(spec, module.strip())
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise ValueError(f"placer {spec!r}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj, plugin


def _build(spec: str, obj: Any, kwargs: dict[str, Any] | None) -> Any:
    if inspect.isclass(obj):
        try:
            return obj(**(kwargs or {}))
        except Exception as e:  # the constructor refused the arguments
            raise ValueError(
                f"placer {spec!r}: {obj.__name__}(**{kwargs or {}}) raised {type(e).__name__}: {e}"
            ) from None
    if kwargs is None:
        return obj
    if inspect.isfunction(obj):
        placer = functools.partial(obj, **kwargs)
        functools.update_wrapper(placer, obj)
        return placer
    raise ValueError(
        f"placer {spec!r}: keyword arguments given, but {placer_name(obj)!r} is neither a "
        "class nor a function"
    )


def load_placer(spec: str) -> tuple[str, Any]:
    """The placer a spec names (module docstring) and its column name: the plug-in's
    name, else the placer's ``name`` attribute, else its class's (or function's) name.

    Raises:
        ValueError: a bad spec (one line naming the spec and the problem).
    """
    target, kwargs = _split(spec)
    obj, plugin = _resolve(spec, target)
    placer = _build(spec, obj, kwargs)
    is_search = callable(getattr(placer, "search", None))
    if not is_search:
        try:
            as_placer(placer)
        except ValueError as e:
            raise ValueError(f"placer {spec!r}: {str(e).partition(': ')[2]}") from None
    return plugin or placer_name(placer), placer


def load_placers(specs: list[str], taken: set[str] | None = None) -> dict[str, Any]:
    """:func:`load_placer` of every spec, by column name; a name already taken (by a
    teacher column or an earlier spec) gets ``#2``, ``#3``, ... appended."""
    out: dict[str, Any] = {}
    used = set(taken or ())
    for spec in specs:
        base, placer = load_placer(spec)
        name = unique_name(base, used)
        out[name] = placer
        used.add(name)
    return out
