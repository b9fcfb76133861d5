"""Result sidecars: where, on what machine and under what load a stored result was made.

A stored result file ``F`` under ``docs/results`` has a sidecar ``F.meta.json``
(:func:`write_sidecar`): the command that wrote it, the date, :func:`machine` (platform,
CPU, cores, load average at the end of the measurement, Python), and the wall and CPU
seconds when known; a field not recorded is ``null``. :func:`provenance` is the table
the generated pages show below each block (:mod:`placegym.train.experiments.pages`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "SIDECAR", "machine", "provenance", "read_sidecar", "write_sidecar"]

#: The stored result files, relative to the checkout.
RESULTS = Path("docs") / "results"
SIDECAR = ".meta.json"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine() -> dict[str, Any]:
    """The machine and its load now: ``platform``, ``system`` (OS and architecture),
    ``cpu`` (model name), ``nproc`` (logical CPUs), ``load_average`` (1, 5, 15 min) and
    ``python``."""
    return {
        "platform": platform.platform(),
        "system": f"{platform.system()} {platform.machine()}",
        "cpu": _cpu_model(),
        "nproc": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def write_sidecar(
    path: Path,
    command: str,
    *,
    load: Sequence[float] | None = None,
    date: str | None = None,
    **extra: Any,
) -> Path:
    """Write ``PATH.meta.json`` for the result file ``path``: ``command``, ``date``
    (today, UTC, unless given), :func:`machine` (its load average replaced by ``load``
    when that was read at the end of the measurement) and ``extra`` fields (e.g.
    ``wall_seconds``); returns the sidecar's path.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such result file")
    info = machine()
    if load is not None:
        info["load_average"] = [float(x) for x in load]
    meta = {
        "file": path.name,
        "command": command,
        "date": date or dt.datetime.now(dt.UTC).date().isoformat(),
        "machine": info,
        **extra,
    }
    out = path.with_name(path.name + SIDECAR)
    out.write_text(json.dumps(meta, indent=1) + "\n")
    return out


def read_sidecar(path: Path) -> dict[str, Any]:
    """The sidecar of result file ``path``.

    Raises:
        FileNotFoundError: it has none (naming the file).
    """
    side = path.with_name(path.name + SIDECAR)
    if not side.is_file():
        raise FileNotFoundError(f"{path}: no sidecar {side.name} (write one with --record)")
    return json.loads(side.read_text())


def _na(x: Any) -> str:
    return "not recorded" if x is None else str(x)


def _took(meta: dict[str, Any]) -> str:
    """``wall_seconds`` and ``cpu_seconds`` of a sidecar, where recorded."""
    kinds = (("wall_seconds", "wall"), ("cpu_seconds", "CPU"))
    return ", ".join(f"{meta[k]:,.1f} s {w}" for k, w in kinds if meta.get(k) is not None)


def provenance(results: Path, files: Sequence[str]) -> str:
    """A table of where ``files`` come from: command, date, machine and load (sidecars)."""
    lines = [
        "| result file | written by | date | machine | load average (1 / 5 / 15 min) | took |",
        "|---|---|---|---|---|---|",
    ]
    for name in files:
        meta = read_sidecar(results / name)
        m = meta.get("machine") or {}
        parts = [m.get("system"), m.get("cpu"), m.get("nproc") and f"{m['nproc']} CPUs"]
        known = [str(p) for p in parts if p]
        where = ", ".join(known) if known else "not recorded"
        load = m.get("load_average")
        loads = " / ".join(f"{x:.2f}" for x in load) if load else "not recorded"
        lines.append(
            f"| `{(RESULTS / name).as_posix()}` | `{meta['command']}` | {_na(meta.get('date'))} "
            f"| {where} | {loads} | {_took(meta)} |"
        )
    notes = [(n, read_sidecar(results / n).get("note")) for n in files]
    notes_md = [f"- `{n}`: {note}" for n, note in notes if note]
    return "\n".join(lines + (["", *notes_md] if notes_md else []))
