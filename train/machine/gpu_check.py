"""``python -m placegym.train.machine.gpu_check``: the real backend on a CUDA machine, one command.

Runs with the interpreter that runs it and that interpreter's torch (a CUDA build already
on the machine); distributions placegym needs that are missing are installed from a
wheelhouse first (:mod:`placegym.train.machine.wheelhouse`; ``make wheelhouse`` makes one on a
networked machine); it runs from a checkout (``configs/``, ``tests/``), installed
editable. Never part of ``make test``'s requirements. Steps, about 5 minutes on one H200:

1. ``correctness``: every workload (small) on ``cuda:0`` and on ``cuda:0,cpu#2`` (random
   placements, real host↔device copies) gives the outputs of one CPU worker.
2. ``profiled``: ``cuda:0`` calibrated with profiled costs of the FFNN at GPU size
   (``scale=0.25``: 4.4 TFLOP); per-node prediction error of a node-after-node run, with
   the roofline's error beside it. Target: median ≤ 10%.
3. ``heterogeneous``: ``cuda:0,cpu#2`` calibrated with profiled costs, rank check over
   20 random FFNN placements. Target: Spearman ≥ 0.9 (median relative error reported).
4. ``gpus``: with several GPUs, the same on ``cuda:0,cuda:1,...`` at GPU size.
5. ``sharing``: the sharing probe on ``cuda:0#4`` must find the streams shared.
6. ``phase3``: a few phase III updates on ``cuda:0,cpu#2`` from a fresh policy.
7. ``gpu_tests`` (with ``--with-tests``, a few minutes more): ``pytest -m gpu
   tests/test_backend_gpu.py tests/test_train_device.py``, which repeats the checks above
   as assertions and adds the SM-partition and several-GPU tests, and training with the
   learner on ``cuda`` (``device``; its scores against the CPU's).

The report (``--out``/report.json) has every figure; the exit code is 1 when a step
fails or misses its target. ``--dry-run`` runs the same steps on CPU workers at tiny
sizes (``cuda:0`` → ``cpu``, ``cuda:0,cpu#2`` → ``cpu#2``), judging no target: it tests
the plumbing on any machine, so the GPU run is less likely to fail on its first try.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from placegym.train.machine.wheelhouse import install_missing, runtime_requirements

ROOT = Path(__file__).resolve().parents[2]  # the repository (configs/, placegym)
NODE_ERROR_TARGET = 0.10
SPEARMAN_TARGET = 0.9


@dataclass(frozen=True)
class Setup:
    """Device sets and sizes of one check (a GPU run or its CPU dry run).

    Attributes:
        gpu, hetero, shared: the one-GPU, GPU-plus-CPU-workers and streams-of-one-GPU
            device sets (``cpu``, ``cpu#2``, ``cpu#2`` in a dry run).
        gpus: every GPU when there are several, else None.
        gpu_scale, hetero_scale, small_scale: graph scales of the profiled one-GPU
            check, of the heterogeneous checks and phase III, and of the correctness
            check.
        placements: random placements per rank check; updates: phase III updates.
        dry_run: no targets are judged.
    """

    gpu: str
    hetero: str
    gpus: str | None
    shared: str
    gpu_scale: float
    hetero_scale: float
    small_scale: float
    placements: int
    updates: int
    dry_run: bool

    @classmethod
    def detect(cls, dry_run: bool) -> Setup:
        """The setup of this machine (all its GPUs), or the CPU one of a dry run.

        Raises:
            SystemExit: no dry run, and torch sees no CUDA device.
        """
        if dry_run:
            return cls("cpu", "cpu#2", None, "cpu#2", 8, 8, 16, 6, 1, True)
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(
                f"gpu_check: torch {torch.__version__} sees no CUDA device (use --dry-run "
                f"to test the plumbing on CPU workers)"
            )
        n = torch.cuda.device_count()
        gpus = ",".join(f"cuda:{i}" for i in range(n)) if n > 1 else None
        return cls("cuda:0", "cuda:0,cpu#2", gpus, "cuda:0#4", 0.25, 2, 4, 20, 3, False)


def _profile_seconds(s: Setup) -> float:
    """Least seconds of profiling runs on CPU workers: the default, none in a dry run."""
    from placegym.envs.real.profile import RUN_SECONDS

    return 0.0 if s.dry_run else RUN_SECONDS


def _ffnn(scale: float):
    from placegym.envs.real.kernels import scale_graph
    from placegym.envs.workloads import make_graph

    return scale_graph(make_graph("ffnn"), scale)


def check_correctness(s: Setup) -> dict[str, Any]:
    """Max abs difference to one CPU worker, per workload and device set."""
    import numpy as np
    import torch

    from placegym.envs import Placement
    from placegym.envs.real import TorchExecutor, scale_graph
    from placegym.envs.workloads import WORKLOADS, make_graph

    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for name in WORKLOADS:
        g = scale_graph(make_graph(name), s.small_scale)
        ref = TorchExecutor(g, "cpu", warmup=0, repeats=1).outputs(
            Placement(device=np.zeros(g.num_nodes), order=g.topological_order.copy())
        )
        for devices in (s.gpu, s.hetero):
            ex = TorchExecutor(g, devices, warmup=0, repeats=1)
            p = Placement(
                device=rng.integers(0, ex.num_devices, g.num_nodes),
                order=g.topological_order.copy(),
            )
            got = ex.outputs(p)
            err = max(float((a.cpu().float() - b.float()).abs().max()) for a, b in zip(got, ref))
            scale = max(float(b.float().abs().max()) for b in ref)
            ok = all(torch.allclose(a.cpu(), b, rtol=1e-3, atol=1e-3) for a, b in zip(got, ref))
            out[f"{name} on {devices}"] = {"max_abs_error": err, "max_abs": scale, "ok": ok}
    out["ok"] = all(v["ok"] for v in out.values())
    return out


def check_profiled(s: Setup) -> dict[str, Any]:
    """Per-node prediction error on one device, profiled and roofline (module docstring)."""
    import dataclasses

    import numpy as np

    from placegym.envs.real.calibrate import calibrate
    from placegym.envs.real.probes import node_errors, node_times

    g = _ffnn(s.gpu_scale)
    cluster = calibrate(s.gpu, graphs=[g], profile_seconds=_profile_seconds(s))
    placement, measured = node_times(g, s.gpu)
    res: dict[str, Any] = {"graph": g.name, "gflop": float(g.flops.sum() / 1e9)}
    roofline = dataclasses.replace(cluster, profile=None)
    for label, c in (("profiled", cluster), ("roofline", roofline)):
        err = node_errors(g, c, placement, measured)
        res[label] = {
            "median_error": float(np.median(err)),
            "p90_error": float(np.quantile(err, 0.9)),
        }
    res["measured_ms"] = float(np.nansum(measured) * 1e3)
    res["launch_overhead_us"] = float(cluster.launch_overhead[0] * 1e6)
    res["ok"] = s.dry_run or res["profiled"]["median_error"] <= NODE_ERROR_TARGET
    return res


def check_rank(devices: str, scale: float, s: Setup) -> dict[str, Any]:
    """Profiled calibration of ``devices`` and the rank check over random placements."""
    from placegym.envs.real.check import calibrate_and_check

    g = _ffnn(scale)
    _, r = calibrate_and_check(g, devices, placements=s.placements, repeats=3)
    return {
        "devices": devices,
        "graph": g.name,
        "spearman": r.spearman,
        "median_relative_error": r.median_relative_error,
        "cpu_share": r.cpu_share,
        "simulated_ms": [round(x * 1e3, 3) for x in r.simulated],
        "measured_ms": [round(x * 1e3, 3) for x in r.measured],
        "ok": s.dry_run or r.spearman >= SPEARMAN_TARGET,
    }


def check_sharing(s: Setup) -> dict[str, Any]:
    """The sharing probe on streams of one GPU: it must find them all shared."""
    from placegym.envs.real.probes import measure_sharing

    sh = measure_sharing(s.shared)
    return {
        "devices": s.shared,
        "slowdown": sh.slowdown.tolist(),
        "parallel_speedup": sh.parallel_speedup,
        "shared": sh.shared,
        "ok": s.dry_run or len(sh.shared) == len(sh.names),
    }


def check_phase3(s: Setup, out: Path) -> dict[str, Any]:
    """A few phase III updates from a fresh policy; reads back the run's metrics."""
    from placegym.train.cli import main as cli

    run = out / "phase3"
    config = ROOT / "configs" / ("phase3_cpu.yaml" if s.dry_run else "phase3_gpu.yaml")
    overrides = [
        "init=null",
        f"phase3.updates={s.updates}",
        f"phase3.devices='{s.hetero}'",
        f"phase3.scale={s.hetero_scale if not s.dry_run else s.small_scale}",
        f"out={run}",
        "resume=false",
        "progress=false",
        "wandb.mode=disabled",
        "eval.teachers=[critical_path]",
        "eval.k=2",
    ]
    if s.dry_run:
        overrides += ["phase3.episodes_per_graph=2"]
    rc = cli(["train", str(config), *overrides])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    gaps = [r["charts/sim_real_gap"] for r in rows if "charts/sim_real_gap" in r]
    return {"exit_code": rc, "updates": len(gaps), "sim_real_gap": gaps, "ok": rc == 0 and gaps}


#: The test files whose ``gpu`` tests ``--with-tests`` runs.
GPU_TESTS = ("tests/test_backend_gpu.py", "tests/test_train_device.py")


def check_gpu_tests(s: Setup, wanted: bool) -> dict[str, Any]:
    """``pytest -m gpu`` on the GPU test files (:data:`GPU_TESTS`) when ``wanted`` and
    pytest is there."""
    if s.dry_run or not wanted:
        return {"skipped": "dry run" if s.dry_run else "not asked (--with-tests)", "ok": True}
    try:
        import pytest  # noqa: F401
    except ImportError:
        return {"skipped": "pytest is not installed", "ok": True}
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-m", "gpu", *GPU_TESTS]
    rc = subprocess.run(cmd, cwd=ROOT, check=False).returncode
    return {"exit_code": rc, "ok": rc == 0}


def run_checks(s: Setup, out: Path, with_tests: bool = False) -> dict[str, Any]:
    """Every step of the module docstring; a step that raises is reported, not fatal."""
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("correctness", lambda: check_correctness(s)),
        ("profiled", lambda: check_profiled(s)),
        ("heterogeneous", lambda: check_rank(s.hetero, s.hetero_scale, s)),
    ]
    gpus = s.gpus
    if gpus is not None:
        steps.append(("gpus", lambda: check_rank(gpus, s.gpu_scale, s)))
    steps += [
        ("sharing", lambda: check_sharing(s)),
        ("phase3", lambda: check_phase3(s, out)),
        ("gpu_tests", lambda: check_gpu_tests(s, with_tests)),
    ]
    report: dict[str, Any] = {"setup": asdict(s), "environment": _environment()}
    for name, step in steps:
        t = time.perf_counter()
        try:
            res = step()
        except Exception as e:  # reported in the step's entry; the next steps still run
            res = {"error": f"{type(e).__name__}: {e}", "ok": False}
        res["seconds"] = round(time.perf_counter() - t, 1)
        report[name] = res
        print(f"[{'ok' if res['ok'] else 'FAILED'}] {name} ({res['seconds']} s): {_brief(res)}")
    report["ok"] = all(report[name]["ok"] for name, _ in steps)
    return report


