"""NEST: network- and memory-aware placement by a level-wise dynamic program (MLSys 2026),
adapted to DAGs executed once on a work-conserving runtime.

    from placegym.teachers.nest import NestTeacher, nest_cost
    teacher = NestTeacher()
    placement = teacher.place(graph, cluster)
    teacher.last_result.runs, teacher.last_result.runtime_s
    phi = -nest_cost(graph, cluster, partial_device) / t_ref   # reward-shaping potential

:class:`NestTeacher`'s docstring is the specification; the cost tables live in
:mod:`placegym.teachers._nest_cost`; :func:`nest_cost` prices any (partial) assignment.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from placegym.envs.analysis.memory import overflow_penalty
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.teachers._memory import make_feasible
from placegym.teachers._nest_blocks import Hierarchy
from placegym.teachers._nest_cost import (
    RECOMPUTE,
    RELIEF_NAMES,
    ZERO,
    NestTables,
    StageRun,
    durations_fn,
    stage_index,
)
from placegym.teachers._nest_recompute import stage_priority
from placegym.teachers.base import PlanTeacher

__all__ = [
    "NestResult",
    "NestTeacher",
    "StageRun",
    "evaluate_plan",
    "nest_cost",
    "nest_priority_order",
    "plan_devices",
    "run_overflow",
    "solve_dp",
]

Relief = Literal["fallback", "always", "never"]
ALL_RELIEFS = (0, 1, 2, 3)


@dataclass(frozen=True, eq=False)
class NestResult:
    """The outcome of one DP solve.

    Attributes:
        runs: the plan (see :class:`~placegym.teachers._nest_cost.StageRun`).
        objective: the DP's optimum (cost, plus the overflow penalty in mode "overflow").
        cost: the model's time of the plan (s), without penalty.
        overflow: bytes beyond capacity, summed over the devices of every run.
        mode: "fits" (no relief needed), "fits-with-relief" or "overflow" (nothing fits;
            least penalised overflow).
        device: ``(n,)`` device per node; ``order`` the priority order.
        runtime_s: wall time of the solve (tables + DP + mapping).
        repaired: whether :meth:`NestTeacher.plan` replaced ``device`` by a repaired
            device map that fits in memory (the DP's plan did not; class docstring).
        recompute: the nodes the plan recomputes (its ``Placement.recompute``; empty
            unless a run has the recomputation relief).
    """

    runs: tuple[StageRun, ...]
    objective: float
    cost: float
    overflow: float
    mode: str
    device: np.ndarray
    order: np.ndarray
    runtime_s: float
    repaired: bool = False
    recompute: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    def describe(self) -> str:
        """One line per run: stages, block, relief, link level."""
        return "\n".join(
            f"stages {r.start}..{r.stop - 1}: {r.size} devices at address {r.address}, "
            f"relief {RELIEF_NAMES[r.relief]}, link level {r.link_level}"
            for r in self.runs
        )


class NestTeacher(PlanTeacher):
    """NEST's level-wise DP over the chain of a DAG's stages.

    **Stages.** Nodes are grouped into stages ``0..m-1`` by their ``layer`` (else their
    topological depth; :func:`~placegym.teachers._nest_cost.stage_index`); edges never go
    to an earlier stage, so the stages form a chain. Beyond ``max_stages`` stages,
    consecutive ones are merged evenly (the DP is quadratic in m).

    **Blocks.** Devices are sorted by ``path`` into addresses (:class:`Hierarchy`); a
    block is an aligned range of one hierarchy level: ``2^j`` devices inside a node, a
    node, ``2^j`` nodes inside a rack, a rack, ``2^j`` racks, the cluster. A stage spread
    over a block of ``k`` devices puts each node on a fixed local device: the stage's
    nodes in barycentric order (pieces connected by stage-internal edges together, next
    to the pieces that read the same inputs), then the best, by the stage time below,
    of three splits: whole pieces in ``k`` compute-balanced contiguous parts, whole
    pieces by LPT (both when there are at least ``k`` pieces), single nodes in
    contiguous parts. The spread of a stage depends only on the stage and ``k``.

    **Search space.** A plan splits the chain into *runs* of consecutive stages; run r
    gets a block (size ``k_r``, address ``a_r``) and a relief option ``o_r`` (none, ZeRO,
    recomputation, both). Blocks of consecutive runs are disjoint and in increasing
    address order (``a_{r+1} >= a_r + k_r``), so no device hosts two runs; inside a run
    every stage uses the run's block ("same group" link). The network level where two
    consecutive blocks meet (same node, same rack, across racks) is the link level.

    **Cost** (the model's time of one execution; a DAG runs once here, so stages follow
    each other and their times add)::

        J = Σ_r [ Σ_{s ∈ r} stage(s, k_r, o_r) + Σ_{s ∈ r, s > first} same(s, k_r) ]
          + Σ_{r ≥ 1} move(first stage of r, k_{r-1}, k_r, level(a_{r-1}, a_r))

    ``stage`` = the larger of the busiest device's compute (+ recompute_factor × its
    recomputed nodes' durations under recomputation, + its parameter all-gather under
    ZeRO) and the longest path
    through the stage's internal edges (durations plus the transfer of each edge that
    crosses devices), + the busiest channel of those edges; ``same`` / ``move`` = the
    busiest channel carrying the stage's inputs from the producer stage's block (the
    same block / a disjoint block meeting at that level). Channels follow the
    simulator: one FIFO per device pair, one transfer per (producer, destination
    device), ``latency + bytes / bandwidth``.
    Inputs from stages earlier than the previous one are charged as if their producers
    sat on the previous stage's block (exact when those stages are in the same run).
    A sum rather than NEST's pipeline bottleneck (max over stages) because one
    execution has no steady state to pipeline: over 6 workloads × 5 presets (p100x4,
    v100x8, h100-2x8, the 64-device ones), the Spearman rank correlation between the
    model and the simulated makespan of 60 random plans was 0.84 on average (median
    0.94, worst 0.28 on llama_layer / p100x4) for the sum and 0.79 (median 0.84) for the
    bottleneck; a stage time of max(compute, communication) did no better on average.

    **Memory rule.** Run r fits iff on every device of its block the resident parameters
    of all its stages (under ZeRO: the run's total / ``k_r``) plus the activations of
    every one of its stages (each stage's outputs plus every distinct input it reads
    there; plus the largest parameter block under ZeRO) stay within memory, the least
    memory of any block of that size (:attr:`~placegym.teachers._nest_cost.NestTables.
    memory`). Runs share no device, so each device's resident parameters are exactly
    those of its run's nodes, and every tensor the simulator ever keeps on a device is
    an output made there or a copy received there: without relief the rule is a
    conservative bound of the simulator's peak (resident bytes plus live tensors, DESIGN
    §3), and a plan that fits it without relief is feasible. For the run of every stage
    (the only run a training step's co-location groups leave), where that bound does not
    fit, and always under recomputation, the rule is the simulator's: the plan's
    simulated peak within every device's memory, on every block of that size
    (:meth:`~placegym.teachers._nest_recompute.WholeRun.overflow`).

    **Relief.** Recomputation is executed by the simulator: a run with it recomputes the
    forward nodes of :attr:`~placegym.teachers._nest_cost.NestTables.recompute` (√n
    checkpointing over the stages of a training-step graph,
    :func:`~placegym.teachers._nest_recompute.recompute_nodes`), the plan carries them as
    its ``Placement.recompute`` (:attr:`NestResult.recompute`), and the run's memory is
    the simulated peak of that plan (:mod:`placegym.envs.core.recompute`), so a plan that fits
    with recomputation alone fits when simulated. The relief applies to a run of every
    stage only (inf otherwise) and does nothing without recomputable nodes. ZeRO exists
    only in this model: the simulator keeps each node's parameters on its device, so a
    plan that needs ZeRO does not fit as such. ``relief="fallback"`` (default) first
    solves without relief, then with relief allowed at its cost, and only if still
    nothing fits, with every run allowed at a penalty of ``overflow_weight / slowest
    bandwidth`` per byte over capacity, summed over devices (≈ least total overflow
    first, then time). ``"always"`` lets relief compete from the start; ``"never"`` never
    uses it. Whatever the mode, the plan is then simulated and, when over memory (ZeRO
    counted on, the penalised fallback, or a tighter peak than the bound on a
    heterogeneous cluster), repaired (:func:`~placegym.teachers._memory.make_feasible`:
    whole groups and nodes moved off the devices over memory to those with the most
    headroom, else the resident bytes spread worst-fit decreasing);
    :attr:`NestResult.repaired` says so. Without memory pressure nothing is simulated and
    the plan is the DP's.

    **Co-location groups.** Every group is kept on one device inside the DP: its nodes
    share the local device of its first node in every spread (the stage figures are
    priced with that), and no run boundary falls inside the span of stages its nodes
    occupy (:attr:`~placegym.teachers._nest_cost.NestTables.cuttable`), so they share a
    run, hence a block, hence a device.

    **DP** (backwards over stages; ``V[i][k][a]``: best cost of stages ``i..m-1`` when a
    run starts at stage i on the block of size k at address a; ``N[j][k][a]``: best cost
    of the link into stage j plus stages ``j..`` when the run before ended on that
    block)::

        V[i][k][a] = min_{j > i, o} run(i, j, k, o) + N[j][k][a]          (N[m] = 0)
        N[j][k][a] = min_{k2, l} move(j, k, k2, l) + min{V[j][k2][a2] : block a2 meets a
                                                       at level l, a2 >= a + k}

    The level ``l`` of each run boundary is the DP's discrete network state: ``move``
    charges the producer stage's outputs at that level, and the inner minimum is a
    suffix minimum inside the level-l unit. The DP costs ``O(m² K + m K² L)`` vector
    operations over the D addresses (K block sizes, L levels; plus ``O(m² K)`` for the
    run tables); the tables take ``O(m K² L)`` channel computations. All blocks of one
    size are priced on one representative (exact for homogeneous trees given by the
    device paths: every preset but ``v100x8``, whose level matrix varies inside its
    node), so the address only carries capacity and the link level.

    **Optimal within its search space**: the returned plan minimises J (hard memory rule;
    penalised in the last fallback) over every split into runs, every block size,
    address and relief option per run, i.e. exactly what a brute-force enumeration of
    those choices finds (tested).

    **Output.** Devices from the plan; priority = a topological order by (stage,
    descending b-level, topological rank). ``last_result`` keeps the
    :class:`NestResult` of the latest solve (runs, cost, mode, runtime).

    Args:
        relief: "fallback", "always" or "never" (see above).
        recompute_factor: weight, in a stage's time, of its recomputed nodes' durations
            (1: each runs once more).
        overflow_weight: penalty weight of the last fallback.
        max_stages: the most stages the DP sees.
    """

    name = "nest"

    def __init__(
        self,
        *,
        relief: Relief = "fallback",
        recompute_factor: float = 1.0,
        overflow_weight: float = 1e6,
        max_stages: int = 128,
    ) -> None:
        super().__init__()
        if relief not in ("fallback", "always", "never"):
            raise ValueError(f"relief: expected 'fallback', 'always' or 'never', got {relief!r}")
        if not np.isfinite(recompute_factor) or recompute_factor < 0:
            raise ValueError(f"recompute_factor: must be >= 0, got {recompute_factor!r}")
        if not np.isfinite(overflow_weight) or overflow_weight <= 0:
            raise ValueError(f"overflow_weight: must be > 0, got {overflow_weight!r}")
        if int(max_stages) < 1:
            raise ValueError(f"max_stages: must be >= 1, got {max_stages!r}")
        self.relief = relief
        self.max_stages = int(max_stages)
        self.recompute_factor = float(recompute_factor)
        self.overflow_weight = float(overflow_weight)
        self.last_result: NestResult | None = None

    def __repr__(self) -> str:
        return (
            f"NestTeacher(relief={self.relief!r}, recompute_factor={self.recompute_factor}, "
            f"overflow_weight={self.overflow_weight}, max_stages={self.max_stages})"
        )

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """Solve NEST's DP, order the stages and repair a plan over memory (see the class
        docstring)."""
        result = self.solve(graph, cluster)
        planned = Placement(device=result.device, order=result.order, recompute=result.recompute)
        placement = make_feasible(graph, cluster, planned)
        if placement is not planned:
            result = dataclasses.replace(
                result,
                device=placement.device.copy(),
                order=placement.order.copy(),
                repaired=True,
                recompute=placement.recompute,
            )
        self.last_result = result
        return placement

    def solve(self, graph: Graph, cluster: Cluster) -> NestResult:
        """Run the DP and map its plan to devices (see the class docstring)."""
        t0 = time.perf_counter()
        tables = NestTables.build(graph, cluster, self.recompute_factor, self.max_stages)
        order = nest_priority_order(graph, cluster, tables.stage)
        if tables.m == 0:
            empty = np.zeros(0, dtype=np.int64)
            elapsed = time.perf_counter() - t0
            return NestResult((), 0.0, 0.0, 0.0, "fits", empty, order, elapsed)
        weight = self.overflow_weight / min(lv.bandwidth for lv in cluster.levels)
        options: dict[str, list[tuple[tuple[int, ...], float | None]]] = {
            "fallback": [((0,), None), (ALL_RELIEFS, None), (ALL_RELIEFS, weight)],
            "always": [(ALL_RELIEFS, None), (ALL_RELIEFS, weight)],
            "never": [((0,), None), ((0,), weight)],
        }
        passes = options[self.relief]
        for reliefs, penalty in passes:
            cost, over = tables.run_tables(reliefs)  # recomputation simulated if allowed
            found = solve_dp(tables, cost, over, reliefs, penalty)
            if found is not None:
                break
        assert found is not None  # the penalised pass always has a finite plan
        objective, runs = found
        plan_cost, overflow = evaluate_plan(tables, runs)
        if penalty is not None:
            mode = "overflow"
        else:
            mode = "fits-with-relief" if any(r.relief for r in runs) else "fits"
        device = plan_devices(tables, runs)
        again = any(r.relief & RECOMPUTE for r in runs)
        recompute = tables.recompute if again else np.zeros(0, dtype=np.int64)
        elapsed = time.perf_counter() - t0
        return NestResult(
            tuple(runs),
            objective,
            plan_cost,
            overflow,
            mode,
            device,
            order,
            elapsed,
            recompute=recompute,
        )


# ---------------------------------------------------------------------- the DP


def solve_dp(
    tables: NestTables,
    cost: np.ndarray,
    over: np.ndarray,
    reliefs: Sequence[int] = ALL_RELIEFS,
    penalty: float | None = None,
) -> tuple[float, list[StageRun]] | None:
    """The optimal plan of the search space (see :class:`NestTeacher`).

    Args:
        tables: the model.
        cost: the run costs of :meth:`NestTables.run_tables`.
        over: the runs' memory overflow, of :meth:`NestTables.run_tables`.
        reliefs: the relief options allowed.
        penalty: ``None`` for the hard memory rule (runs that overflow are excluded),
            else the cost per byte of overflow.

    Returns:
        ``(objective, runs)``, or ``None`` when no plan fits (hard rule only).
    """
    m, h = tables.m, tables.hier
    nk, d = len(tables.sizes), h.num_devices
    rel = np.asarray(reliefs, dtype=np.int64)
    if penalty is None:
        obj = np.where(over[..., rel] > 0, np.inf, cost[..., rel])
    else:
        obj = cost[..., rel] + penalty * over[..., rel]
    if not tables.cuttable.all():  # runs start and end outside co-location groups
        cut = tables.cuttable
        inside = ~cut[:m, None] | ~cut[None, :]
        obj = np.where(inside[:, :, None, None], np.inf, obj)
    qx, qok = _queries(h)
    value = np.full((m + 1, nk, d), np.inf)  # V of the class docstring
    nxt = np.zeros((m + 1, nk, d))  # N; N[m] = 0
    arg_j = np.zeros((m, nk, d), dtype=np.int64)
    arg_o = np.zeros((m, m + 1, nk), dtype=np.int64)
    arg_n = np.zeros((m + 1, nk, d), dtype=np.int64)
    for i in range(m - 1, -1, -1):
        runs = obj[i, i + 1 :]  # (J, K, R): runs i..j-1, j = i+1..m
        arg_o[i, i + 1 :] = rel[runs.argmin(axis=-1)]
        total = runs.min(axis=-1)[:, :, None] + nxt[i + 1 :]
        value[i] = np.where(h.valid, total.min(axis=0), np.inf)
        arg_j[i] = total.argmin(axis=0) + i + 1
        if i > 0:
            nxt[i], arg_n[i] = _link_step(tables.move_link[i], value[i], h, qx, qok)
    best = int(np.argmin(value[0]))
    if not np.isfinite(value[0].flat[best]):
        return None
    b, a = divmod(best, d)
    args = (arg_j, arg_o, arg_n, qx)
    return float(value[0].flat[best]), _backtrack(tables, value, args, b, a)


def _backtrack(
    tables: NestTables, value: np.ndarray, args: tuple[np.ndarray, ...], b: int, a: int
) -> list[StageRun]:
    """The runs of the optimum that starts with a block of ``sizes[b]`` at ``a``."""
    arg_j, arg_o, arg_n, qx = args
    h, m = tables.hier, tables.m
    runs: list[StageRun] = []
    i, level = 0, -1
    while i < m:
        j = int(arg_j[i, b, a])
        runs.append(StageRun(i, j, tables.sizes[b], a, int(arg_o[i, j, b]), level))
        if j == m:
            break
        b2, level = divmod(int(arg_n[j, b, a]), h.num_levels)
        lo, hi = int(qx[b, level, a]), int(h.end[level + 1, a])
        # the first address holding the suffix minimum the DP used
        a = lo + int(np.argmin(value[j, b2, lo:hi]))
        i, b = j, b2
    return runs


def _queries(h: Hierarchy) -> tuple[np.ndarray, np.ndarray]:
    """For a block (size b, address a) and level l: the first address ``x`` a next block
    may take to meet it at exactly level l (outside its level-(l-1) unit, after it), and
    whether one exists inside its level-l unit. ``(K, L, D)`` each."""
    nk, nl, d = len(h.sizes), h.num_levels, h.num_devices
    addr = np.arange(d)
    qx = np.zeros((nk, nl, d), dtype=np.int64)
    qok = np.zeros((nk, nl, d), dtype=bool)
    for b, k in enumerate(h.sizes):
        for lv in range(nl):
            x = np.maximum(addr + k, h.end[lv])
            ok = x < h.end[lv + 1]
            qx[b, lv] = np.where(ok, x, 0)
            qok[b, lv] = ok
    return qx, qok


def _link_step(
    move: np.ndarray, value: np.ndarray, h: Hierarchy, qx: np.ndarray, qok: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``N[j]`` from ``V[j]``: best link plus future, and its (size, level) code."""
    nk, d = value.shape
    best = np.full((nk, d), np.inf)
    arg = np.zeros((nk, d), dtype=np.int64)
    for lv in range(h.num_levels):
        unit = int(h.end[lv + 1, 0] - h.start[lv + 1, 0])
        rev = value.reshape(nk, d // unit, unit)[:, :, ::-1]
        suffix = np.minimum.accumulate(rev, axis=2)[:, :, ::-1].reshape(nk, d)
        for b in range(nk):
            future = np.where(qok[b, lv], suffix[:, qx[b, lv]], np.inf)
            cand = move[b, :, lv][:, None] + future  # (K2, D)
            b2 = cand.argmin(axis=0)
            c = cand[b2, np.arange(d)]
            better = c < best[b]
            best[b] = np.where(better, c, best[b])
            arg[b] = np.where(better, b2 * h.num_levels + lv, arg[b])
    return best, arg


# ---------------------------------------------------------------------- plans


def run_overflow(tables: NestTables, run: StageRun) -> float:
    """Bytes beyond memory summed over the run's devices (0 iff it fits): a device needs
    the resident parameters of all the run's stages (under ZeRO the run's total over
    ``size``) plus every stage's activations (every tensor a stage ever holds there: a
    bound on the simulator's live tensors) plus, under ZeRO, the largest gather buffer.
    The run of every stage, where that bound does not fit without relief, and always
    under recomputation (inf on a run of some stages): the simulated peak of its plan
    (:meth:`~placegym.teachers._nest_recompute.WholeRun.overflow`)."""
    t, b = tables, tables.sizes.index(run.size)
    whole = run.start == 0 and run.stop == t.m
    if run.relief & RECOMPUTE:
        return t.whole_run.overflow(b, True, bool(run.relief & ZERO)) if whole else np.inf
    resident, live, buf, total = np.zeros(run.size), np.zeros(run.size), 0.0, 0.0
    for s in range(run.start, run.stop):
        total = total + t.param_total[s]
        resident = resident + t.params[s][b]
        live = live + t.acts[s][b]
        if run.relief & ZERO:
            buf = np.maximum(buf, t.gather_buf[s][b])
    if run.relief & ZERO:
        resident = np.full(run.size, total / run.size)
        live = live + buf
    over = float(np.maximum(resident + live - t.memory[b], 0.0).sum())
    return t.whole_run.overflow(b, False) if whole and over > 0 and not run.relief else over


def evaluate_plan(tables: NestTables, runs: Sequence[StageRun]) -> tuple[float, float]:
    """``(cost, overflow)`` of a plan, priced run by run from the stage tables (the
    oracle the DP is tested against).

    ``cost`` = Σ stage_cost + Σ same_link inside runs + Σ move_link between runs (at the
    level where their blocks meet); ``overflow`` = Σ :func:`run_overflow`.

    Raises:
        ValueError: the runs do not cover the stages in order, a block is misaligned,
            a block does not start after the previous one, or a run starts inside a
            co-location group's stages (:attr:`NestTables.cuttable`).
    """
    t = tables
    cost, over, prev = 0.0, 0.0, None
    for r in runs:
        b = t.sizes.index(r.size)
        ok = t.hier.valid[b, r.address] and r.start < r.stop and t.cuttable[r.start]
        if not ok or r.start != (prev.stop if prev else 0):
            raise ValueError(f"runs: invalid run {r}")
        for s in range(r.start, r.stop):
            cost += t.stage_cost[s, b, r.relief]
            if s > r.start:
                cost += t.same_link[s, b]
        if prev is not None:
            if r.address < prev.address + prev.size:
                raise ValueError(f"runs: block of {r} overlaps or precedes {prev}")
            lv = t.hier.level(prev.address, r.address)
            cost += t.move_link[r.start, t.sizes.index(prev.size), b, lv]
        over += run_overflow(t, r)
        prev = r
    if (prev.stop if prev else 0) != t.m:
        raise ValueError(f"runs: the plan must cover stages 0..{t.m - 1}")
    return cost, over


def plan_devices(tables: NestTables, runs: Sequence[StageRun]) -> np.ndarray:
    """``(n,)`` device of every node under the plan."""
    t = tables
    device = np.zeros(t.graph.num_nodes, dtype=np.int64)
    for r in runs:
        b = t.sizes.index(r.size)
        nodes = np.flatnonzero((t.stage >= r.start) & (t.stage < r.stop))
        device[nodes] = t.devices(b, r.address)[t.loc[b, nodes]]
    return device


# ---------------------------------------------------------------------- priority


def nest_priority_order(
    graph: Graph, cluster: Cluster, stage: np.ndarray | None = None
) -> np.ndarray:
    """A topological order by (stage, descending b-level, topological rank): Kahn's
    algorithm taking the ready node with the smallest key
    (:func:`~placegym.teachers._nest_recompute.stage_priority`; stages by default those of
    :func:`~placegym.teachers._nest_cost.stage_index`)."""
    return stage_priority(graph, cluster, stage_index(graph) if stage is None else stage)


# ---------------------------------------------------------------------- NEST cost


def nest_cost(
    graph: Graph,
    cluster: Cluster,
    device: np.ndarray | Sequence[int],
    *,
    overflow_weight: float = 1.0,
) -> float:
    """The NEST cost of a (partial) assignment; the potential of reward shaping is
    ``Φ(s) = −nest_cost / T_ref`` (DESIGN §4).

    With ``A`` the assigned nodes (``device[v] >= 0``; -1 = unassigned) and ``d(v)`` their
    devices::

        cost = max_e Σ_{v ∈ A, d(v) = e} dur(v, e)                          (compute)
             + Σ_{(u, v) ∈ E, u, v ∈ A, d(u) != d(v)}
                   [latency(d(u), d(v)) + out_bytes_u / bandwidth(d(u), d(v))]  (cut edges)
             + overflow_penalty(Σ_{v ∈ A, d(v) = e} param_bytes_v for every e)  (memory)

    where ``dur`` is the rule-1 duration (DESIGN §3.1, no noise), latency and bandwidth
    are those of the pair's network level, and
    :func:`~placegym.envs.analysis.memory.overflow_penalty` prices resident parameters beyond
    capacity. Every cut edge counts, as DESIGN §4 states (the simulator
    sends one transfer per producer and destination device, so a fan-out to several
    consumers on one device is charged once per edge here).

    Unassigned nodes contribute nothing, a cut edge counts only when both ends are
    assigned, the empty assignment costs 0, and the cost never decreases when a node is
    assigned (every term is a max or a sum of non-negative terms over assigned nodes).
    This is the assignment-level form of the DP's terms (compute, transfers at their
    level, memory); the DP itself prices whole stages (see ``NestTeacher``).

    Raises:
        ValueError: ``device`` has the wrong length or an index outside ``-1..D-1``.
    """
    dev = np.asarray(device, dtype=np.int64).reshape(-1)
    n, d = graph.num_nodes, cluster.num_devices
    if dev.shape[0] != n:
        raise ValueError(f"device: expected {n} entries (one per node), got {dev.shape[0]}")
    if n and (dev.min() < -1 or dev.max() >= d):
        bad = int(np.flatnonzero((dev < -1) | (dev >= d))[0])
        raise ValueError(f"device[{bad}]: expected -1 or a device index < {d}, got {dev[bad]}")
    on = np.flatnonzero(dev >= 0)
    if on.size == 0:
        return 0.0
    e = dev[on]
    load = np.bincount(e, weights=durations_fn(graph, cluster)(on, e), minlength=d)
    params = np.bincount(e, weights=graph.param_bytes[on], minlength=d)
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    cut = (dev[u] >= 0) & (dev[v] >= 0) & (dev[u] != dev[v])
    src, dst = dev[u[cut]], dev[v[cut]]
    comm = (
        cluster.pair_latency[src, dst] + graph.out_bytes[u[cut]] / cluster.pair_bandwidth[src, dst]
    )
    penalty = overflow_penalty(params, cluster, overflow_weight=overflow_weight)
    return float(load.max() + comm.sum() + penalty)
