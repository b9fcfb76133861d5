"""Stable-Baselines3 / sb3-contrib integration: a GNN policy for MaskablePPO.

- :class:`GraphFeaturesExtractor`: a ``BaseFeaturesExtractor`` over placegym's padded
  ``Dict`` observation. It turns a batch into one disjoint graph
  (:func:`~placegym.envs.mdp.observation.batch_to_pyg`), derives critical-path pointers for
  all graphs at once (:func:`critical_path_pointers_torch`), runs the agents'
  :class:`~placegym.agents.nn.encoder.GraphEncoder` on ``node_static ‖ node_dynamic`` and
  returns a pooled graph embedding (so it also works under SB3's stock MLP heads).
- :class:`GnnMaskablePolicy`: a ``MaskableActorCriticPolicy`` whose action logits come
  from the node embeddings: one logit per padded node slot in SEL, one per device in
  PLC (selected node's embedding, per-device aggregates, device features), chosen by
  ``obs["phase"]``; a value head on the pooled embedding.
- :class:`AnchoredMaskablePPO`: MaskablePPO that keeps the policy on the cloned
  teacher's tie sets after each update (a behaviour-cloning auxiliary loss).
- :func:`make_maskable_ppo`: an :class:`AnchoredMaskablePPO` with that policy and tuned
  defaults.

Example (behaviour cloning of the critical-path teacher, then MaskablePPO)::

    import torch
    from sb3_contrib import MaskablePPO
    from placegym.agents.sb3.bc import greedy_makespans, pretrain
    from placegym.agents.sb3 import make_maskable_ppo

    torch.set_num_threads(1)  # batches of small graphs: more threads only contend
    model = make_maskable_ppo("placegym/FFNN-v0", seed=0)  # GnnMaskablePolicy, PPO_DEFAULTS
    pretrain(model, "placegym/FFNN-v0", teacher="critical_path", epochs=2)  # also the anchor
    for _ in range(4):
        model.learn(5_120, reset_num_timesteps=False)
        print(greedy_makespans(model.policy, "placegym/FFNN-v0", seeds=[0, 1, 2]))
    model.save("ppo_ffnn")  # placegym bench --agents ppo_ffnn.zip
    model = MaskablePPO.load("ppo_ffnn")

Its measured curve over seeds is in the README (``python -m placegym.train.experiments.sb3_recipe``
reproduces it); pass ``callback=PhaseDiagnostics()``
(:mod:`placegym.agents.sb3.callbacks`) to ``learn`` to log entropy, approx KL and clip
fraction per phase beside SB3's ``train/`` metrics.

The policy's logits already exclude every action illegal by ``obs["action_mask"]``,
so ``predict`` stays legal even without ``action_masks``. Devices are CPU tensors
(``batch_to_pyg`` builds its index tensors on the CPU).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.distributions import MaskableDistribution
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, MlpExtractor
from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from torch import Tensor, nn
from torch_geometric.utils import scatter

from placegym.agents.nn.encoder import GraphEncoder, GraphInputs
from placegym.agents.sb3.bc import Demonstrations, clone_step
from placegym.envs.mdp.observation import DEVICE_FEATURES, NODE_DYNAMIC, NODE_STATIC, batch_to_pyg

__all__ = [
    "NEG_LOGIT",
    "PPO_DEFAULTS",
    "AnchoredMaskablePPO",
    "GnnMaskablePolicy",
    "GraphEncoding",
    "GraphFeaturesExtractor",
    "PlacementHeads",
    "batch_graph_inputs",
    "critical_path_pointers_torch",
    "make_maskable_ppo",
]

#: Logit of padding slots and of actions illegal by ``obs["action_mask"]`` (sb3-contrib
#: uses the same value for masked actions).
NEG_LOGIT = -1e8

# node_static / node_dynamic columns (see placegym.envs.mdp.observation)
_W, _COMM_OUT, _B_LEVEL, _T_LEVEL = 0, 1, 3, 4
_ASSIGNED, _DEVICE, _SELECTED = 0, 1, 3
# leads in earliest start (fractions of the critical path, float32) up to this are ties
_TIE_LEAD = 1e-6


# ------------------------------------------------------------------ batched graph inputs
def _best_neighbour(owner: Tensor, other: Tensor, key: Tensor, n: int) -> Tensor:
    """Per ``owner`` node, the ``other`` end of its edge of largest ``key`` (ties: the
    smallest id), ``-1`` where it has no edge."""
    out = torch.full((n,), -1, dtype=torch.long, device=owner.device)
    if owner.numel() == 0:
        return out
    best = torch.full((n,), -torch.inf, dtype=key.dtype, device=key.device)
    best = best.scatter_reduce(0, owner, key, reduce="amax", include_self=True)
    ids = torch.where(key == best[owner], other, torch.full_like(other, n))
    first = torch.full((n,), n, dtype=torch.long, device=owner.device)
    first = first.scatter_reduce(0, owner, ids, reduce="amin", include_self=True)
    return torch.where(first < n, first, out)


def critical_path_pointers_torch(
    edge_index: Tensor, down_key: Tensor, up_key: Tensor, n: int
) -> tuple[Tensor, Tensor]:
    """Torch twin of :func:`placegym.agents.nn.critical_path_pointers` (same tie rule:
    largest key, then smallest id), for a disjoint batch of graphs at once.

    Shapes:
        - input: ``edge_index (2, E)`` long, ``down_key (n,)``, ``up_key (n,)``
        - output: ``next (n,)``, ``prev (n,)`` long, ``-1`` at sinks / sources
    """
    u, v = edge_index
    return _best_neighbour(u, v, down_key[v], n), _best_neighbour(v, u, up_key[u], n)


def batch_graph_inputs(obs: dict[str, Tensor]) -> tuple[GraphInputs, Any]:
    """A batch of observations as one :class:`GraphInputs` over the disjoint union of its
    graphs (``x`` = node_static ‖ node_dynamic, 13 columns) and the PyG ``Batch``
    (whose ``batch`` and ``node_index`` map real nodes back to padded slots)."""
    b = batch_to_pyg(obs)
    x = b.x
    down_key = x[:, _B_LEVEL]
    up_key = x[:, _T_LEVEL] + x[:, _W] + x[:, _COMM_OUT]
    down, up = critical_path_pointers_torch(b.edge_index, down_key, up_key, x.shape[0])
    return GraphInputs(x, b.edge_index, b.edge_attr, down, up), b


# ------------------------------------------------------------------ features extractor
class GraphEncoding(NamedTuple):
    """Encoder outputs for a batch, padded back to ``N`` node slots.

    Attributes:
        h: ``(B, N, H)`` node embeddings (0 on padding).
        cp: ``(B, N, 2H)`` critical-path embeddings (to a sink ‖ from a source).
        node_mask: ``(B, N)`` bool, real nodes.
        pooled: ``(B, 3H + 8)`` graph embedding: mean and max of ``h``, the selected
            node's ``h`` (0 in SEL), the mean device features and the phase.
    """

    h: Tensor
    cp: Tensor
    node_mask: Tensor
    pooled: Tensor


class GraphFeaturesExtractor(BaseFeaturesExtractor):
    """GNN features extractor for placegym's ``Dict`` observation.

    Args:
        observation_space: the environment's ``Dict`` space (``node_static`` ``(N, 7)``
            ... ``device`` ``(D, 7)``).
        hidden: embedding width ``H``.
        layers: rounds of :class:`~placegym.agents.nn.DAGConv`.

    Shapes:
        - input: a batch of preprocessed observations (float tensors, leading dim ``B``)
        - output: :meth:`forward` ``(B, 3H + 8)``; :meth:`encode` a :class:`GraphEncoding`
    """

    def __init__(self, observation_space: spaces.Dict, hidden: int = 64, layers: int = 3) -> None:
        super().__init__(observation_space, features_dim=3 * hidden + DEVICE_FEATURES + 1)
        self.hidden, self.layers = hidden, layers
        self.encoder = GraphEncoder(hidden, layers, node_dim=NODE_STATIC + NODE_DYNAMIC)

    def encode(self, obs: dict[str, Tensor]) -> GraphEncoding:
        g, batch = batch_graph_inputs(obs)
        h, cp = self.encoder(g)
        node_mask = obs["node_mask"] > 0.5
        bsz, n = node_mask.shape
        h_pad = h.new_zeros(bsz, n, h.shape[1])
        h_pad[batch.batch, batch.node_index] = h
        cp_pad = cp.new_zeros(bsz, n, cp.shape[1])
        cp_pad[batch.batch, batch.node_index] = cp
        selected = obs["node_dynamic"][..., _SELECTED].unsqueeze(-1)
        pooled = torch.cat(
            [
                scatter(h, batch.batch, 0, dim_size=bsz, reduce="mean"),
                scatter(h, batch.batch, 0, dim_size=bsz, reduce="max"),
                (selected * h_pad).sum(dim=1),
                obs["device"].mean(dim=1),
                obs["phase"].view(bsz, 1),
            ],
            dim=-1,
        )
        return GraphEncoding(h_pad, cp_pad, node_mask, pooled)

    def forward(self, observations: dict[str, Tensor]) -> Tensor:
        return self.encode(observations).pooled


# ------------------------------------------------------------------ action heads
def _head(inp: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inp, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def _fit(x: Tensor, width: int) -> Tensor:
    """Pad (with :data:`NEG_LOGIT`) or cut the last dim of ``x`` to ``width``."""
    if x.shape[-1] >= width:
        return x[..., :width]
    pad = x.new_full((*x.shape[:-1], width - x.shape[-1]), NEG_LOGIT)
    return torch.cat([x, pad], dim=-1)


class PlacementHeads(nn.Module):
    """Per-node SEL and per-device PLC logits, merged by phase into the action space.

    SEL scores node v from ``[h_v ‖ cp_v ‖ node_dynamic_v]``. PLC scores device d from
    the selected node's ``h``, the mean ``h`` of the nodes already on d and
    ``log(1 + count)``, d's features, the mean device features and d's lead in earliest
    start over the best device (as :class:`~placegym.agents.doppler.DopplerPolicy`), that
    lead relative to the largest one and whether d is an earliest device (lead 0).
    Leads are small fractions of the critical path (on FFNN-v0 the smallest nonzero one is
    0.004 CP), so without the last two an MLP needs many epochs to tell ties apart.

    Shapes:
        - input: :class:`GraphEncoding` ``enc``, observations with ``node_dynamic
          (B, N, 6)``, ``device (B, D, 7)``, ``phase (B, 1)``, ``action_mask (B, A)``
        - output: ``(B, A)``; padding and illegal actions get :data:`NEG_LOGIT`
    """

    def __init__(self, hidden: int, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.sel = _head(3 * hidden + NODE_DYNAMIC, hidden)
        self.plc = _head(2 * hidden + 1 + 2 * DEVICE_FEATURES + 3, hidden)

    def sel_logits(self, enc: GraphEncoding, dyn: Tensor) -> Tensor:
        out = self.sel(torch.cat([enc.h, enc.cp, dyn], dim=-1)).squeeze(-1)
        return out.masked_fill(~enc.node_mask, NEG_LOGIT)

    def plc_logits(self, enc: GraphEncoding, dyn: Tensor, dev: Tensor) -> Tensor:
        d = dev.shape[1]
        device_id = torch.round(dyn[..., _DEVICE] * d).long() - 1  # -1 when unassigned
        on = (device_id.unsqueeze(-1) == torch.arange(d, device=dev.device)).to(enc.h.dtype)
        on = on * ((dyn[..., _ASSIGNED] > 0.5) & enc.node_mask).unsqueeze(-1).to(enc.h.dtype)
        count = on.sum(dim=1)  # (B, D)
        agg = torch.einsum("bnd,bnh->bdh", on, enc.h) / count.clamp(min=1).unsqueeze(-1)
        h_sel = (dyn[..., _SELECTED].unsqueeze(-1) * enc.h).sum(dim=1)
        lead = dev[..., :1] - dev[..., :1].min(dim=1, keepdim=True).values
        relative = lead / lead.max(dim=1, keepdim=True).values.clamp(min=_TIE_LEAD)
        earliest = (lead <= _TIE_LEAD).to(lead.dtype)
        x = torch.cat(
            [
                h_sel.unsqueeze(1).expand(-1, d, -1),
                agg,
                torch.log1p(count).unsqueeze(-1),
                dev,
                dev.mean(dim=1, keepdim=True).expand(-1, d, -1),
                lead,
                relative,
                earliest,
            ],
            dim=-1,
        )
        return self.plc(x).squeeze(-1)

    def forward(self, enc: GraphEncoding, obs: dict[str, Tensor]) -> Tensor:
        dyn = obs["node_dynamic"]
        sel = _fit(self.sel_logits(enc, dyn), self.num_actions)
        plc = _fit(self.plc_logits(enc, dyn, obs["device"]), self.num_actions)
        logits = torch.where(obs["phase"].view(-1, 1) > 0.5, plc, sel)
        return logits.masked_fill(obs["action_mask"] < 0.5, NEG_LOGIT)

    def output_layers(self) -> list[nn.Linear]:
        return [self.sel[-1], self.plc[-1]]


# ------------------------------------------------------------------ the policy
class GnnMaskablePolicy(MaskableActorCriticPolicy):
    """MaskableActorCriticPolicy with graph-structured action logits.

    The actor reads :class:`PlacementHeads` logits over ``Discrete(A)`` (a node slot in
    SEL, a device in PLC, by ``obs["phase"]``); the critic is an MLP (``net_arch``,
    default ``[64, 64]``) on the pooled graph embedding. Size the encoder through
    ``features_extractor_kwargs=dict(hidden=..., layers=...)``. The arguments are those
    of ``MaskableActorCriticPolicy`` (so ``MaskablePPO.load`` rebuilds it); ``net_arch``
    may be a list (critic layers) or ``dict(vf=[...])`` (``pi`` is ignored: the actor is
    the heads). Works under ``SelectOnly`` / ``PlaceOnly`` too (``A`` = N or D).

    Shapes (``B`` observations, ``N`` node slots, ``D`` devices, ``A`` actions):
        - :meth:`action_logits`: observations -> ``(B, A)``
        - :meth:`forward`: -> actions ``(B,)``, values ``(B, 1)``, log-probs ``(B,)``
        - :meth:`evaluate_actions`: -> values ``(B, 1)``, log-probs ``(B,)``, entropy ``(B,)``
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        action_space: spaces.Discrete,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        ortho_init: bool = True,
        features_extractor_class: type[BaseFeaturesExtractor] = GraphFeaturesExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not issubclass(features_extractor_class, GraphFeaturesExtractor):
            raise ValueError(
                "features_extractor_class: must subclass GraphFeaturesExtractor, got "
                f"{features_extractor_class.__name__}"
            )
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            net_arch=[64, 64] if net_arch is None else net_arch,
            activation_fn=activation_fn,
            ortho_init=ortho_init,
            features_extractor_class=features_extractor_class,
            features_extractor_kwargs=features_extractor_kwargs,
            share_features_extractor=share_features_extractor,
            normalize_images=normalize_images,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
        )

    def _build_mlp_extractor(self) -> None:
        vf = self.net_arch["vf"] if isinstance(self.net_arch, dict) else self.net_arch
        self.mlp_extractor = MlpExtractor(
            self.features_dim,
            net_arch=dict(pi=[], vf=list(vf)),
            activation_fn=self.activation_fn,
            device=self.device,
        )

    def _build(self, lr_schedule: Schedule) -> None:
        self._build_mlp_extractor()
        self.action_net = PlacementHeads(self.features_extractor.hidden, int(self.action_space.n))
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:
            extractors = {self.pi_features_extractor, self.vf_features_extractor}
            for module in (*extractors, self.mlp_extractor, self.action_net):
                module.apply(partial(self.init_weights, gain=np.sqrt(2)))
            for layer in self.action_net.output_layers():
                self.init_weights(layer, gain=0.01)
            self.value_net.apply(partial(self.init_weights, gain=1.0))
        self.optimizer = self.optimizer_class(
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    # -------------------------------------------------------------- internals
    def _encode(self, obs: dict[str, Tensor], extractor: GraphFeaturesExtractor):
        pre = preprocess_obs(obs, self.observation_space, normalize_images=False)
        return pre, extractor.encode(pre)

    def _distribution(
        self, pre: dict[str, Tensor], enc: GraphEncoding, action_masks: Any
    ) -> MaskableDistribution:
        dist = self.action_dist.proba_distribution(action_logits=self.action_net(enc, pre))
        if action_masks is not None:
            dist.apply_masking(action_masks)
        return dist

    def _value(self, enc: GraphEncoding) -> Tensor:
        return self.value_net(self.mlp_extractor.forward_critic(enc.pooled))

    def distribution_and_values(
        self, obs: dict[str, Tensor], action_masks: Any = None
    ) -> tuple[MaskableDistribution, Tensor]:
        """The masked action distribution and the values ``(B, 1)``, encoding once when
        the extractor is shared."""
        pre, enc = self._encode(obs, self.pi_features_extractor)
        dist = self._distribution(pre, enc, action_masks)
        if not self.share_features_extractor:
            enc = self.vf_features_extractor.encode(pre)
        return dist, self._value(enc)

    # -------------------------------------------------------------- SB3 API
    def action_logits(self, obs: dict[str, Tensor]) -> Tensor:
        """Raw logits ``(B, A)`` before sb3-contrib's masking."""
        pre, enc = self._encode(obs, self.pi_features_extractor)
        return self.action_net(enc, pre)

    def forward(
        self, obs: dict[str, Tensor], deterministic: bool = False, action_masks: Any = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        dist, values = self.distribution_and_values(obs, action_masks)
        actions = dist.get_actions(deterministic=deterministic)
        return actions.reshape((-1, *self.action_space.shape)), values, dist.log_prob(actions)

    def evaluate_actions(
        self, obs: dict[str, Tensor], actions: Tensor, action_masks: Any = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        dist, values = self.distribution_and_values(obs, action_masks)
        return values, dist.log_prob(actions), dist.entropy()

    def get_distribution(
        self, obs: dict[str, Tensor], action_masks: Any = None
    ) -> MaskableDistribution:
        pre, enc = self._encode(obs, self.pi_features_extractor)
        return self._distribution(pre, enc, action_masks)

    def predict_values(self, obs: dict[str, Tensor]) -> Tensor:
        return self._value(self._encode(obs, self.vf_features_extractor)[1])


# ------------------------------------------------------------------ MaskablePPO factory
class AnchoredMaskablePPO(MaskablePPO):
    """MaskablePPO whose updates keep the policy on the teacher's tie sets.

    After each PPO update it takes ``anchor_steps`` minibatch steps (``anchor_batch_size``
    states, PPO's own Adam) of the tie negative log-likelihood on the demonstrations that
    :func:`~placegym.agents.sb3.bc.pretrain` cloned (:meth:`set_anchor`). The loss is flat
    inside a tie set, so PPO stays free to learn how to break ties, where the gains are
    (critical_path with uniform tie-breaking: 0.85-1.06 of its own makespan on FFNN-v0,
    mean 0.94), while the mass it moves onto actions outside the ties is pulled back.
    Without demonstrations (no :func:`pretrain`, or after ``load``) it is MaskablePPO.
    Logs ``train/anchor_tie_nll`` (the mean NLL before the anchor's steps).

    Args:
        anchor_steps: anchor minibatches after each update (0: plain MaskablePPO).
        anchor_batch_size: demonstration states per anchor minibatch.
        *args: those of ``MaskablePPO``.
        **kwargs: those of ``MaskablePPO``.
    """

    def __init__(
        self, *args: Any, anchor_steps: int = 8, anchor_batch_size: int = 32, **kwargs: Any
    ) -> None:
        if anchor_steps < 0 or anchor_batch_size < 1:
            raise ValueError(
                "anchor_steps, anchor_batch_size: must be >= 0 and >= 1, got "
                f"{anchor_steps}, {anchor_batch_size}"
            )
        self.anchor_steps, self.anchor_batch_size = anchor_steps, anchor_batch_size
        self.demonstrations: Demonstrations | None = None
        self._anchor_rng = np.random.default_rng(0)
        super().__init__(*args, **kwargs)

    def set_anchor(self, demos: Demonstrations | None) -> None:
        """Anchor later updates to ``demos`` (``None``: no anchor)."""
        self.demonstrations = demos
        self._anchor_rng = np.random.default_rng(self.seed)

    def train(self) -> None:
        super().train()
        demos = self.demonstrations
        if demos is None or self.anchor_steps == 0:
            return
        self.policy.set_training_mode(True)
        nll, opt = [], self.policy.optimizer
        for _ in range(self.anchor_steps):
            idx = self._anchor_rng.choice(len(demos), size=self.anchor_batch_size)
            nll.append(clone_step(self.policy, demos, idx, opt, 0.0, self.max_grad_norm))
        self.policy.set_training_mode(False)
        self.logger.record("train/anchor_tie_nll", nll[0])

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "demonstrations", "_anchor_rng"]


#: MaskablePPO keyword arguments of :func:`make_maskable_ppo` (per-env ``n_steps``).
PPO_DEFAULTS: dict[str, Any] = {
    "learning_rate": 3e-4,
    "n_steps": 1024,  # 4 episodes of FFNN-v0 (2n = 256 steps) per env and update
    "batch_size": 256,
    "n_epochs": 4,
    # Terminal-only reward over 2n steps: undiscounted Monte-Carlo advantages (lambda < 1
    # would let only value noise reach the early steps of an episode).
    "gamma": 1.0,
    "gae_lambda": 1.0,
    "clip_range": 0.2,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "target_kl": 0.02,  # stop an update's epochs early rather than undo a BC warm start
    "anchor_steps": 8,  # AnchoredMaskablePPO: tie-set NLL steps on the BC data per update
    "policy_kwargs": {"features_extractor_kwargs": {"hidden": 32, "layers": 3}},
    "device": "cpu",
}


def make_maskable_ppo(
    env: str | gym.Env | VecEnv,
    *,
    n_envs: int = 1,
    vec_env: str = "dummy",
    env_kwargs: dict[str, Any] | None = None,
    seed: int | None = 0,
    **overrides: Any,
) -> AnchoredMaskablePPO:
    """:class:`AnchoredMaskablePPO` with :class:`GnnMaskablePolicy` and :data:`PPO_DEFAULTS`.

    Args:
        env: an environment id (``"placegym/FFNN-v0"``), an env or a VecEnv.
        n_envs: copies of an id env; ``vec_env``: ``"dummy"`` or ``"subproc"`` (ids
            ``placegym/...`` get the ``placegym.envs:`` prefix so workers import it).
        env_kwargs: keyword arguments of ``gym.make`` for an id env.
        seed: seed of the model and of an id env's copies.
        **overrides: MaskablePPO keyword arguments replacing the defaults;
            ``policy_kwargs`` entries are merged one level deep.
    """
    if vec_env not in ("dummy", "subproc"):
        raise ValueError(f"vec_env: expected 'dummy' or 'subproc', got {vec_env!r}")
    if isinstance(env, str):
        env_id = env
        if vec_env == "subproc" and env.startswith("placegym/"):
            env_id = f"placegym.envs:{env}"
        env = make_vec_env(
            env_id,
            n_envs=n_envs,
            seed=seed,
            env_kwargs=env_kwargs,
            vec_env_cls=SubprocVecEnv if vec_env == "subproc" else DummyVecEnv,
        )
    kwargs = {k: v for k, v in PPO_DEFAULTS.items() if k != "policy_kwargs"}
    policy_kwargs = {**PPO_DEFAULTS["policy_kwargs"], **overrides.pop("policy_kwargs", {})}
    kwargs.update(overrides)
    return AnchoredMaskablePPO(
        GnnMaskablePolicy, env, policy_kwargs=policy_kwargs, seed=seed, **kwargs
    )
