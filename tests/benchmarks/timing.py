"""Timing helpers of ``make bench``: the machine is shared, so every figure is the best of
several interleaved rounds, and single-threaded code is timed in CPU time of the calling
thread (what other processes do to the wall clock does not count against it)."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable


def cpu_per_call(fn: Callable[[], object], repeat: int, rounds: int = 5) -> float:
    """Best of ``rounds`` mean thread CPU seconds of ``repeat`` calls."""
    best = float("inf")
    for _ in range(rounds):
        t = time.thread_time()
        for _ in range(repeat):
            fn()
        best = min(best, (time.thread_time() - t) / repeat)
    return best


def wall_per_call(fn: Callable[[], object], repeat: int, rounds: int = 5) -> float:
    """Best of ``rounds`` mean wall-clock seconds of ``repeat`` calls."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t) / repeat)
    return best


def load_note() -> str:
    """The machine's load while a benchmark runs, for the printed tables."""
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.1f} (1 min) / {five:.1f} (5 min)"


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
