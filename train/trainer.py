"""One ``placegym train`` run: phases, checkpoints, resume, evaluation, logging.

Reads top to bottom like a CleanRL script, split into methods:

1. **Seeding**: ``torch.manual_seed(seed)`` and one ``numpy`` generator drive every draw
   (graph choice, reset seeds, roll-in coins, action samples, PPO minibatch order).
   Evaluation uses its own generators seeded from ``seed``, so evaluating never changes
   the training trajectory.
2. **Resume or init**: the run folder's ``checkpoints/latest.pt`` when present (policy,
   optimiser, scheduler, random states, counters), else the ``init`` weights, else fresh.
3. **Phases** (``phases`` in order): phase I imitation (:mod:`placegym.train.imitation`),
   phase II RL on the simulator and phase III RL on the real backend
   (:mod:`placegym.train.rl`; phase III's rewards are measured makespans and it logs the
   sim-vs-real gap ``charts/sim_real_gap``), each with its own Adam and learning-rate
   schedule, a tqdm bar, metrics every update, a checkpoint every ``checkpoint_every``
   updates and at the phase end, and an evaluation every ``eval.every`` updates.
4. **Final**: evaluation against the teachers on training and held-out graphs, a
   markdown table (printed and written to ``results.md``, with ``results.json``),
   ``checkpoints/final.pt`` logged as a W&B artifact.

A run killed at any moment resumes from its latest checkpoint and repeats at most
``checkpoint_every`` updates; with the same config the resumed run ends with the same
weights as an uninterrupted one (CPU, same thread count).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.rollout import EpisodeRecord, rollout
from placegym.envs import Graph, Placement, load_cluster, load_graph, simulate
from placegym.train.checkpoint import (
    CHECKPOINT_FORMAT,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from placegym.train.config import GraphSpec, TrainConfig, load_config
from placegym.train.evaluate import (
    EnvPool,
    episode_placement,
    evaluate_policy,
    teacher_makespans,
)
from placegym.train.imitation import epsilon, imitation_update, make_teacher
from placegym.train.optim import make_optimizer
from placegym.train.plan_teacher import CanonicalPlanTeacher
from placegym.train.rl import rl_update
from placegym.train.tracking import Tracker

__all__ = ["Progress", "Trainer", "resolve_graph", "resolve_path"]

REFERENCE = "critical_path"


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


def resolve_path(path: str, base: Path | None) -> Path:
    """``path`` as given when it exists (relative to the working directory), else
    relative to ``base`` (the config file's folder) when it exists there."""
    p = Path(path)
    if p.exists() or p.is_absolute() or base is None:
        return p
    return base / p if (base / p).exists() else p


def resolve_graph(spec: GraphSpec, base: Path | None = None) -> Graph:
    """The graph of a :class:`GraphSpec`: a JSON file or a generator with parameters."""
    from placegym.envs.workloads import make_graph

    if spec.name.endswith(".json"):
        return load_graph(resolve_path(spec.name, base))
    return make_graph(spec.name, **spec.params)


class Trainer:
    """Runs the phases of ``cfg`` (see the module docstring).

    Args:
        cfg: the run configuration.
        base_dir: folder of the config file, for relative ``init`` and graph paths.
    """

    def __init__(self, cfg: TrainConfig, *, base_dir: Path | None = None) -> None:
        self.cfg, self.base_dir = cfg, base_dir
        self.run_dir = cfg.run_dir
        self.ckpt_dir = self.run_dir / "checkpoints"
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(cfg.threads)
        self.rng = np.random.default_rng(cfg.seed)
        self.policy = DopplerPolicy(
            PolicyConfig(
                cfg.policy.hidden, cfg.policy.layers, cfg.policy.learn, cfg.policy.siblings
            )
        )
        self.cluster = load_cluster(str(resolve_path(cfg.data.cluster, base_dir)))
        self.graphs = [resolve_graph(s, base_dir) for s in cfg.data.graphs]
        self.heldout = [resolve_graph(s, base_dir) for s in cfg.data.heldout]
        env_kw = {"memory_mask": cfg.data.memory_mask, "dispatch": cfg.data.dispatch}
        self.pools = {r: EnvPool(reward=r, **env_kw) for r in ("relative", "nest")}
        self.eval_pool = EnvPool(**env_kw)
        self.progress = Progress()
        self._teachers: dict[int, dict[str, float]] = {}
        self.last_eval: list[dict[str, Any]] = []
        self._eval_step = -1  # global update of last_eval
        self.tracker: Tracker | None = None
        self._real: tuple[EnvPool, Any] | None = None  # phase III envs, made on first use
        self._best_plans: CanonicalPlanTeacher | None = None  # self-imitation targets
        self._saved_plans: dict[int, dict[str, Any]] = {}  # from a resumed checkpoint

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
        path = resolve_path(init, self.base_dir)
        if path.suffix in (".yaml", ".yml"):
            src = load_config(path)
            path = src.run_dir / "checkpoints" / "final.pt"
            if not path.is_file():
                print(f"init: training {src.name} first ({path} does not exist)")
                from placegym.train.restarts import train

                train(src, base_dir=resolve_path(init, self.base_dir).parent)
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
        teacher = None
        if phase == "phase1":
            teacher = make_teacher(
                pcfg.teacher,
                self.cfg.seed,
                canonical=pcfg.canonical_labels,
                kwargs=pcfg.teacher_kwargs,
                select=pcfg.select_teacher,
            )
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
            metrics = self._update(phase, pcfg, opt, teacher)
            sched.step()
            self._session += 1
            bar.update()
            bar.set_postfix_str(self._postfix(metrics))
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

    def _update(self, phase: str, pcfg: Any, opt: torch.optim.Optimizer, teacher) -> dict:
        """Collect one batch of episodes and take one update; returns the metrics logged."""
        t0 = time.perf_counter()
        lr = opt.param_groups[0]["lr"]
        self.policy.train()
        if phase == "phase1":
            records, metrics = self._imitation_step(pcfg, opt, teacher)
        else:
            records, metrics = self._rl_step(pcfg, opt, real=phase == "phase3")
        secs = time.perf_counter() - t0
        p = self.progress
        p.update, p.global_update = p.update + 1, p.global_update + 1
        p.episodes, p.seconds = p.episodes + len(records), p.seconds + secs
        metrics.update(_episode_metrics(records))
        metrics.update(
            {
                "charts/learning_rate": lr,
                "charts/episodes_per_second": len(records) / secs,
                "charts/episodes": p.episodes,
                "charts/phase": float(self.cfg.phases.index(phase) + 1),
            }
        )
        self.tracker.log(metrics, step=p.global_update)
        return metrics

    def _imitation_step(self, pcfg: Any, opt: torch.optim.Optimizer, teacher) -> tuple:
        pool = self.pools["relative"]
        envs, _ = self._batch_envs(pcfg, pool)
        seeds = self.rng.integers(2**31 - 1, size=len(envs)).tolist()
        eps = epsilon(
            self.progress.update, pcfg.updates, pcfg.eps_start, pcfg.eps_end, pcfg.eps_decay
        )
        records = rollout(
            self.policy,
            envs,
            seeds,
            rng=self.rng,
            teacher=teacher,
            teacher_prob=eps,
            record_teacher=True,
            graph_cache=pool.graph_cache,
        )
        metrics = imitation_update(self.policy, opt, records, pcfg.max_grad_norm)
        metrics["charts/epsilon"] = eps
        return records, metrics

    def _rl_step(self, pcfg: Any, opt: torch.optim.Optimizer, real: bool = False) -> tuple:
        pool, cluster = self._real_pool(pcfg) if real else (self.pools[pcfg.reward], None)
        envs, groups = self._batch_envs(pcfg, pool, cluster)
        seeds = self.rng.integers(2**31 - 1, size=len(envs)).tolist()
        plans = self._self_imitation(pcfg) if not real else None
        on_plan = plans is not None and pcfg.imitation_states == "plan"
        records = rollout(
            self.policy,
            envs,
            seeds,
            rng=self.rng,
            graph_cache=pool.graph_cache,
            teacher=plans,
            record_teacher=plans is not None and not on_plan,
        )
        plan_records = None
        if plans is not None:
            best = self._best_per_graph(envs, groups, records)
            offered = self._offer_best(plans, best)
            every = pcfg.improve_every
            if every > 0 and self.progress.update % every == 0:
                offered.update(self._improve_plans(plans, best, pcfg, pool))
        if on_plan:  # one episode per graph along its (just updated) best plan
            firsts = [env for env, _ in best]
            plan_records = rollout(
                self.policy,
                firsts,
                self.rng.integers(2**31 - 1, size=len(firsts)).tolist(),
                rng=self.rng,
                graph_cache=pool.graph_cache,
                teacher=plans,
                teacher_prob=1.0,
                record_teacher=True,
            )
        metrics = rl_update(self.policy, opt, records, groups, pcfg, self.rng, plan_records)
        if plans is not None:
            metrics.update(offered)
        if real:
            measured = np.array([r.makespan for r in records])
            simulated = np.array([r.info["simulated_makespan"] for r in records])
            metrics["charts/measured_makespan_ms"] = float(measured.mean()) * 1e3
            metrics["charts/simulated_makespan_ms"] = float(simulated.mean()) * 1e3
            metrics["charts/sim_real_gap"] = float(np.mean(measured / simulated) - 1.0)
        return records, metrics

    def _self_imitation(self, pcfg: Any) -> CanonicalPlanTeacher | None:
        """The best-known placement per graph (self-imitation targets), or None when
        ``imitation_coef`` is 0; starts from ``imitation_teacher``'s plans."""
        if pcfg.imitation_coef <= 0:
            return None
        if self._best_plans is None:
            source = make_teacher(
                pcfg.imitation_teacher, self.cfg.seed, kwargs=pcfg.imitation_teacher_kwargs
            )
            select = pcfg.imitation_select_teacher
            self._best_plans = CanonicalPlanTeacher(
                source, make_teacher(select) if select else None
            )
            for i, saved in self._saved_plans.items():  # plans of a resumed run
                placement = Placement(device=saved["device"], order=saved["order"])
                self._best_plans.offer(
                    self.graphs[int(i)], self.cluster, placement, saved["makespan"]
                )
        return self._best_plans

    @staticmethod
    def _best_per_graph(
        envs: list, groups: list[int], records: list[EpisodeRecord]
    ) -> list[tuple[Any, EpisodeRecord]]:
        """(an env, the best sampled episode) of each graph of the batch, in batch order."""
        best: dict[int, tuple[Any, EpisodeRecord]] = {}
        for g, env, r in zip(groups, envs, records, strict=True):
            if g not in best:
                best[g] = (env, r)
            elif r.makespan < best[g][1].makespan:
                best[g] = (best[g][0], r)
        return list(best.values())

    @staticmethod
    def _offer_best(
        plans: CanonicalPlanTeacher, best: list[tuple[Any, EpisodeRecord]]
    ) -> dict[str, float]:
        """Offer each graph's best sampled episode as its new plan; returns metrics."""
        adopted, ratios = 0, []
        for env, r in best:
            adopted += plans.offer(env.graph, env.cluster, episode_placement(r), r.makespan)
            ratios.append(
                plans.plan_makespan(env.graph, env.cluster) / r.info["reference_makespan"]
            )
        return {
            "charts/plans_improved": float(adopted),
            "charts/plan_ratio": float(np.mean(ratios)),
        }

    def _improve_plans(
        self,
        plans: CanonicalPlanTeacher,
        best: list[tuple[Any, EpisodeRecord]],
        pcfg: Any,
        pool: EnvPool,
    ) -> dict[str, float]:
        """Expert iteration: anneal (``improve_budget`` simulations) from each graph's
        greedy placement and best sampled one, and offer the result as its plan, so the
        plans improve from the policy's own solutions."""
        from placegym.teachers.anneal import anneal

        adopted = 0
        for env, sampled in best:
            seed = int(self.rng.integers(2**31 - 1))
            [greedy] = rollout(
                self.policy,
                [env],
                [seed],
                rng=self.rng,
                greedy=True,
                graph_cache=pool.graph_cache,
            )
            starts = [episode_placement(greedy), episode_placement(sampled)]
            res = anneal(env.graph, env.cluster, starts, budget=pcfg.improve_budget, seed=seed)
            adopted += plans.offer(env.graph, env.cluster, res.placement, res.makespan)
        return {"charts/plans_annealed": float(adopted)}

    def _real_pool(self, pcfg: Any) -> tuple[EnvPool, Any]:
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

    def _batch_envs(self, pcfg: Any, pool: EnvPool, cluster: Any = None) -> tuple[list, list[int]]:
        """Environments of this update's graphs, ``episodes_per_graph`` each, and the
        graph index of each (the baseline groups)."""
        n = len(self.graphs)
        if pcfg.graphs_per_update >= n:
            chosen = list(range(n))
        else:
            chosen = sorted(self.rng.choice(n, pcfg.graphs_per_update, replace=False).tolist())
        envs, groups = [], []
        for gi in chosen:
            envs += pool.get(self.graphs[gi], cluster or self.cluster, pcfg.episodes_per_graph)
            groups += [gi] * pcfg.episodes_per_graph
        return envs, groups

    @staticmethod
    def _postfix(m: dict[str, float]) -> str:
        loss = m.get("losses/imitation", m.get("losses/policy", float("nan")))
        return (
            f"loss {loss:.3g} ratio {m['charts/ratio_to_critical_path']:.3f} "
            f"best {m['charts/best_ratio']:.3f} {m['charts/episodes_per_second']:.1f} ep/s"
        )

    # ------------------------------------------------------------------ checkpoints
    def _payload(self, opt, sched) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "name": self.cfg.name,
            "config": self.cfg.to_dict(),
            "policy_config": {
                "hidden": self.cfg.policy.hidden,
                "layers": self.cfg.policy.layers,
                "learn": self.cfg.policy.learn,
                "siblings": self.cfg.policy.siblings,
            },
            "policy": self.policy.state_dict(),
            "optimizer": None if opt is None else opt.state_dict(),
            "scheduler": None if sched is None else sched.state_dict(),
            "progress": asdict(self.progress),
            "rng": rng_state(self.rng),
            "best_plans": self._plans_state(),
        }

    def _plans_state(self) -> dict[int, dict[str, Any]]:
        """The self-imitation plans found so far, by training-graph index."""
        plans, out = self._best_plans, {}
        if plans is None:
            return out
        for i, graph in enumerate(self.graphs):
            if plans.has_plan(graph, self.cluster):
                p = plans.place(graph, self.cluster)
                out[i] = {
                    "device": p.device.tolist(),
                    "order": p.order.tolist(),
                    "makespan": plans.plan_makespan(graph, self.cluster),
                }
        return out

    def _save(self, name: str, opt, sched) -> Path:
        return save_checkpoint(self.ckpt_dir / name, self._payload(opt, sched))

    # ------------------------------------------------------------------ evaluation
    def _teacher_times(self, graph: Graph) -> dict[str, float]:
        names = list(dict.fromkeys([REFERENCE, *self.cfg.eval.teachers]))
        if id(graph) not in self._teachers:
            self._teachers[id(graph)] = teacher_makespans(
                graph, self.cluster, names, seed=self.cfg.seed, dispatch=self.cfg.data.dispatch
            )
        return self._teachers[id(graph)]

    def _evaluate(self) -> list[dict[str, Any]]:
        """Greedy / sampled / best-of-k on every training and held-out graph; logs
        ``eval/...`` metrics (ratios to critical_path, geometric means) and a Gantt chart."""
        cfg, step = self.cfg, self.progress.global_update
        rows, metrics = [], {}
        splits = (
            ("train", cfg.data.graphs, self.graphs),
            ("heldout", cfg.data.heldout, self.heldout),
        )
        for split, specs, graphs in splits:
            for spec, graph in zip(specs, graphs):
                res = evaluate_policy(
                    self.policy,
                    graph,
                    self.cluster,
                    k=cfg.eval.k,
                    seed=cfg.seed,
                    pool=self.eval_pool,
                )
                teachers = self._teacher_times(graph)
                row = {
                    "split": split,
                    "graph": spec.label,
                    "greedy": res.greedy,
                    "sampled": res.sampled,
                    f"best_of_{cfg.eval.k}": res.best,
                    **teachers,
                }
                rows.append(row)
                cp = teachers[REFERENCE]
                key = f"eval/{split}/{spec.label}"
                metrics[f"{key}/greedy_ratio"] = res.greedy / cp
                metrics[f"{key}/best_ratio"] = res.best / cp
                metrics[f"{key}/sampled_ratio"] = res.sampled / cp
                metrics[f"{key}/greedy_ms"] = res.greedy * 1e3
                if split == "train" and len(rows) == 1 and cfg.eval.gantt:
                    self._gantt(graph, res.best_placement, step)
        for split in ("train", "heldout"):
            rs = [r for r in rows if r["split"] == split]
            for mode, col in (("greedy", "greedy"), ("best", f"best_of_{cfg.eval.k}")):
                if rs:
                    metrics[f"eval/{split}/{mode}_ratio_geomean"] = _geomean(
                        [r[col] / r[REFERENCE] for r in rs]
                    )
        self.tracker.log(metrics, step=step)
        self.last_eval, self._eval_step = rows, step
        score = metrics.get("eval/train/greedy_ratio_geomean", math.inf)
        if cfg.eval.keep_best and score < self.progress.best_eval:
            self.progress.best_eval = score
            self._save("best.pt", None, None)
        return rows

    def _gantt(self, graph: Graph, placement, step: int) -> None:
        from placegym.envs.gantt import gantt_rgb

        schedule = simulate(graph, self.cluster, placement, dispatch=self.cfg.data.dispatch)
        self.tracker.image(
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
        self.tracker.summary({f"final/{k}": v for k, v in asdict(self.progress).items()})
        self.tracker.artifact(final)
        return final


def _geomean(xs: list[float]) -> float:
    return float(math.exp(np.mean(np.log(xs)))) if xs else float("nan")


def train_greedy_ratio(rows: list[dict[str, Any]]) -> float:
    """Geometric mean over the training graphs of greedy / critical_path makespan (of
    evaluation ``rows``): what ``eval.keep_best`` and ``restarts`` select by."""
    return _geomean([r["greedy"] / r[REFERENCE] for r in rows if r["split"] == "train"])


def _episode_metrics(records: list[EpisodeRecord]) -> dict[str, float]:
    ratios = [r.makespan / r.info["reference_makespan"] for r in records]
    return {
        "charts/makespan_ms": float(np.mean([r.makespan for r in records])) * 1e3,
        "charts/ratio_to_critical_path": float(np.mean(ratios)),
        "charts/best_ratio": float(np.min(ratios)),
        "charts/return_mean": float(np.mean([r.ret for r in records])),
    }


def results_table(rows: list[dict[str, Any]], k: int, seconds: float) -> str:
    """Markdown: per graph, the agent's greedy and best-of-k makespans and each teacher's,
    in ms with the ratio to critical_path."""
    if not rows:
        return "(no evaluation)"
    fixed = {"split", "graph"}
    cols = [c for c in rows[0] if c not in fixed]
    head = "| split | graph | " + " | ".join(cols) + " |"
    lines = [head, "|---|---|" + "---|" * len(cols)]
    for r in rows:
        cp = r[REFERENCE]
        cells = [f"{r[c] * 1e3:.3f} ({r[c] / cp:.2f}x)" for c in cols]
        lines.append(f"| {r['split']} | {r['graph']} | " + " | ".join(cells) + " |")
    lines.append(
        f"\ntraining time {seconds:.1f} s (evaluation excluded); best_of_{k}: best of {k} samples"
    )
    return "\n".join(lines)
