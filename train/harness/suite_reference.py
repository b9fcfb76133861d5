"""Computing a suite's reference values: certified lower bound and best-known placement.

``placegym suites reference NAME`` runs :func:`compute_references` and writes the suite's
reference file (:mod:`placegym.envs.suites.reference`, package data by default). Per
instance:

- ``lower_bound``: :func:`placegym.envs.analysis.bounds.lower_bound`.
- best known: the fastest of (a) every heuristic teacher (critical_path, heft, nest,
  metis, round_robin, single_device), (b) the ``optimal`` teacher's proven optimum where
  it applies (within its size limits, :data:`placegym.teachers.optimal.MAX_NODES` nodes
  on :data:`placegym.teachers.optimal.MAX_DEVICES` devices, and ``optimal_time_limit``
  seconds), (c) simulated annealing from all of (a) with ``budget`` simulations for
  each of ``seeds`` (seeds other than the benchmark's 0, so the benchmark's own anneal
  column is not compared with itself), (d) the recompute certificate where memory may
  bind (:func:`~placegym.envs.analysis.memory.recompute_certificate`: contiguous stages
  checkpointed, the only kind of placement that fits where no placement without
  recompute can), and (e) the previous best known of a fresh entry, so an entry only
  ever improves.

A best-known placement is feasible (:mod:`placegym.train.harness.feasibility`): a
candidate over a device's memory, one that splits a co-location group and a heuristic
that raises never become the best known, and an instance without any feasible candidate
is an error naming it. :func:`check_reference` re-checks a stored entry against its built
instance: the harness (``placegym bench --suite``, ``placegym anytime``, the report
drivers) refuses a reference whose best-known placement is infeasible, naming the
instance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from placegym.envs import Placement
from placegym.envs.analysis.bounds import lower_bound
from placegym.envs.analysis.memory import (
    memory_infeasibility,
    memory_may_bind,
    recompute_certificate,
)
from placegym.envs.suites import Instance, Suite
from placegym.envs.suites.reference import Reference, load_references, save_references


@dataclass(frozen=True)
class _Candidate:
    makespan: float
    infeasible: str | None
    source: str
    placement: Placement | None
    proven: bool = False


def _score(
    inst: Instance, placement: Placement | None, source: str, proven: bool = False
) -> _Candidate:
    """A candidate; infeasible (never the best known) when over memory, split or absent."""
    from placegym.train.harness.feasibility import simulate_outcome

    if placement is None:
        return _Candidate(math.inf, f"{source} raised", source, None, proven)
    out = simulate_outcome(inst.graph, inst.cluster, placement)
    makespan = math.inf if out.makespan is None else out.makespan
    return _Candidate(makespan, out.infeasible, source, placement, proven)


def _heuristic(inst: Instance, name: str) -> _Candidate:
    from placegym.teachers import get_teacher

    try:
        placement = get_teacher(name).place(inst.graph, inst.cluster)
    except Exception as e:  # a heuristic that fails on this instance is no candidate
        return _Candidate(math.inf, f"{name} raised {type(e).__name__}: {e}", name, None)
    return _score(inst, placement, name)


def check_reference(inst: Instance, ref: Reference) -> None:
    """Raise unless ``ref``'s best-known placement is feasible on ``inst`` (its groups
    whole, within every device's memory).

    Raises:
        ValueError: naming the suite, the instance and why.
    """
    from placegym.train.harness.feasibility import simulate_outcome

    where = f"{inst.suite} reference of instance {inst.id!r}"
    if ref.best_oom:
        raise ValueError(f"{where}: the best-known placement is marked over memory (best_oom)")
    out = simulate_outcome(inst.graph, inst.cluster, ref.best_placement)
    if not out.feasible:
        raise ValueError(f"{where}: the best-known placement is infeasible: {out.infeasible}")


def _searches(
    inst: Instance, starts: list[Placement], budget: int, seeds: Sequence[int], time_limit: float
) -> list[_Candidate]:
    from placegym.teachers.anneal import anneal
    from placegym.teachers.optimal import MAX_DEVICES, MAX_NODES, solve

    out = []
    g, c = inst.graph, inst.cluster
    if g.num_nodes <= MAX_NODES and c.num_devices <= MAX_DEVICES:
        try:
            opt = solve(g, c, time_limit=time_limit)
        except Exception as e:  # no candidate, like a heuristic that raises
            out.append(_Candidate(math.inf, f"optimal raised {e}", "optimal", None))
        else:
            limit = f"optimal (time limit {time_limit:g} s)"
            label = "optimal (proven)" if opt.proven else limit
            out.append(_score(inst, opt.placement, label, proven=opt.proven))
    for seed in seeds:
        source = f"anneal(budget={budget}, seed={seed})"
        try:
            res = anneal(g, c, starts, budget=budget, seed=seed)
        except Exception as e:
            out.append(_Candidate(math.inf, f"{source} raised {e}", source, None))
        else:
            out.append(_score(inst, res.placement, source))
    return out


def best_known(
    inst: Instance,
    *,
    budget: int,
    seeds: Sequence[int] = (1, 2),
    previous: Reference | None = None,
    optimal_time_limit: float = 60.0,
) -> Reference:
    """The reference values of one instance (see the module docstring).

    Raises:
        ValueError: no candidate is feasible (naming the instance).
    """
    from placegym.teachers import SINGLE_PASS

    cands = [_heuristic(inst, t) for t in SINGLE_PASS]
    # every heuristic's placement seeds the search, those over memory too (annealing
    # prices them above any feasible one): where live tensors bind, the fastest starts
    # are often slightly over memory, and the search moves them into it
    starts = [c.placement for c in cands if c.placement is not None]
    cands += _searches(inst, starts, budget, seeds, optimal_time_limit)
    if memory_may_bind(inst.graph, inst.cluster):
        cert = recompute_certificate(inst.graph, inst.cluster)
        if cert is not None:
            cands.append(_score(inst, cert, "recompute_certificate"))
    if previous is not None and previous.digest == inst.digest:
        cands.append(
            _score(inst, previous.best_placement, previous.best_source, previous.proven_optimal)
        )
    feasible = [c for c in cands if c.infeasible is None and c.placement is not None]
    if not feasible:
        why = "; ".join(f"{c.source}: {c.infeasible}" for c in cands)
        raise ValueError(
            f"{inst.suite} instance {inst.id!r}: no feasible placement found for the best "
            f"known ({why})"
        )
    best = min(feasible, key=lambda c: c.makespan)
    assert best.placement is not None
    lb = lower_bound(inst.graph, inst.cluster)
    return Reference(
        split=inst.split,
        digest=inst.digest,
        nodes=inst.graph.num_nodes,
        edges=inst.graph.num_edges,
        lower_bound=lb.value,
        bound_kind=lb.kind,
        best_makespan=best.makespan,
        best_source=best.source,
        best_oom=False,
        proven_optimal=best.proven,
        best_placement=best.placement,
    )


def compute_references(
    suite: Suite,
    *,
    budget: int | None = None,
    seeds: Sequence[int] | None = None,
    split: str | None = None,
    folder=None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Reference]:
    """(Re)compute the reference values of ``suite`` (one split, or all) and save them.

    Entries of other splits are kept; the file is rewritten after every instance, so an
    interrupted run keeps what it finished. An instance that no placement fits
    (:func:`~placegym.envs.analysis.memory.memory_infeasibility` names why) has no entry.

    Args:
        suite: the suite.
        budget: simulations per annealing run (default ``suite.reference_budget``).
        seeds: annealing seeds (default ``suite.reference_seeds``).
        split: only this split (default every split).
        folder: where the reference file lives (default the package data folder).
        progress: called with a one-line summary after each instance.

    Returns:
        The suite's references after the run, in catalog order.
    """
    refs = load_references(suite.name, folder)
    budget = suite.reference_budget if budget is None else budget
    seeds = suite.reference_seeds if seeds is None else seeds
    for inst in suite.instances(split):
        why = memory_infeasibility(inst.graph, inst.cluster)
        if why is not None:  # certified: no placement fits, so there is no best known
            refs.pop(inst.id, None)
            save_references(suite.name, refs, folder)
            if progress is not None:
                progress(f"{inst.id}: no placement fits ({why})")
            continue
        ref = best_known(inst, budget=budget, seeds=seeds, previous=refs.get(inst.id))
        refs[inst.id] = ref
        order = [spec.id for _, spec in suite.specs() if spec.id in refs]
        refs = {k: refs[k] for k in order}
        save_references(suite.name, refs, folder)
        if progress is not None:
            progress(
                f"{inst.id}: bound {ref.lower_bound:.6g}, best {ref.best_makespan:.6g} "
                f"({ref.best_source}), gap {ref.best_makespan / ref.lower_bound - 1:+.1%}"
            )
    return refs
