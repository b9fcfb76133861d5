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


ROOT = README.parent


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_readme_calls_action_masks_where_it_exists():
    # a gym.make env has no action_masks attribute: the README calls it on env.unwrapped
    text = _flat(README).replace("env.unwrapped.action_masks()", "")
    assert "env.action_masks()" not in text
    import gymnasium as gym

    import placegym.envs  # noqa: F401

    env = gym.make("placegym/ChainMM-v0")
    env.reset(seed=0)
    assert not hasattr(env, "action_masks")
    mask = env.unwrapped.action_masks()
    assert (env.get_wrapper_attr("action_masks")() == mask).all() and mask.any()


def test_readme_names_what_make_demo_writes():
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:")[1].split("\n\n")[0]
    outs = re.findall(r"(?:--out |out=)(\S+)", recipe)
    assert outs == ["demo-out", "demo-out/quickstart", "demo-out/bench"]
    text = _flat(README)
    for folder in outs:
        assert f"`{folder}/`" in text


def _minutes(text: str, anchor: str) -> int:
    """The N of the first "about N min(utes)" after ``anchor`` in ``text``."""
    found = re.search(re.escape(anchor) + r".*?about (\d+) min", text, flags=re.I)
    assert found, anchor
    return int(found.group(1))


def test_time_figures_agree_everywhere():
    readme, configs = _flat(README), _flat(ROOT / "configs" / "README.md")
    quickstart = _flat(ROOT / "configs" / "quickstart.yaml")
    report = _flat(ROOT / "train" / "experiments" / "report.py")
    make = _flat(ROOT / "Makefile")
    line = "placegym train configs/quickstart.yaml #"
    assert _minutes(readme, line) == _minutes(configs, line) == _minutes(quickstart, "#")
    assert (
        _minutes(readme, "make agent-report")
        == _minutes(make, "# Learned-agent report")
        == _minutes(report, "The whole report takes")
    )
