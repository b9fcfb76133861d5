"""Phase III's pieces: RL on the real backend, whose makespans are measured.

:func:`real_pool` builds the environments that execute placements on this machine's
devices (and the cluster they observe); :func:`sim_real_metrics` logs how far the
simulator's makespans are from the measured ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from placegym.agents.doppler.episodes import EpisodeRecord
from placegym.envs import Cluster, Graph, load_cluster
from placegym.envs.mdp.backends import TorchBackend
from placegym.train.config import DataConfig, RealRLConfig, resolve_path
from placegym.train.evaluate import EnvPool

__all__ = ["real_pool", "sim_real_metrics"]


def real_pool(
    pcfg: RealRLConfig, graphs: Sequence[Graph], data: DataConfig, base_dir: Path | None
) -> tuple[EnvPool, Cluster]:
    """Phase III's environments (the real backend on ``pcfg.devices``) and the cluster
    they observe: calibrated on the devices, with ``graphs``' kernels profiled as they
    run (scaled) when ``pcfg.profile``, if ``pcfg.cluster`` is ``calibrate``; else the
    cluster it names."""
    from placegym.envs.real.calibrate import calibrate

    if pcfg.cluster == "calibrate":
        from placegym.envs.real.kernels import scale_graph

        profiled = [scale_graph(g, pcfg.scale) for g in graphs] if pcfg.profile else ()
        cluster = calibrate(pcfg.devices, graphs=profiled)
    else:
        cluster = load_cluster(str(resolve_path(pcfg.cluster, base_dir)))
    pool = EnvPool(
        reward="relative",
        memory_mask=data.memory_mask,
        dispatch=data.dispatch,
        backend=TorchBackend(pcfg.devices, scale=pcfg.scale, repeats=pcfg.repeats),
    )
    return pool, cluster


def sim_real_metrics(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """Mean measured and simulated makespans (ms) of phase III episodes and the
    sim-vs-real gap ``charts/sim_real_gap`` (mean of measured / simulated, minus 1)."""
    measured = np.array([r.makespan for r in records])
    simulated = np.array([r.info["simulated_makespan"] for r in records])
    return {
        "charts/measured_makespan_ms": float(measured.mean()) * 1e3,
        "charts/simulated_makespan_ms": float(simulated.mean()) * 1e3,
        "charts/sim_real_gap": float(np.mean(measured / simulated) - 1.0),
    }
