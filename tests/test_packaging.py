"""Every code folder installs under the ``placegym`` namespace."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "envs": "placegym.envs",
    "agents": "placegym.agents",
    "teachers": "placegym.teachers",
    "train": "placegym.train",
}


def test_every_package_folder_is_listed_in_pyproject():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    code_dirs = {k: v for k, v in cfg["package-dir"].items() if k != "placegym.configs"}
    assert code_dirs == {v: k for k, v in FOLDERS.items()}
    found = {"placegym.configs"}  # the YAML presets, a data package
    for folder, pkg in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((pkg, *rel)))
    assert set(cfg["packages"]) == found

    assert all(p.startswith("placegym.") for p in cfg["packages"])  # nothing installs bare


def test_the_presets_ship_as_package_data():
    from placegym.train.config import load_preset, presets_dir

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"]["placegym.configs"] == "configs"
    assert "*.yaml" in cfg["package-data"]["placegym.configs"]
    assert presets_dir().resolve() == (ROOT / "configs").resolve()
    assert load_preset("quickstart").name == "quickstart"
