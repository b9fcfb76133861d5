"""Metric logging: a local ``metrics.jsonl`` always, and Weights & Biases when enabled.

W&B mode (``wandb.mode`` in the config):

- ``auto``: ``$WANDB_MODE`` when set; otherwise ``online`` when an API key is configured
  (``$WANDB_API_KEY`` or a ``.netrc`` entry for the W&B host) and ``offline`` when not,
  so a machine without credentials never tries the network;
- ``online`` / ``offline`` / ``disabled``: as given (``disabled`` does not import wandb).

Metric namespaces follow CleanRL: ``losses/...``, ``charts/...``, ``eval/...``. Runs
live under ``$WANDB_DIR`` when set, else the run folder; the W&B run id is derived from
the run folder, so a resumed run continues the same W&B run. A resumed run redoes the
updates after its checkpoint; the steps that an earlier session already logged (the
last step of ``metrics.jsonl`` before it is cut back to the checkpoint) are not sent to
W&B again, so the run's W&B history (or, offline, its folders, one a session) never
overlaps: a resume is exact, so the skipped values are the ones W&B already holds. A
finished run that is run again opens no W&B run at all
(:func:`placegym.train.restarts.train` only prints its results).

The final model artifact (:meth:`Tracker.artifact`) carries in its metadata the run name,
the config, and each training graph's final greedy makespan and its ratio to
critical_path's (:func:`artifact_metadata`).

Progress bars (``progress`` in the config): ``auto`` shows them when stderr is a
terminal only, so logs redirected to a file are not filled with bar updates
(:func:`placegym.train.progress.wants_bar`); ``true`` / ``false`` force them on / off.
"""

from __future__ import annotations

import hashlib
import json
import math
import netrc
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

import numpy as np

if TYPE_CHECKING:
    from placegym.train.config import TrainConfig

__all__ = [
    "Tracker",
    "api_key_configured",
    "artifact_metadata",
    "last_step",
    "resolve_wandb_mode",
    "truncate_metrics",
]


def api_key_configured() -> bool:
    """Whether W&B credentials exist locally (no network access)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return host is not None and netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def resolve_wandb_mode(mode: str) -> str:
    """``online``, ``offline`` or ``disabled`` for a config value (see module docstring)."""
    if mode != "auto":
        return mode
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    if env:
        return {"dryrun": "offline", "run": "online"}.get(env, env)
    return "online" if api_key_configured() else "offline"


def truncate_metrics(path: Path, step: int) -> int:
    """Drop the rows of ``path`` (a ``metrics.jsonl``) after global update ``step``, and a
    torn last line; returns the number of rows dropped. The file is replaced atomically."""
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill
            dropped += 1
            continue
        if isinstance(row, dict) and row.get("step", 0) > step:
            dropped += 1
        else:
            kept.append(line + "\n")
    if dropped:
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text("".join(kept))
        os.replace(tmp, path)
    return dropped


def last_step(path: Path) -> int:
    """The largest ``step`` of the rows of ``path`` (a ``metrics.jsonl``; a torn line is
    skipped), or -1 when it has none or does not exist."""
    if not path.is_file():
        return -1
    best = -1
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            best = max(best, row["step"])
    return best


def artifact_metadata(
    name: str, config: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The model artifact's metadata: ``run`` (the name), ``config``, and ``final``: per
    training graph of the final evaluation ``rows``, ``greedy_makespan`` (seconds) and
    ``greedy_ratio`` (to critical_path's makespan)."""
    from placegym.train.evaluate import REFERENCE

    final = {
        str(r["graph"]): {
            "greedy_makespan": float(r["greedy"]),
            "greedy_ratio": float(r["greedy"]) / float(r[REFERENCE]),
        }
        for r in rows
        if r.get("split") == "train" and r.get(REFERENCE)
    }
    return {"run": name, "config": config, "final": final}


