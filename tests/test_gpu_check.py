"""The GPU check's plumbing on CPU workers (``--dry-run``) and its offline dependencies."""

import base64
import hashlib
import json
import zipfile

import pytest

from placegym.train.machine import gpu_check
from placegym.train.machine.wheelhouse import (
    install_command,
    install_missing,
    missing,
    requirements,
)


def test_dry_run_runs_every_step_on_cpu_workers(tmp_path, one_torch_thread):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["ok"] and report["setup"]["dry_run"] and report["setup"]["gpu"] == "cpu"
    steps = ["correctness", "profiled", "heterogeneous", "sharing", "phase3", "gpu_tests"]
    assert all(report[s]["ok"] for s in steps), {s: report[s] for s in steps}
    assert report["correctness"]["ffnn on cpu#2"]["max_abs_error"] <= 1e-3
    assert set(report["profiled"]) >= {"profiled", "roofline", "launch_overhead_us"}
    assert len(report["heterogeneous"]["measured_ms"]) == report["setup"]["placements"]
    assert report["phase3"]["updates"] == 1 and report["phase3"]["exit_code"] == 0
    assert "gpus" not in report  # one "GPU" in a dry run


def test_wheelhouse_requirements_pin_everything_but_torch():
    reqs = requirements("3.12")
    names = {r.split("==")[0] for r in reqs}
    assert {"gymnasium", "stable-baselines3", "sb3-contrib", "pymetis", "numba"} <= names
    assert {"setuptools", "wheel", "pytest"} <= names  # the editable build, the GPU tests
    assert not names & {"torch", "sympy", "filelock", "ruff"}
    assert next(r for r in reqs if r.startswith("gymnasium==")).count("==") == 1


def _wheel(folder, name: str, version: str):
    """A minimal pure-Python wheel of one module."""
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{name}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        ),
        f"{name}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [
        f"{path},sha256="
        f"{base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}"
        for path, data in files.items()
    ]
    files[f"{name}-{version}.dist-info/RECORD"] = (
        "\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    ).encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, data in files.items():
            z.writestr(p, data)
    return path


def test_missing_distributions_install_from_the_wheelhouse_only(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    _wheel(wh, "pgdemo_dep", "0.1")
    assert missing(["numpy>=1.24", "pgdemo_dep", "pgdemo-absent"]) == [
        "pgdemo_dep",
        "pgdemo-absent",
    ]
    cmd = install_command(["pgdemo_dep"], wh, target=tmp_path / "site")
    assert cmd[1:6] == ["-m", "pip", "install", "--no-index", "--find-links"]
    assert install_missing(["numpy", "pgdemo_dep"], wh, target=tmp_path / "site") == ["pgdemo_dep"]
    assert (tmp_path / "site" / "pgdemo_dep" / "__init__.py").read_text() == "VALUE = 42\n"
    with pytest.raises(RuntimeError, match=r"pip could not install pgdemo-absent from"):
        install_missing(["pgdemo-absent"], wh, target=tmp_path / "site")
    with pytest.raises(ValueError, match=r"wheelhouse: '.*nowhere' is not a folder; missing"):
        install_missing(["pgdemo_dep"], tmp_path / "nowhere")
