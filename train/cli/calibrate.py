"""``placegym calibrate``: fit a cluster JSON to real devices, optionally check it."""

from __future__ import annotations

import argparse
import json
import time

from placegym.envs.real.profile import PROFILE_MODES


def add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``calibrate`` on the CLI's subparsers."""
    p = sub.add_parser(
        "calibrate",
        help="measure devices and write their cluster JSON",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,  # every option's default
    )
    p.add_argument(
        "--devices",
        default="cpu#2",
        help="backend devices: cpu#k, cuda:i, cuda:i#k, cuda:i%%N, comma-separated",
    )
    p.add_argument("--out", default="cluster.json", help="cluster JSON to write")
    p.add_argument(
        "--size",
        type=int,
        default=None,
        help="side of the calibration matmuls (None: 256 on CPU workers, 2048 on GPUs)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measurement")
    p.add_argument(
        "--profile",
        action="store_true",
        help="time every distinct kernel of --graph (at --scale) on each device kind and "
        "write the costs into the cluster (they replace the roofline)",
    )
    p.add_argument(
        "--profile-mode",
        choices=PROFILE_MODES,
        default="auto",
        help="run: kernels timed as they run in executions of --graph over the devices; "
        "isolated: each kernel alone; auto: run on CPU workers, isolated on GPUs",
    )
    p.add_argument(
        "--profile-seconds",
        type=float,
        default=30.0,
        help="least seconds of timed executions of --graph when kernels are timed in runs, "
        "without --check (with it, the executions are interleaved with the check's rounds)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="report the Spearman rank correlation and the median relative error of "
        "simulated vs measured makespans over random placements",
    )
    p.add_argument(
        "--allow-shared",
        action="store_true",
        help="run --check even on devices that share hardware (streams of one GPU)",
    )
    p.add_argument("--graph", default="ffnn", help="workload or graph JSON for --profile/--check")
    p.add_argument(
        "--scale",
        type=float,
        default=2,
        help="divide the graph's tensor dimensions by this (< 1 grows them; default 2)",
    )
    p.add_argument("--placements", type=int, default=20, help="random placements for --check")
    p.add_argument(
        "--rounds",
        type=int,
        default=15,
        help="--check: timed runs of every placement (interleaved rounds; the median of "
        "the runs no other load disturbed is compared)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the --check placements")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Calibrate the devices, write the cluster JSON, optionally rank-check it."""
    from placegym.envs.mdp.sources import resolve_graph
    from placegym.envs.real.devices import parse_devices, shared_hardware
    from placegym.envs.real.kernels import scale_graph
    from placegym.train.cli.outputs import out_file, writing

    notes = shared_hardware(parse_devices(args.devices))
    if args.check and notes and not args.allow_shared:
        raise ValueError(
            f"--check: {notes[0]}; the simulator does not model their contention, so a "
            f"rank check on them means nothing. Check several GPUs, cpu#k or a GPU with "
            f"CPU workers (cuda:0,cpu#2), or pass --allow-shared"
        )
    graph = scale_graph(resolve_graph(args.graph, seed=args.seed), args.scale)
    t0 = time.perf_counter()
    out_file(args.out)  # its folder, before minutes of measuring
    cluster, res = _calibrate_and_check(args, graph)
    with writing(args.out):
        cluster.save(args.out)
    print(
        f"calibrated {cluster.num_devices} devices"
        + (" and checked" if args.check else "")
        + f" in {time.perf_counter() - t0:.1f} s; written to {args.out}"
    )
    _print_cluster(cluster)
    shared = _report_sharing(args.devices, notes)
    if res is not None:
        summary = {
            "spearman": res.spearman,
            "median_relative_error": res.median_relative_error,
            "placements": args.placements,
            "graph": graph.name,
            "profiled": args.profile,
            "profile_mode": args.profile_mode if args.profile else None,
            "shared_hardware": shared,
            "cpu_share": res.cpu_share,
            "runs": int(res.runs.sum()),
            "disturbed_runs": int(res.disturbed.sum()),
            "interference": res.interference,
            "simulated_ms": [round(x * 1e3, 3) for x in res.simulated],
            "measured_ms": [round(x * 1e3, 3) for x in res.measured],
        }
        print(json.dumps(summary))
        print(f"Spearman rank correlation, simulated vs measured: {res.spearman:.3f}")
        print(f"median relative error, simulated vs measured: {res.median_relative_error:.1%}")
        if res.cpu_share < 0.9:
            print(
                f"warning: the CPU workers ran only {res.cpu_share:.0%} of the time they were "
                f"ready to run (other load on this machine): the measured makespans include it"
            )
        for kind, x in res.interference.items():
            print(
                f"interference: {kind} kernels took {x:.1%} longer with every such device "
                f"busy than alone (independent devices: 0)"
            )
        if res.disturbed.sum():
            print(
                f"{res.disturbed.sum()} of {res.runs.sum()} runs were disturbed by other load "
                f"(left out of the medians)"
            )
        if shared:
            print("warning: these devices share hardware; the figures above are not a check")
    return 0


def _calibrate_and_check(args: argparse.Namespace, graph):
    """(cluster, check or None). With --profile and --check the profiling executions are
    interleaved with the check's rounds (``calibrate_and_check``); else the check, if
    asked for, follows the calibration."""
    from placegym.envs.real.calibrate import calibrate
    from placegym.envs.real.check import calibrate_and_check, rank_check

    if args.profile and args.check:
        return calibrate_and_check(
            graph,
            args.devices,
            placements=args.placements,
            seed=args.seed,
            repeats=args.rounds,
            allow_shared=args.allow_shared,
            profile_mode=args.profile_mode,
            size=args.size,
            probe_repeats=args.repeats,
        )
    cluster = calibrate(
        args.devices,
        graphs=[graph] if args.profile else (),
        size=args.size,
        repeats=args.repeats,
        profile_mode=args.profile_mode,
        profile_seconds=args.profile_seconds,
    )
    if not args.check:
        return cluster, None
    res = rank_check(
        graph,
        cluster,
        args.devices,
        placements=args.placements,
        seed=args.seed,
        repeats=args.rounds,
        allow_shared=args.allow_shared,
    )
    return cluster, res


def _print_cluster(cluster) -> None:
    for d in cluster.devices:
        profiled = len((cluster.profile or {}).get(d.kind, {}))
        print(
            f"  {d.name:<10} {d.flops / 1e9:8.1f} GFLOP/s  "
            f"{(d.mem_bandwidth or 0) / 1e9:7.1f} GB/s"
            f"  launch {d.launch_overhead * 1e6:7.1f} us"
            + (f"  {profiled} profiled kernels ({d.kind})" if profiled else "")
        )
    for lv in cluster.levels:
        print(
            f"  {lv.name:<10} {lv.bandwidth / 1e9:8.2f} GB/s  latency {lv.latency * 1e6:8.1f} us"
        )


def _report_sharing(devices: str, notes: list[str]) -> bool:
    """Print what is known and measured about shared hardware; True if any is shared."""
    from placegym.envs.real.devices import parse_devices
    from placegym.envs.real.probes import measure_sharing

    for note in notes:
        print(f"warning: {note}")
    if len(parse_devices(devices)) < 2:
        return False
    sharing = measure_sharing(devices)
    print("sharing probe (matmul chains, each device alone vs all at once):")
    for line in sharing.lines():
        print(line if line.startswith("  ") else f"  {line}")
    return bool(notes or sharing.shared)
