"""``placegym calibrate``: fit a cluster JSON to real devices, optionally check it."""

from __future__ import annotations

import argparse
import json
import time


def add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``calibrate`` on the CLI's subparsers."""
    p = sub.add_parser("calibrate", help="measure devices and write their cluster JSON")
    p.add_argument(
        "--devices",
        default="cpu#2",
        help="backend devices: cpu#k, cuda:i, cuda:i#k, comma-separated (cpu#2)",
    )
    p.add_argument("--out", default="cluster.json", help="cluster JSON to write")
    p.add_argument("--size", type=int, default=256, help="side of the calibration matmuls")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measurement")
    p.add_argument(
        "--check",
        action="store_true",
        help="report the Spearman rank correlation of simulated vs measured "
        "makespans over random placements",
    )
    p.add_argument("--graph", default="ffnn", help="workload or graph JSON for --check")
    p.add_argument("--scale", type=int, default=2, help="shrink the --check graph by this")
    p.add_argument("--placements", type=int, default=20, help="random placements for --check")
    p.add_argument("--seed", type=int, default=0, help="seed of the --check placements")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Calibrate the devices, write the cluster JSON, optionally rank-check it."""
    from placegym.envs.backend.calibrate import calibrate, rank_check
    from placegym.envs.backend.kernels import scale_graph
    from placegym.envs.sources import resolve_graph

    t0 = time.perf_counter()
    cluster = calibrate(args.devices, size=args.size, repeats=args.repeats)
    cluster.save(args.out)
    print(
        f"calibrated {cluster.num_devices} devices in {time.perf_counter() - t0:.1f} s; "
        f"written to {args.out}"
    )
    for d in cluster.devices:
        print(
            f"  {d.name:<10} {d.flops / 1e9:8.1f} GFLOP/s  "
            f"{(d.mem_bandwidth or 0) / 1e9:7.1f} GB/s"
            f"  launch {d.launch_overhead * 1e6:7.1f} us"
        )
    for lv in cluster.levels:
        print(
            f"  {lv.name:<10} {lv.bandwidth / 1e9:8.2f} GB/s  latency {lv.latency * 1e6:8.1f} us"
        )
    if args.check:
        graph = scale_graph(resolve_graph(args.graph, seed=args.seed), args.scale)
        rho, sim, real = rank_check(
            graph,
            cluster,
            args.devices,
            placements=args.placements,
            seed=args.seed,
            repeats=args.repeats,
        )
        print(
            json.dumps(
                {
                    "spearman": rho,
                    "placements": args.placements,
                    "graph": graph.name,
                    "simulated_ms": [round(x * 1e3, 3) for x in sim],
                    "measured_ms": [round(x * 1e3, 3) for x in real],
                }
            )
        )
        print(f"Spearman rank correlation, simulated vs measured: {rho:.3f}")
    return 0
