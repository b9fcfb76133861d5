"""One ``placegym train`` run, read top to bottom: seeding, resume, phases, evaluation.

1. **Seeding**: ``torch.manual_seed(seed)`` and one ``numpy`` generator drive every draw
   (graph choice, reset seeds, PPO minibatch order, and the seed of each episode's own
   generator, which draws its roll-in coins and action samples: the episodes can then be
   played anywhere, :mod:`placegym.train.players`).
   Evaluation uses its own generators seeded from ``seed``, so evaluating never changes
   the training trajectory.
2. **Devices**: the learner (the policy Adam steps: scoring, losses, backward) lives on
   ``device`` (:func:`~placegym.train.config_checks.resolve_device`; ``auto``: a GPU
   when torch sees one); every episode (rollouts, greedy baselines, self-imitation's plan
   episodes, evaluation) is played by the **actor**, a policy on the CPU, whose tiny
   per-step forwards are fastest there. On the CPU the actor *is* the learner (one
   object: nothing is copied, the run is that of a CPU-only machine); elsewhere it is a
   CPU copy that takes the learner's weights after each update (after its last optimiser
   step, before any episode is played again), after a resume or init, and when
   ``eval.keep_best`` brings back the best weights. Ray workers receive the actor's
   (CPU) weights. Checkpoints hold CPU tensors, so a run resumes on any device.
3. **Resume or init**: the run folder's ``checkpoints/latest.pt`` when present (policy,
   optimiser, scheduler, random states, counters, self-imitation plans), else the
   ``init`` weights (:func:`~placegym.train.checkpoint.init_weights`; the run layer,
   :func:`placegym.train.restarts.train`, trains an ``init`` config first), else fresh.
4. **Phases** (``phases`` in order), each with its own Adam and learning-rate schedule, a
   tqdm bar, metrics every update, a checkpoint every ``checkpoint_every`` updates and at
   the phase end, and an evaluation every ``eval.every`` updates. An update draws a batch
   (:func:`~placegym.train.players.draw_job`: graphs, ``episodes_per_graph`` environments
   each, reset seeds), has an episode player play it (in process, or on Ray actors with
   ``workers`` > 0: :mod:`placegym.train.players`) and takes one step:

   - phase I: imitation of a teacher's tie sets with DAgger roll-in
     (:func:`~placegym.train.imitation.imitation_update`);
   - phase II: REINFORCE or PPO on the simulator (:func:`~placegym.train.rl.rl_update`),
     with optional self-imitation of the best plans
     (:class:`~placegym.train.self_imitation.SelfImitation`);
   - phase III: the same RL on measured makespans of the real backend, logging the
     sim-vs-real gap ``charts/sim_real_gap`` (:mod:`placegym.train.phase3`).
5. **Final**: evaluation against the teachers on training and held-out graphs
   (:class:`~placegym.train.evaluator.RunEvaluator`), a markdown table (printed and written
   to ``results.md``, with ``results.json``), ``checkpoints/final.pt`` logged as a W&B
   artifact.

An update whose loss or resulting weights are not finite (nan or inf) stops the run at
that update, before anything of it is saved, with :class:`Diverged` (one line naming the
phase, the update and the likely cause; ``placegym train`` exits with 2).

A run killed at any moment resumes from its latest checkpoint and repeats at most
``checkpoint_every`` updates; with the same config the resumed run ends with the same
weights as an uninterrupted one (CPU, same thread count); another config is refused
(:func:`~placegym.train.checkpoint.check_resume`). Ctrl-C raises
:class:`~placegym.train.checkpoint.Interrupted` (one line to print, no traceback).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.envs import Cluster, PlacementEnv
from placegym.train.checkpoint import (
    Interrupted,
    Progress,
    check_resume,
    init_weights,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
    training_checkpoint,
)
from placegym.train.config import (
    ImitationConfig,
    PhaseConfig,
    RealRLConfig,
    RLConfig,
    SimRLConfig,
    TrainConfig,
)
from placegym.train.config_checks import resolve_device
from placegym.train.config_schema import instance_sampler
from placegym.train.data import load_graphs
from placegym.train.evaluate import (
    EnvPool,
    episode_metrics,
    results_table,
    train_greedy_ratio,
    write_results,
)
from placegym.train.evaluator import RunEvaluator
from placegym.train.imitation import epsilon, imitation_update
from placegym.train.optim import make_optimizer
from placegym.train.phase3 import real_pool, sim_real_metrics
from placegym.train.players import (
    Batch,
    EpisodePlayer,
    InProcessPlayer,
    Job,
    draw_job,
    phase1_teacher,
)
from placegym.train.rl import baseline_metrics, rl_update
from placegym.train.self_imitation import SelfImitation
from placegym.train.tracking import Tracker, progress_postfix

__all__ = ["Diverged", "Trainer"]

Step = Callable[[torch.optim.Optimizer], tuple[list[EpisodeRecord], dict[str, float]]]


class Diverged(ValueError):
    """An update made the loss or the policy's weights nan or inf; the message names the
    phase, the update, what went non-finite and the likely cause."""


def _divergence(
    phase: str, pcfg: PhaseConfig, metrics: dict[str, float], policy: torch.nn.Module
) -> str | None:
    """What of an update is not finite (its ``losses/`` metrics, the weights it left), as
    a phrase, else None."""
    losses = sorted(
        k for k, v in metrics.items() if k.startswith("losses/") and not math.isfinite(v)
    )
    weights = [n for n, w in policy.named_parameters() if not bool(torch.isfinite(w).all())]
    if not losses and not weights:
        return None
    parts = [f"{k} = {metrics[k]}" for k in losses]
    if weights:
        more = f" and {len(weights) - 3} more" if len(weights) > 3 else ""
        parts.append(f"non-finite weights in {', '.join(weights[:3])}{more}")
    clip = f", or clip gradients with {phase}.max_grad_norm > 0" if not pcfg.max_grad_norm else ""
    return (
        f"{'; '.join(parts)}; likely cause: the learning rate {phase}.lr = {pcfg.lr:g} is "
        f"too large for this run (try a tenth of it{clip})"
    )


class Trainer:
    """Runs the phases of ``cfg`` (see the module docstring).

    Attributes:
        device: the learner's device (``cfg.device`` resolved on this machine).
        policy: the learner, on :attr:`device`: the weights Adam steps, the scores and
            the losses, the weights checkpoints save.
        actor: the policy on the CPU that plays every episode: :attr:`policy` itself
            when the two are not split, else a copy holding the learner's weights as of
            the last update (see the module docstring).

    Args:
        cfg: the run configuration.
        base_dir: folder of the config file, for relative ``init``, cluster and graph
            paths.
        split_actor: whether the actor is a CPU copy of the learner (True) or the
            learner itself (False); None (the default): a copy exactly when
            :attr:`device` is not the CPU. True on the CPU runs the split's code path
            (copies, weight syncs) on one machine: a test seam; its weights are those of
            the run without it.

    Raises:
        ValueError: ``cfg.device`` names a device this machine lacks, or
            ``split_actor`` is False for a learner off the CPU.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        base_dir: Path | None = None,
        split_actor: bool | None = None,
    ) -> None:
        self.cfg, self.base_dir = cfg, base_dir
        self.run_dir = cfg.run_dir
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.device = resolve_device(cfg.device)
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(cfg.threads)
        self.rng = np.random.default_rng(cfg.seed)
        self.actor = DopplerPolicy(cfg.policy)  # made on the CPU, from the seeded generator
        if split_actor is None:
            split_actor = self.device.type != "cpu"
        elif not split_actor and self.device.type != "cpu":
            raise ValueError(f"split_actor: a learner on {self.device} needs its CPU actor")
        # the learner: a copy (no draw from the generator) moved to its device, or the actor
        self.policy = copy.deepcopy(self.actor).to(self.device) if split_actor else self.actor
        self.train_set = load_graphs(cfg.data.graphs, cfg.data.cluster, base_dir)
        self.heldout_set = load_graphs(cfg.data.heldout, cfg.data.cluster, base_dir)
        self.graphs = [t.graph for t in self.train_set]
        self.clusters = [t.cluster for t in self.train_set]
        env_kw = {"memory_mask": cfg.data.memory_mask, "dispatch": cfg.data.dispatch}
        self.pools = {r: EnvPool(reward=r, **env_kw) for r in ("relative", "nest")}
        # fresh training instances per update (data.sampler), else None
        self.sampler = instance_sampler(cfg.seed, cfg.data.sampler)
        self.evaluator = RunEvaluator(cfg, self.train_set, self.heldout_set)
        self.progress = Progress()
        self.tracker: Tracker | None = None
        self.last_eval: list[dict[str, Any]] = []
        self._eval_step = -1  # global update of last_eval
        self._session = 0  # updates done by this process (stop_after)
        self._real: tuple[EnvPool, Cluster] | None = None  # phase III envs, made on first use
        self.self_imitation: SelfImitation | None = None  # made when phase II starts
        self._saved_plans: dict[int, dict[str, Any]] = {}  # from a resumed checkpoint
        self._players: dict[bool, EpisodePlayer] = {}  # by "real": made on first use
        self.drawn: list[str] = []  # with data.sampler: the ids of this update's instances

    # ------------------------------------------------------------------ entry point
    def run(self, stop_after: int | None = None) -> list[dict[str, Any]]:
        """Train (resuming when possible) and return the final evaluation rows.

        ``stop_after`` ends the session after that many updates without saving anything
        (as if killed), for tests of resume.
        """
        cfg = self.cfg
        states = self._restore()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(cfg.to_yaml())
        self.tracker = Tracker.for_run(cfg, self.progress.global_update)
        split = "" if self.actor is self.policy else " (episodes on cpu)"
        print(f"training on {self.device}{split}")
        self._session = 0
        try:
            if self.progress.global_update == 0:
                self._evaluate()  # the starting point (zero-shot for transfer runs)
            for index, phase in enumerate(cfg.phases):
                if index < self.progress.phase_index:
                    continue
                # the checkpoint's optimiser states belong to the phase it was saved in
                if not self._run_phase(index, phase, states, stop_after):
                    return []
                states = None
            self.progress.complete = True
            if self._eval_step != self.progress.global_update:
                self._evaluate()
            final = self._finish()
        except KeyboardInterrupt:  # one line instead of a traceback (placegym train)
            raise Interrupted(self.progress.global_update, self.ckpt_dir / "latest.pt") from None
        finally:
            self.tracker.finish()
            for player in self._players.values():
                player.close()
            self._players = {}
        print(results_table(self.last_eval, cfg.eval.k, self.progress.seconds))
        print(f"\nfinal checkpoint: {final}")
        return self.last_eval

    def _restore(self) -> dict[str, Any] | None:
        """Load the latest checkpoint (returns its optimiser states) or the init weights."""
        latest = self.ckpt_dir / "latest.pt"
        if self.cfg.resume and latest.is_file():
            ckpt = load_checkpoint(latest)
            check_resume(self.cfg, ckpt["config"])  # only with the run's own config
            self.policy.load_state_dict(ckpt["policy"])
            set_rng_state(self.rng, ckpt["rng"])
            self.progress = Progress(**ckpt["progress"])
            self._saved_plans = ckpt.get("best_plans") or {}
            print(f"resuming {latest} at update {self.progress.global_update}")
            self._sync_actor()
            return {"optimizer": ckpt["optimizer"], "scheduler": ckpt["scheduler"]}
        if self.cfg.init:
            path, weights = init_weights(self.cfg.init, self.base_dir, self.cfg.policy)
            self.policy.load_state_dict(weights)
            print(f"initialised from {path}")
        self._sync_actor()
        return None

    def _sync_actor(self) -> None:
        """Copy the learner's weights into the CPU actor (nothing to do when they are one
        policy)."""
        if self.actor is not self.policy:
            self.actor.load_state_dict(self.policy.state_dict())

    # ------------------------------------------------------------------ phases
    def _run_phase(
        self, index: int, phase: str, states: dict[str, Any] | None, stop_after: int | None
    ) -> bool:
        """Run (the rest of) one phase; False when stopped by ``stop_after``."""
        from placegym.train.progress import progress_bar

        pcfg = self.cfg.phase_config(phase)
        opt, sched = make_optimizer(
            self.policy.parameters(), pcfg.lr, pcfg.lr_schedule, pcfg.updates, pcfg.lr_end_factor
        )
        if states is not None and states["optimizer"] is not None:
            opt.load_state_dict(states["optimizer"])
            sched.load_state_dict(states["scheduler"])
        step = self._phase_step(pcfg)
        with progress_bar(  # a bar on a terminal, else a line every few seconds in a log;
            pcfg.updates,  # closed however the loop ends (Ctrl-C: no bar over the message)
            initial=self.progress.update,
            desc=phase,
            unit="upd",
            mode=self.cfg.progress,
        ) as bar:
            while self.progress.update < pcfg.updates:
                if stop_after is not None and self._session >= stop_after:
                    return False
                metrics = self._update(phase, step, opt)
                sched.step()
                self._session += 1
                bar.update()
                bar.set_postfix_str(progress_postfix(metrics))
                p = self.progress
                if p.update % self.cfg.checkpoint_every == 0 and p.update < pcfg.updates:
                    self._save("latest.pt", opt, sched)
                if self.cfg.eval.every and p.update % self.cfg.eval.every == 0:
                    self._evaluate()
        self.progress.phase_index, self.progress.update = index + 1, 0
        self._save("latest.pt", None, None)
        if self._eval_step != self.progress.global_update:
            self._evaluate()
        return True

    def _phase_step(self, pcfg: ImitationConfig | SimRLConfig | RealRLConfig) -> Step:
        """The update step of a phase (by its config's type): batch, rollout and
        learning step."""
        if isinstance(pcfg, ImitationConfig):
            teacher = phase1_teacher(pcfg, self.cfg.seed)
            self._player().set_phase1(pcfg)
            return lambda opt: self._imitation_step(pcfg, opt, teacher)
        if isinstance(pcfg, SimRLConfig):
            si = pcfg.self_imitation  # phase II's plans; a resumed run's restored
            if si.coef > 0 and self.self_imitation is None:
                self.self_imitation = SelfImitation(si, self.cfg.seed)
                self.self_imitation.restore(self._saved_plans, self.graphs, self.clusters)
            return lambda opt: self._rl_step(
                pcfg,
                opt,
                self.pools[pcfg.reward],
                reward_to_go=pcfg.reward == "nest",
                self_imitation=self.self_imitation,
            )
        return lambda opt: self._real_step(pcfg, opt)

    def _update(self, phase: str, step: Step, opt: torch.optim.Optimizer) -> dict[str, float]:
        """Take one update and log its metrics (``charts/``, ``losses/``); the actor then
        holds the learner's new weights."""
        t0 = time.perf_counter()
        lr = opt.param_groups[0]["lr"]
        self.policy.train()
        self.actor.train()
        records, metrics = step(opt)
        self._sync_actor()
        secs = time.perf_counter() - t0
        p = self.progress
        p.update, p.global_update = p.update + 1, p.global_update + 1
        p.episodes, p.seconds = p.episodes + len(records), p.seconds + secs
        metrics.update(episode_metrics(records))
        metrics.update(
            {
                "charts/learning_rate": lr,
                "charts/episodes_per_second": len(records) / secs,
                "charts/episodes": p.episodes,
                "charts/phase": float(self.cfg.phases.index(phase) + 1),
            }
        )
        self._tracker.log(metrics, step=p.global_update)
        pcfg = self.cfg.phase_config(phase)
        if (why := _divergence(phase, pcfg, metrics, self.policy)) is not None:
            raise Diverged(
                f"{phase}: training diverged at update {p.update} of {pcfg.updates} (global "
                f"update {p.global_update}), stopped before saving it: {why}"
            )
        return metrics

    def _player(self, real: bool = False) -> EpisodePlayer:
        """Who plays the episodes: Ray actors with ``workers`` > 0 (started on first use),
        else this process; phase III (``real``) always plays here."""
        if real not in self._players:
            if self.cfg.workers and not real:
                from placegym.train.workers import RayPlayer

                self._players[real] = RayPlayer.for_run(self.cfg, self.graphs, self.clusters)
                print(f"rollouts on {self.cfg.workers} Ray workers")
            else:
                self._players[real] = InProcessPlayer()
        return self._players[real]

    def _draw(self, pcfg: PhaseConfig, pool: EnvPool, **job: Any) -> Batch:
        """This update's environments and episodes (:func:`~placegym.train.players.draw_job`):
        of the training graphs, or with ``data.sampler`` of ``graphs_per_update`` instances
        drawn fresh (indices from the global update; ``pool`` is this update's own,
        :meth:`_update_pool`)."""
        if self.sampler is None or job.get("cluster") is not None:
            return draw_job(self.rng, self.graphs, self.clusters, pcfg, pool, **job)
        first = self.progress.global_update * pcfg.graphs_per_update
        index = [first + i for i in range(pcfg.graphs_per_update)]
        drawn = [self.sampler.draw(i) for i in index]
        self.drawn = [inst.id for inst in drawn]
        graphs = [inst.graph for inst in drawn]
        envs, batch = draw_job(
            self.rng, graphs, [inst.cluster for inst in drawn], pcfg, pool, **job
        )
        return envs, dataclasses.replace(batch, instances=index)

    def _update_pool(self, pool: EnvPool) -> EnvPool:
        """``pool``, or with ``data.sampler`` a new pool like it for this update's fresh
        graphs only (so that no environment or graph input accumulates)."""
        return pool if self.sampler is None else EnvPool(**pool.env_kwargs)

    def _imitation_step(
        self, pcfg: ImitationConfig, opt: torch.optim.Optimizer, teacher: Any
    ) -> tuple[list[EpisodeRecord], dict[str, float]]:
        """Phase I: episodes with teacher roll-in (probability ε), labelled by the teacher."""
        pool = self._update_pool(self.pools["relative"])
        eps = epsilon(
            self.progress.update, pcfg.updates, pcfg.eps_start, pcfg.eps_end, pcfg.eps_decay
        )
        envs, job = self._draw(
            pcfg,
            pool,
            teacher_prob=eps,
            record_teacher=True,
            teacher="phase1",
            greedy=pcfg.rollin == "greedy",
        )
        records = self._player().play(self.actor, envs, job, pool, teacher)
        metrics = imitation_update(
            self.policy,
            opt,
            records,
            pcfg.max_grad_norm,
            regret_coef=pcfg.regret_coef,
            price_coef=pcfg.price_coef,
            price_temperature=pcfg.price_temperature,
        )
        metrics["charts/epsilon"] = eps
        return records, metrics

    def _rl_step(
        self,
        pcfg: RLConfig,
        opt: torch.optim.Optimizer,
        pool: EnvPool,
        *,
        cluster: Cluster | None = None,
        reward_to_go: bool = False,
        self_imitation: SelfImitation | None = None,
    ) -> tuple[list[EpisodeRecord], dict[str, float]]:
        """Phases II and III: sampled episodes, then REINFORCE or PPO (with the
        ``self_imitation`` term when given)."""
        si = self_imitation
        if cluster is None:
            pool = self._update_pool(pool)
            if si is not None and self.sampler is not None:
                si.forget()  # fresh instances: a plan lasts its update
        envs, job = self._draw(
            pcfg,
            pool,
            cluster=cluster,
            reward="nest" if reward_to_go else "relative",
            record_teacher=si is not None and si.labels_batch,
            teacher=None if si is None else "plans",
            temperature=pcfg.temperature,
        )
        baselines = None
        if pcfg.baseline == "greedy":
            baselines = self._greedy_baselines(envs, job, pool)
        teacher = None if si is None else si.plans
        player = self._player(real=cluster is not None)
        records = player.play(self.actor, envs, job, pool, teacher, plans=si)
        term, extra = None, dict[str, float]()
        if si is not None:
            term, extra = si.step(
                self.actor, envs, job.groups, records, rng=self.rng, graph_cache=pool.graph_cache
            )
        metrics = rl_update(
            self.policy,
            opt,
            records,
            job.groups,
            pcfg,
            self.rng,
            reward_to_go=reward_to_go,
            imitation=term,
            baselines=baselines,
        )
        metrics.update(extra)
        if baselines is not None:
            metrics.update(baseline_metrics(records, job.groups, baselines))
        return records, metrics

    def _greedy_baselines(
        self, envs: list[PlacementEnv], job: Job, pool: EnvPool
    ) -> dict[int, EpisodeRecord]:
        """``baseline: greedy``: per graph of the batch, the policy's greedy episode,
        played here on the graph's first environment with its first episode's reset seed
        (before the samples, which reset it again); its inputs are not kept."""
        first = {g: i for i, g in reversed(list(enumerate(job.groups)))}
        order = list(first)
        played = play_episodes(
            self.actor,
            [envs[first[g]] for g in order],
            [job.seeds[first[g]] for g in order],
            rng=np.random.default_rng(0),  # greedy: no draw is made
            greedy=True,
            graph_cache=pool.graph_cache,
            keep_inputs=False,
        )
        return dict(zip(order, played))

    def _real_step(
        self, pcfg: RealRLConfig, opt: torch.optim.Optimizer
    ) -> tuple[list[EpisodeRecord], dict[str, float]]:
        """Phase III: the RL step on measured makespans, plus the sim-vs-real gap."""
        if self._real is None:  # the real backend's environments, made once
            self._real = real_pool(pcfg, self.graphs, self.cfg.data, self.base_dir)
        pool, cluster = self._real
        records, metrics = self._rl_step(pcfg, opt, pool, cluster=cluster)
        metrics.update(sim_real_metrics(records))
        return records, metrics

    # ------------------------------------------------------------------ checkpoints
    def _save(self, name: str, opt: torch.optim.Optimizer | None, sched: Any | None) -> Path:
        si = self.self_imitation
        plans = self._saved_plans if si is None else si.state(self.graphs, self.clusters)
        payload = training_checkpoint(
            self.cfg, self.policy, opt, sched, self.progress, self.rng, plans
        )
        return save_checkpoint(self.ckpt_dir / name, payload)

    # ------------------------------------------------------------------ evaluation
    @property
    def _tracker(self) -> Tracker:
        assert self.tracker is not None, "the tracker exists while run() runs"
        return self.tracker

    def _evaluate(self) -> list[dict[str, Any]]:
        """Evaluate on every training and held-out graph (:class:`RunEvaluator`); keep
        the best weights (``eval.keep_best``)."""
        step = self.progress.global_update
        ev = self.evaluator.evaluate(self.actor, step, self._tracker)
        self.last_eval, self._eval_step = ev.rows, step
        score = ev.metrics.get("eval/train/greedy_ratio_geomean", math.inf)
        if self.cfg.eval.keep_best and score < self.progress.best_eval:
            self.progress.best_eval = score
            self._save("best.pt", None, None)
        return ev.rows

    def _finish(self) -> Path:
        """Final checkpoint (also logged as an artifact), results.md and results.json;
        with ``eval.keep_best``, the best evaluated weights become the final ones."""
        best = self.ckpt_dir / "best.pt"
        current = train_greedy_ratio(self.last_eval)
        if self.cfg.eval.keep_best and best.is_file() and self.progress.best_eval < current:
            self.policy.load_state_dict(load_checkpoint(best)["policy"])
            self._sync_actor()
            print(f"keep_best: final weights from {best} (greedy {self.progress.best_eval:.3f})")
            self._evaluate()
        final = self._save("final.pt", None, None)
        self._save("latest.pt", None, None)
        write_results(self.run_dir, self.last_eval, self.cfg.eval.k, asdict(self.progress))
        self._tracker.summary({f"final/{k}": v for k, v in asdict(self.progress).items()})
        self._tracker.artifact(final, rows=self.last_eval)
        return final
