"""The dual policy as a placer: :class:`AgentPlacer`, ``place(graph, cluster, seed)``.

A trained :class:`~placegym.agents.doppler.policy.DopplerPolicy` places any graph on any
cluster in one of three modes, all seeded:

- ``greedy``: one episode taking the most probable action at every step (decoded without
  environments, :func:`~placegym.agents.doppler.decoder.reserved_greedy`, where that
  plays the same episode);
- ``sample``: one episode sampling every action from the policy;
- ``best_of_k``: ``k`` sampled episodes, the one of smallest makespan kept (a feasible
  one first): an inference-time search that costs ``k`` simulations.

With ``one_pass=True`` (``greedy`` only, a policy without lookahead prices) the greedy
placement is decoded in one pass (:mod:`~placegym.agents.doppler.onepass`): no
simulator call at all, hence no raised reserves and no repair.

Torch runs on ``threads`` threads while the placer places (default :data:`THREADS`, one:
:func:`torch_threads`, the caller's count put back after each placement). A policy's
forward passes during placement are small: torch's default of one intra-op thread per
core spends more time synchronising them than computing, and on a loaded many-core
machine a placement takes many times longer than on one thread.

The placer decodes under the memory mask its policy was trained under
(:func:`trained_mask` reads it from a training config: a checkpoint's or a shipped
agent's card), so a policy trained under ``room`` is not played under the default mask.
It speaks the benchmark's ``Placer`` protocol (:mod:`placegym.benchmark`) as it is: a
shipped agent (:func:`placegym.agents.pretrained`) is one, and a checkpoint gives one
through ``placegym.train.evaluate.load_agent``.

:class:`EnvPool` holds the environments the ``sample`` mode (and a priced policy's
greedy pass) plays in, per graph and cluster; training's evaluation reuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.decoder import (
    Decoder,
    best_of_samples,
    decodes_like_episodes,
    reserved_greedy,
)
from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.onepass import check_one_pass, one_pass_greedy
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.doppler.selector import ProposalSelector, check_selector, one_pass_select
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs import Cluster, Graph, Placement, PlacementEnv, load_cluster
from placegym.envs.core.cache import IdentityCache
from placegym.envs.mdp.reward import DEFAULT_REFERENCE, SharedReference
from placegym.envs.mdp.state import memory_mask_mode
from placegym.teachers import make_feasible

__all__ = [
    "MODES",
    "THREADS",
    "AgentPlacer",
    "EnvPool",
    "check_threads",
    "episode_placement",
    "torch_threads",
    "trained_mask",
]

#: The placer's modes (module docstring).
MODES = ("greedy", "sample", "best_of_k")
#: Torch threads an agent places with unless told otherwise (module docstring).
THREADS = 1


def check_threads(threads: int | None, field: str = "threads") -> int | None:
    """``threads`` when it is None (torch's own setting) or an integer >= 1.

    Raises:
        ValueError: anything else, naming ``field`` and the value.
    """
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1:
        raise ValueError(
            f"{field}: must be an integer >= 1 (or None: torch's own setting), got {threads!r}"
        )
    return int(threads)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch (intra-op) threads, then put the caller's
    count back (also when the block raises); None leaves the setting alone."""
    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def trained_mask(config: dict[str, Any] | None) -> bool | str:
    """The memory mask a training config (a checkpoint's or a zoo card's) trained its
    policy under: ``data.memory_mask``, True where it names none."""
    return ((config or {}).get("data") or {}).get("memory_mask", True)


class EnvPool:
    """Environments per (graph, cluster), created on demand and reused (each caches its
    observation builder and reference makespan for its graph), and the policy inputs of
    their graphs (``graph_cache`` for :func:`~placegym.agents.doppler.episodes.play_episodes`).

    The environments are built with ``env_kwargs`` plus two settings that change no
    episode: compact observations (:func:`~placegym.agents.doppler.episodes.play_episodes`
    reads the per-graph keys once per graph, not at every step) and one
    :class:`~placegym.envs.mdp.reward.SharedReference` for all of them, so the reference
    placement of a graph is computed once, not once per environment.

    Args:
        **env_kwargs: keyword arguments of :class:`~placegym.envs.PlacementEnv`.
    """

    def __init__(self, **env_kwargs: Any) -> None:
        self.env_kwargs = env_kwargs
        self._build_kwargs = {
            "observation": "compact",
            **env_kwargs,
            "reference": SharedReference(env_kwargs.get("reference", DEFAULT_REFERENCE)),
        }
        self._envs: IdentityCache[list[PlacementEnv]] = IdentityCache(lambda g, c: [], size=None)
        self.graph_cache: IdentityCache[GraphInputs] = IdentityCache(size=None)

    def get(self, graph: Graph, cluster: Cluster, count: int) -> list[PlacementEnv]:
        """``count`` environments of ``graph`` on ``cluster`` (the same objects each call)."""
        envs = self._envs(graph, cluster)
        while len(envs) < count:
            envs.append(PlacementEnv(graph, cluster, **self._build_kwargs))
        return envs[:count]


def episode_placement(r: EpisodeRecord) -> Placement:
    """The placement an episode ended with (its recompute set included)."""
    return Placement(
        device=np.asarray(r.info["placement"]),
        order=np.asarray(r.info["order"]),
        recompute=np.asarray(r.info.get("recompute", ()), dtype=np.int64),
    )


class AgentPlacer:
    """A trained policy as a placer for any graph and cluster.

    Its placement keeps every co-location group together (the environment's mask) and
    fits in memory whenever the repair can reach a feasible one: the policy's placement
    (greedy, with reserves raised to fit as the teachers' single passes are:
    :func:`~placegym.agents.doppler.decoder.reserved_greedy`; sampled; or the best of
    ``k`` samples, a feasible sample first) when it fits, else
    :func:`~placegym.teachers.make_feasible` of it (whole units moved off the devices
    over memory, then the resident bytes spread worst-fit), so an agent never ends over
    memory where the certificate of a fit exists.

    Args:
        policy: the dual policy.
        mode: ``greedy``, ``sample`` or ``best_of_k``.
        k: samples of ``best_of_k``.
        name: label in benchmark tables.
        memory_mask: the environments' device mask (``True``, ``"resident"``, ``"room"``:
            :class:`~placegym.envs.mdp.state.PlacementState`); that of the policy's
            training (:func:`trained_mask`) for a trained policy.
        threads: torch threads while placing (:data:`THREADS`; None: the process's
            setting, e.g. ``OMP_NUM_THREADS``); the caller's count is restored after.
        one_pass: (``greedy`` only) place by the one-pass decode
            (:func:`~placegym.agents.doppler.onepass.one_pass_greedy`): no simulator call
            at all, so neither raised reserves nor a repair; the policy's greedy
            placement under ``memory_mask``, which may be over memory where memory binds
            (where it cannot, the same placement as without the option).
        selector: (``one_pass`` only) a :class:`~placegym.agents.doppler.selector.
            ProposalSelector` that keeps the policy's placement or one of its proposals
            (its hints' placements, and rule rollouts where it scores them:
            :func:`~placegym.agents.doppler.selector.one_pass_select`, no simulator call
            either); :attr:`last_choice` names the proposal taken by the last placement
            (None: the policy's own) and :attr:`last_polished` says whether the
            selector's polish changed it.

    Raises:
        ValueError: an unknown mode or mask, ``k`` < 1 or ``threads`` < 1; ``one_pass``
            with another mode or a policy it cannot decode
            (:func:`~placegym.agents.doppler.onepass.check_one_pass`); a selector without
            ``one_pass`` or scoring a hint the policy does not read.
    """

    def __init__(
        self,
        policy: DopplerPolicy,
        *,
        mode: str = "greedy",
        k: int = 16,
        name: str = "agent",
        memory_mask: bool | str = True,
        threads: int | None = THREADS,
        one_pass: bool = False,
        selector: ProposalSelector | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        memory_mask_mode(memory_mask)  # raises on a bad value, naming the field
        if one_pass:
            if mode != "greedy":
                raise ValueError(f"one_pass: decodes the greedy mode only, got mode={mode!r}")
            check_one_pass(policy)
        if selector is not None:
            if not one_pass:
                raise ValueError("selector: chooses among one-pass proposals; needs one_pass=True")
            check_selector(selector, policy)
        self.one_pass, self.selector = bool(one_pass), selector
        self.last_choice: str | None = None
        self.last_polished = False
        self.policy, self.mode, self.k, self.name = policy.eval(), mode, k, name
        self.memory_mask, self.threads = memory_mask, check_threads(threads)
        self._pool = EnvPool(memory_mask=memory_mask)

    def place(self, graph: Graph, cluster: Cluster | str, seed: int = 0) -> Placement:
        """Place ``graph`` on ``cluster`` (a preset name, JSON path or Cluster), with
        :attr:`threads` torch threads."""
        cluster = load_cluster(cluster)
        with torch_threads(self.threads):
            if self.one_pass and self.selector is not None:
                self.last_choice, placement, self.last_polished = one_pass_select(
                    self.policy, self.selector, graph, cluster, self.memory_mask
                )
                return placement
            if self.one_pass:
                return one_pass_greedy(self.policy, graph, cluster, self.memory_mask)
            return make_feasible(graph, cluster, self._place(graph, cluster, seed))

    def _decodes_greedy(self) -> bool:
        """Whether the greedy pass is decoded without environments: the same episode,
        without their reference placement's simulator calls; a priced policy plays in
        environments, whose pricer serves all its states."""
        return decodes_like_episodes(self.policy) and not self.policy.config.prices

    def _place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        if self.mode == "greedy" and self._decodes_greedy():
            with torch.no_grad():
                dec = Decoder(self.policy, graph, cluster, self.memory_mask)
                return reserved_greedy(dec)
        if self.mode == "best_of_k" and decodes_like_episodes(self.policy):
            return best_of_samples(
                self.policy,
                graph,
                cluster,
                self.k,
                seed,
                feasible=True,
                memory_mask=self.memory_mask,
            )[0]
        count = self.k if self.mode == "best_of_k" else 1
        envs = self._pool.get(graph, cluster, count)
        records = play_episodes(
            self.policy,
            envs,
            [seed] * count,
            rng=np.random.default_rng(seed),
            greedy=self.mode == "greedy",
            graph_cache=self._pool.graph_cache,
            keep_inputs=False,
        )
        # a feasible episode first (the environment marks an infeasible one), then the fastest
        best = min(records, key=lambda r: (bool(r.info.get("infeasible")), r.makespan))
        placement = episode_placement(best)
        if self.mode == "greedy" and best.info.get("oom") and decodes_like_episodes(self.policy):
            # over memory: decoded again under the room mask with raised reserves
            dec = Decoder(self.policy, graph, cluster, self.memory_mask)
            with torch.no_grad():
                placement = reserved_greedy(dec, first=placement)
        return placement

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """The placer as a function ``(graph, cluster, seed)``: :meth:`place`."""
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"AgentPlacer({self.name!r}, mode={self.mode!r}, k={self.k})"
