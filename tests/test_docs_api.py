"""The API reference: Sphinx roles become links or code, and every module the guides name
is on an API page.

The docs build itself (``make docs``, ``mkdocs build --strict``) is not run here; these
tests check what it relies on: the Griffe extension ``docs/griffe_sphinx_roles.py``
rewrites the roles of the real docstrings (loaded as mkdocstrings loads them), and the
``:::`` directives of ``docs/api/*.md`` cover the guides' modules.
"""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location(
    "griffe_sphinx_roles", ROOT / "docs" / "griffe_sphinx_roles.py"
)
assert SPEC is not None and SPEC.loader is not None
roles = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(roles)

KNOWN = {"Graph": "placegym.envs.core.graph.Graph", "placegym.envs.sim": "placegym.envs.sim"}


def resolve(target: str) -> str | None:
    return KNOWN.get(target)


def link(identifier: str, title: str) -> str:
    return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'


@pytest.mark.parametrize(
    "text, expected",
    [
        (":class:`Graph` nodes", link("placegym.envs.core.graph.Graph", "Graph") + " nodes"),
        (":py:class:`~Graph`", link("placegym.envs.core.graph.Graph", "Graph")),
        (":mod:`placegym.envs.sim`", link("placegym.envs.sim", "placegym.envs.sim")),
        (":mod:`~placegym.envs.sim`", link("placegym.envs.sim", "sim")),
        (":func:`the graph <Graph>`", link("placegym.envs.core.graph.Graph", "the graph")),
        (":func:`~torch.load` and :data:`X`", "`load` and `X`"),  # unknown: code
        (":meth:`~placegym.a.\n    b`", "`b`"),  # a target wrapped onto the next line
        ("no role: ``plain`` and `code`", "no role: ``plain`` and `code`"),
        ("see\n```python\nx = ':class:`Graph`'\n```\n:class:`Graph`", None),
    ],
)
def test_roles_become_optional_links_or_code(text, expected):
    out = roles.convert(text, resolve)
    if expected is None:  # fenced code is left alone, the role after it is not
        assert "x = ':class:`Graph`'" in out and out.endswith(link(KNOWN["Graph"], "Graph"))
    else:
        assert out == expected


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """``placegym`` as the docs build loads it (the Makefile's .docs-src links), with the
    extension."""
    src = tmp_path_factory.mktemp("docs-src") / "placegym"
    src.mkdir()
    for name in ("__init__.py", "benchmark.py"):
        (src / name).symlink_to(ROOT / "placegym" / name)
    for name in ("envs", "teachers", "agents", "train"):
        (src / name).symlink_to(ROOT / name)
    ext = griffe.load_extensions(roles.SphinxRoles)
    # as mkdocstrings does, by an object's path (the top package's own file is a link)
    pkg = griffe.load("placegym.benchmark", search_paths=[src.parent], extensions=ext).package
    assert {"benchmark", "envs", "teachers", "agents", "train"} <= set(pkg.members)
    return pkg


def _objects(obj):
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)


def test_no_docstring_of_the_package_keeps_a_raw_role(package):
    left = [
        f"{obj.path}: {m[0]}"
        for obj in _objects(package)
        if obj.docstring is not None
        for m in roles.ROLE.finditer(obj.docstring.value)
    ]
    assert left == []
    config = package["train.config"].docstring.value
    # resolved in the module's scope (an import), to the object's own path
    assert link("placegym.train.config_schema.ImitationConfig", "ImitationConfig") in config
    assert link("placegym.train.dataclass_io", "placegym.train.dataclass_io") in config


GUIDES = sorted((ROOT / "docs").glob("*.md"))
LAYERS = {"placegym.envs", "placegym.teachers", "placegym.agents", "placegym.train"}
NOT_MODULES = {"placegym.configs"}  # the presets: a data package


def _rendered() -> set[str]:
    out: set[str] = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        out |= set(re.findall(r"^::: (\S+)", page.read_text(), re.M))
    return out


def test_every_module_the_guides_name_is_in_the_api_reference():
    """A module named in a guide (not as ``python -m``), or the module of a function or
    class named there, is rendered by a ``:::`` directive (the layer namespaces are
    described on api/index.md)."""
    rendered, missing = _rendered(), []
    for page in GUIDES:
        text = re.sub(r"python -m placegym[\w.]+", "", page.read_text())
        for name in sorted(set(re.findall(r"`[^`]*?\b(placegym(?:\.\w+)+)", text))):
            if name in LAYERS | NOT_MODULES:
                continue
            try:
                is_module = importlib.util.find_spec(name) is not None
            except ModuleNotFoundError:
                is_module = False
            parent, _, attr = name.rpartition(".")
            if is_module:
                if name not in rendered:
                    missing.append(f"{page.name}: module {name}")
                continue
            obj = getattr(importlib.import_module(parent), attr, None)
            module = getattr(obj, "__module__", None)
            if module is not None and not {module, parent} & rendered:
                missing.append(f"{page.name}: {name} (in {module})")
    assert missing == []
    assert {"placegym.benchmark", "placegym.train.leaderboard", "placegym.agents.zoo"} <= rendered
