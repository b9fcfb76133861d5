"""Every code folder installs under the ``placegym`` package (which carries the version),
the presets as its data package ``placegym.configs``, the suites' and importers' data as
data packages of their own."""

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "placegym": "placegym",
    "envs": "placegym.envs",
    "agents": "placegym.agents",
    "teachers": "placegym.teachers",
    "train": "placegym.train",
}


def test_every_package_folder_is_listed_in_pyproject():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    code_dirs = {k: v for k, v in cfg["package-dir"].items() if k != "placegym.configs"}
    assert code_dirs == {v: k for k, v in FOLDERS.items()}
    # data packages: the YAML presets, the suites' reference files and published
    # workloads, the importers' sample files
    found = {"placegym.configs", "placegym.envs.suites.data", "placegym.envs.importers.data"}
    for folder, pkg in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((pkg, *rel)))
    assert set(cfg["packages"]) == found
    # nothing installs bare; the top package holds the version and the benchmark facade
    assert all(p == "placegym" or p.startswith("placegym.") for p in cfg["packages"])
    top = sorted(p.name for p in (ROOT / "placegym").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "benchmark.py"]


def test_version_from_python_and_the_command_line():
    import placegym

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert placegym.__version__ == version("placegym") == project["version"]
    proc = subprocess.run(
        [sys.executable, "-m", "placegym.train.cli", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout == f"placegym {project['version']}\n"


def test_the_presets_ship_as_package_data():
    from placegym.train.config import load_preset, presets_dir

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"]["placegym.configs"] == "configs"
    assert "*.yaml" in cfg["package-data"]["placegym.configs"]
    assert presets_dir().resolve() == (ROOT / "configs").resolve()
    assert load_preset("quickstart").name == "quickstart"
