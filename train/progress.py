"""Progress of long runs: a bar on a terminal, a line every few seconds in a log.

:func:`progress_bar` is what ``placegym bench``, ``placegym anytime`` and ``placegym
train`` show while they work. Its ``mode``:

- ``"auto"`` (the commands' default): a tqdm bar when stderr is a terminal; else
  (stderr redirected to a log file, a batch job) a :class:`LineProgress`, which writes
  one plain line to stderr at most every :data:`EVERY` seconds, e.g.
  ``bench: 12/96 runs (12%), 40 s elapsed, 60 s left; ffnn/p100x4/heft``, so a log of a
  long run shows it is alive and how far it got, without carriage-return updates;
- ``True``: the bar wherever stderr goes;
- ``False``: nothing.

Both objects take the calls the code already makes on a tqdm bar: ``update(n)``,
``set_postfix_str(text)``, ``close()``, ``with``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["EVERY", "LineProgress", "progress_bar", "wants_bar"]

#: Seconds between two lines of :class:`LineProgress` at least.
EVERY = 10.0


def wants_bar(mode: bool | str, stream: Any = None) -> bool:
    """Whether ``mode`` asks for a bar: True, or ``"auto"`` with ``stream`` (default
    stderr) a terminal."""
    if isinstance(mode, bool):
        return mode
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineProgress:
    """A progress report for logs: one line at most every ``every`` seconds (module
    docstring).

    Args:
        total: the count at the end (None: unknown).
        desc: what is counted, at the head of each line (``bench``, ``phase1``).
        unit: the counted thing (``runs``, ``upd``).
        initial: the count already done (a resumed run).
        every: seconds between two lines at least (0: a line at every update).
        stream: where the lines go (default stderr, looked up at each line).
        clock: the time source (``time.monotonic``).
    """

    def __init__(
        self,
        total: int | None,
        *,
        desc: str = "",
        unit: str = "it",
        initial: int = 0,
        every: float = EVERY,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n, self.postfix = initial, ""
        self._initial, self._stream, self._clock = initial, stream, clock
        self._start = self._last = clock()

    def update(self, n: int = 1) -> None:
        """``n`` more done; a line when the last one is ``every`` seconds old."""
        self.n += n
        now = self._clock()
        if now - self._last >= self.every:
            self._last = now
            print(self.line(now), file=self._stream or sys.stderr, flush=True)

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """What the next line ends with (the item in hand, a loss)."""
        self.postfix = s

    def line(self, now: float | None = None) -> str:
        """The current state: count of total, percent, elapsed and, from the rate so
        far, the time left."""
        elapsed = (self._clock() if now is None else now) - self._start
        head = f"{self.desc}: " if self.desc else ""
        text = f"{head}{self.n}"
        if self.total:
            text += f"/{self.total} {self.unit} ({self.n / self.total:.0%})"
        else:
            text += f" {self.unit}"
        text += f", {elapsed:.0f} s elapsed"
        done = self.n - self._initial
        if self.total and done > 0 and self.n < self.total:
            text += f", {elapsed / done * (self.total - self.n):.0f} s left"
        return text + (f"; {self.postfix}" if self.postfix else "")

    def close(self) -> None:
        """Nothing to clear (no line is rewritten)."""

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    total: int | None,
    *,
    desc: str = "",
    unit: str = "it",
    mode: bool | str = "auto",
    initial: int = 0,
    every: float | None = None,
) -> Any:
    """A tqdm bar (left nowhere when done), a :class:`LineProgress` (a line at most every
    ``every`` seconds, default :data:`EVERY`) or a silent bar, as ``mode`` asks (module
    docstring).

    Raises:
        ValueError: ``mode`` is none of True, False, ``"auto"``.
    """
    from tqdm.auto import tqdm

    if not isinstance(mode, bool) and mode != "auto":
        raise ValueError(f"progress: expected true, false or 'auto', got {mode!r}")
    if mode is False:
        return tqdm(total=total, disable=True)
    if wants_bar(mode):
        return tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=False)
    every = EVERY if every is None else every
    return LineProgress(total, desc=desc, unit=unit, initial=initial, every=every)