def _brief(res: dict[str, Any]) -> str:
    keys = ("error", "spearman", "median_relative_error", "cpu_share", "shared", "updates")
    parts = [
        f"{k} {res[k]:.3f}" if isinstance(res[k], float) else f"{k} {res[k]}"
        for k in keys
        if k in res
    ]
    for label in ("profiled", "roofline"):
        if label in res:
            parts.append(f"{label} per-node median error {res[label]['median_error']:.1%}")
    return ", ".join(parts)


def _environment() -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__}
    if torch.cuda.is_available():
        env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return env


def main(argv: list[str] | None = None) -> int:
    """Install what is missing, run every step, write the report; 0 if all passed."""
    p = argparse.ArgumentParser(
        prog="python -m placegym.train.machine.gpu_check", description=__doc__
    )
    p.add_argument("--out", default="runs/gpu-check", help="folder of the report")
    p.add_argument("--wheelhouse", default="wheelhouse", help="wheels of missing dependencies")
    p.add_argument("--dry-run", action="store_true", help="CPU workers, tiny sizes, no targets")
    p.add_argument("--with-tests", action="store_true", help="also run pytest -m gpu")
    args = p.parse_args(argv)
    installed = install_missing(runtime_requirements(), args.wheelhouse)
    if installed:
        print(f"installed from {args.wheelhouse}: {', '.join(installed)}")
    import torch

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    report = run_checks(Setup.detect(args.dry_run), out, args.with_tests)
    report["seconds"] = round(time.perf_counter() - t, 1)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"{'all checks passed' if report['ok'] else 'some checks FAILED'} in "
        f"{report['seconds']} s; report: {out / 'report.json'}"
    )
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
