"""A custom Weights & Biases run: a teacher sweep over a benchmark suite's split.

Every teacher of ``--teachers`` places every instance of ``--suite`` / ``--split``
(``placegym.envs.suites``); the simulator times each placement. The run logs, per
instance (one W&B step each), every teacher's makespan and its ratio to the instance's
best-known makespan (the suite's shipped reference), then two ``wandb.Table`` s: one row
per (instance, teacher) and a summary per teacher (geometric mean of the ratio to the best
known over the instances every teacher solved, wins, feasible count), also written to the
run's summary. The same rows go to ``--out`` as ``results.csv`` and ``summary.md``, so
the script is useful without W&B too.

W&B mode: ``--wandb-mode auto`` (the default) takes ``$WANDB_MODE`` when set, else
``online`` when an API key is configured (``$WANDB_API_KEY`` or a ``.netrc`` entry) and
``offline`` when not, so a machine without credentials never contacts W&B
(``placegym.train.tracking.resolve_wandb_mode``, the rule of ``placegym train``). An
offline run lands in ``--out``/wandb/; ``wandb sync`` uploads it later. ``disabled``
turns W&B off (the local files are still written).

A placement over a device's memory is recorded as infeasible (``OOM``): it gets no
ratio and never enters a mean or a win. (placegym's teachers keep co-location groups
whole, so on suites with groups, ``memory-tight-v0`` and ``published-v0``, memory is the
one way to fail.)

Run (``--fast`` sweeps two instances with two teachers, for CI)::

    python examples/wandb_custom_run.py
    python examples/wandb_custom_run.py --fast --out /tmp/sweep
    python examples/wandb_custom_run.py --suite comm-heavy-v0 --split test --wandb-mode online
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from typing import Any

import wandb

from placegym.envs import simulate
from placegym.envs.suites import get_suite, list_suites
from placegym.envs.suites.reference import load_references
from placegym.teachers import list_teachers, make_teacher
from placegym.train.tracking import resolve_wandb_mode

TEACHERS = "critical_path,heft,nest,metis,round_robin,random"


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="workloads-v0", help="a benchmark suite")
    p.add_argument("--split", default="test", help="the suite's split")
    p.add_argument("--teachers", default=TEACHERS, help="comma-separated teacher names")
    p.add_argument("--limit", type=int, default=None, help="only the first N instances")
    p.add_argument("--seed", type=int, default=0, help="seed of the seeded teachers")
    p.add_argument("--out", default="runs/examples/wandb_custom_run", help="output folder")
    p.add_argument("--project", default="placegym-examples", help="W&B project")
    p.add_argument(
        "--wandb-mode",
        default="auto",
        choices=["auto", "online", "offline", "disabled"],
        help="auto: $WANDB_MODE, else online with an API key, else offline",
    )
    p.add_argument("--fast", action="store_true", help="two instances, two teachers")
    args = p.parse_args()
    suites = [s.name for s in list_suites()]
    if args.suite not in suites:
        p.error(f"--suite: unknown suite {args.suite!r} ({', '.join(suites)})")
    args.teachers = [t.strip() for t in args.teachers.split(",") if t.strip()]
    unknown = [t for t in args.teachers if t not in list_teachers()]
    if unknown or not args.teachers:
        p.error(f"--teachers: unknown teacher(s) {unknown} ({', '.join(list_teachers())})")
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit: must be >= 1, got {args.limit}")
    if args.fast:
        args.limit, args.teachers = 2, ["critical_path", "heft"]
    return args


def sweep(args: argparse.Namespace, run: Any) -> list[dict[str, Any]]:
    """Place every instance with every teacher; log per instance; return the rows."""
    suite = get_suite(args.suite)
    references = load_references(suite.name)
    specs = suite.specs(args.split)[: args.limit]
    rows: list[dict[str, Any]] = []
    for step, (split, spec) in enumerate(specs):
        inst = suite.build(split, spec)
        ref = references.get(inst.id)
        # a reference built from another version of the instance is stale: not used
        best = ref.best_makespan if ref is not None and ref.digest == inst.digest else None
        logged: dict[str, float] = {}
        for name in args.teachers:
            start = time.perf_counter()
            teacher = make_teacher(name, args.seed)  # the seed goes to those that draw
            placement = teacher.place(inst.graph, inst.cluster)
            schedule = simulate(inst.graph, inst.cluster, placement)
            seconds = time.perf_counter() - start
            feasible = not schedule.oom
            ratio = schedule.makespan / best if feasible and best else None
            rows.append(
                {
                    "instance": inst.id,
                    "nodes": inst.graph.num_nodes,
                    "cluster": inst.cluster.name,
                    "teacher": name,
                    "makespan_ms": 1e3 * schedule.makespan,
                    "best_known_ms": 1e3 * best if best else None,
                    "ratio_to_best_known": ratio,
                    "feasible": feasible,
                    "seconds": seconds,
                }
            )
            if feasible:
                logged[f"makespan_ms/{name}"] = 1e3 * schedule.makespan
                if ratio is not None:
                    logged[f"ratio_to_best_known/{name}"] = ratio
            shown = f"{1e3 * schedule.makespan:.4f} ms" if feasible else "OOM"
            ratio_text = f" ({ratio:.3f} of best known)" if ratio is not None else ""
            print(f"{inst.id}: {name} {shown}{ratio_text}")
        run.log(logged, step=step)
    return rows


def summarise(rows: list[dict[str, Any]], teachers: list[str]) -> list[dict[str, Any]]:
    """Per teacher: geometric mean ratio over the instances every teacher solved (with a
    ratio), wins on those instances (ties count for each), feasible count."""
    instances = list(dict.fromkeys(r["instance"] for r in rows))
    ratio = {(r["instance"], r["teacher"]): r["ratio_to_best_known"] for r in rows}
    common = [i for i in instances if all(ratio[i, t] is not None for t in teachers)]
    out = []
    for t in teachers:
        logs = [math.log(ratio[i, t]) for i in common]
        wins = sum(ratio[i, t] <= min(ratio[i, u] for u in teachers) for i in common)
        feasible = sum(r["feasible"] for r in rows if r["teacher"] == t)
        out.append(
            {
                "teacher": t,
                "geomean_ratio": math.exp(sum(logs) / len(logs)) if logs else None,
                "instances": len(common),
                "wins": wins,
                "feasible": f"{feasible}/{len(instances)}",
            }
        )
    return out


def write_local(out: Path, rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> None:
    """``results.csv`` (one row per placement) and ``summary.md`` in ``out``."""
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| teacher | geomean ratio to best known | instances | wins | feasible |",
        "|---|---|---|---|---|",
    ]
    for s in summary:
        g = "-" if s["geomean_ratio"] is None else f"{s['geomean_ratio']:.3f}"
        lines.append(
            f"| {s['teacher']} | {g} | {s['instances']} | {s['wins']} | {s['feasible']} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    """Sweep, log, summarise."""
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mode = resolve_wandb_mode(args.wandb_mode)
    config = {k: v for k, v in vars(args).items() if k not in ("out", "wandb_mode")}
    run = wandb.init(
        project=args.project,
        name=f"teacher-sweep-{args.suite}-{args.split}",
        dir=str(out),  # the run's files: out/wandb/
        mode=mode,  # online, offline or disabled
        config=config,
        settings=wandb.Settings(quiet=True),
    )
    print(f"W&B mode {mode} ({args.wandb_mode}); {args.suite}/{args.split}: {args.teachers}")

    rows = sweep(args, run)
    summary = summarise(rows, args.teachers)
    columns = list(rows[0])
    run.log(
        {
            "per_instance": wandb.Table(columns=columns, data=[list(r.values()) for r in rows]),
            "summary": wandb.Table(
                columns=list(summary[0]), data=[list(s.values()) for s in summary]
            ),
        }
    )
    for s in summary:
        if s["geomean_ratio"] is not None:
            run.summary[f"geomean_ratio/{s['teacher']}"] = s["geomean_ratio"]
    write_local(out, rows, summary)
    ranked = [s for s in summary if s["geomean_ratio"] is not None]
    if ranked:
        top = min(ranked, key=lambda s: s["geomean_ratio"])
        print(f"best teacher: {top['teacher']} ({top['geomean_ratio']:.3f} of best known)")
    if mode == "offline":
        folder = Path(run.dir).parent  # run.dir is the run's files/ folder
        print(f"offline W&B run in {folder} (upload: wandb sync {folder})")
    run.finish()
    print(f"wrote {out / 'results.csv'} and {out / 'summary.md'}")


if __name__ == "__main__":
    main()
