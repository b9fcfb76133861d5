"""``placegym bench --ray``: the grid on a local Ray gives the serial run's records.

The local Ray runs inside a network namespace with loopback alone (:mod:`netns`).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from netns import isolated, run_isolated

pytest.importorskip("ray")

ARGS = [
    "bench",
    "--teachers",
    "critical_path,random,heft,round_robin",
    "--workloads",
    "ffnn,chainmm",
    "--seeds",
    "0,1",
    "--optimal",
    "--no-progress",
]


def _records(out: Path) -> list[dict]:
    records = json.loads((out / "results.json").read_text())["records"]
    for r in records:
        del r["seconds"]  # wall-clock time: the one field that may differ
    return records


@pytest.mark.skipif(not isolated(), reason="needs unshare -n (a network namespace)")
def test_bench_on_local_ray_equals_the_serial_run(tmp_path):
    cli = [sys.executable, "-m", "placegym.train.cli"]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    serial = subprocess.run(
        [*cli, *ARGS, "--out", str(tmp_path / "serial")], capture_output=True, text=True, env=env
    )
    assert serial.returncode == 0, serial.stderr
    ray = run_isolated([*cli, *ARGS, "--out", str(tmp_path / "ray"), "--ray"], env)
    assert ray.returncode == 0, ray.stderr[-2000:]
    serial_records, ray_records = _records(tmp_path / "serial"), _records(tmp_path / "ray")
    assert len(serial_records) == 2 * 2 * 4
    assert ray_records == serial_records
    assert serial.stdout.splitlines()[:4] == ray.stdout.splitlines()[:4]  # the table's rows


def test_ray_with_a_suite_is_refused(capsys):
    from placegym.train.cli.main import main

    assert main(["bench", "--suite", "x", "--ray"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "placegym bench: error: --ray: not supported with --suite or --replay"
