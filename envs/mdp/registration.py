"""Registered environment ids (``import placegym.envs`` registers them).

=============================  ==================  ===========  =============================
id                             graph               cluster      notes
=============================  ==================  ===========  =============================
placegym/ChainMM-v0            chainmm             p100x4       DOPPLER workload
placegym/FFNN-v0               ffnn                p100x4       DOPPLER workload
placegym/LlamaBlock-v0         llama_block         p100x4       DOPPLER workload
placegym/LlamaLayer-v0         llama_layer         p100x4       DOPPLER workload
placegym/LlamaLayer-8GPU-v0    llama_layer         v100x8       NVLink hybrid cube-mesh
placegym/LlamaLayer-2x8-v0     llama_layer         h100-2x8     two nodes over InfiniBand
placegym/MoE-v0                moe                 p100x4
placegym/RandomDAG-v0          random_dag sampler  p100x4       a new 64-160 node graph
                                                                every reset
placegym/Placement-v0          any (keywords)      any          defaults: ffnn on p100x4
placegym/FFNN-CPU-v0           ffnn (scale 8)      calibrated   real backend, cpu#2 workers,
                                                                nondeterministic
placegym/Real-v0               any (keywords)      calibrated   real backend, by keyword
=============================  ==================  ===========  =============================

Every id registers ``max_episode_steps`` (Gymnasium's ``TimeLimit``) where its graph size
is known: ``step_limit_factor × 2n`` (default 4 × 2n) for its graph, or for the largest
graph of a sampler. ``placegym/Placement-v0`` and ``placegym/Real-v0`` take their graph
by keyword, so their limit is the environment's own, from the graph of each episode
(:class:`~placegym.envs.mdp.env.PlacementEnv` truncates there). Overriding ``graph=`` on an id
with a registered limit keeps that limit: pass ``max_episode_steps=`` with it, or use
``placegym/Placement-v0``.

The real ids are built by :func:`make_real_env`: their ``devices=``, ``scale=`` and
``repeats=`` keywords make the environment's
:class:`~placegym.envs.mdp.backends.TorchBackend`. Any other id takes a backend object
(``backend=TorchBackend(...)``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from placegym.envs.mdp.backends import TorchBackend
from placegym.envs.mdp.env import PlacementEnv, step_limit
from placegym.envs.mdp.sources import WorkloadSampler

ENTRY_POINT = "placegym.envs.mdp.env:PlacementEnv"
#: The entry point of :data:`REAL_ENV_IDS` (:func:`make_real_env`).
REAL_ENTRY_POINT = "placegym.envs.mdp.registration:make_real_env"
#: ``gym.make_vec(id, num_envs=B)`` builds this native vector environment for the
#: simulated ids (``vectorization_mode="sync"`` / ``"async"`` still wrap single ones).
VECTOR_ENTRY_POINT = "placegym.envs.mdp.vector:PlacementVectorEnv"

RANDOM_DAG_NODES = (64, 160)

#: Nodes of each registered workload's default graph, so that registering the ids (at
#: ``import placegym.envs``) builds no graph and loads no generator; a test rebuilds each
#: graph and compares.
WORKLOAD_NODES: dict[str, int] = {
    "chainmm": 84,
    "ffnn": 128,
    "llama_block": 115,
    "llama_layer": 197,
    "moe": 116,
}

ENV_IDS: dict[str, dict] = {
    "placegym/ChainMM-v0": {"graph": "chainmm", "cluster": "p100x4"},
    "placegym/FFNN-v0": {"graph": "ffnn", "cluster": "p100x4"},
    "placegym/LlamaBlock-v0": {"graph": "llama_block", "cluster": "p100x4"},
    "placegym/LlamaLayer-v0": {"graph": "llama_layer", "cluster": "p100x4"},
    "placegym/LlamaLayer-8GPU-v0": {"graph": "llama_layer", "cluster": "v100x8"},
    "placegym/LlamaLayer-2x8-v0": {"graph": "llama_layer", "cluster": "h100-2x8"},
    "placegym/MoE-v0": {"graph": "moe", "cluster": "p100x4"},
    "placegym/RandomDAG-v0": {
        "graph": WorkloadSampler("random_dag", ranges={"nodes": RANDOM_DAG_NODES}),
        "cluster": "p100x4",
        "max_nodes": RANDOM_DAG_NODES[1],
        # about fan_in (2) producers per node; 4 per node is never reached in practice
        "max_edges": 4 * RANDOM_DAG_NODES[1],
    },
    "placegym/Placement-v0": {},
}

#: Ids whose reward comes from real execution (registered ``nondeterministic=True``).
REAL_ENV_IDS: dict[str, dict] = {
    "placegym/FFNN-CPU-v0": {
        "graph": "ffnn",
        "cluster": "calibrate",
        "backend": "torch",
        "devices": "cpu#2",
        "scale": 8,
        "repeats": 3,
    },
    "placegym/Real-v0": {"backend": "torch"},
}


def make_real_env(
    *,
    backend: str = "torch",
    devices: str = "cpu#2",
    scale: float = 1,
    repeats: int = 3,
    **kwargs: Any,
) -> PlacementEnv:
    """The real ids' environment: ``PlacementEnv(backend=TorchBackend(devices,
    scale=scale, repeats=repeats), **kwargs)``.

    Raises:
        ValueError: ``backend`` is not ``"torch"`` (a backend object goes to
            ``placegym/Placement-v0``).
    """
    if not (isinstance(backend, str) and backend == "torch"):
        raise ValueError(
            f"backend: the real ids build TorchBackend(devices, scale=, repeats=); expected "
            f"'torch', got {backend!r} (pass a backend object to placegym/Placement-v0)"
        )
    return PlacementEnv(backend=TorchBackend(devices, scale=scale, repeats=repeats), **kwargs)


make_real_env.metadata = PlacementEnv.metadata  # type: ignore[attr-defined]  # render modes


def max_episode_steps(kwargs: dict[str, Any]) -> int | None:
    """The registered step limit of an id's keywords: for a workload name, its graph's;
    for a sampler, its ``max_nodes``'; None when the graph comes by keyword."""
    graph = kwargs.get("graph")
    if isinstance(graph, str):
        return step_limit(WORKLOAD_NODES[graph])
    if graph is not None and "max_nodes" in kwargs:
        return step_limit(kwargs["max_nodes"])
    return None


def register_envs() -> None:
    """Register every id of :data:`ENV_IDS` and :data:`REAL_ENV_IDS` (idempotent)."""
    for ids, nondeterministic in ((ENV_IDS, False), (REAL_ENV_IDS, True)):
        for env_id, kwargs in ids.items():
            if env_id not in gym.registry:
                gym.register(
                    id=env_id,
                    entry_point=REAL_ENTRY_POINT if nondeterministic else ENTRY_POINT,
                    vector_entry_point=None if nondeterministic else VECTOR_ENTRY_POINT,
                    kwargs=dict(kwargs),
                    max_episode_steps=max_episode_steps(kwargs),
                    nondeterministic=nondeterministic,
                )
