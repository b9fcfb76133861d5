"""Dependencies for machines without network: a wheelhouse of everything placegym needs
beyond torch, and installing what is missing from it.

A GPU machine usually has a CUDA build of torch already and often no network, so
``make install`` (which resolves from PyPI) is not an option there. Instead:

1. On a networked machine with a working ``.venv``, ``make wheelhouse`` writes
   :func:`requirements` (every distribution placegym and its ``dev`` extra need, pinned
   to the versions installed here, *except* torch and what torch itself requires: the
   GPU machine's torch brings those) and downloads their wheels with ``pip download
   --no-deps --only-binary=:all: --platform ... --python-version ...`` for the GPU
   machine's platform and Python (what is not installed here, such as ``wheel``, is
   listed unpinned).
2. On the GPU machine, ``make gpu-check`` installs placegym itself without dependencies
   (building it needs setuptools and wheel, both in the wheelhouse), and
   :func:`install_missing` installs the distributions that the interpreter lacks with
   ``pip install --no-index --find-links WHEELHOUSE``: nothing is ever fetched from the
   network, and torch is left alone.

Only the standard library is imported at module level: this runs before the
dependencies are there.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

__all__ = ["install_command", "install_missing", "missing", "requirements"]

#: In the wheelhouse besides placegym's requirements: the build backend of ``pip install
#: -e .`` and what the GPU tests need.
EXTRA = ("setuptools", "wheel", "pytest", "hypothesis")

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(dist: str = "placegym") -> list[str]:
    """Names of ``dist``'s requirements outside its extras (standard library only, so it
    works before anything else is installed)."""
    lines = metadata.requires(dist) or []
    return [_name(x) for x in lines if "extra ==" not in x]


def _name(spec: str) -> str:
    """The distribution name at the start of a requirement string."""
    m = _NAME.match(spec)
    if m is None:
        raise ValueError(f"requirement: not a distribution name, got {spec!r}")
    return m.group(1)


def _direct(dist: str, python: str | None) -> list[str]:
    """Names of ``dist``'s non-extra requirements whose markers hold for ``python``."""
    from packaging.requirements import Requirement

    env = {} if python is None else {"python_version": python, "python_full_version": python}
    out = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
            out.append(req.name)
    return out


def _closure(
    roots: Iterable[str], python: str | None, skip: AbstractSet[str] = frozenset()
) -> set[str]:
    """Installed distributions reachable from ``roots`` through their requirements."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = _canonical(todo.pop())
        if name in seen or name in skip:
            continue
        seen.add(name)
        if not missing([name]):
            todo += _direct(name, python)
    return seen


def requirements(python: str | None = None) -> list[str]:
    """Pinned ``name==version`` of every distribution the wheelhouse needs (module
    docstring), from the current environment; markers are evaluated for ``python``
    (a version such as ``"3.12"``; default: this interpreter)."""
    torch_side = _closure(["torch"], python)
    roots = [*_direct("placegym", python), *EXTRA]
    needed = _closure(roots, python, skip=torch_side - {_canonical(x) for x in EXTRA})
    absent = set(missing(needed))  # not installed here (wheel): the newest is fetched
    return sorted(n if n in absent else f"{n}=={metadata.version(n)}" for n in needed)


def missing(names: Iterable[str]) -> list[str]:
    """The distributions of ``names`` (requirement strings allowed) not installed."""
    out = []
    for name in map(_name, names):
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def install_command(
    names: Iterable[str], wheelhouse: str | Path, target: str | Path | None = None
) -> list[str]:
    """The ``pip install`` argv that installs ``names`` from ``wheelhouse`` only (into
    ``target`` when given, else into this interpreter's environment)."""
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse)]
    if target is not None:
        cmd += ["--target", str(target)]
    return [*cmd, *names]


def install_missing(
    names: Iterable[str], wheelhouse: str | Path, target: str | Path | None = None
) -> list[str]:
    """Install from ``wheelhouse`` whichever of ``names`` is missing; returns them.

    Raises:
        ValueError: the wheelhouse folder does not exist (``make wheelhouse`` makes it).
        RuntimeError: pip failed (its output says which wheel is not in the wheelhouse).
    """
    todo = missing(names)
    if not todo:
        return []
    if not Path(wheelhouse).is_dir():
        raise ValueError(
            f"wheelhouse: {str(wheelhouse)!r} is not a folder; missing {', '.join(todo)} "
            f"(run 'make wheelhouse' on a networked machine and copy the folder here)"
        )
    done = subprocess.run(install_command(todo, wheelhouse, target), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {', '.join(todo)} from {wheelhouse}")
    return todo


def main(argv: list[str] | None = None) -> int:
    """``python -m placegym.train.machine.wheelhouse [PYTHON_VERSION]``: print the requirements."""
    args = sys.argv[1:] if argv is None else argv
    print("\n".join(requirements(args[0] if args else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
