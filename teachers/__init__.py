"""placegym.teachers: heuristic and exact placers behind one registry.

    from placegym.teachers import get_teacher, list_teachers
    placement = get_teacher("critical_path").place(graph, cluster)

Every teacher implements :class:`~placegym.teachers.base.Teacher`: ``place(graph,
cluster)`` and, for imitation, the tie sets of best actions in any placement state.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from placegym.teachers.base import PlanTeacher, StepTeacher, Teacher, ties

# name -> "module:Class"; modules are imported on first use.
_REGISTRY: dict[str, str] = {
    "critical_path": "placegym.teachers.critical_path:CriticalPathTeacher",
    "heft": "placegym.teachers.heft:HeftTeacher",
    "nest": "placegym.teachers.nest:NestTeacher",
    "anneal": "placegym.teachers.anneal:AnnealTeacher",
    "random": "placegym.teachers.simple:RandomTeacher",
    "round_robin": "placegym.teachers.simple:RoundRobinTeacher",
    "single_device": "placegym.teachers.simple:SingleDeviceTeacher",
    "metis": "placegym.teachers.metis:MetisTeacher",
    "optimal": "placegym.teachers.optimal:OptimalTeacher",
}

__all__ = [
    "PlanTeacher",
    "StepTeacher",
    "Teacher",
    "get_teacher",
    "list_teachers",
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