class Tracker:
    """Logs scalars, images and the final model artifact of one run.

    Args:
        run_dir: the run folder (``metrics.jsonl`` is appended to there).
        name: the run name.
        config: the run's config as a dict (logged to W&B).
        wandb_cfg: the ``wandb`` section of the config.
        fresh: start ``metrics.jsonl`` over (a new run) instead of appending (a resumed one).
        resume_step: for a resumed run, the global update of its checkpoint: rows of
            later steps (logged before the run was killed, and about to be redone) are
            dropped from ``metrics.jsonl``, so that every step appears once; W&B gets
            none of the steps up to the last one the file held (see the module
            docstring).
    """

    def __init__(
        self,
        run_dir: Path,
        name: str,
        config: dict[str, Any],
        wandb_cfg: Any,
        *,
        fresh: bool = False,
        resume_step: int | None = None,
    ) -> None:
        self.run_dir, self.name = Path(run_dir), name
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.mode = resolve_wandb_mode(wandb_cfg.mode)
        self.config = config
        log = self.run_dir / "metrics.jsonl"
        #: steps up to this one are in W&B already (logged by an earlier session)
        self.logged_until = -1
        if resume_step is not None and not fresh and log.is_file():
            self.logged_until = last_step(log)
            truncate_metrics(log, resume_step)
        self._metrics = open(log, "w" if fresh else "a")  # noqa: SIM115
        self.run = None
        if self.mode != "disabled":
            import wandb

            digest = hashlib.sha1(str(self.run_dir.resolve()).encode()).hexdigest()[:8]
            self.run = wandb.init(
                project=wandb_cfg.project,
                entity=wandb_cfg.entity,
                group=wandb_cfg.group,
                tags=list(wandb_cfg.tags) or None,
                name=name,
                id=f"{name}-{digest}",
                dir=os.environ.get("WANDB_DIR") or str(self.run_dir),
                mode=cast(Any, self.mode),  # resolve_wandb_mode gives online/offline
                config=config,
                resume="allow",
                settings=wandb.Settings(quiet=True),  # no run-history dump over our table
            )

    @classmethod
    def for_run(cls, cfg: TrainConfig, global_update: int) -> Tracker:
        """The tracker of ``cfg``'s run folder, for a session that starts at
        ``global_update`` (0: a new run, else the resumed checkpoint's)."""
        return cls(
            cfg.run_dir,
            cfg.name,
            cfg.to_dict(),
            cfg.wandb,
            fresh=global_update == 0,
            resume_step=global_update,
        )

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Scalars at global update ``step`` (non-finite values are kept as null locally)."""
        row: dict[str, float | None] = {"step": step}
        row.update(
            {k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()}
        )
        self._metrics.write(json.dumps(row) + "\n")
        self._metrics.flush()
        if self.run is not None and step > self.logged_until:  # not sent before
            self.run.log(dict(metrics), step=step)

    def image(self, key: str, rgb: np.ndarray, step: int, caption: str = "") -> None:
        """An RGB image (``(H, W, 3)`` uint8), e.g. a Gantt chart."""
        if self.run is not None and step > self.logged_until:  # not sent before
            import wandb

            self.run.log({key: wandb.Image(rgb, caption=caption)}, step=step)

    def artifact(
        self, path: Path, kind: str = "model", rows: Sequence[dict[str, Any]] = ()
    ) -> None:
        """Upload (or, offline, stage) ``path`` as an artifact named after the run, with
        :func:`artifact_metadata` of the final evaluation ``rows``."""
        if self.run is not None:
            import wandb

            meta = artifact_metadata(self.name, self.config, rows)
            art = wandb.Artifact(f"{self.name}-{kind}", type=kind, metadata=meta)
            art.add_file(str(path))
            self.run.log_artifact(art)

    def summary(self, values: dict[str, Any]) -> None:
        """Values of the W&B run's summary."""
        if self.run is not None:
            self.run.summary.update(values)

    def finish(self) -> None:
        """Close ``metrics.jsonl`` and the W&B run."""
        self._metrics.close()
        if self.run is not None:
            self.run.finish()
            self.run = None


def progress_postfix(m: dict[str, float]) -> str:
    """One update's metrics ``m`` as a progress bar's postfix."""
    loss = m.get("losses/imitation", m.get("losses/policy", float("nan")))
    return (
        f"loss {loss:.3g} ratio {m['charts/ratio_to_critical_path']:.3f} "
        f"best {m['charts/best_ratio']:.3f} {m['charts/episodes_per_second']:.1f} ep/s"
    )
