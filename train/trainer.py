"""One ``placegym train`` run, read top to bottom: seeding, resume, phases, evaluation.

1. **Seeding**: ``torch.manual_seed(seed)`` and one ``numpy`` generator drive every draw
   (graph choice, reset seeds, PPO minibatch order, and the seed of each episode's own
   generator, which draws its roll-in coins and action samples: the episodes can then be
   played anywhere, :mod:`placegym.train.workers`).
   Evaluation uses its own generators seeded from ``seed``, so evaluating never changes
   the training trajectory.
2. **Resume or init**: the run folder's ``checkpoints/latest.pt`` when present (policy,
   optimiser, scheduler, random states, counters, self-imitation plans), else the
   ``init`` weights (:func:`init_checkpoint`; the run layer,
   :func:`placegym.train.restarts.train`, trains an ``init`` config first), else fresh.
3. **Phases** (``phases`` in order), each with its own Adam and learning-rate schedule, a
   tqdm bar, metrics every update, a checkpoint every ``checkpoint_every`` updates and at
   the phase end, and an evaluation every ``eval.every`` updates. An update draws a batch
   (:meth:`Trainer._batch`: graphs, ``episodes_per_graph`` environments each, reset
   seeds), plays it with :func:`~placegym.agents.rollout.rollout` (in process, or on Ray
   actors with ``workers`` > 0: :mod:`placegym.train.workers`) and takes one step:

   - phase I: imitation of a teacher's tie sets with DAgger roll-in
     (:func:`~placegym.train.imitation.imitation_update`);
   - phase II: REINFORCE or PPO on the simulator (:func:`~placegym.train.rl.rl_update`),
     with optional self-imitation of the best plans
     (:class:`~placegym.train.self_imitation.SelfImitation`);
   - phase III: the same RL on measured makespans of the real backend, logging the
     sim-vs-real gap ``charts/sim_real_gap``.
4. **Final**: evaluation against the teachers on training and held-out graphs
   (:func:`~placegym.train.evaluate.evaluate_run`), a markdown table (printed and written
   to ``results.md``, with ``results.json``), ``checkpoints/final.pt`` logged as a W&B
   artifact.

A run killed at any moment resumes from its latest checkpoint and repeats at most
``checkpoint_every`` updates; with the same config the resumed run ends with the same
weights as an uninterrupted one (CPU, same thread count).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from placegym.agents.doppler import DopplerPolicy
from placegym.agents.rollout import EpisodeRecord, rollout
from placegym.envs import Cluster, Graph, Placement, PlacementEnv, load_cluster, simulate
from placegym.envs.cache import IdentityCache
from placegym.envs.simulator import Dispatch
from placegym.train.checkpoint import (
    CHECKPOINT_FORMAT,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from placegym.train.config import (
    ImitationConfig,
    RealRLConfig,
    RLConfig,
    SimRLConfig,
    TrainConfig,
    load_config,
    resolve_path,
)
from placegym.train.data import load_graphs
from placegym.train.evaluate import (
    REFERENCE,
    EnvPool,
    episode_metrics,
    evaluate_run,
    results_table,
    teacher_makespans,
    train_greedy_ratio,
)
from placegym.train.imitation import epsilon, imitation_update
from placegym.train.optim import make_optimizer
from placegym.train.rl import rl_update
from placegym.train.self_imitation import SelfImitation
from placegym.train.tracking import Tracker
from placegym.train.workers import Job, RolloutWorkers, episode_rngs, phase1_teacher

__all__ = ["Progress", "Trainer", "init_checkpoint"]

Step = Callable[[torch.optim.Optimizer], tuple[list[EpisodeRecord], dict[str, float]]]


@dataclass
class Progress:
    """Counters stored in every checkpoint."""

    phase_index: int = 0
    update: int = 0  # updates done in the phase at phase_index
    global_update: int = 0
    episodes: int = 0
    seconds: float = 0.0  # training wall time (evaluation excluded)
    complete: bool = False
    best_eval: float = math.inf  # best train greedy geomean ratio (eval.keep_best)


def init_checkpoint(init: str, base_dir: Path | None) -> tuple[Path, TrainConfig | None]:
    """The checkpoint an ``init`` value names, and the config it names (or None).

    A ``.pt`` path is the checkpoint itself; a ``.yaml`` / ``.yml`` config names its
    run's ``checkpoints/final.pt``. Paths are found as given, else relative to
    ``base_dir`` (the config file's folder).
    """
    path = resolve_path(init, base_dir)
    if path.suffix in (".yaml", ".yml"):
        src = load_config(path)
        return src.run_dir / "checkpoints" / "final.pt", src
    return path, None


class Trainer:
    """Runs the phases of ``cfg`` (see the module docstring).

    Args:
        cfg: the run configuration.
        base_dir: folder of the config file, for relative ``init``, cluster and graph
            paths.
    """

    def __init__(self, cfg: TrainConfig, *, base_dir: Path | None = None) -> None:
        self.cfg, self.base_dir = cfg, base_dir
        self.run_dir = cfg.run_dir
        self.ckpt_dir = self.run_dir / "checkpoints"
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(cfg.threads)
        self.rng = np.random.default_rng(cfg.seed)
        self.policy = DopplerPolicy(cfg.policy)
        self.train_set = load_graphs(cfg.data.graphs, cfg.data.cluster, base_dir)
        self.heldout_set = load_graphs(cfg.data.heldout, cfg.data.cluster, base_dir)
        self.graphs = [t.graph for t in self.train_set]
        self.clusters = [t.cluster for t in self.train_set]
        self._cluster_of = {id(t.graph): t.cluster for t in self.train_set + self.heldout_set}
        env_kw = {"memory_mask": cfg.data.memory_mask, "dispatch": cfg.data.dispatch}
        self.pools = {r: EnvPool(reward=r, **env_kw) for r in ("relative", "nest")}
        self.eval_pool = EnvPool(**env_kw)
        teachers = list(dict.fromkeys([REFERENCE, *cfg.eval.teachers]))
        self.teacher_times: IdentityCache[dict[str, float]] = IdentityCache(
            lambda g: teacher_makespans(
                g, self._cluster_of[id(g)], teachers, seed=cfg.seed, dispatch=self._dispatch
            ),
            size=None,
        )
        self.progress = Progress()
        self.tracker: Tracker | None = None
        self.last_eval: list[dict[str, Any]] = []
        self._eval_step = -1  # global update of last_eval
        self._session = 0  # updates done by this process (stop_after)
        self._real: tuple[EnvPool, Cluster] | None = None  # phase III envs, made on first use
        self.self_imitation: SelfImitation | None = None  # made when phase II starts
        self._saved_plans: dict[int, dict[str, Any]] = {}  # from a resumed checkpoint
        self.workers: RolloutWorkers | None = None  # Ray actors (cfg.workers > 0), on first use

    @property
    def _dispatch(self) -> Dispatch:
        return cast(Dispatch, self.cfg.data.dispatch)  # validated: priority or fifo

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
        self.tracker = Tracker(
            self.run_dir,
            cfg.name,
            cfg.to_dict(),
            cfg.wandb,
            fresh=self.progress.global_update == 0,
            resume_step=self.progress.global_update,
        )
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
        finally:
            self.tracker.finish()
            if self.workers is not None:
                self.workers.close()
                self.workers = None
        print(results_table(self.last_eval, cfg.eval.k, self.progress.seconds))
        print(f"\nfinal checkpoint: {final}")
        return self.last_eval

    def _restore(self) -> dict[str, Any] | None:
        """Load the latest checkpoint (returns its optimiser states) or the init weights."""
        latest = self.ckpt_dir / "latest.pt"
        if self.cfg.resume and latest.is_file():
            ckpt = load_checkpoint(latest)
            self.policy.load_state_dict(ckpt["policy"])
            set_rng_state(self.rng, ckpt["rng"])
            self.progress = Progress(**ckpt["progress"])
            self._saved_plans = ckpt.get("best_plans") or {}
            print(f"resuming {latest} at update {self.progress.global_update}")
            return {"optimizer": ckpt["optimizer"], "scheduler": ckpt["scheduler"]}
        if self.cfg.init:
            self._load_init(self.cfg.init)
        return None

    def _load_init(self, init: str) -> None:
        path, src = init_checkpoint(init, self.base_dir)
        if src is not None and not path.is_file():
            raise FileNotFoundError(
                f"init: {init} has no final checkpoint {path} yet; train it first "
                "(placegym train does)"
            )
        ckpt = load_checkpoint(path)
        mine = {"hidden": self.cfg.policy.hidden, "layers": self.cfg.policy.layers}
        if {k: ckpt["policy_config"].get(k) for k in mine} != mine:
            raise ValueError(
                f"init: the checkpoint's policy sizes {dict(ckpt['policy_config'])} differ "
                f"from this config's policy {mine}"
            )
        self.policy.load_state_dict(ckpt["policy"])
        print(f"initialised from {path}")

    # ------------------------------------------------------------------ phases
    def _run_phase(
        self, index: int, phase: str, states: dict[str, Any] | None, stop_after: int | None
    ) -> bool:
        """Run (the rest of) one phase; False when stopped by ``stop_after``."""
        from tqdm.auto import tqdm

        pcfg = getattr(self.cfg, phase)
        opt, sched = make_optimizer(
            self.policy.parameters(), pcfg.lr, pcfg.lr_schedule, pcfg.updates, pcfg.lr_end_factor
        )
        if states is not None and states["optimizer"] is not None:
            opt.load_state_dict(states["optimizer"])
            sched.load_state_dict(states["scheduler"])
        step = self._phase_step(phase, pcfg)
        bar = tqdm(
            total=pcfg.updates,
            initial=self.progress.update,
            desc=phase,
            unit="upd",
            disable=not self.cfg.progress,
            leave=False,
        )
        while self.progress.update < pcfg.updates:
            if stop_after is not None and self._session >= stop_after:
                bar.close()
                return False
            metrics = self._update(phase, step, opt)
            sched.step()
            self._session += 1
            bar.update()
            bar.set_postfix_str(_postfix(metrics))
            p = self.progress
            if p.update % self.cfg.checkpoint_every == 0 and p.update < pcfg.updates:
                self._save("latest.pt", opt, sched)
            if self.cfg.eval.every and p.update % self.cfg.eval.every == 0:
                self._evaluate()
        bar.close()
        self.progress.phase_index, self.progress.update = index + 1, 0
        self._save("latest.pt", None, None)
        if self._eval_step != self.progress.global_update:
            self._evaluate()
        return True

    def _phase_step(self, phase: str, pcfg: Any) -> Step:
        """The update step of ``phase``: batch, rollout and learning step."""
        if phase == "phase1":
            teacher = phase1_teacher(pcfg, self.cfg.seed)
            workers = self._workers()
            if workers is not None:
                workers.set_phase1(pcfg)
            return lambda opt: self._imitation_step(pcfg, opt, teacher)
        if phase == "phase2":
            self._start_self_imitation(pcfg)
            return lambda opt: self._rl_step(
                pcfg,
                opt,
                self.pools[pcfg.reward],
                reward_to_go=pcfg.reward == "nest",
                self_imitation=self.self_imitation,
            )
        return lambda opt: self._real_step(pcfg, opt)

    def _update(self, phase: str, step: Step, opt: torch.optim.Optimizer) -> dict[str, float]:
        """Take one update and log its metrics (``charts/``, ``losses/``)."""
        t0 = time.perf_counter()
        lr = opt.param_groups[0]["lr"]
        self.policy.train()
        records, metrics = step(opt)
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
        return metrics

    def _batch(
        self, pcfg: Any, pool: EnvPool, cluster: Cluster | None = None
    ) -> tuple[list[PlacementEnv], list[int], list[int], list[int]]:
        """This update's environments (``episodes_per_graph`` per drawn graph), the graph
        index of each (the baseline groups), their reset seeds and the seed of each
        episode's own generator (:func:`~placegym.train.workers.episode_rngs`)."""
        n = len(self.graphs)
        if pcfg.graphs_per_update >= n:
            chosen = list(range(n))
        else:
            chosen = sorted(self.rng.choice(n, pcfg.graphs_per_update, replace=False).tolist())
        envs: list[PlacementEnv] = []
        groups: list[int] = []
        for gi in chosen:
            envs += pool.get(
                self.graphs[gi], cluster or self.clusters[gi], pcfg.episodes_per_graph
            )
            groups += [gi] * pcfg.episodes_per_graph
        seeds = self.rng.integers(2**31 - 1, size=len(envs)).tolist()
        streams = self.rng.integers(2**63 - 1, size=len(envs)).tolist()
        return envs, groups, seeds, streams

    def _workers(self) -> RolloutWorkers | None:
        """The Ray actors of ``workers`` > 0 (started on first use), else None."""
        if self.cfg.workers and self.workers is None:
            self.workers = RolloutWorkers(
                self.cfg.workers,
                policy=self.cfg.policy,
                graphs=self.graphs,
                clusters=self.clusters,
                env_kwargs=dict(self.eval_pool.env_kwargs),
                threads=self.cfg.threads,
                seed=self.cfg.seed,
            )
            print(f"rollouts on {self.cfg.workers} Ray workers")
        return self.workers

    def _play(
        self, envs: list[PlacementEnv], job: Job, pool: EnvPool, teacher: Any, real: bool = False
    ) -> list[EpisodeRecord]:
        """The episodes of ``job`` (on ``envs``): in process, or on the Ray actors (the
        simulator phases with ``workers`` > 0), with the same records."""
        workers = None if real else self._workers()
        if workers is None:
            return rollout(
                self.policy,
                envs,
                job.seeds,
                rng=episode_rngs(job.streams),
                teacher=teacher,
                teacher_prob=job.teacher_prob,
                record_teacher=job.record_teacher,
                graph_cache=pool.graph_cache,
            )
        if self.self_imitation is not None and job.teacher == "plans":
            si = self.self_imitation
            workers.set_plans(si.cfg, si.state(self.graphs, self.clusters))
        records = workers.play(self.policy, job)
        first: dict[int, PlacementEnv] = {}
        for env, gi, seed, r in zip(envs, job.groups, job.seeds, records, strict=True):
            if gi not in first:  # reset, so that it names its graph as after a rollout
                first[gi] = env
                env.reset(seed=seed)
            known = pool.graph_cache.get(self.graphs[gi], self.clusters[gi])
            if known is None:  # one GraphInputs per graph, as in process
                pool.graph_cache.put(self.graphs[gi], self.clusters[gi], value=r.graph)
            else:
                r.graph = known
        return records

    def _imitation_step(
        self, pcfg: ImitationConfig, opt: torch.optim.Optimizer, teacher: Any
    ) -> tuple[list[EpisodeRecord], dict[str, float]]:
        """Phase I: episodes with teacher roll-in (probability ε), labelled by the teacher."""
        pool = self.pools["relative"]
        envs, groups, seeds, streams = self._batch(pcfg, pool)
        eps = epsilon(
            self.progress.update, pcfg.updates, pcfg.eps_start, pcfg.eps_end, pcfg.eps_decay
        )
        job = Job(groups, seeds, streams, "relative", eps, True, "phase1")
        records = self._play(envs, job, pool, teacher)
        metrics = imitation_update(
            self.policy, opt, records, pcfg.max_grad_norm, regret_coef=pcfg.regret_coef
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
        envs, groups, seeds, streams = self._batch(pcfg, pool, cluster)
        reward = "nest" if reward_to_go else "relative"
        labels, name = si is not None and si.labels_batch, None if si is None else "plans"
        job = Job(groups, seeds, streams, reward, 0.0, labels, name)
        teacher = None if si is None else si.plans
        records = self._play(envs, job, pool, teacher, real=cluster is not None)
        term, extra = None, dict[str, float]()
        if si is not None:
            term, extra = si.step(
                self.policy, envs, groups, records, rng=self.rng, graph_cache=pool.graph_cache
            )
        metrics = rl_update(
            self.policy,
            opt,
            records,
            groups,
            pcfg,
            self.rng,
            reward_to_go=reward_to_go,
            imitation=term,
        )
        metrics.update(extra)
        return records, metrics

    def _real_step(
        self, pcfg: RealRLConfig, opt: torch.optim.Optimizer
    ) -> tuple[list[EpisodeRecord], dict[str, float]]:
        """Phase III: the RL step on measured makespans, plus the sim-vs-real gap."""
        pool, cluster = self._real_pool(pcfg)
        records, metrics = self._rl_step(pcfg, opt, pool, cluster=cluster)
        measured = np.array([r.makespan for r in records])
        simulated = np.array([r.info["simulated_makespan"] for r in records])
        metrics["charts/measured_makespan_ms"] = float(measured.mean()) * 1e3
        metrics["charts/simulated_makespan_ms"] = float(simulated.mean()) * 1e3
        metrics["charts/sim_real_gap"] = float(np.mean(measured / simulated) - 1.0)
        return records, metrics

    def _start_self_imitation(self, pcfg: SimRLConfig) -> None:
        """Phase II's plans (``self_imitation.coef`` > 0), a resumed run's restored."""
        if pcfg.self_imitation.coef > 0 and self.self_imitation is None:
            self.self_imitation = SelfImitation(pcfg.self_imitation, self.cfg.seed)
            self.self_imitation.restore(self._saved_plans, self.graphs, self.clusters)

    def _real_pool(self, pcfg: RealRLConfig) -> tuple[EnvPool, Cluster]:
        """The phase III environments (real backend) and the cluster they observe; the
        cluster is calibrated on the devices once when ``phase3.cluster`` is
        ``calibrate``."""
        if self._real is None:
            from placegym.envs.backend.calibrate import calibrate

            if pcfg.cluster == "calibrate":
                from placegym.envs.backend.kernels import scale_graph

                graphs = [scale_graph(g, pcfg.scale) for g in self.graphs] if pcfg.profile else ()
                cluster = calibrate(pcfg.devices, graphs=graphs)
            else:
                cluster = load_cluster(str(resolve_path(pcfg.cluster, self.base_dir)))
            pool = EnvPool(
                reward="relative",
                memory_mask=self.cfg.data.memory_mask,
                dispatch=self.cfg.data.dispatch,
                backend="torch",
                devices=pcfg.devices,
                scale=pcfg.scale,
                repeats=pcfg.repeats,
            )
            self._real = (pool, cluster)
        return self._real

    # ------------------------------------------------------------------ checkpoints
    def _save(self, name: str, opt: torch.optim.Optimizer | None, sched: Any | None) -> Path:
        plans = self.self_imitation
        payload = {
            "format": CHECKPOINT_FORMAT,
            "name": self.cfg.name,
            "config": self.cfg.to_dict(),
            "policy_config": asdict(self.cfg.policy),
            "policy": self.policy.state_dict(),
            "optimizer": None if opt is None else opt.state_dict(),
            "scheduler": None if sched is None else sched.state_dict(),
            "progress": asdict(self.progress),
            "rng": rng_state(self.rng),
            "best_plans": self._saved_plans
            if plans is None
            else plans.state(self.graphs, self.clusters),
        }
        return save_checkpoint(self.ckpt_dir / name, payload)

    # ------------------------------------------------------------------ evaluation
    @property
    def _tracker(self) -> Tracker:
        assert self.tracker is not None, "the tracker exists while run() runs"
        return self.tracker

    def _evaluate(self) -> list[dict[str, Any]]:
        """Evaluate on every training and held-out graph; log ``eval/...`` metrics and a
        Gantt chart; keep the best weights (``eval.keep_best``)."""
        cfg, step = self.cfg, self.progress.global_update
        sets = [("train", t) for t in self.train_set] + [("heldout", t) for t in self.heldout_set]
        ev = evaluate_run(
            self.policy,
            [(split, t.label, t.graph) for split, t in sets],
            [t.cluster for _, t in sets],
            self.teacher_times,
            k=cfg.eval.k,
            seed=cfg.seed,
            pool=self.eval_pool,
        )
        if cfg.eval.gantt:
            self._gantt(self.graphs[0], ev.best_placements[0], step)
        self._tracker.log(ev.metrics, step=step)
        self.last_eval, self._eval_step = ev.rows, step
        score = ev.metrics.get("eval/train/greedy_ratio_geomean", math.inf)
        if cfg.eval.keep_best and score < self.progress.best_eval:
            self.progress.best_eval = score
            self._save("best.pt", None, None)
        return ev.rows

    def _gantt(self, graph: Graph, placement: Placement, step: int) -> None:
        from placegym.envs.gantt import gantt_rgb

        schedule = simulate(graph, self._cluster_of[id(graph)], placement, dispatch=self._dispatch)
        self._tracker.image(
            "charts/gantt",
            gantt_rgb(schedule),
            step,
            caption=f"{graph.name}: best of {self.cfg.eval.k}, {schedule.makespan * 1e3:.3f} ms",
        )

    def _finish(self) -> Path:
        """Final checkpoint (also logged as an artifact), results.md and results.json;
        with ``eval.keep_best``, the best evaluated weights become the final ones."""
        best = self.ckpt_dir / "best.pt"
        current = train_greedy_ratio(self.last_eval)
        if self.cfg.eval.keep_best and best.is_file() and self.progress.best_eval < current:
            self.policy.load_state_dict(load_checkpoint(best)["policy"])
            print(f"keep_best: final weights from {best} (greedy {self.progress.best_eval:.3f})")
            self._evaluate()
        final = self._save("final.pt", None, None)
        self._save("latest.pt", None, None)
        table = results_table(self.last_eval, self.cfg.eval.k, self.progress.seconds)
        (self.run_dir / "results.md").write_text(table + "\n")
        (self.run_dir / "results.json").write_text(
            json.dumps({"progress": asdict(self.progress), "rows": self.last_eval}, indent=1)
        )
        self._tracker.summary({f"final/{k}": v for k, v in asdict(self.progress).items()})
        self._tracker.artifact(final)
        return final


def _postfix(m: dict[str, float]) -> str:
    loss = m.get("losses/imitation", m.get("losses/policy", float("nan")))
    return (
        f"loss {loss:.3g} ratio {m['charts/ratio_to_critical_path']:.3f} "
        f"best {m['charts/best_ratio']:.3f} {m['charts/episodes_per_second']:.1f} ep/s"
    )
