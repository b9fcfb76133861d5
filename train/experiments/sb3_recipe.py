"""The documented Stable-Baselines3 recipe as a reproducible experiment.

The recipe (README, :mod:`placegym.agents.sb3`): one torch thread,
``make_maskable_ppo(env_id, seed=s)``, ``pretrain(model, env_id, teacher=...)`` (behaviour
cloning), then ``model.learn`` in chunks; after each stage the greedy makespan (a
deterministic ``predict`` with ``action_masks`` over env seeds ``0..2``) divided by the
teacher's makespan on the same graph. Per seed it records that curve, the wall time of
each stage and :class:`~placegym.agents.sb3.callbacks.PhaseDiagnostics` of every PPO
update; over seeds it writes a markdown table (mean ± std) and a plot::

    python -m placegym.train.experiments.sb3_recipe --seeds 0,1,2 --steps 20480 \
        --out runs/sb3-recipe

``--ppo KEY=VALUE`` / ``--bc KEY=VALUE`` override :data:`~placegym.agents.sb3.PPO_DEFAULTS`
and :func:`~placegym.agents.sb3.bc.pretrain` arguments (values parsed as YAML). Writes
``results.json`` (rewritten after every chunk), ``table.md`` and ``curve.png`` under
``--out``; ``--load A/results.json B/results.json`` writes the joint table and plot of
seeds run as separate processes, up to ``--steps`` (or the shortest of the runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import yaml

import placegym.envs  # noqa: F401  (registers the ids)
from placegym.agents.sb3 import make_maskable_ppo
from placegym.agents.sb3.bc import greedy_makespans, pretrain
from placegym.agents.sb3.callbacks import PhaseDiagnostics

__all__ = [
    "RecipeRun",
    "curve_table",
    "greedy_ratio",
    "plot_recipe_curves",
    "recipe_table",
    "run_recipe",
    "truncate",
]

#: Diagnostics printed after each chunk (SB3 ``train/`` keys and :class:`PhaseDiagnostics`).
SHOWN = (
    "train/value_loss",
    "train/explained_variance",
    "train/approx_kl",
    "train/clip_fraction",
    "phase/sel_entropy",
    "phase/plc_entropy",
    "phase/sel_approx_kl",
    "phase/plc_approx_kl",
    "rollout/return_std",
    "rollout/adv_std",
    "rollout/makespan_ratio",
)


@dataclass
class RecipeRun:
    """One seed of the recipe.

    Attributes:
        seed: seed of ``make_maskable_ppo`` (model and env copies) and of BC.
        steps: PPO timesteps at each entry of ``ratios`` (``-1``: untrained, ``0``: after BC).
        ratios: greedy makespan / teacher makespan after each stage.
        margins: median over the greedy episode's decisions (those with two or more legal
            actions) of the gap between the two largest log-probabilities, after each
            stage: near 0, the greedy episode is an argmax over near-ties and flips with
            any small update.
        wall: seconds of each stage (BC, then each chunk; evaluation excluded).
        bc_losses: BC tie negative log-likelihood per epoch.
        updates: one :class:`PhaseDiagnostics` record per PPO update.
    """

    seed: int
    steps: list[int] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    margins: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    bc_losses: list[float] = field(default_factory=list)
    updates: list[dict[str, float]] = field(default_factory=list)


def _print(line: str) -> None:
    print(line, flush=True)


def greedy_ratio(model, env_id: str, teacher_makespan: float, seeds: Sequence[int]) -> float:
    """Mean greedy makespan of ``model`` over env ``seeds``, divided by the teacher's."""
    return float(np.mean(greedy_makespans(model.policy, env_id, seeds=seeds)) / teacher_makespan)


