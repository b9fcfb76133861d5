"""Does the link model change which placements look best? ``links="pair"`` against
``links="port"`` (:mod:`placegym.envs.core.cluster`), per benchmark suite.

For each instance of a suite's split, a set of placements is simulated on the
instance's cluster twice, once with each link model: every registered teacher's
placement (each computed once, on the instance as built, with pair links) and ``random``
seeded random placements (:class:`~placegym.teachers.simple.RandomTeacher`, groups kept
whole). The Spearman rank correlation of the two makespan vectors says how far a ranking
made under one model holds under the other (1: the same order). A placement over memory
under either model is left out (infeasible: never a makespan to rank), and so is a
teacher that cannot place the instance (it raises ``ValueError``, e.g. a size limit).
``rho`` is NaN where either vector is constant (no order to compare).

    python -m placegym.train.experiments.links [--suites workloads-v0 comm-heavy-v0]
        [--split test] [--random 16] [--seed 0] [--max-instances N] [--teachers ...]

prints one markdown row per suite: instances, placements per instance (mean), mean and
minimum ρ over the instances, and the geometric mean of the port / pair makespan ratio.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placegym.envs import Cluster, Graph, Placement, simulate_batch
from placegym.envs.real.check import spearman
from placegym.envs.suites import Suite, get_suite
from placegym.teachers import list_teachers, make_teacher

__all__ = [
    "DEFAULT_SUITES",
    "InstanceRanks",
    "default_teachers",
    "instance_ranks",
    "markdown_table",
    "placements_for",
    "spearman",
    "suite_ranks",
]

#: Small suites the command runs by default.
DEFAULT_SUITES = ("workloads-v0", "comm-heavy-v0")

#: Teachers left out by default: ``optimal`` (exponential search), and ``random``,
#: which draws the random placements instead.
_SKIPPED = ("optimal", "random")


def default_teachers() -> tuple[str, ...]:
    """Every registered teacher but ``optimal`` and ``random``."""
    return tuple(t for t in list_teachers() if t not in _SKIPPED)


@dataclass(frozen=True)
class InstanceRanks:
    """One instance's comparison.

    Attributes:
        instance: the instance id.
        placements: placements compared (feasible under both models).
        rho: Spearman's ρ of their pair and port makespans (NaN: a constant vector).
        ratio: geometric mean over them of port / pair makespan.
    """

    instance: str
    placements: int
    rho: float
    ratio: float


def placements_for(
    graph: Graph, cluster: Cluster, teachers: Sequence[str], random: int, seed: int
) -> list[Placement]:
    """The teachers' placements (those that can place the instance), then ``random``
    random ones drawn with seeds ``seed, seed + 1, ...``.

    Raises:
        ValueError: an unknown teacher name (naming the registered ones).
    """
    out = []
    for name in teachers:
        teacher = make_teacher(name, seed)  # an unknown name raises here
        try:
            out.append(teacher.place(graph, cluster))
        except ValueError:  # e.g. a size limit: that teacher has no placement here
            continue
    out += [make_teacher("random", seed + k).place(graph, cluster) for k in range(random)]
    return out


def instance_ranks(
    instance: str, graph: Graph, cluster: Cluster, placements: Sequence[Placement]
) -> InstanceRanks:
    """Simulate ``placements`` with pair and with port links and compare the makespans
    of those feasible under both."""
    devs = np.array([p.device for p in placements], dtype=np.int64).reshape(-1, graph.num_nodes)
    orders = np.array([p.order for p in placements], dtype=np.int64).reshape(devs.shape)
    runs = [simulate_batch(graph, cluster.with_links(x), devs, orders) for x in ("pair", "port")]
    ok = ~(runs[0].oom | runs[1].oom)
    pair, port = runs[0].makespan[ok], runs[1].makespan[ok]
    ratio = float(np.exp(np.mean(np.log(port / pair)))) if ok.any() else math.nan
    return InstanceRanks(instance, int(ok.sum()), spearman(pair, port), ratio)


def suite_ranks(
    suite: Suite | str,
    split: str = "test",
    *,
    teachers: Sequence[str] | None = None,
    random: int = 16,
    seed: int = 0,
    max_instances: int | None = None,
) -> list[InstanceRanks]:
    """:func:`instance_ranks` of every instance of ``split`` (the first
    ``max_instances``), with :func:`placements_for` placements (``teachers`` default:
    :func:`default_teachers`)."""
    s = get_suite(suite) if isinstance(suite, str) else suite
    names = default_teachers() if teachers is None else tuple(teachers)
    out = []
    for k, (sp, spec) in enumerate(s.specs(split)):
        if max_instances is not None and k >= max_instances:
            break
        inst = s.build(sp, spec)
        ps = placements_for(inst.graph, inst.cluster, names, random, seed)
        out.append(instance_ranks(inst.id, inst.graph, inst.cluster, ps))
    return out


def markdown_table(results: dict[str, list[InstanceRanks]]) -> str:
    """One row per suite: instances, mean placements, mean and minimum ρ (over the
    instances where it is defined), geometric mean port / pair makespan."""
    lines = [
        "| suite | instances | placements (mean) | mean ρ | min ρ | port / pair makespan |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        rho = np.array([r.rho for r in rows if not math.isnan(r.rho)])
        ratios = np.array([r.ratio for r in rows if not math.isnan(r.ratio)])
        mean_p = np.mean([r.placements for r in rows]) if rows else math.nan
        undefined = len(rows) - len(rho)
        note = f" ({undefined} undefined)" if undefined else ""
        lines.append(
            f"| {name} | {len(rows)} | {mean_p:.1f} | "
            f"{rho.mean() if len(rho) else math.nan:.3f}{note} | "
            f"{rho.min() if len(rho) else math.nan:.3f} | "
            f"{np.exp(np.log(ratios).mean()) if len(ratios) else math.nan:.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m placegym.train.experiments.links",
        description="Spearman rank correlation of placements' makespans, pair vs port links",
    )
    ap.add_argument("--suites", nargs="+", default=list(DEFAULT_SUITES))
    ap.add_argument("--split", default="test")
    ap.add_argument("--random", type=int, default=16, help="random placements per instance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-instances", type=int, default=None)
    ap.add_argument("--teachers", nargs="+", default=None, help="default: all but optimal")
    args = ap.parse_args(argv)
    if args.random < 0:
        ap.error(f"--random: must be >= 0, got {args.random}")
    results = {
        name: suite_ranks(
            name,
            args.split,
            teachers=args.teachers,
            random=args.random,
            seed=args.seed,
            max_instances=args.max_instances,
        )
        for name in args.suites
    }
    print(markdown_table(results))


if __name__ == "__main__":
    main()
