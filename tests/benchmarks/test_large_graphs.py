"""Large graphs end to end (``make bench``): a 10,000-node / 30,000-edge graph on the
1024-device presets through the environment, the teachers and the agent.

For each cluster it prints CPU time and the peak resident memory each row added
to the process (Linux: the high-water mark reset before the row through
``/proc/self/clear_refs``; elsewhere the process's peak so far): the environment's set-up
(observation statics and the reference makespan, the critical_path teacher's), a masked
random episode (time per step and per episode), critical_path, nest, anneal (a budget of
32 simulations from the critical_path start) and the greedy episode of an untrained
agent (the cost of a trained one is the same; ``keep_inputs=False``, as evaluation runs
it: recording every step's inputs for training is ``O(n²)`` memory, 7 GB here). Per
step, nothing costs ``n × D``: the agent's PLC head aggregates placed nodes per device
by index (``O(n · H)``), not by an ``(n, D)`` one-hot.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from benchmarks.test_sim_speed import layered_dag
from benchmarks.timing import load_note

from placegym.agents.doppler import DopplerPolicy
from placegym.agents.doppler.episodes import play_episodes
from placegym.envs import PlacementEnv, load_cluster, simulate
from placegym.teachers import make_teacher

pytestmark = pytest.mark.benchmark

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def _hwm_mb() -> float:
    """The process's resident high-water mark in MiB (VmHWM)."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    for line in _STATUS.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measured(fn: Callable[[], object]) -> tuple[object, float, float]:
    """``(result, CPU seconds of this process, peak MiB above the resident size before
    the call)``; CPU time, since the machine is shared (torch runs on one thread)."""
    base = _rss_mb()
    with contextlib.suppress(OSError):
        _CLEAR.write_text("5")  # resets VmHWM to the current RSS
    t = time.process_time()
    out = fn()
    cpu = time.process_time() - t
    return out, cpu, max(_hwm_mb() - base, 0.0)


def random_episode(env: PlacementEnv, seed: int) -> tuple[int, float]:
    """A masked random episode from an env already reset; ``(steps, makespan)``."""
    rng = np.random.default_rng(seed)
    mask = env.action_masks()
    steps, terminated, info = 0, False, {}
    while not terminated:
        _, _, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        mask = info["action_mask"]
        steps += 1
    return steps, float(info["makespan"])


@pytest.mark.parametrize("cluster_name", ["h100-spineleaf-1024", "tpuv4-fattree-1024"])
def test_10k_node_graph_end_to_end(cluster_name):
    torch.set_num_threads(1)
    g = layered_dag(10_000, 30_000, seed=1)
    c = load_cluster(cluster_name)
    env = PlacementEnv(graph=g, cluster=c)
    compact = PlacementEnv(graph=g, cluster=c, observation="compact")
    rows = []
    _, t, mb = measured(lambda: env.reset(seed=0))
    rows.append(("environment set-up (reset: statics, T_ref)", t, "", mb))
    (steps, makespan), t, mb = measured(lambda: random_episode(env, 0))
    assert steps == 2 * g.num_nodes and np.isfinite(makespan)
    rows.append(("masked random episode", t, f"{t / steps * 1e6:.0f} µs/step", mb))
    compact.reset(seed=0)
    (steps, makespan), t, mb = measured(lambda: random_episode(compact, 0))
    rows.append(("masked random episode, compact", t, f"{t / steps * 1e6:.0f} µs/step", mb))
    for name, kwargs in (
        ("critical_path", {}),
        ("nest", {}),
        ("anneal", {"budget": 32, "starts": ("critical_path",)}),
    ):
        p, t, mb = measured(lambda n=name, k=kwargs: make_teacher(n, kwargs=k).place(g, c))
        assert np.isfinite(simulate(g, c, p).makespan)
        rows.append((name, t, "", mb))
    policy = DopplerPolicy()
    rng = np.random.default_rng(0)
    with torch.no_grad():
        recs, t, mb = measured(
            lambda: play_episodes(policy, [env], [0], rng=rng, greedy=True, keep_inputs=False)
        )
    assert np.isfinite(recs[0].makespan)
    rows.append(("agent greedy episode (untrained)", t, f"{t / steps * 1e6:.0f} µs/step", mb))
    print(f"\n\n10,000 nodes / 30,000 edges on {cluster_name} ({load_note()})")
    print("CPU time of the process; peak: resident memory the row added (MiB)")
    print("| what | time | per step | peak |")
    print("|---|---|---|---|")
    for what, t, per, mb in rows:
        print(f"| {what} | {t:.2f} s | {per} | {mb:,.0f} MiB |")
