"""A two-instance suite for harness tests, registered for the test's duration by ``tiny``."""

import pytest

from placegym.envs.suites import InstanceSpec, Suite, catalog, workload

TINY = Suite(
    "tiny-v0",
    "two small instances",
    {
        "train": (InstanceSpec("dag@p100x4", workload("random_dag", nodes=24, seed=1), "p100x4"),),
        "test": (
            InstanceSpec(
                "dag-ccr4@doppler-unit-4",
                workload("random_dag", nodes=30, seed=2, ccr=4.0),
                "doppler-unit-4",
            ),
        ),
    },
)


@pytest.fixture
def tiny(monkeypatch):
    """:data:`TINY`, findable by ``get_suite("tiny-v0")`` (replay rebuilds through it)."""
    monkeypatch.setitem(catalog.SUITES, TINY.name, TINY)
    return TINY
