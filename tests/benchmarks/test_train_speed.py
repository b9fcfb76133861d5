"""Training speed (``make bench``): episodes/s of ``placegym train`` on FFNN (128 nodes,
4x P100) with the quickstart settings, phase I (imitation with teacher labels) and
phase II (REINFORCE and PPO), counting rollout and update (evaluation excluded).

Target: >= 10 training episodes/s in phase II on 2 CPU cores.
"""

from pathlib import Path

import pytest

from placegym.train.config import apply_overrides, load_config
from placegym.train.trainer import Trainer

pytestmark = pytest.mark.benchmark

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"


def episodes_per_second(tmp_path: Path, phase: str, *overrides: str) -> float:
    cfg = load_config(
        QUICKSTART,
        [
            f"out={tmp_path / phase}",
            f"phases=[{phase}]",
            "phase1.updates=10",
            "phase2.updates=10",
            "eval.every=0",
            "eval.k=1",
            "eval.teachers=[critical_path]",
            "eval.gantt=false",
            "progress=false",
            "wandb.mode=disabled",
            *overrides,
        ],
    )
    trainer = Trainer(cfg)
    trainer.run()
    return trainer.progress.episodes / trainer.progress.seconds


def test_training_episodes_per_second(tmp_path):
    cfg = apply_overrides(load_config(QUICKSTART), [])
    rates = {
        "phase I imitation": episodes_per_second(tmp_path / "a", "phase1"),
        "phase II reinforce": episodes_per_second(tmp_path / "b", "phase2"),
        "phase II ppo (4 epochs)": episodes_per_second(
            tmp_path / "c", "phase2", "phase2.algo=ppo", "phase2.ppo_epochs=4"
        ),
    }
    print(
        f"\n\ntraining speed on ffnn / p100x4 (quickstart: {cfg.phase1.episodes_per_graph} "
        f"episodes per phase I update, {cfg.phase2.episodes_per_graph} per phase II update, "
        f"hidden {cfg.policy.hidden}, {cfg.policy.layers} layers, {cfg.threads} thread)"
    )
    print("| phase | episodes/s |")
    print("|---|---|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:.1f} |")
    assert rates["phase II reinforce"] >= 10.0
    assert rates["phase II ppo (4 epochs)"] >= 10.0
