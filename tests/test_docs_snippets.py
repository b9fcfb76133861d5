"""The documentation pages' Python snippets run as written, as the README's do.

The mechanism is :mod:`test_readme`'s: every ``python`` block of ``docs/**/*.md`` runs in
an empty folder and may write only under ``demo-out/``; a block that trains (``.learn(``)
runs as written in the slow suite and with its budgets shrunk in the default one. A block
the README also holds runs once, there. The shell blocks write only to scratch folders,
and the pages' hand-written text (not the dated research notes, not generated blocks)
makes no time claims.
"""

import re
from pathlib import Path

import pytest
import test_readme as readme

DOCS = readme.ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
NOTES = DOCS / "notes"
SEEN = set(readme.BLOCKS)
SNIPPETS = [
    (page, i, block)
    for page in PAGES
    for i, block in enumerate(readme.python_blocks(page))
    if block not in SEEN
]


def _label(page: Path, i: int) -> str:
    return f"{page.relative_to(readme.ROOT)}[python block {i}]"


def test_the_pages_have_snippets_and_one_trains():
    assert len(SNIPPETS) >= 5
    pages = {page.name for page, _, _ in SNIPPETS}
    assert {"environments.md", "training.md", "real-backend.md"} <= pages
    assert sum(readme.trains(block) for _, _, block in SNIPPETS) >= 2


@pytest.mark.parametrize(
    "page, index, block",
    [
        pytest.param(p, i, b, marks=pytest.mark.slow, id=_label(p, i))
        if readme.trains(b)
        else pytest.param(p, i, b, id=_label(p, i))
        for p, i, b in SNIPPETS
    ],
)
def test_docs_snippet_runs(page, index, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readme.run(block, _label(page, index), tmp_path)


@pytest.mark.parametrize(
    "page, index, block",
    [pytest.param(p, i, b, id=_label(p, i)) for p, i, b in SNIPPETS if readme.trains(b)],
)
def test_docs_training_snippet_runs_on_a_small_budget(page, index, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    small = readme.shrunk(block)
    assert small != block and "total_timesteps=64" in small
    readme.run(small, _label(page, index), tmp_path)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_shell_outputs_go_to_scratch_folders(page):
    for i, block in enumerate(readme.bash_blocks(page)):
        readme.check_scratch(block, f"{page.relative_to(readme.ROOT)}[bash block {i}]")


@pytest.mark.parametrize(
    "page", [p for p in PAGES if NOTES not in p.parents], ids=lambda p: str(p.relative_to(DOCS))
)
def test_pages_make_no_hand_typed_time_claims(page):
    hand = re.sub(r"<!-- generated: .*?<!-- end generated -->", "", page.read_text(), flags=re.S)
    assert readme.time_claims(hand) == []


def test_the_pages_call_action_masks_where_it_exists():
    # a gym.make env has no action_masks attribute: the pages call it on env.unwrapped
    for page in [readme.README, *PAGES]:
        text = " ".join(page.read_text().split()).replace("env.unwrapped.action_masks()", "")
        assert "env.action_masks()" not in text, page.name
    import gymnasium as gym

    import placegym.envs  # noqa: F401

    env = gym.make("placegym/ChainMM-v0")
    env.reset(seed=0)
    assert not hasattr(env, "action_masks")
    mask = env.unwrapped.action_masks()
    assert (env.get_wrapper_attr("action_masks")() == mask).all() and mask.any()


def test_every_research_note_is_dated_and_listed():
    index = (NOTES / "index.md").read_text()
    for note in sorted(NOTES.glob("20*.md")):
        date = note.name[:10]
        assert re.search(rf"^\*Date: {date}", note.read_text(), flags=re.M), note.name
        assert f"]({note.name})" in index and f"| {date} |" in index, note.name
