"""``placegym bench --ray [ADDRESS]``: the benchmark's cells as Ray tasks.

Each (workload, cluster, seed, placer) cell of :func:`~placegym.train.harness.bench.
run_benchmark` becomes one task; every distinct graph and cluster is put in Ray's object
store once. A cell's result depends only on its inputs (placers draw from their seed), so
the records are those of the serial run, field for field, but ``seconds``.

Without an address, ``ray.init()`` starts a local Ray (all of this machine's CPUs); with
one (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``) it joins that cluster, whose nodes
need placegym installed (the same version). Ray is optional: ``pip install
'placegym[ray]'``. At start-up Ray looks up this machine's outward address; on a machine
that must not contact the network, run it in a network namespace with only loopback
(``unshare -n sh -c 'ip link set lo up; placegym bench --ray ...'``, as the tests do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from placegym.train.harness.bench import Cell, CellMap

__all__ = ["ray_map"]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError("--ray: Ray is not installed (pip install 'placegym[ray]')") from None
    return ray


def ray_map(address: str | None = None) -> CellMap:
    """A cell map running every cell as a Ray task on the cluster at ``address`` (None:
    a local one, started here and shut down at the end; an already initialised Ray is
    used as it is)."""
    ray = _import_ray()

    def run(fn: Callable[[Cell], Any], cells: Sequence[Cell]) -> Iterable[tuple[int, Any]]:
        started = not ray.is_initialized()
        if started:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        try:
            yield from _run_tasks(ray, fn, cells)
        finally:
            if started:
                ray.shutdown()

    return run


def _call(fn: Callable[[Cell], Any], label: str, graph, cluster, seed: int, name: str) -> Any:
    return fn((label, graph, cluster, seed, name))


def _run_tasks(ray: Any, fn: Callable[[Cell], Any], cells: Sequence[Cell]) -> Iterator:
    """Submit every cell, yield ``(index, result)`` as tasks finish."""
    task = ray.remote(_call)
    fn_ref = ray.put(fn)
    refs: dict[int, Any] = {}  # one object per distinct graph or cluster
    for _, graph, cluster, _, _ in cells:
        for obj in (graph, cluster):
            if id(obj) not in refs:
                refs[id(obj)] = ray.put(obj)
    pending = {
        task.remote(fn_ref, label, refs[id(g)], refs[id(c)], seed, name): i
        for i, (label, g, c, seed, name) in enumerate(cells)
    }
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            yield pending.pop(ref), ray.get(ref)
