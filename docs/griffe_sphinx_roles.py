"""A Griffe extension for the API pages: Sphinx roles in docstrings become links or code.

placegym's docstrings cross-reference with Sphinx roles (``:class:`~placegym.envs.Graph```,
``:func:`simulate```, ``:mod:`placegym.train.config```); mkdocstrings' Python handler
renders Markdown and would show them as raw text. Once the package is loaded
(:meth:`SphinxRoles.on_package`), every docstring's roles are rewritten:

- a target that Griffe resolves (a name in the docstring's scope, as Sphinx looks it up,
  or a full ``placegym.`` path of an object that exists) becomes an *optional*
  cross-reference of mkdocs-autorefs, ``<autoref identifier="a.b.c" optional>``: a link
  when the object is rendered on some page, else the same text as code (an unresolved
  optional reference is never a warning, so ``mkdocs build --strict`` stays clean);
- any other target (``torch.Tensor``, a name Griffe does not know) becomes inline code.

The text shown is Sphinx's: the target as written, or its last part for ``~a.b.c``, or
the explicit title of ``:role:`title <target>```. Fenced code blocks are left alone.

Loaded through ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``);
:func:`convert` is the rewrite itself (tested in ``tests/test_docs_api.py``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import griffe

__all__ = ["ROLE", "SphinxRoles", "convert"]

#: A Sphinx role of the Python domain: ``:role:`target``` (``py:`` prefix optional).
ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|mod|data|attr|exc|obj|const|type):`(?P<body>[^`]+)`"
)
_FENCED = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.M | re.S)


def _one(match: re.Match[str], resolve: Callable[[str], str | None]) -> str:
    body = " ".join(match["body"].split())  # a target may wrap onto the next line
    title = None
    if body.endswith(">") and " <" in body:  # :role:`title <target>`
        title, _, body = body[:-1].rpartition(" <")
    target = body.replace(" ", "").lstrip("!")
    short = target.startswith("~")
    target = target.lstrip("~")
    if title is None:
        title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
    code = f"<code>{html.escape(title)}</code>"
    identifier = resolve(target.lstrip("."))
    if identifier is None:
        return f"`{title}`"
    return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'


def convert(text: str, resolve: Callable[[str], str | None]) -> str:
    """``text`` with every Sphinx role rewritten (module docstring), outside fenced code.

    Args:
        text: a docstring.
        resolve: the full path of a role's target (as written, less ``~`` and leading
            dots), or None when it has none (then the role becomes inline code).
    """
    out, pos = [], 0
    for fence in _FENCED.finditer(text):
        out += [ROLE.sub(lambda m: _one(m, resolve), text[pos : fence.start()]), fence[0]]
        pos = fence.end()
    out.append(ROLE.sub(lambda m: _one(m, resolve), text[pos:]))
    return "".join(out)


def _resolver(obj: griffe.Object, collection: Any) -> Callable[[str], str | None]:
    """Sphinx's lookup of a target from ``obj``'s docstring: in ``obj``'s scope (its
    members, its parents', the names its module imports), else as a full path; None
    unless the object exists in the loaded package."""

    def resolve(target: str) -> str | None:
        head, _, rest = target.partition(".")
        try:
            base = obj.resolve(head)
            full = f"{base}.{rest}" if rest else base
        except griffe.NameResolutionError:
            full = target
        try:
            collection.get_member(full)
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        return full

    return resolve


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring of a loaded package (module
    docstring)."""

    def on_package(
        self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any
    ) -> None:
        """Rewrite the docstrings of ``pkg`` and everything in it (aliases share their
        target's docstring)."""
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None:
                resolve = _resolver(obj, loader.modules_collection)
                obj.docstring.value = convert(obj.docstring.value, resolve)
            stack.extend(m for m in obj.members.values() if not m.is_alias)
