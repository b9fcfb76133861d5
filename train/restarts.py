"""The run layer: train a config's ``init`` config first when needed, then the config
itself, or several independent restarts of it with the best one kept.

``init: other.yaml`` names the final checkpoint of that config's run; when it does not
exist yet, :func:`train` trains that config first (the trainer itself only loads it).

Training outcomes vary with the seed far more than with most knobs (the README's
three-seed figures), so a config may ask for ``restarts: R``. :func:`train` then runs it R
times with seeds ``seed, seed + 1, ..., seed + R - 1``, each a complete, resumable run in
``<run>/restart<i>`` (W&B run ``<name>-restart<i>``), and picks the restart whose final
greedy placements are best on the *training* graphs (geometric mean of the greedy
makespans over critical_path's; held-out graphs never take part in the choice). The
chosen restart's ``checkpoints/final.pt``, ``results.md`` and ``results.json`` are
copied to the run folder, which therefore looks like a one-restart run to ``placegym
bench --agents``, ``init:`` and the agent report; ``restarts.json`` records every
restart's seed, folder (relative to the run folder, which may move) and score, and which
one was chosen. Re-running resumes the restarts that
did not finish and loads those that did.

Running a finished run again (same config) trains, evaluates and logs nothing: it prints
the run's results (``results.md``) and how to train again. A resume must use the config
the run was trained with (:func:`~placegym.train.checkpoint.check_resume`: a changed key
is refused, naming it), and one process at a time trains in a run folder
(:class:`~placegym.train.runlock.RunLock`: a second one is refused, naming the first).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from placegym.train.checkpoint import check_resume, init_checkpoint
from placegym.train.config import TrainConfig, resolve_path
from placegym.train.config_checks import resolve_device
from placegym.train.evaluate import results_table, train_greedy_ratio
from placegym.train.runlock import RunLock
from placegym.train.trainer import Trainer

__all__ = ["finished_results", "restart_configs", "train", "train_init_first"]


def restart_configs(cfg: TrainConfig) -> list[TrainConfig]:
    """The configs of ``cfg``'s restarts (``restarts: 1`` inside each)."""
    return [
        dataclasses.replace(
            cfg,
            seed=cfg.seed + i,
            restarts=1,
            name=f"{cfg.name}-restart{i}",
            out=str(cfg.run_dir / f"restart{i}"),
        )
        for i in range(cfg.restarts)
    ]


def finished_results(run_dir: Path) -> dict[str, Any] | None:
    """The ``results.json`` of a run that finished, else None."""
    done = run_dir / "results.json"
    if done.is_file():
        results = json.loads(done.read_text())
        if results["progress"]["complete"]:
            return results
    return None


def _rows(cfg: TrainConfig, base_dir: Path | None, table: bool = False) -> list[dict[str, Any]]:
    """Final evaluation rows of a one-restart run: loaded when it finished (and, with
    ``table``, printed), else trained (resuming when it can).

    Raises:
        ConfigChanged: the run exists, and ``cfg`` is not the config it was trained with.
    """
    check_resume(cfg)
    results = finished_results(cfg.run_dir) if cfg.resume else None
    if results is None:
        return Trainer(cfg, base_dir=base_dir).run()
    progress = results["progress"]
    print(
        f"{cfg.run_dir}: finished at update {progress['global_update']}, nothing to train; "
        "train again with out=<another folder> or resume=false"
    )
    if table:
        print(results_table(results["rows"], cfg.eval.k, progress["seconds"]))
    return results["rows"]


def train_init_first(cfg: TrainConfig, base_dir: Path | None = None) -> None:
    """Train the config that ``cfg.init`` names when its final checkpoint is missing."""
    if not cfg.init:
        return
    path, src = init_checkpoint(cfg.init, base_dir)
    if src is not None and not path.is_file():
        print(f"init: training {src.name} first ({path} does not exist)")
        train(src, base_dir=resolve_path(cfg.init, base_dir).parent)


def train(cfg: TrainConfig, base_dir: Path | None = None) -> list[dict[str, Any]]:
    """Run ``cfg`` (its ``init`` config first when needed, then all its restarts) and
    return the final evaluation rows of the run (of the chosen restart).

    Raises:
        RunBusy: another process trains in the run folder.
        ConfigChanged: the run exists with another config (a resume must keep it).
        ValueError: ``cfg.device`` names a device this machine lacks (before anything,
            the ``init`` config included, is trained).
    """
    resolve_device(cfg.device)
    train_init_first(cfg, base_dir)
    with RunLock(cfg.run_dir):  # restarts train in sub-folders: one lock holds them all
        if cfg.restarts == 1:
            return _rows(cfg, base_dir, table=True)
        return _train_restarts(cfg, base_dir)


def _train_restarts(cfg: TrainConfig, base_dir: Path | None) -> list[dict[str, Any]]:
    """Train (or load) every restart of ``cfg`` and keep the best one (module docstring)."""
    runs = [(sub, _rows(sub, base_dir)) for sub in restart_configs(cfg)]
    scores = [train_greedy_ratio(rows) for _, rows in runs]
    best = min(range(len(runs)), key=scores.__getitem__)
    chosen, rows = runs[best]
    (cfg.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(
        chosen.run_dir / "checkpoints" / "final.pt", cfg.run_dir / "checkpoints" / "final.pt"
    )
    for name in ("results.md", "results.json"):
        shutil.copyfile(chosen.run_dir / name, cfg.run_dir / name)
    (cfg.run_dir / "config.yaml").write_text(cfg.to_yaml())
    summary = {
        "chosen": best,
        "restarts": [
            {"restart": i, "seed": sub.seed, "run": sub.run_dir.name, "train_greedy_ratio": s}
            for i, ((sub, _), s) in enumerate(zip(runs, scores, strict=True))
        ],
    }
    (cfg.run_dir / "restarts.json").write_text(json.dumps(summary, indent=1))
    print(
        "restarts: train greedy / critical_path "
        + ", ".join(f"{s:.3f}" for s in scores)
        + f"; chose restart{best} (seed {chosen.seed}): "
        + f"{cfg.run_dir / 'checkpoints' / 'final.pt'}"
    )
    return rows
