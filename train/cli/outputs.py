"""Where a command writes: ``--out`` files and folders, created with their parents.

Every ``--out`` of the command line goes through :func:`out_file` (a file: its folder
is created, parents included), :func:`out_folder` (a folder, created likewise) or, for a
long run that writes at its end, :func:`check_folder` first (nothing created before the
run's inputs are known good), and the writing itself through :func:`writing`, so that a
path whose folder does not exist yet just works, and one that cannot be written (a file
where a folder should be, no permission) is one line naming the option and the path,
never an error that reads like a missing input.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["check_folder", "out_file", "out_folder", "writing"]


def _refuse(option: str, path: str | Path, what: str, e: OSError) -> ValueError:
    return ValueError(f"{option} {path}: cannot {what} ({e.strerror or e})")


def check_folder(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a :class:`Path`, refused now if it could not be created as a folder
    later: it, or the nearest of its parents that exists, is not a folder, or cannot be
    written in. Nothing is created.

    Raises:
        ValueError: naming ``option``, ``path`` and the obstacle.
    """
    p = Path(path)
    for q in (p, *p.absolute().parents):
        if not q.exists():
            continue
        if not q.is_dir():
            raise ValueError(f"{option} {path}: {q} is a file, not a folder")
        if not os.access(q, os.W_OK | os.X_OK):
            raise ValueError(f"{option} {path}: no permission to write in {q}")
        break
    return p


def out_file(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a :class:`Path`, its folder (and that folder's parents) created.

    Raises:
        ValueError: the folder cannot be created, naming ``option`` and ``path``.
    """
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _refuse(option, path, f"create its folder {p.parent}", e) from None
    return p


def out_folder(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a :class:`Path`, created as a folder with its parents.

    Raises:
        ValueError: it cannot be created (a file of that name, no permission), naming
            ``option`` and ``path``.
    """
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _refuse(option, path, "create the folder", e) from None
    return p


@contextmanager
def writing(path: str | Path, option: str = "--out", folder: bool = False) -> Iterator[Path]:
    """Create ``path``'s folder (``folder``: ``path`` itself) and run the block that
    writes there; an ``OSError`` of the block becomes one line naming ``option`` and
    ``path``.

    Raises:
        ValueError: the folder cannot be created or the block cannot write.
    """
    p = out_folder(path, option) if folder else out_file(path, option)
    try:
        yield p
    except OSError as e:
        raise _refuse(option, path, "write it", e) from None
