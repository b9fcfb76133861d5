"""A saved MaskablePPO model (``model.save(...)`` zip) as a placer for ``placegym bench``.

``placegym bench --agents ppo_ffnn.zip`` adds a column ``ppo_ffnn`` with the model's
greedy placement (deterministic ``predict`` with ``action_masks``) of every workload.
The model reads padded observations of fixed size, so a graph must fit its
``max_nodes`` / ``max_edges`` and a cluster must have its number of devices.

**What loading runs.** ``MaskablePPO.load`` unpickles (cloudpickle) the objects that
``model.save`` stored in the zip's ``data`` (the policy class, the spaces, the
schedules): loading a zip runs code from it. :func:`load_policy` avoids that where it
can: for :class:`~placegym.agents.sb3.policy.GnnMaskablePolicy` and sb3-contrib's
``MultiInputPolicy`` with plain (JSON) ``policy_kwargs`` and placegym's observation space,
it rebuilds the policy from the readable part of ``data`` and loads ``policy.pth`` with
``torch.load(weights_only=True)``: nothing stored in the file runs. Any other zip is
loaded with ``MaskablePPO.load``, with an :class:`UnpicklingWarning` naming the file
(once per file and process): bench only zips you trust.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from gymnasium import spaces

from placegym.envs import Cluster, Graph, Placement, PlacementEnv, load_cluster
from placegym.envs.mdp.observation import observation_space

__all__ = ["Sb3Placer", "UnpicklingWarning", "load_policy"]

#: The zips this process has warned about (:class:`UnpicklingWarning`, once per file).
_WARNED: set[Path] = set()


class UnpicklingWarning(UserWarning):
    """A Stable-Baselines3 zip is loaded with ``MaskablePPO.load``, which runs code stored
    in the file."""


def _policy_classes() -> dict[str, type]:
    """The policy classes :func:`load_policy` rebuilds without unpickling, by the
    ``module.Class`` that the zip's readable ``data`` names."""
    from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy

    from placegym.agents.sb3.policy import GnnMaskablePolicy

    return {
        f"{c.__module__}.{c.__name__}": c
        for c in (GnnMaskablePolicy, MaskableMultiInputActorCriticPolicy)
    }


def _size(text: str, key: str) -> int | None:
    """The first dimension of the ``Box`` of ``key`` in the repr of a ``Dict`` space."""
    match = re.search(rf"'{key}': Box\([^()]*\((\d+),", text)
    return int(match[1]) if match else None


def _weights_only(zf: zipfile.ZipFile) -> Any | None:
    """The policy of a MaskablePPO zip rebuilt from its readable ``data`` and its
    ``policy.pth`` (weights only), or None when the zip is not one this can rebuild."""
    try:
        data = json.loads(zf.read("data"))
        cls_info, obs_info = data["policy_class"], data["observation_space"]
        act_info, kwargs = data["action_space"], data.get("policy_kwargs") or {}
    except (KeyError, ValueError, TypeError):
        return None
    init = re.match(r"<function (\w+)\.__init__ ", str(cls_info.get("__init__", "")))
    cls = _policy_classes().get(f"{cls_info.get('__module__')}.{init[1] if init else ''}")
    if cls is None or not isinstance(kwargs, dict) or ":serialized:" in kwargs:
        return None  # another policy, or policy_kwargs with objects (pickled)
    text = str(obs_info.get("spaces", ""))
    n, e, d = (_size(text, k) for k in ("node_mask", "edge_mask", "device"))
    if n is None or e is None or d is None:
        return None
    obs_space = observation_space(n, e, d)
    if str(obs_space.spaces) != text or str(act_info.get("n")) != str(max(n, d)):
        return None  # not placegym's full observation (a wrapper, another version)
    policy = cls(obs_space, spaces.Discrete(max(n, d)), lambda _: 0.0, **kwargs)
    state = torch.load(io.BytesIO(zf.read("policy.pth")), map_location="cpu", weights_only=True)
    policy.load_state_dict(state)
    policy.set_training_mode(False)
    return policy


def load_policy(path: str | Path) -> tuple[Any, bool]:
    """The policy of a MaskablePPO ``.zip`` and whether it was read weights only (module
    docstring); otherwise ``MaskablePPO.load`` reads it, with an
    :class:`UnpicklingWarning` naming the file the first time.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a model zip, or one whose policy does not build from its
            description or whose weights do not fit it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with zipfile.ZipFile(path) as zf:
            policy = _weights_only(zf)
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path}: not a Stable-Baselines3 model zip ({e})") from None
    except KeyError as e:  # no policy.pth
        raise ValueError(f"{path}: not a Stable-Baselines3 model zip ({e})") from None
    except (RuntimeError, TypeError, ValueError, pickle.UnpicklingError) as e:
        # policy_kwargs the policy does not take, weights that do not fit it
        msg = " ".join(str(e).split())
        raise ValueError(f"{path}: the model does not load: {msg}") from None
    if policy is not None:
        return policy, True
    from sb3_contrib import MaskablePPO

    if path.resolve() not in _WARNED:
        _WARNED.add(path.resolve())
        warnings.warn(
            f"{path}: loading runs code stored in the file (MaskablePPO.load unpickles the "
            "objects model.save stored; placegym reads only the weights of a "
            "GnnMaskablePolicy or MultiInputPolicy model with plain policy_kwargs); "
            "load only files you trust",
            UnpicklingWarning,
            stacklevel=2,
        )
    return MaskablePPO.load(path, device="cpu").policy, False


class Sb3Placer:
    """Greedy placements of a saved MaskablePPO model.

    Args:
        path: the ``.zip`` written by ``model.save``, read by :func:`load_policy` (weights
            only where it can; else with an :class:`UnpicklingWarning`: a zip runs code).
        name: label in benchmark tables (default: the file's stem).

    Attributes:
        policy: the model's policy.
        weights_only: whether it was loaded without running anything stored in the zip.
    """

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        self.policy, self.weights_only = load_policy(path)
        space = cast(spaces.Dict, self.policy.observation_space)
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
            action, _ = self.policy.predict(
                obs, deterministic=True, action_masks=info["action_mask"]
            )
            obs, _, done, _, info = env.step(int(action))
        return Placement(
            device=np.asarray(info["placement"]),
            order=np.asarray(info["order"]),
            recompute=np.asarray(info["recompute"], dtype=np.int64),
        )

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """:meth:`place` (the benchmark's placer signature)."""
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"Sb3Placer({self.name!r})"