@torch.no_grad()
def greedy_margin(model, env_id: str, seed: int = 0) -> float:
    """Median top-2 log-probability gap of the greedy episode's decisions (see
    :attr:`RecipeRun.margins`)."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    gaps, done = [], False
    while not done:
        mask = np.asarray(info["action_mask"], dtype=bool)
        obs_t, _ = model.policy.obs_to_tensor(obs)
        dist = model.policy.get_distribution(obs_t, action_masks=mask[None])
        logp = dist.distribution.logits[0].numpy()
        if mask.sum() >= 2:
            top = np.sort(logp[mask])[-2:]
            gaps.append(float(top[1] - top[0]))
        action = int(np.argmax(np.where(mask, logp, -np.inf)))  # predict(deterministic=True)
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return float(np.median(gaps)) if gaps else float("inf")


def _teacher_makespan(env_id: str, teacher: str) -> float:
    from placegym.envs import simulate
    from placegym.teachers import get_teacher

    env = gym.make(env_id)
    env.reset(seed=0)
    u: Any = env.unwrapped
    return float(
        simulate(u.graph, u.cluster, get_teacher(teacher).place(u.graph, u.cluster)).makespan
    )


def run_recipe(
    env_id: str = "placegym/FFNN-v0",
    *,
    seed: int = 0,
    teacher: str = "critical_path",
    total_steps: int = 20_480,
    chunk: int = 5_120,
    eval_seeds: Sequence[int] = (0, 1, 2),
    env_kwargs: dict[str, Any] | None = None,
    bc_kwargs: dict[str, Any] | None = None,
    ppo_overrides: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = _print,
    on_chunk: Callable[[RecipeRun], None] | None = None,
) -> RecipeRun:
    """Run the recipe for one seed (see the module docstring).

    Args:
        env_id: a registered placegym id.
        seed: model, env and BC seed.
        teacher: the BC teacher and the reference of the ratios.
        total_steps: PPO timesteps in all.
        chunk: PPO timesteps between two evaluations.
        eval_seeds: env seeds of the greedy evaluation.
        env_kwargs: ``gym.make`` arguments of the training env (BC and PPO; the
            evaluation measures makespans, whatever the reward).
        bc_kwargs: extra :func:`pretrain` arguments (default ``epochs=2``, as the recipe).
        ppo_overrides: :func:`make_maskable_ppo` arguments replacing ``PPO_DEFAULTS``.
        log: called with one line after each stage (``None``: silent).
        on_chunk: called with the run so far after each PPO chunk (to save it).
    """
    if chunk < 1 or total_steps < 0:
        raise ValueError(f"chunk, total_steps: must be >= 1 and >= 0, got {chunk}, {total_steps}")
    log = log or (lambda _line: None)
    ref = _teacher_makespan(env_id, teacher)
    run = RecipeRun(seed)
    model = make_maskable_ppo(env_id, seed=seed, env_kwargs=env_kwargs, **(ppo_overrides or {}))

    def evaluate(steps: int) -> str:
        run.steps.append(steps)
        run.ratios.append(greedy_ratio(model, env_id, ref, eval_seeds))
        run.margins.append(greedy_margin(model, env_id, eval_seeds[0]))
        return f"{run.ratios[-1]:.3f} (greedy margin {run.margins[-1]:.3g})"

    log(f"seed {seed} untrained: {evaluate(-1)}")
    t0 = time.perf_counter()
    bc = {"epochs": 2, "env_kwargs": env_kwargs, **(bc_kwargs or {})}
    run.bc_losses = pretrain(model, env_id, teacher=teacher, seed=seed, **bc)
    run.wall.append(time.perf_counter() - t0)
    log(
        f"seed {seed} BC: {evaluate(0)}, tie NLL {run.bc_losses[0]:.3f} -> "
        f"{run.bc_losses[-1]:.3f}, {run.wall[-1]:.0f} s"
    )
    diagnostics = PhaseDiagnostics()
    while model.num_timesteps < total_steps:
        t0 = time.perf_counter()
        model.learn(chunk, callback=diagnostics, reset_num_timesteps=False)
        run.wall.append(time.perf_counter() - t0)
        result = evaluate(int(model.num_timesteps))
        last = diagnostics.history[-1]
        shown = " ".join(f"{k.split('/')[1]}={last.get(k, np.nan):.3g}" for k in SHOWN)
        log(f"seed {seed} {run.steps[-1]}: {result}, {run.wall[-1]:.0f} s; {shown}")
        run.updates = diagnostics.history
        if on_chunk is not None:
            on_chunk(run)
    return run


def truncate(run: RecipeRun, steps: int) -> RecipeRun:
    """``run`` up to ``steps`` PPO timesteps (the first stages of a longer run)."""
    keep = sum(s <= steps for s in run.steps)
    return RecipeRun(
        run.seed,
        run.steps[:keep],
        run.ratios[:keep],
        run.margins[:keep],
        run.wall[: keep - 1],
        run.bc_losses,
        [u for u in run.updates if u["timesteps"] <= steps],
    )


def curve_table(runs: Sequence[RecipeRun]) -> str:
    """Markdown table: greedy ratio (mean ± std over the runs) at every stage."""
    steps = runs[0].steps
    ratios = np.array([r.ratios for r in runs])
    names = ["untrained", "BC", *(f"{s:,}" for s in steps[2:])]
    head = "| after | " + " | ".join(names) + " |"
    rule = "|---" * (len(names) + 1) + "|"
    cells = [f"{m:.3f} ± {s:.3f}" for m, s in zip(ratios.mean(0), ratios.std(0))]
    rows = [head, rule, "| ratio to the teacher | " + " | ".join(cells) + " |"]
    for r in runs:
        rows.append(f"| seed {r.seed} | " + " | ".join(f"{x:.3f}" for x in r.ratios) + " |")
    return "\n".join(rows)


def recipe_table(
    runs: Sequence[RecipeRun], teachers: dict[str, float], teacher: str = "critical_path"
) -> str:
    """The runs cut at the PPO steps every one of them reached (:func:`truncate`): their
    :func:`curve_table`, wall time per run (mean ± std), then the last checkpoint's ratio
    (mean ± std over the runs) beside ``teachers`` (placer -> makespan / ``teacher``'s on
    the same graph), least first.

    Raises:
        ValueError: no runs.
    """
    if not runs:
        raise ValueError("runs: none to tabulate")
    common = min(r.steps[-1] for r in runs)
    runs = [truncate(r, common) for r in runs]
    last = np.array([r.ratios[-1] for r in runs])
    wall = np.array([sum(r.wall) for r in runs])
    seeds = ", ".join(str(r.seed) for r in runs)
    stage = f"{common:,} PPO steps" if common > 0 else "BC"
    rows = [(f"SB3 recipe, greedy after {stage} (seeds {seeds})", last.mean(), last.std())]
    rows += [(name, ratio, None) for name, ratio in teachers.items()]
    lines = [
        curve_table(runs),
        "",
        f"Wall time per seed (BC + PPO): {wall.mean():,.0f} ± {wall.std():,.0f} s.",
        "",
        f"| placer | makespan / {teacher} |",
        "|---|---|",
    ]
    for name, mean, std in sorted(rows, key=lambda row: row[1]):
        lines.append(f"| {name} | {mean:.3f}" + ("" if std is None else f" ± {std:.3f}") + " |")
    return "\n".join(lines)


def plot_recipe_curves(
    runs: Sequence[RecipeRun], path: Path, teacher: str = "critical_path"
) -> None:
    """Greedy ratio against PPO timesteps, one line per seed and the mean (BC at 0)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    for r in runs:
        ax.plot(r.steps[1:], r.ratios[1:], alpha=0.4, lw=1, label=f"seed {r.seed}")
    mean = np.mean([r.ratios[1:] for r in runs], axis=0)
    ax.plot(runs[0].steps[1:], mean, color="black", lw=2, label="mean")
    ax.axhline(1.0, color="grey", ls="--", lw=1, label=teacher)
    ax.set_xlabel("PPO timesteps (0 = after behaviour cloning)")
    ax.set_ylabel(f"greedy makespan / {teacher}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _overrides(items: Sequence[str], flag: str) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected KEY=VALUE, got {item!r}")
        parsed = yaml.safe_load(value)
        if isinstance(parsed, str):  # YAML 1.1 reads 1e-3 as a string
            with contextlib.suppress(ValueError):
                parsed = float(parsed)
        out[key] = parsed
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m placegym.train.experiments.sb3_recipe", description=__doc__
    )
    p.add_argument("--env", default="placegym/FFNN-v0", help="registered env id")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--steps", type=int, default=20_480, help="PPO timesteps (default 20480)")
    p.add_argument("--chunk", type=int, default=5_120, help="steps between evaluations")
    p.add_argument("--teacher", default="critical_path", help="BC teacher (default critical_path)")
    p.add_argument("--ppo", nargs="*", default=[], help="MaskablePPO overrides KEY=VALUE")
    p.add_argument("--bc", nargs="*", default=[], help="pretrain overrides KEY=VALUE")
    p.add_argument("--env-kwargs", nargs="*", default=[], help="gym.make arguments KEY=VALUE")
    p.add_argument("--out", default="runs/sb3-recipe", help="output folder")
    p.add_argument(
        "--load",
        nargs="*",
        default=[],
        help="results.json files of earlier runs (seeds run in parallel): no training, "
        "write their joint table and plot up to --steps",
    )
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.load:
        loaded = [RecipeRun(**r) for path in args.load for r in json.loads(Path(path).read_text())]
        common = min(args.steps, *(r.steps[-1] for r in loaded))  # stopped runs: shortest
        runs = [truncate(r, common) for r in loaded]
    else:
        runs = _run_seeds(args, out)
    table = curve_table(runs)
    wall = np.array([sum(r.wall) for r in runs])
    table += f"\n\nwall time per seed (BC + PPO): {wall.mean():.0f} ± {wall.std():.0f} s"
    (out / "table.md").write_text(table + "\n")
    plot_recipe_curves(runs, out / "curve.png", args.teacher)
    print(table)
    return 0


def _run_seeds(args: argparse.Namespace, out: Path) -> list[RecipeRun]:
    torch.set_num_threads(1)  # batches of small graphs: more threads only contend
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    ppo, bc = _overrides(args.ppo, "--ppo"), _overrides(args.bc, "--bc")
    kw = dict(teacher=args.teacher, total_steps=args.steps, chunk=args.chunk)
    kw["env_kwargs"] = _overrides(args.env_kwargs, "--env-kwargs")
    runs: list[RecipeRun] = []

    def save(run: RecipeRun) -> None:
        (out / "results.json").write_text(json.dumps([asdict(r) for r in [*runs, run]], indent=1))

    for seed in seeds:
        runs.append(
            run_recipe(args.env, seed=seed, bc_kwargs=bc, ppo_overrides=ppo, on_chunk=save, **kw)
        )
    return runs


if __name__ == "__main__":
    raise SystemExit(main())
