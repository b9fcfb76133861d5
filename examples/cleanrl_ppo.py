"""PPO with invalid-action masking on a placegym environment, in one file (CleanRL style).

The script reads top to bottom: arguments, seeding, a batched environment, a small graph
policy, then the PPO loop of CleanRL's ``ppo.py`` (rollout, GAE, clipped surrogate,
value loss, entropy bonus, minibatch epochs) with one change: the policy's logits are
masked by the environment's legal actions, so every sampled action is legal.

The environment is placegym's native vector environment (``gym.make_vec``): ``num_envs``
copies of the placement MDP stepped in one compiled call, with same-step autoreset (an
ended episode's next observation is already the next episode's first) and the legal
actions of every copy in ``info["action_mask"]``. An episode alternates SEL (pick a
frontier node; the pick order becomes its priority) and PLC (pick that node's device);
the reward is 0 until the last step, then ``(T_ref - T) / T_ref`` with ``T`` the
simulated makespan and ``T_ref`` the critical-path teacher's.

The policy scores nodes (SEL) and devices (PLC) from their features: an MLP embeds every
node's static and dynamic features, a few rounds of mean message passing along the
graph's edges mix in its producers and consumers, a node head gives the SEL logits and a
device head (device features plus the selected node's embedding) the PLC logits. Logits
of illegal actions are set to a large negative number (Huang & Ontañón 2020, the
``CategoricalMasked`` of CleanRL's ``ppo_gridnet.py``).

Run (``--fast`` shrinks every budget so that the script ends in seconds, for CI)::

    python examples/cleanrl_ppo.py
    python examples/cleanrl_ppo.py --fast
    python examples/cleanrl_ppo.py --env-id placegym/FFNN-v0 --total-timesteps 200000

It ends by placing the graph with the greedy (argmax) policy and printing its makespan
next to a teacher's from ``placegym.teachers`` (``--teacher``, critical_path by default).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from placegym.envs import simulate  # importing placegym.envs registers the placegym/* ids
from placegym.teachers import get_teacher, list_teachers

NEG_LOGIT = -1e8  # logit of an illegal action: probability 0 after the softmax


@dataclass
class Args:
    """Command-line arguments (each field is a ``--kebab-case`` option)."""

    exp_name: str = field(default="cleanrl_ppo", metadata={"help": "name of this experiment"})
    seed: int = field(default=1, metadata={"help": "seed of torch, the shuffles and the envs"})
    torch_deterministic: bool = field(
        default=True, metadata={"help": "torch.use_deterministic_algorithms"}
    )
    env_id: str = field(
        default="placegym/ChainMM-v0", metadata={"help": "a registered placegym id"}
    )
    total_timesteps: int = field(
        default=40_960, metadata={"help": "environment steps over all envs"}
    )
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    num_envs: int = field(default=8, metadata={"help": "parallel environments"})
    num_steps: int = field(default=256, metadata={"help": "steps per env per rollout"})
    anneal_lr: bool = field(default=True, metadata={"help": "anneal the learning rate to 0"})
    gamma: float = field(
        default=1.0, metadata={"help": "discount (the reward is terminal-only: keep 1)"}
    )
    # lambda < 1 would credit the early steps of a long episode with value noise only
    gae_lambda: float = field(default=1.0, metadata={"help": "lambda of GAE"})
    num_minibatches: int = field(default=8, metadata={"help": "minibatches per epoch"})
    update_epochs: int = field(default=4, metadata={"help": "epochs per rollout"})
    norm_adv: bool = field(default=True, metadata={"help": "normalise advantages"})
    clip_coef: float = field(default=0.2, metadata={"help": "surrogate clipping coefficient"})
    clip_vloss: bool = field(default=True, metadata={"help": "clip the value loss too"})
    # SEL has many equivalent frontier nodes, so the entropy stays high without a bonus
    ent_coef: float = field(default=0.0, metadata={"help": "entropy bonus coefficient"})
    vf_coef: float = field(default=0.5, metadata={"help": "value loss coefficient"})
    max_grad_norm: float = field(default=0.5, metadata={"help": "gradient clipping norm"})
    target_kl: float | None = field(
        default=None, metadata={"help": "stop an update's epochs above this approx KL"}
    )
    hidden: int = field(default=32, metadata={"help": "width of the policy's layers"})
    rounds: int = field(default=2, metadata={"help": "message-passing rounds"})
    teacher: str = field(
        default="critical_path", metadata={"help": "teacher printed next to the policy"}
    )
    fast: bool = field(default=False, metadata={"help": "tiny budget: seconds, for CI"})


def boolean(text: str) -> bool:
    """``true`` / ``false`` (also ``1`` / ``0``, ``yes`` / ``no``) as a bool."""
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if text.lower() not in value:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value[text.lower()]


def parse_args() -> Args:
    """:class:`Args` from the command line (booleans take ``true`` / ``false``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "fast":
            parser.add_argument(flag, action="store_true", help=f.metadata["help"])
        elif isinstance(f.default, bool):
            parser.add_argument(flag, type=boolean, default=f.default, help=f.metadata["help"])
        elif f.name == "target_kl":
            parser.add_argument(flag, type=float, default=None, help=f.metadata["help"])
        else:
            parser.add_argument(
                flag, type=type(f.default), default=f.default, help=f.metadata["help"]
            )
    args = Args(**vars(parser.parse_args()))
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    if args.num_minibatches > args.num_envs * args.num_steps:
        parser.error(
            f"--num-minibatches: at most num_envs * num_steps = "
            f"{args.num_envs * args.num_steps}, got {args.num_minibatches}"
        )
    if args.teacher not in list_teachers():
        parser.error(f"--teacher: unknown teacher {args.teacher!r} ({', '.join(list_teachers())})")
    if args.fast:  # two updates of a small batch: checks the whole script in seconds
        args.num_envs, args.num_steps, args.update_epochs = 4, 96, 2
        args.total_timesteps = 2 * args.num_envs * args.num_steps
    return args


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights and a constant bias (CleanRL's initialisation)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(inp: int, hidden: int, out: int, std: float) -> nn.Sequential:
    """Two tanh layers, the last initialised with standard deviation ``std``."""
    return nn.Sequential(
        layer_init(nn.Linear(inp, hidden)),
        nn.Tanh(),
        layer_init(nn.Linear(hidden, out), std=std),
    )


class Agent(nn.Module):
    """Actor and critic over placegym's padded ``Dict`` observation.

    Args:
        space: the single environment's observation space (feature widths and sizes).
        num_actions: ``n`` of the ``Discrete(max(max_nodes, D))`` action space.
        hidden: width of every layer.
        rounds: message-passing rounds along the graph's edges.
    """

    def __init__(self, space: gym.spaces.Dict, num_actions: int, hidden: int, rounds: int):
        super().__init__()
        node_in = space["node_static"].shape[-1] + space["node_dynamic"].shape[-1]
        device_in = space["device"].shape[-1]
        self.num_actions = num_actions
        self.embed = nn.Sequential(layer_init(nn.Linear(node_in, hidden)), nn.Tanh())
        # a round mixes a node's embedding with the means over its producers and consumers
        self.rounds = nn.ModuleList(
            nn.Sequential(layer_init(nn.Linear(3 * hidden, hidden)), nn.Tanh())
            for _ in range(rounds)
        )
        self.sel_head = mlp(hidden, hidden, 1, std=0.01)
        self.plc_head = mlp(hidden + device_in, hidden, 1, std=0.01)
        self.critic = mlp(hidden + 1, hidden, 1, std=1.0)

    def encode(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Node embeddings ``(B, N, hidden)``."""
        h = self.embed(torch.cat([obs["node_static"], obs["node_dynamic"]], dim=-1))
        b, n, _ = h.shape
        # dense adjacency (B, N, N): adj[i, v, u] = 1 for an edge u -> v (padded edges
        # are 0 -> 0 with edge_mask 0, so they add nothing); rows normalised to means
        adj = torch.zeros(b, n, n)
        rows = torch.arange(b).unsqueeze(1).expand_as(obs["edge_mask"])
        src, dst = obs["edge_index"][:, 0], obs["edge_index"][:, 1]
        adj.index_put_((rows, dst, src), obs["edge_mask"].float(), accumulate=True)
        to_pred = adj / adj.sum(-1, keepdim=True).clamp(min=1)  # mean over producers
        adj_t = adj.transpose(1, 2)
        to_succ = adj_t / adj_t.sum(-1, keepdim=True).clamp(min=1)  # mean over consumers
        for mix in self.rounds:
            h = h + mix(torch.cat([h, to_pred @ h, to_succ @ h], dim=-1))
        return h

    def logits(self, obs: dict[str, torch.Tensor], h: torch.Tensor) -> torch.Tensor:
        """Unmasked logits ``(B, A)``: node scores in SEL, device scores in PLC."""
        b, n, _ = h.shape
        sel = self.sel_head(h).squeeze(-1)  # (B, N)
        # the selected node (a one-hot dynamic feature; all zeros in SEL)
        chosen = obs["node_dynamic"][..., 3:4]
        node = (h * chosen).sum(dim=1)  # (B, hidden)
        dev = obs["device"]
        node = node.unsqueeze(1).expand(-1, dev.shape[1], -1)
        plc = self.plc_head(torch.cat([node, dev], dim=-1)).squeeze(-1)  # (B, D)
        pad = torch.full((b, self.num_actions), NEG_LOGIT)
        sel_full = pad.clone()
        sel_full[:, :n] = sel
        plc_full = pad.clone()
        plc_full[:, : plc.shape[1]] = plc
        return torch.where(obs["phase"].bool(), plc_full, sel_full)

    def value(self, obs: dict[str, torch.Tensor], h: torch.Tensor) -> torch.Tensor:
        """State values ``(B,)`` from the mean node embedding and the phase."""
        mask = obs["node_mask"].float().unsqueeze(-1)
        pooled = (h * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return self.critic(torch.cat([pooled, obs["phase"].float()], dim=-1)).squeeze(-1)

    def get_value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """State values ``(B,)``."""
        return self.value(obs, self.encode(obs))

    def get_action_and_value(
        self,
        obs: dict[str, torch.Tensor],
        mask: torch.Tensor,
        action: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A sampled (or the given) legal action, its log-probability, the masked
        distribution's entropy and the state value."""
        h = self.encode(obs)
        logits = self.logits(obs, h).masked_fill(~mask, NEG_LOGIT)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        # entropy over the legal actions only (illegal ones contribute p log p = 0)
        p_log_p = probs.logits * probs.probs
        entropy = -torch.where(mask, p_log_p, torch.zeros_like(p_log_p)).sum(-1)
        return action, probs.log_prob(action), entropy, self.value(obs, h)


def to_torch(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """A batched numpy observation as tensors (``edge_index`` as int64 indices)."""
    return {k: torch.as_tensor(v) for k, v in obs.items()}


def greedy_episode(agent: Agent, env_id: str, seed: int) -> tuple[float, gym.Env]:
    """Makespan of one episode with the argmax of the masked policy, and the env (whose
    ``unwrapped.graph`` is the episode's graph)."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    done = False
    with torch.no_grad():
        while not done:
            batch = to_torch({k: v[None] for k, v in obs.items()})
            mask = torch.as_tensor(info["action_mask"], dtype=torch.bool)[None]
            logits = agent.logits(batch, agent.encode(batch)).masked_fill(~mask, NEG_LOGIT)
            obs, _, terminated, truncated, info = env.step(int(logits.argmax(-1)))
            done = terminated or truncated
    return float(info["makespan"]), env


def main() -> None:
    """Train, then compare the greedy policy with the teacher."""
    args = parse_args()
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // batch_size)
    run_name = f"{args.env_id.split('/')[-1]}__{args.exp_name}__{args.seed}"
    print(f"run {run_name}: {num_iterations} updates of {batch_size} steps")

    # seeding: every random draw below comes from these generators (actions from torch's,
    # minibatch shuffles from rng, graphs and noise from the envs' own seeded generators)
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(args.torch_deterministic)
    torch.set_num_threads(1)  # small networks: more threads only contend

    envs = gym.make_vec(args.env_id, num_envs=args.num_envs)  # PlacementVectorEnv
    assert isinstance(envs.single_action_space, gym.spaces.Discrete)
    space = envs.single_observation_space
    assert isinstance(space, gym.spaces.Dict)
    num_actions = int(envs.single_action_space.n)
    agent = Agent(space, num_actions, args.hidden, args.rounds)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # rollout storage, (num_steps, num_envs, ...)
    shape = (args.num_steps, args.num_envs)
    obs = {
        k: torch.zeros(shape + s.shape, dtype=torch.as_tensor(np.zeros(0, s.dtype)).dtype)
        for k, s in space.spaces.items()
    }
    masks = torch.zeros((*shape, num_actions), dtype=torch.bool)
    actions = torch.zeros(shape, dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros(shape) for _ in range(4))

    global_step, start = 0, time.time()
    next_obs_np, info = envs.reset(seed=args.seed)  # env i is seeded seed + i
    next_obs = to_torch(next_obs_np)
    next_mask = torch.as_tensor(info["action_mask"], dtype=torch.bool)
    next_done = torch.zeros(args.num_envs)
    makespans: list[float] = []  # of the episodes ended during the current update
    ratios: list[float] = []  # their makespans over the reference's (critical_path's)

    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            for k in obs:
                obs[k][step] = next_obs[k]
            masks[step], dones[step] = next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
            actions[step], logprobs[step], values[step] = action, logprob, value

            next_obs_np, reward, terminations, truncations, info = envs.step(action.numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = to_torch(next_obs_np)
            next_mask = torch.as_tensor(info["action_mask"], dtype=torch.bool)
            next_done = torch.as_tensor(np.logical_or(terminations, truncations)).float()
            if "final_info" in info:  # episodes that ended this step
                final = info["final_info"]
                for i in np.flatnonzero(final["_makespan"]):
                    makespans.append(float(final["makespan"][i]))
                    ratios.append(float(final["makespan"][i] / final["reference_makespan"][i]))

        # generalised advantage estimation, bootstrapped from the state after the rollout
        with torch.no_grad():
            next_value = agent.get_value(next_obs)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal, nextvalues = 1.0 - next_done, next_value
                else:
                    nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        # flatten the batch
        b_obs = {k: v.reshape((-1, *v.shape[2:])) for k, v in obs.items()}
        b_masks = masks.reshape(-1, num_actions)
        b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = (
            advantages.reshape(-1),
            returns.reshape(-1),
            values.reshape(-1),
        )

        # optimise the policy and value network
        b_inds = np.arange(batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            rng.shuffle(b_inds)
            for lo in range(0, batch_size, minibatch_size):
                mb = torch.as_tensor(b_inds[lo : lo + minibatch_size])
                mb_obs = {k: v[mb] for k, v in b_obs.items()}
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    mb_obs, b_masks[mb], b_actions[mb]
                )
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())

                mb_advantages = b_advantages[mb]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8
                    )

                # clipped surrogate objective
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef
                )
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # value loss
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb]) ** 2
                    v_clipped = b_values[mb] + torch.clamp(
                        newvalue - b_values[mb], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        var_y = np.var(y_true)
        metrics = {
            "charts/learning_rate": optimizer.param_groups[0]["lr"],
            "losses/value_loss": v_loss.item(),
            "losses/policy_loss": pg_loss.item(),
            "losses/entropy": entropy_loss.item(),
            "losses/old_approx_kl": old_approx_kl.item(),
            "losses/approx_kl": approx_kl.item(),
            "losses/clipfrac": float(np.mean(clipfracs)),
            "losses/explained_variance": np.nan
            if var_y == 0
            else 1 - np.var(y_true - y_pred) / var_y,
            "charts/SPS": int(global_step / (time.time() - start)),
        }
        if makespans:  # the sampled episodes that ended during this update
            metrics["charts/episodes"] = len(makespans)
            metrics["charts/episodic_makespan_ms"] = 1e3 * float(np.mean(makespans))
            metrics["charts/best_makespan_ms"] = 1e3 * min(makespans)
            metrics["charts/ratio_to_reference"] = float(np.mean(ratios))
        print(f"update {iteration}/{num_iterations} global_step={global_step}", end="")
        print("".join(f" {k}={v:.4g}" for k, v in metrics.items()))
        makespans.clear()
        ratios.clear()
    envs.close()

    # deterministic evaluation: the argmax policy against a teacher on the same graph
    makespan, env = greedy_episode(agent, args.env_id, seed=args.seed)
    graph, cluster = env.unwrapped.graph, env.unwrapped.cluster
    teacher = simulate(graph, cluster, get_teacher(args.teacher).place(graph, cluster)).makespan
    print(f"graph {graph.name} ({graph.num_nodes} nodes) on {cluster.name}")
    print(f"final makespan: {makespan * 1e3:.6f} ms (greedy policy)")
    print(f"teacher makespan: {teacher * 1e3:.6f} ms ({args.teacher})")
    print(f"ratio to {args.teacher}: {makespan / teacher:.3f}")


if __name__ == "__main__":
    main()
