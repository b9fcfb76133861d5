"""The README's Python snippets run as written, and the README is a front page.

Snippets that train (``.learn(``) run as written in the slow suite; the default suite
runs each of them with its budgets shrunk (:data:`SHRINK`), every line still executed.
The same mechanism runs the documentation pages' snippets (``tests/test_docs_snippets.py``).
Every snippet runs in an empty folder and may write only under ``demo-out/`` there.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Folders the documented commands may write to (all git-ignored), besides placeholders.
SCRATCH = ("demo-out", "runs/", "bench-out", "anytime-out")

#: Budget knobs of the training snippets and their small values.
SHRINK = (
    (r"\bn_steps=\d+", "n_steps=64"),
    (r"\bbatch_size=\d+", "batch_size=64"),
    (r"\btotal_timesteps=[\d_]+", "total_timesteps=64"),
    (r"\b(n_)?epochs=\d+", r"\1epochs=1"),
    (r"make_maskable_ppo\(([^)]*)\)", r"make_maskable_ppo(\1, n_steps=64, batch_size=64)"),
)


def python_blocks(path: Path) -> list[str]:
    """The ``python`` code blocks of a markdown page, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def bash_blocks(path: Path) -> list[str]:
    """The ``bash`` code blocks of a markdown page, in order."""
    return re.findall(r"```bash\n(.*?)```", path.read_text(), flags=re.S)


def trains(block: str) -> bool:
    return ".learn(" in block


def shrunk(block: str) -> str:
    for pattern, small in SHRINK:
        block = re.sub(pattern, small, block)
    return block


def run(block: str, label: str, folder: Path) -> dict:
    """Execute ``block`` in ``folder`` (the current directory), check that it wrote
    nothing outside ``folder/demo-out``, and return its namespace."""
    namespace: dict = {}
    exec(compile(block, label, "exec"), namespace)
    stray = [
        p.relative_to(folder)
        for p in folder.rglob("*")
        if p.is_file() and p.relative_to(folder).parts[0] != "demo-out"
    ]
    assert stray == [], f"{label} wrote outside demo-out/: {stray}"
    return namespace


def assigned_names(block: str) -> set[str]:
    """The names a block binds at its top level (assignments and imports)."""
    names: set[str] = set()
    for node in ast.parse(block).body:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def written_paths(block: str) -> list[str]:
    """The outputs a shell block names: ``--out X``, ``out=X`` and ``> X``."""
    text = block.replace("\\\n", " ")
    return re.findall(r"(?:--out[ =]|\bout=|> )(\S+)", text)


def check_scratch(block: str, label: str) -> None:
    """Every output of a shell block goes to a scratch folder, and ``placegym calibrate``
    (which writes ``cluster.json`` by default) is always given ``--out``."""
    for out in written_paths(block):
        out = out.strip("'\"")
        assert out.startswith(SCRATCH) or out.isupper(), f"{label}: writes to {out}"
    for line in block.replace("\\\n", " ").splitlines():
        if "placegym calibrate" in line:
            assert "--out " in line, f"{label}: {line.strip()} writes cluster.json here"


BLOCKS = python_blocks(README)
TRAINS = [i for i, block in enumerate(BLOCKS) if trains(block)]


def test_readme_has_the_tour_snippet():
    assert BLOCKS and "simulate(graph, cluster" in BLOCKS[0]


@pytest.mark.parametrize(
    "index",
    [pytest.param(i, marks=pytest.mark.slow) if i in TRAINS else i for i in range(len(BLOCKS))],
)
def test_readme_snippet_runs(index, tmp_path, monkeypatch, capsys):
    """Each snippet runs, binds every name it assigns, and shows something: it prints or
    writes a file under demo-out/ (the tour's Gantt chart; a makespan it prints must be
    a positive number)."""
    monkeypatch.chdir(tmp_path)
    namespace = run(BLOCKS[index], f"README.md[python block {index}]", tmp_path)
    assert assigned_names(BLOCKS[index]) <= set(namespace)
    printed = capsys.readouterr().out.split()
    written = [p for p in (tmp_path / "demo-out").rglob("*") if p.is_file()]
    assert printed or written, "the snippet shows nothing"
    if "schedule" in namespace:
        assert printed and float(printed[0]) == namespace["schedule"].makespan > 0
    if index == 0:
        assert (tmp_path / "demo-out" / "gantt.png").stat().st_size > 10_000


def test_shrinking_keeps_every_line_and_cuts_the_budgets():
    block = (
        "model = make_maskable_ppo('placegym/FFNN-v0', seed=0)\n"
        "model.learn(total_timesteps=5_120)\n"
        "MaskablePPO('MultiInputPolicy', env, n_steps=512, batch_size=128, n_epochs=2)\n"
    )
    small = shrunk(block)
    assert small.count("\n") == block.count("\n")
    assert "total_timesteps=64" in small and "n_steps=64, batch_size=64, n_epochs=1" in small
    assert "make_maskable_ppo('placegym/FFNN-v0', seed=0, n_steps=64, batch_size=64)" in small


def test_a_snippet_writing_outside_demo_out_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match=r"wrote outside demo-out/: \[PosixPath\('g.png'\)"):
        run("open('g.png', 'w').write('x')", "t", tmp_path)


def test_shell_outputs_go_to_scratch_folders():
    for i, block in enumerate(bash_blocks(README)):
        check_scratch(block, f"README.md[bash block {i}]")
    with pytest.raises(AssertionError, match=r"writes to g\.json"):
        check_scratch("placegym graphs import-doppler x.txt --out g.json", "t")
    with pytest.raises(AssertionError, match=r"writes cluster\.json here"):
        check_scratch("placegym calibrate --devices cpu#2 --check", "t")


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_readme_names_what_make_demo_writes():
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:")[1].split("\n\n")[0]
    outs = re.findall(r"(?:--out |out=)(\S+)", recipe)
    assert outs == ["demo-out", "demo-out/quickstart", "demo-out/bench"]
    text = _flat(README)
    for folder in outs:
        assert f"`{folder}/`" in text


def test_readme_says_how_to_run_the_command_line():
    text = _flat(README)
    assert "source .venv/bin/activate" in text and "`.venv/bin/placegym`" in text


def test_readme_is_a_front_page_whose_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert missing == []


def time_claims(text: str) -> list[str]:
    """Hand-typed durations: "about 10 minutes", "takes 5 s", "8 min on 2 cores"."""
    unit = r"(?:s|sec|seconds?|min|minutes?|h|hours?)\b"
    pattern = (
        rf"\b(?:about|takes?|took)\s+[\d.,–-]+\s*{unit}|\b[\d.,–-]+\s*{unit}\s+on\s+\d+\s+cores"
    )
    return re.findall(pattern, text)


def test_time_claims_are_found():
    assert time_claims("make demo (about 10 minutes on 2 cores)") == ["about 10 minutes"]
    assert time_claims("# FFNN on p100x4, 8 min on 2 cores") == ["8 min on 2 cores"]
    assert time_claims("It takes 5 s; 3 seeds") == ["takes 5 s"]
    assert time_claims("measured 0.5 s per call (machine recorded)") == []


def test_readme_makes_no_hand_typed_time_claims():
    # durations belong in generated blocks, which record the machine they were measured on
    hand = re.sub(r"<!-- generated: .*?<!-- end generated -->", "", README.read_text(), flags=re.S)
    assert time_claims(hand) == []
