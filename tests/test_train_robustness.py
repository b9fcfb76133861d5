"""`placegym train` on hostile input: YAML that nests too deep, holds itself or has wrong
types (a seeded fuzz of the quickstart config), ``init`` chains that loop, and runs whose
loss or weights go nan: one line naming the problem and exit code 2, never a traceback."""

import copy
import random
from pathlib import Path

import pytest
import torch
import yaml
from test_train_run import tiny_config

from placegym.train.cli import main
from placegym.train.config import InitCycle, load_config
from placegym.train.dataclass_io import MAX_DEPTH, check_nesting
from placegym.train.trainer import Diverged, Trainer

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
BASE = yaml.safe_load(QUICKSTART.read_text())


def one_error_line(capsys, argv: list[str]) -> str:
    """Run ``placegym`` (exit code 2 expected) and return its one line of stderr."""
    assert main(argv) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("placegym train: error: "), out.err
    assert "Traceback" not in out.err + out.out
    return lines[0]


def _paths(value, at=""):
    """Every (dotted key, value) below a parsed config, sections and list items too."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        sub = f"{at}[{key}]" if isinstance(value, list) else f"{at}.{key}" if at else key
        yield sub, child
        if isinstance(child, dict | list):
            yield from _paths(child, sub)


def _set(raw, dotted: str, value) -> None:
    """Set the value at a key of :func:`_paths` (``a.b[0].c``)."""
    parts = dotted.replace("[", ".[").split(".")
    node = raw
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    last = parts[-1]
    node[int(last[1:-1]) if last.startswith("[") else last] = value


DEEP = "@@deep@@"


def fuzz_case(seed: int) -> tuple[str, str]:
    """A broken quickstart config (YAML text) and what its error line must contain."""
    rng = random.Random(seed)
    raw = copy.deepcopy(BASE)
    where, old = rng.choice(list(_paths(raw)))
    kind = ["deep", "wrong type", "itself"][seed % 3]
    if kind == "deep":
        depth = rng.choice([MAX_DEPTH + 1, 100, 990, 3000])
        opened, closed = ("[", "]") if rng.random() < 0.5 else ("{a: ", "}")
        _set(raw, where, DEEP)
        nest = opened * depth + "1" + closed * depth
        text = yaml.safe_dump(raw).replace(f"'{DEEP}'", nest).replace(DEEP, nest)
        return text, f"nested deeper than {MAX_DEPTH} levels"
    if kind == "itself":
        loop: list = [1]
        loop.append(loop)
        _set(raw, where, loop)
        return yaml.safe_dump(raw), f"{where}[1]: contains itself"
    # a mapping where a value or list is expected, a list where a section is
    _set(raw, where, [1, 2] if isinstance(old, dict) else {"x": [1]})
    return yaml.safe_dump(raw), where


@pytest.mark.parametrize("seed", range(30))
def test_fuzzed_configs_give_one_line_and_exit_2(tmp_path, capsys, seed):
    text, expected = fuzz_case(seed)
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    line = one_error_line(capsys, ["train", str(path), "--print-config"])
    assert expected in line


def test_deep_and_self_holding_overrides_are_refused(tmp_path, capsys):
    deep = "[" * 2000 + "]" * 2000
    line = one_error_line(capsys, ["train", str(QUICKSTART), f"phase1.teacher_kwargs={deep}"])
    assert line.endswith(f"phase1.teacher_kwargs: nested deeper than {MAX_DEPTH} levels")
    laughs = {"a": [1] * 10}  # aliases that expand tenfold per level: refused, not expanded
    for _ in range(8):
        laughs = {"a": [laughs["a"]] * 10}
    with pytest.raises(ValueError, match=r"x: more than 100,000 values"):
        check_nesting(laughs, "x")


def test_an_init_chain_that_loops_is_refused_naming_it(tmp_path, capsys):
    (tmp_path / "self.yaml").write_text("init: self.yaml\n")
    line = one_error_line(capsys, ["train", str(tmp_path / "self.yaml")])
    assert line.endswith(f"init: the configs' init chain loops: {tmp_path}/self.yaml -> self.yaml")
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "a.yaml").write_text("init: sub/b.yaml\n")
    (sub / "b.yaml").write_text("init: c.yaml\n")  # found beside b.yaml
    (sub / "c.yaml").write_text("init: ../a.yaml\n")
    with pytest.raises(InitCycle, match=r"loops: .*a\.yaml -> sub/b\.yaml -> c\.yaml -> \.\./a"):
        load_config(tmp_path / "a.yaml")
    # an override can close the loop too; a chain that ends is fine
    (tmp_path / "d.yaml").write_text("seed: 1\n")
    assert load_config(tmp_path / "a.yaml", ["init=d.yaml"]).init == "d.yaml"
    line = one_error_line(capsys, ["train", str(tmp_path / "d.yaml"), "init=sub/b.yaml"])
    assert "loops: " in line and line.endswith("c.yaml -> ../a.yaml -> sub/b.yaml")
    (sub / "c.yaml").write_text("phase1: {lr: 5}\n")  # a bad config down the chain
    with pytest.raises(ValueError, match=r"^init: sub/b\.yaml: init: c\.yaml: phase1\.lr: must"):
        load_config(tmp_path / "a.yaml")


def test_a_learning_rate_that_makes_nan_stops_at_that_update(tmp_path):
    cfg = tiny_config(tmp_path)
    cfg.phase1.lr = 1e30  # past the config's checks (a Python caller): Adam overflows
    trainer = Trainer(cfg)
    with pytest.raises(Diverged) as info:
        trainer.run()
    message = str(info.value)
    assert message.startswith("phase1: training diverged at update 2 of 4 (global update 2)")
    assert "losses/imitation = nan" in message and "non-finite weights in " in message
    assert "likely cause: the learning rate phase1.lr = 1e+30 is too large" in message
    assert "\n" not in message
    # stopped there: update 2 (a checkpoint update) saved nothing, no final checkpoint
    assert not (trainer.ckpt_dir / "latest.pt").exists()
    assert not (trainer.ckpt_dir / "final.pt").exists()


def test_nan_weights_in_phase2_end_the_cli_run_with_one_line(tmp_path, capsys, monkeypatch):
    import placegym.train.trainer as trainer_module

    real, calls = trainer_module.rl_update, []

    def poisoned(policy, *args, **kwargs):
        metrics = real(policy, *args, **kwargs)
        calls.append(1)
        if len(calls) == 3:
            with torch.no_grad():
                next(policy.parameters()).fill_(float("inf"))
        return metrics

    monkeypatch.setattr(trainer_module, "rl_update", poisoned)
    cfg = tiny_config(tmp_path, phase2={"updates": 5, "episodes_per_graph": 2, "lr": 0.01})
    path = tmp_path / "tiny.yaml"
    path.write_text(cfg.to_yaml().replace("max_grad_norm: 1.0", "max_grad_norm: 0.0"))
    line = one_error_line(capsys, ["train", str(path)])
    assert "phase2: training diverged at update 3 of 5 (global update 7)" in line
    assert "non-finite weights in " in line and "phase2.lr = 0.01" in line
    assert "or clip gradients with phase2.max_grad_norm > 0" in line
