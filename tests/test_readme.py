"""The README's Python snippets run as written.

Snippets that train (``.learn(``) run as written in the slow suite; the default suite
runs each of them with its budgets shrunk (:data:`SHRINK`), every line still executed.
"""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
TRAINS = [i for i, block in enumerate(BLOCKS) if ".learn(" in block]

#: Budget knobs of the training snippets and their small values.
SHRINK = (
    (r"\bn_steps=\d+", "n_steps=64"),
    (r"\bbatch_size=\d+", "batch_size=64"),
    (r"\btotal_timesteps=[\d_]+", "total_timesteps=64"),
    (r"\b(n_)?epochs=\d+", r"\1epochs=1"),
    (r"make_maskable_ppo\(([^)]*)\)", r"make_maskable_ppo(\1, n_steps=64, batch_size=64)"),
)


def shrunk(block: str) -> str:
    for pattern, small in SHRINK:
        block = re.sub(pattern, small, block)
    return block


def run(block: str, index: int) -> None:
    exec(compile(block, f"README.md[python block {index}]", "exec"), {})


def test_readme_has_the_snippets():
    assert len(BLOCKS) >= 3 and TRAINS


@pytest.mark.parametrize(
    "index",
    [pytest.param(i, marks=pytest.mark.slow) if i in TRAINS else i for i in range(len(BLOCKS))],
)
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run(BLOCKS[index], index)


@pytest.mark.parametrize("index", TRAINS)
def test_readme_training_snippet_runs_on_a_small_budget(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    small = shrunk(BLOCKS[index])
    assert small != BLOCKS[index] and "total_timesteps=64" in small
    run(small, index)
