"""Rollouts on Ray actors (``workers``): the same weights as the in-process run.

The Ray run is a subprocess inside a network namespace with loopback alone (:mod:`netns`).
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from netns import isolated, run_isolated
from simcases import diamond_graph, fork_join, graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.envs import PlacementEnv
from placegym.train.checkpoint import load_checkpoint
from placegym.train.config import config_from_dict
from placegym.train.trainer import Trainer
from placegym.train.workers import Job, _split


def _graphs():
    fork = fork_join()
    diamond = diamond_graph()
    chain = graph([2.0, 1.0, 2.0, 1.0], [(0, 1), (1, 2), (2, 3)], out_bytes=[1.0] * 4)
    return [fork, diamond, chain]


def _config(tmp_path: Path) -> dict:
    """Phases I and II (with self-imitation) on three small graphs, two drawn per update."""
    names = []
    for i, g in enumerate(_graphs()):
        g.save(tmp_path / f"g{i}.json")
        names.append(str(tmp_path / f"g{i}.json"))
    unit_cluster(2).save(tmp_path / "unit.json")
    return {
        "name": "workers",
        "out": str(tmp_path / "serial"),
        "progress": False,
        "policy": {"hidden": 8, "layers": 1},
        "data": {"cluster": str(tmp_path / "unit.json"), "graphs": names},
        "phase1": {"updates": 3, "episodes_per_graph": 2, "graphs_per_update": 2, "lr": 0.01},
        "phase2": {
            "updates": 4,
            "algo": "ppo",
            "episodes_per_graph": 3,
            "graphs_per_update": 2,
            "lr": 0.01,
            "self_imitation": {"coef": 1.0, "states": "sampled", "teacher": "single_device"},
        },
        "eval": {"every": 0, "k": 2, "teachers": ["critical_path"], "gantt": False},
        "wandb": {"mode": "disabled"},
    }


def test_split_deals_whole_graphs_round_robin():
    job = Job([0, 0, 2, 2, 2, 1], [10, 11, 12, 13, 14, 15], [5, 6, 7, 8, 9, 4], "relative")
    parts = _split(job, 2)
    assert [pos for pos, _ in parts] == [[0, 1, 5], [2, 3, 4]]
    assert parts[0][1].groups == [0, 0, 1] and parts[0][1].seeds == [10, 11, 15]
    assert parts[1][1].streams == [7, 8, 9]
    assert [pos for pos, _ in _split(job, 5)] == [[0, 1], [2, 3, 4], [5]]


def test_episodes_with_their_own_generators_do_not_depend_on_the_other_graphs():
    from simcases import unit_cluster as cluster_of

    torch.manual_seed(0)
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1))
    cluster = cluster_of(2)
    a, b, _ = _graphs()
    envs = [PlacementEnv(g, cluster) for g in (a, a, b, b)]
    streams, seeds = [3, 4, 5, 6], [0, 1, 2, 3]

    def play(idx):
        rngs = [np.random.default_rng(streams[i]) for i in idx]
        return play_episodes(policy, [envs[i] for i in idx], [seeds[i] for i in idx], rng=rngs)

    together = play([0, 1, 2, 3])
    apart = play([0, 1]) + play([2, 3])
    for x, y in zip(together, apart):
        np.testing.assert_array_equal(x.sel_action, y.sel_action)
        np.testing.assert_array_equal(x.plc_action, y.plc_action)
    assert len({tuple(r.plc_action) + tuple(r.sel_action) for r in together}) > 1


def test_play_episodes_wants_one_generator_per_env():
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1))
    env = PlacementEnv(_graphs()[0], unit_cluster(2))
    with pytest.raises(ValueError, match=r"rng: expected one generator per env \(1\), got 2"):
        play_episodes(policy, [env], [0], rng=[np.random.default_rng(0)] * 2)


def test_negative_workers_are_refused(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        config_from_dict({**_config(tmp_path), "workers": -1})


@pytest.mark.skipif(not isolated(), reason="needs unshare -n (a network namespace)")
def test_training_on_ray_workers_ends_with_the_serial_weights(tmp_path):
    ref, out = _serial_and_ray(tmp_path, _config(tmp_path))
    assert out["progress"]["episodes"] == ref["progress"]["episodes"] == 3 * 4 + 4 * 6
    assert out["best_plans"] == ref["best_plans"] and ref["best_plans"]
    for k in ref["policy"]:
        torch.testing.assert_close(out["policy"][k], ref["policy"][k], rtol=0, atol=0)


def _serial_and_ray(tmp_path: Path, raw: dict) -> tuple[dict, dict]:
    """The final checkpoints of ``raw`` trained in process and on 2 Ray workers (the
    CLI in a loopback-only namespace)."""
    pytest.importorskip("ray")
    serial = Trainer(config_from_dict(raw))
    serial.run()
    (tmp_path / "run.yaml").write_text(config_from_dict(raw).to_yaml())
    cli = [sys.executable, "-m", "placegym.train.cli", "train", str(tmp_path / "run.yaml")]
    overrides = ["workers=2", f"out={tmp_path / 'ray'}"]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "WANDB_MODE": "disabled"}
    ray = run_isolated([*cli, *overrides], env)
    assert ray.returncode == 0, ray.stderr[-3000:]
    assert "rollouts on 2 Ray workers" in ray.stdout
    ref = load_checkpoint(serial.ckpt_dir / "final.pt")
    return ref, load_checkpoint(tmp_path / "ray" / "checkpoints" / "final.pt")


@pytest.mark.skipif(not isolated(), reason="needs unshare -n (a network namespace)")
def test_ray_workers_draw_the_samplers_fresh_instances_and_end_with_the_serial_weights(tmp_path):
    """data.sampler with workers: each actor draws the update's instances by index from
    its own sampler; the records, and so the weights, are the in-process run's."""
    raw = _config(tmp_path)
    raw["data"] = {
        "graphs": [],
        "sampler": {
            "nodes": [20, 40],
            "devices": [2, 4],
            "families": ["random_dag", "chainmm", "ffnn"],
            "memory_share": 0.0,
            "training_share": 0.0,
        },
    }
    raw["phase1"].update(updates=2)
    raw["phase2"] = {"updates": 2, "episodes_per_graph": 2, "graphs_per_update": 2, "lr": 0.01}
    ref, out = _serial_and_ray(tmp_path, raw)
    assert out["progress"]["episodes"] == ref["progress"]["episodes"] == 2 * 4 + 2 * 4
    for k in ref["policy"]:
        torch.testing.assert_close(out["policy"][k], ref["policy"][k], rtol=0, atol=0)
