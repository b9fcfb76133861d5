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
placegym/Real-v0               any (keywords)      any          real backend, by keyword
=============================  ==================  ===========  =============================
"""

from __future__ import annotations

import gymnasium as gym

from placegym.envs.sources import WorkloadSampler

ENTRY_POINT = "placegym.envs.env:PlacementEnv"
#: ``gym.make_vec(id, num_envs=B)`` builds this native vector environment for the
#: simulated ids (``vectorization_mode="sync"`` / ``"async"`` still wrap single ones).
VECTOR_ENTRY_POINT = "placegym.envs.vector:PlacementVectorEnv"

RANDOM_DAG_NODES = (64, 160)

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


def register_envs() -> None:
    """Register every id of :data:`ENV_IDS` and :data:`REAL_ENV_IDS` (idempotent)."""
    for env_id, kwargs in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=ENTRY_POINT,
                vector_entry_point=VECTOR_ENTRY_POINT,
                kwargs=dict(kwargs),
            )
    for env_id, kwargs in REAL_ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id, entry_point=ENTRY_POINT, kwargs=dict(kwargs), nondeterministic=True
            )
