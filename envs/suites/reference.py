"""Per-instance reference values of a suite: lower bound and best-known placement, cached.

They are shipped with placegym as versioned package data, one file per suite:
``placegym/envs/suites/data/<suite>.json`` (``placegym.suite-reference/v1``)::

    {"format": "placegym.suite-reference/v1", "suite": "comm-heavy-v0",
     "instances": {
      "chainmm-6x2-ccr1@p100x4": {"split": "train", "digest": "…", "nodes": 84,
        "edges": 120, "lower_bound": 0.0123, "bound_kind": "path",
        "best_makespan": 0.0161, "best_source": "anneal(budget=20000, seed=1)",
        "best_oom": false, "proven_optimal": false,
        "best_placement": {"device": […], "order": […]}},
      …}}

A best-known placement with a recompute set (:mod:`placegym.envs.core.recompute`) keeps
it under ``best_placement.recompute`` (absent when empty).

``lower_bound`` is :func:`placegym.envs.analysis.bounds.lower_bound` (cheap; stored so the
exported files carry it). The best known is the fastest placement found by the
expensive search of :mod:`placegym.train.harness.suite_reference` (``placegym suites reference
NAME``, which only ever replaces an entry by a faster one), with its placement so anyone
can re-simulate it; a test does, for every instance of the small suites. ``digest`` is
:attr:`placegym.envs.suites.Instance.digest`: an entry whose digest differs from the
built instance's is *stale* and is not used. A best known is feasible: an entry whose
``best_oom`` is true is an error naming the instance (the harness also re-simulates the
placement against the built instance, split groups included:
:func:`placegym.train.harness.suite_reference.check_reference`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placegym.envs.core import validate as V
from placegym.envs.core.placement import Placement

__all__ = ["REFERENCE_FORMAT", "Reference", "load_references", "reference_path", "save_references"]

REFERENCE_FORMAT = "placegym.suite-reference/v1"
DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Reference:
    """Reference values of one instance (see the module docstring for the fields)."""

    split: str
    digest: str
    nodes: int
    edges: int
    lower_bound: float
    bound_kind: str
    best_makespan: float
    best_source: str
    best_oom: bool
    proven_optimal: bool
    best_placement: Placement

    def to_dict(self) -> dict[str, Any]:
        """The entry as a JSON-ready dict."""
        placement: dict[str, Any] = {
            "device": self.best_placement.device.tolist(),
            "order": self.best_placement.order.tolist(),
        }
        if self.best_placement.recompute.size:
            placement["recompute"] = self.best_placement.recompute.tolist()
        return {
            "split": self.split,
            "digest": self.digest,
            "nodes": self.nodes,
            "edges": self.edges,
            "lower_bound": self.lower_bound,
            "bound_kind": self.bound_kind,
            "best_makespan": self.best_makespan,
            "best_source": self.best_source,
            "best_oom": self.best_oom,
            "proven_optimal": self.proven_optimal,
            "best_placement": placement,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> Reference:
        """Parse an entry; errors name the field under ``where``."""
        d = V.as_mapping(data, where)
        p = V.as_mapping(V.get(d, "best_placement", where), f"{where}.best_placement")
        if bool(V.get(d, "best_oom", where)):
            raise ValueError(
                f"{where}.best_oom: the best-known placement is over a device's memory; a "
                "best known must be feasible"
            )
        recompute: Any = V.as_list(
            V.get(p, "recompute", f"{where}.best_placement", default=[]),
            f"{where}.best_placement.recompute",
        )
        return cls(
            split=str(V.get(d, "split", where)),
            digest=str(V.get(d, "digest", where)),
            nodes=V.integer(V.get(d, "nodes", where), f"{where}.nodes", lo=0),
            edges=V.integer(V.get(d, "edges", where), f"{where}.edges", lo=0),
            lower_bound=V.number(V.get(d, "lower_bound", where), f"{where}.lower_bound"),
            bound_kind=str(V.get(d, "bound_kind", where)),
            best_makespan=V.number(V.get(d, "best_makespan", where), f"{where}.best_makespan"),
            best_source=str(V.get(d, "best_source", where)),
            best_oom=bool(V.get(d, "best_oom", where)),
            proven_optimal=bool(V.get(d, "proven_optimal", where)),
            best_placement=Placement(
                device=V.get(p, "device", f"{where}.best_placement"),
                order=V.get(p, "order", f"{where}.best_placement"),
                recompute=recompute,
            ),
        )


def reference_path(suite: str, folder: Path | None = None) -> Path:
    """The reference file of ``suite`` (in ``folder``, default the package data folder)."""
    return (folder or DATA) / f"{suite}.json"


def load_references(suite: str, folder: Path | None = None) -> dict[str, Reference]:
    """``{instance id: Reference}`` of ``suite``; empty when it has no reference file.

    Raises:
        ValueError: a malformed file (naming the file and field).
    """
    path = reference_path(suite, folder)
    if not path.exists():
        return {}
    data = V.read_json(path, "suite reference")
    try:
        V.check_format(data, REFERENCE_FORMAT)
        items = V.as_mapping(V.get(data, "instances", ""), "instances")
        return {k: Reference.from_dict(v, f"instances[{k!r}]") for k, v in items.items()}
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def save_references(suite: str, refs: dict[str, Reference], folder: Path | None = None) -> Path:
    """Write ``refs`` (one line per instance, so diffs stay readable); returns the path."""
    path = reference_path(suite, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"  {json.dumps(k)}: {json.dumps(r.to_dict(), separators=(',', ':'))}"
        for k, r in refs.items()
    ]
    head = f'{{"format": "{REFERENCE_FORMAT}", "suite": {json.dumps(suite)}, "instances": {{'
    path.write_text(head + "\n" + ",\n".join(lines) + "\n}}\n")
    return path
