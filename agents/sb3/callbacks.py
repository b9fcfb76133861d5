"""SB3 callbacks for placegym's MaskablePPO: per-phase update diagnostics.

SB3's own ``train/`` metrics average over both MDP phases (SEL picks one of up to
``max_nodes`` frontier slots, PLC one of ``D`` devices), so a collapse of one phase hides
behind the other. :class:`PhaseDiagnostics` adds, through the model's logger (so they
reach stdout, CSV, TensorBoard or W&B with the ``train/`` keys of the same update):

==============================  ==========================================================
key                             meaning
==============================  ==========================================================
``phase/{sel,plc}_entropy``     mean entropy of the masked policy on the rollout's states
                                of that phase, before the update
``phase/{sel,plc}_approx_kl``   ``E[(r - 1) - log r]`` of the whole update (all epochs),
                                ``r`` = new / old probability of the rollout's actions
``phase/{sel,plc}_clip_frac``   share of those states with ``|r - 1| >`` the clip range
``phase/{sel,plc}_uniform``     entropy of the uniform policy over the legal actions
                                (mean ``log #legal``): the entropy of an untrained policy
``rollout/return_std``          std of the rollout's returns-to-go (the learning signal)
``rollout/adv_std``             std of the raw advantages (before PPO's normalisation)
``rollout/value_mae``           mean ``|V(s) - G(s)|`` at collection
``rollout/makespan_ratio``      mean makespan / reference makespan of the rollout's
                                finished (sampled) episodes
==============================  ==========================================================

The KL and clip fraction are measured after ``train()`` on a copy of the rollout (SB3
clears its buffer before the next collection), so they describe the whole update, not one
minibatch. Each record is also kept in :attr:`PhaseDiagnostics.history`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

__all__ = ["PhaseDiagnostics"]

PHASES = ("sel", "plc")


class PhaseDiagnostics(BaseCallback):
    """Per-phase entropy, approx KL and clip fraction of each MaskablePPO update.

    Args:
        batch_size: states per forward pass when re-evaluating the rollout.
        verbose: SB3 verbosity.

    Attributes:
        history: one dict per update (the keys of the module table, plus ``timesteps``).
    """

    def __init__(self, batch_size: int = 512, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.batch_size = batch_size
        self.history: list[dict[str, float]] = []
        self._rollout: dict[str, Any] | None = None
        self._pending: dict[str, float] = {}
        self._ratios: list[float] = []

    # ---------------------------------------------------------------- SB3 hooks
    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"]):
            if done and "makespan" in info:
                self._ratios.append(info["makespan"] / info["reference_makespan"])
        return True

    def _on_rollout_end(self) -> None:
        buf = self._ppo.rollout_buffer
        obs = {k: np.array(v.reshape(-1, *v.shape[2:])) for k, v in buf.observations.items()}
        rollout = {
            "obs": obs,
            "actions": buf.actions.reshape(-1).astype(np.int64),
            "masks": buf.action_masks.reshape(len(obs["phase"]), -1).astype(bool),
            "old_log_prob": buf.log_probs.reshape(-1).copy(),
            "phase": obs["phase"].reshape(-1) > 0.5,
        }
        _, _, entropy = self._evaluate(rollout)
        stats = {
            "rollout/return_std": float(np.std(buf.returns)),
            "rollout/adv_std": float(np.std(buf.advantages)),
            "rollout/value_mae": float(np.mean(np.abs(buf.values - buf.returns))),
        }
        if self._ratios:
            stats["rollout/makespan_ratio"] = float(np.mean(self._ratios))
        self._ratios = []
        for name, sel in self._phase_rows(rollout):
            stats[f"phase/{name}_entropy"] = float(entropy[sel].mean())
            legal = rollout["masks"][sel].sum(axis=1)
            stats[f"phase/{name}_uniform"] = float(np.log(legal).mean())
        self._rollout, self._pending = rollout, stats

    def _on_rollout_start(self) -> None:
        self._finish_update()

    def _on_training_end(self) -> None:
        self._finish_update()

    # ---------------------------------------------------------------- internals
    @property
    def _ppo(self) -> Any:
        """The MaskablePPO being trained (typed ``Any``: SB3 annotates its buffers and
        schedules loosely)."""
        return self.model

    def _phase_rows(self, rollout: dict[str, Any]):
        for name, is_plc in zip(PHASES, (False, True)):
            sel = rollout["phase"] == is_plc
            if sel.any():
                yield name, sel

    @torch.no_grad()
    def _evaluate(self, rollout: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        policy = self._ppo.policy
        was_training = policy.training
        policy.set_training_mode(False)
        out: list[list[np.ndarray]] = [[], [], []]
        for lo in range(0, len(rollout["actions"]), self.batch_size):
            rows = slice(lo, lo + self.batch_size)
            obs = {
                k: torch.as_tensor(v[rows], device=policy.device)
                for k, v in rollout["obs"].items()
            }
            actions = torch.as_tensor(rollout["actions"][rows], device=policy.device)
            values, log_prob, entropy = policy.evaluate_actions(
                obs, actions, action_masks=rollout["masks"][rows]
            )
            for acc, x in zip(out, (values.flatten(), log_prob, entropy)):
                acc.append(x.cpu().numpy())
        policy.set_training_mode(was_training)
        return tuple(np.concatenate(acc) for acc in out)  # type: ignore[return-value]

    def _finish_update(self) -> None:
        """Measure the update that just ended against the rollout it was trained on."""
        if self._rollout is None:
            return
        rollout, stats = self._rollout, self._pending
        _, log_prob, _ = self._evaluate(rollout)
        log_ratio = log_prob - rollout["old_log_prob"]
        ratio = np.exp(log_ratio)
        ppo = self._ppo
        clip = float(ppo.clip_range(ppo._current_progress_remaining))
        for name, sel in self._phase_rows(rollout):
            stats[f"phase/{name}_approx_kl"] = float(np.mean((ratio - 1 - log_ratio)[sel]))
            stats[f"phase/{name}_clip_frac"] = float(np.mean(np.abs(ratio[sel] - 1) > clip))
        for key, value in stats.items():
            self.logger.record(key, value)
        train = {
            k: float(v) for k, v in self.logger.name_to_value.items() if k.startswith("train/")
        }
        self.history.append({"timesteps": float(self.num_timesteps), **train, **stats})
        self._rollout, self._pending = None, {}
