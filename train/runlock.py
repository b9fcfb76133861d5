"""One process per run folder: :class:`RunLock`.

``placegym train`` holds an exclusive ``fcntl.flock`` on ``<run folder>/.lock`` while it
trains (:func:`placegym.train.restarts.train`). A second run started into the same folder
fails at once with :class:`RunBusy`, one line naming the holder (pid, host, start time,
which the holder writes into the file), instead of interleaving ``metrics.jsonl`` and
overwriting the first one's checkpoints. The operating system releases the lock when the
holding process ends, however it ends (a crash, ``kill -9``), so no stale lock is ever
left to clean up; the file itself stays, and only says who held the folder last.

Where ``fcntl`` does not exist (Windows) the lock does nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "RunBusy", "RunLock"]

#: The lock file's name in the run folder.
LOCK_FILE = ".lock"


class RunBusy(ValueError):
    """Another process holds the run folder."""


def _holder(text: str) -> str:
    """The holder a lock file's ``text`` names, in words."""
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):  # written this very moment, or not by us
        return "another process"


class RunLock:
    """An exclusive lock on a run folder (created when missing), for a ``with`` block.

    Args:
        run_dir: the run folder.
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock and write this process's pid, host and start time into it.

        Raises:
            RunBusy: another process holds it (the message names that process).
        """
        if fcntl is None or self._fd is not None:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with os.fdopen(fd) as f:
                holder = _holder(f.read())
            raise RunBusy(
                f"{self.run_dir}: the run folder is in use by another placegym train "
                f"({holder}); wait for it to end, or train into another folder with "
                "out=<folder>"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode())
        self._fd = fd

    def release(self) -> None:
        """Let the lock go (the file stays)."""
        if self._fd is not None and fcntl is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()
