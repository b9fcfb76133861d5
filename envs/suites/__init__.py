"""Benchmark suites: named, versioned, deterministic instance sets with train/test splits.

    from placegym.envs.suites import get_suite, list_suites
    suite = get_suite("comm-heavy-v0")
    for inst in suite.instances("test"):
        inst.id, inst.graph, inst.cluster, inst.digest

A suite is data (:mod:`placegym.envs.suites.catalog`): per split, a tuple of
:class:`InstanceSpec` (an id, how to build the graph, a cluster preset). Building is
deterministic: generators get their seeds in the spec, traced models are traced on the
meta device, and a spec's ``ccr`` rescales the graph's tensors to that CCR *on the
instance's own cluster* (:func:`placegym.envs.analysis.ccr.scale_to_ccr`).

Versioning: a suite's name ends in ``-v<k>``. Every instance has a :attr:`Instance.digest`
(a hash of its graph and cluster documents, numbers rounded to 12 significant digits so
that the last-ulp differences of other platforms do not change it), and the suite's
reference file (:mod:`placegym.envs.suites.reference`) records the digest next to the
lower bound and best-known placement; a test rebuilds every instance and compares. A
change to a generator, a preset or the catalog that alters an instance therefore fails
the tests until the suite gets a new version (or, for an unreleased suite, its reference
file is regenerated with ``placegym suites reference NAME``).

Training at scale: :class:`InstanceSampler` (:mod:`placegym.envs.suites.sampler`) draws
endless seeded instances across every generator family, never one of a test split.
"""

from __future__ import annotations

from placegym.envs.suites.catalog import SUITES
from placegym.envs.suites.sampler import InstanceSampler, SampledInstance
from placegym.envs.suites.spec import (
    SPLITS,
    GraphRecipe,
    Instance,
    InstanceSpec,
    Suite,
    digest,
    model,
    workload,
)

__all__ = [
    "SPLITS",
    "SUITES",
    "GraphRecipe",
    "Instance",
    "InstanceSampler",
    "InstanceSpec",
    "SampledInstance",
    "Suite",
    "digest",
    "get_suite",
    "list_suites",
    "model",
    "workload",
]


def list_suites() -> list[Suite]:
    """Every registered suite, in catalog order."""
    return list(SUITES.values())


def get_suite(name: str) -> Suite:
    """The suite ``name``.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if name not in SUITES:
        raise ValueError(f"suite: unknown suite {name!r} (suites: {', '.join(SUITES)})")
    return SUITES[name]
