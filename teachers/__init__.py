"""placegym.teachers: heuristic and exact placers behind one registry.

    from placegym.teachers import get_teacher, list_teachers
    placement = get_teacher("critical_path").place(graph, cluster)

Every teacher implements :class:`~placegym.teachers.base.Teacher`: ``place(graph,
cluster)`` and, for imitation, the tie sets of best actions in any placement state.
:func:`make_teacher` builds one for training and benchmarks (seeded, optionally
label-invariant). Also here: :mod:`~placegym.teachers.canonical_plan` (imitating a plan up
to device symmetries) and :mod:`~placegym.teachers.wrappers` (one-phase views of the
environment in which a teacher plays the other phase).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from importlib import import_module
from typing import Any

from placegym.teachers._memory import make_feasible
from placegym.teachers.base import PlanTeacher, StepTeacher, Teacher, ties

# name -> "module:Class"; modules are imported on first use.
_REGISTRY: dict[str, str] = {
    "critical_path": "placegym.teachers.critical_path:CriticalPathTeacher",
    "heft": "placegym.teachers.heft:HeftTeacher",
    "heft_rule": "placegym.teachers.heft:HeftRuleTeacher",
    "heft_lookahead": "placegym.teachers.heft:HeftLookaheadTeacher",
    "nest": "placegym.teachers.nest:NestTeacher",
    "anneal": "placegym.teachers.anneal:AnnealTeacher",
    "device_anneal": "placegym.teachers.device_anneal:DeviceAnnealTeacher",
    "random": "placegym.teachers.simple:RandomTeacher",
    "round_robin": "placegym.teachers.simple:RoundRobinTeacher",
    "single_device": "placegym.teachers.simple:SingleDeviceTeacher",
    "metis": "placegym.teachers.metis:MetisTeacher",
    "optimal": "placegym.teachers.optimal:OptimalTeacher",
    "best_list": "placegym.teachers.best_list:BestListTeacher",
    "lookahead": "placegym.teachers.lookahead:LookaheadTeacher",
    "fortified_lookahead": "placegym.teachers.lookahead:FortifiedLookaheadTeacher",
}

#: The single-pass placers: one pass of a rule, no search (the starts of
#: ``device_anneal`` and the baselines the reports compare a greedy pass with).
SINGLE_PASS = ("critical_path", "heft", "nest", "metis", "round_robin", "single_device")

__all__ = [
    "SINGLE_PASS",
    "PlanTeacher",
    "StepTeacher",
    "Teacher",
    "get_teacher",
    "list_teachers",
    "make_feasible",
    "make_teacher",
    "teacher_class",
    "ties",
]


def list_teachers() -> list[str]:
    """Names accepted by :func:`get_teacher`."""
    return list(_REGISTRY)


def teacher_class(name: str) -> type[Teacher]:
    """The class registered as ``name`` (its module is imported on first use)."""
    if name not in _REGISTRY:
        raise ValueError(f"teacher: unknown name {name!r} (teachers: {', '.join(_REGISTRY)})")
    module, cls = _REGISTRY[name].split(":")
    return getattr(import_module(module), cls)


def get_teacher(name: str, **kwargs: Any) -> Teacher:
    """Instantiate the teacher ``name`` with keyword arguments ``kwargs``."""
    return teacher_class(name)(**kwargs)


def make_teacher(
    name: str,
    seed: int = 0,
    *,
    canonical: bool = False,
    select: str | None = None,
    kwargs: Mapping[str, Any] | None = None,
) -> Teacher:
    """The teacher ``name`` built with ``kwargs``, given ``seed`` when its class takes one.

    Args:
        name: a registered teacher (:func:`list_teachers`).
        seed: passed as ``seed=`` to teachers that take one (``kwargs`` win).
        canonical: wrap a plan teacher (``anneal``, ``nest``, ...) in
            :class:`~placegym.teachers.canonical_plan.CanonicalPlanTeacher`, so that its
            device labels are imitated up to the cluster's symmetries; per-state rule
            teachers are returned unchanged.
        select: with ``canonical``, answer SEL with this teacher's tie sets (built with
            the same ``seed``) instead of the plan's order.
        kwargs: keyword arguments of the teacher's class.

    Raises:
        ValueError: an unknown name.
    """
    cls = teacher_class(name)
    kw = dict(kwargs or {})
    if "seed" in inspect.signature(cls).parameters:
        kw.setdefault("seed", seed)
    teacher = cls(**kw)
    if canonical and isinstance(teacher, PlanTeacher):
        from placegym.teachers.canonical_plan import CanonicalPlanTeacher

        return CanonicalPlanTeacher(teacher, make_teacher(select, seed) if select else None)
    return teacher
