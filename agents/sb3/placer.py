"""A saved MaskablePPO model (``model.save(...)`` zip) as a placer for ``placegym bench``.

``placegym bench --agents ppo_ffnn.zip`` adds a column ``ppo_ffnn`` with the model's
greedy placement (deterministic ``predict`` with ``action_masks``) of every workload.
The model reads padded observations of fixed size, so a graph must fit its
``max_nodes`` / ``max_edges`` and a cluster must have its number of devices.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
from gymnasium import spaces

from placegym.envs import Cluster, Graph, Placement, PlacementEnv, load_cluster

__all__ = ["Sb3Placer"]


class Sb3Placer:
    """Greedy placements of a saved MaskablePPO model.

    Args:
        path: the ``.zip`` written by ``model.save``.
        name: label in benchmark tables (default: the file's stem).
    """

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        from sb3_contrib import MaskablePPO

        self.model = MaskablePPO.load(path, device="cpu")
        space = cast(spaces.Dict, self.model.observation_space)
        rows = {key: int((space[key].shape or (0,))[0]) for key in ("node_mask", "edge_mask")}
        self.max_nodes, self.max_edges = rows["node_mask"], rows["edge_mask"]
        self.num_devices = int((space["device"].shape or (0,))[0])
        self.name = name or Path(path).stem

    def place(self, graph: Graph, cluster: Cluster | str, seed: int = 0) -> Placement:
        """The greedy episode's placement of ``graph`` on ``cluster`` (``seed`` resets the
        env; the greedy episode itself draws nothing)."""
        cluster = load_cluster(cluster)
        if cluster.num_devices != self.num_devices:
            raise ValueError(
                f"cluster: {cluster.name!r} has {cluster.num_devices} devices, the model "
                f"{self.name!r} was trained for {self.num_devices}"
            )
        env = PlacementEnv(graph, cluster, max_nodes=self.max_nodes, max_edges=self.max_edges)
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            action, _ = self.model.predict(
                obs, deterministic=True, action_masks=info["action_mask"]
            )
            obs, _, done, _, info = env.step(int(action))
        return Placement(device=np.asarray(info["placement"]), order=np.asarray(info["order"]))

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """:meth:`place` (the benchmark's placer signature)."""
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"Sb3Placer({self.name!r})"
