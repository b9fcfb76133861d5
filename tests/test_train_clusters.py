"""Training graphs on their own clusters: suite instances and splits in ``data.graphs``,
per-graph ``cluster``, and runs whose batches mix clusters of different device counts."""

import json
from pathlib import Path

import pytest
from simcases import graph, unit_cluster

from placegym.envs import simulate
from placegym.teachers import get_teacher
from placegym.teachers.device_anneal import DeviceAnnealTeacher
from placegym.train.config import config_from_dict, load_config
from placegym.train.data import expand_graphs, load_graphs
from placegym.train.evaluate import evaluate_run, load_agent
from placegym.train.trainer import Trainer

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_a_suite_split_expands_to_its_instances_each_on_its_cluster():
    cfg = load_config(CONFIGS / "generalist.yaml")
    specs = expand_graphs(cfg.data.graphs)
    assert len(specs) == 24 and specs[0].name == "generalize-v0/random_dag-64-s0@p100x4"
    loaded = load_graphs(cfg.data.graphs[:1], "doppler-unit-4", None)
    by_cluster = {t.cluster.name: t.cluster for t in loaded}
    assert {n: c.num_devices for n, c in by_cluster.items()} == {"p100x4": 4, "v100x8": 8}
    for t in loaded:  # one cluster object per name
        assert t.cluster is by_cluster[t.label.rsplit("@", 1)[1]]


def test_a_suite_instance_ignores_data_cluster_and_checks_its_own():
    name = "generalize-v0/chainmm-4x3@p100x4"
    cfg = load_config(
        CONFIGS / "plan_imitation.yaml", ["data.cluster=v100x8", f"data.graphs=[{name}]"]
    )
    [t] = load_graphs(cfg.data.graphs, cfg.data.cluster, None)
    assert t.cluster.name == "p100x4"
    raw = cfg.to_dict()
    raw["data"]["graphs"] = [{"name": name, "cluster": "v100x8"}]
    with pytest.raises(ValueError, match=r"data\.graphs\[0\]\.cluster: must be 'p100x4'"):
        config_from_dict(raw)
    raw["data"]["graphs"] = []
    raw["data"]["heldout"] = [{"name": name, "cluster": "v100x8"}]
    with pytest.raises(ValueError, match=r"data\.graphs: expected at least one graph"):
        config_from_dict(raw)


def test_evaluate_run_needs_one_cluster_per_graph():
    g = graph([1.0, 1.0], [(0, 1)])
    with pytest.raises(ValueError, match=r"cluster: expected 2 clusters, got 1"):
        evaluate_run(
            None, [("train", "a", g), ("train", "b", g)], [unit_cluster(2)], dict, k=1, seed=0
        )


def _mixed_config(tmp_path: Path, phase1: dict, phases: list[str]) -> dict:
    """A fork graph on the 2-device ``data.cluster`` and a chain on its own 3 devices."""
    fork = graph([1.0, 2.0, 2.0, 2.0, 1.0], [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)])
    chain = graph([2.0, 1.0, 1.0, 2.0, 1.0, 1.0], [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5)])
    for name, obj in (
        ("fork", fork),
        ("chain", chain),
        ("c2", unit_cluster(2)),
        ("c3", unit_cluster(3)),
    ):
        obj.save(tmp_path / f"{name}.json")
    return {
        "name": "mixed",
        "out": str(tmp_path / "run"),
        "progress": False,
        "phases": phases,
        "policy": {"hidden": 8, "layers": 1},
        "data": {
            "cluster": str(tmp_path / "c2.json"),
            "graphs": [
                str(tmp_path / "fork.json"),
                {"name": str(tmp_path / "chain.json"), "cluster": str(tmp_path / "c3.json")},
            ],
        },
        "phase1": {"updates": 4, "episodes_per_graph": 2, "graphs_per_update": 2, **phase1},
        "phase2": {"updates": 3, "episodes_per_graph": 3, "graphs_per_update": 2},
        "eval": {"every": 2, "k": 2, "teachers": ["critical_path", "heft"], "gantt": False},
        "wandb": {"mode": "disabled"},
    }


def test_a_run_trains_on_graphs_of_two_device_counts_in_one_batch(tmp_path):
    raw = _mixed_config(tmp_path, {"lr": 0.01}, ["phase1", "phase2"])
    trainer = Trainer(config_from_dict(raw))
    assert [c.num_devices for c in trainer.clusters] == [2, 3]
    rows = trainer.run()
    assert [r["graph"] for r in rows] == ["fork", "chain"]
    for row, t in zip(rows, trainer.train_set):  # teachers timed on each graph's cluster
        cp = simulate(t.graph, t.cluster, get_teacher("critical_path").place(t.graph, t.cluster))
        assert row["critical_path"] == cp.makespan
    agent = load_agent(tmp_path / "run" / "checkpoints" / "final.pt")
    for row, t in zip(rows, trainer.train_set):
        placement = agent.place(t.graph, t.cluster)
        assert placement.device.max() < t.cluster.num_devices
        assert simulate(t.graph, t.cluster, placement).makespan == row["greedy"]
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(saved["rows"]) == 2


def test_plan_cloning_over_two_clusters_reproduces_each_plan(tmp_path):
    """One policy clones a device_anneal plan per graph, each on its own cluster."""
    teacher = {"teacher": "device_anneal", "teacher_kwargs": {"budget": 120, "restarts": 1}}
    phase1 = {
        **teacher,
        "canonical_labels": True,
        "select_teacher": "critical_path",
        "deterministic_teacher": True,
        "eps_start": 1.0,
        "eps_end": 1.0,
        "updates": 80,
        "lr": 0.02,
    }
    raw = _mixed_config(tmp_path, phase1, ["phase1"])
    raw["policy"] = {"hidden": 16, "layers": 2, "affinity": True, "positions": True}
    raw["eval"].update(every=20, keep_best=True)
    trainer = Trainer(config_from_dict(raw))
    rows = trainer.run()
    for row, t in zip(rows, trainer.train_set):
        plan = DeviceAnnealTeacher(budget=120, restarts=1, seed=0).place(t.graph, t.cluster)
        assert row["greedy"] == simulate(t.graph, t.cluster, plan).makespan
