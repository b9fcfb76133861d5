"""Plan imitation: the device_anneal plan teacher, one-label teachers, and behaviour
cloning that makes the greedy policy reproduce its plan (configs/plan_imitation.yaml)."""

from pathlib import Path

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import Placement, simulate
from placegym.envs.mdp.state import PlacementState
from placegym.teachers import get_teacher, make_teacher
from placegym.teachers.base import FirstOfTies
from placegym.teachers.device_anneal import DeviceAnnealTeacher, critical_path_order
from placegym.train.config import config_from_dict, load_config
from placegym.train.evaluate import load_agent
from placegym.train.trainer import Trainer

PLAN_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "plan_imitation.yaml"


def small_dag():
    """12 nodes (one isolated) where transfers cost about one node's work: on 3 unit devices
    the best single-pass placer takes 16.5 and device_anneal's plan 15.0."""
    flops = [3.0, 1.0, 1.0, 1.0, 1.0, 3.0, 2.0, 3.0, 1.0, 2.0, 1.0, 1.0]
    edges = [(0, 2), (0, 3), (1, 3), (1, 4), (2, 4), (3, 4), (3, 5), (4, 7), (5, 7), (7, 8)]
    edges += [(7, 9), (8, 9), (9, 10)]
    return graph(flops, edges, out_bytes=[1.5] * 12)


def test_device_anneal_plans_in_the_critical_path_order_within_its_budget():
    g, c = small_dag(), unit_cluster(3)
    order = critical_path_order(g, c)
    pos = np.empty(g.num_nodes, dtype=np.int64)
    pos[order] = np.arange(g.num_nodes)
    assert (pos[g.edges[:, 0]] < pos[g.edges[:, 1]]).all()  # topological
    t = DeviceAnnealTeacher(budget=200, restarts=2, seed=1)
    plan = t.place(g, c)
    assert (plan.order == order).all()
    starts = [
        simulate(g, c, Placement(device=get_teacher(h).place(g, c).device, order=order)).makespan
        for h in ("critical_path", "heft", "nest", "metis", "round_robin", "single_device")
    ]
    assert t.last_makespan == simulate(g, c, plan).makespan <= min(starts)
    again = DeviceAnnealTeacher(budget=200, restarts=2, seed=1).place(g, c)
    assert (again.device == plan.device).all()
    with pytest.raises(ValueError, match=r"budget: must be >= restarts x starts = 12, got 11"):
        DeviceAnnealTeacher(budget=11, restarts=2)
    with pytest.raises(ValueError, match=r"restarts: must be an integer >= 1, got 0"):
        DeviceAnnealTeacher(restarts=0)


def test_first_of_ties_answers_one_action_of_the_tie_set():
    g, c = small_dag(), unit_cluster(3)
    inner = get_teacher("critical_path")
    det = FirstOfTies(inner)
    state = PlacementState(g, c)
    while not state.done:
        tied = inner.select_actions(state)
        [v] = det.select_actions(state)
        assert v == tied[0]
        state.select(int(v))
        tied = inner.place_actions(state)
        [d] = det.place_actions(state)
        est = state.earliest_start()
        assert d in tied and est[d] == est[tied].min()
        state.place(int(d))
    plan = make_teacher("nest", canonical=True)
    assert FirstOfTies(plan).plan_makespan(g, c) == plan.plan_makespan(g, c)  # passes through


def test_the_shipped_plan_imitation_config_validates():
    cfg = load_config(PLAN_CONFIG)
    assert cfg.phases == ["phase1"] and cfg.phase1.teacher == "device_anneal"
    assert cfg.phase1.deterministic_teacher and cfg.phase1.eps_end == 1.0
    cfg = load_config(
        PLAN_CONFIG,
        [
            "data.cluster=doppler-unit-4",
            "data.graphs=[comm-heavy-v0/ffnn-3x2x4-ccr4@doppler-unit-4]",
        ],
    )
    assert cfg.data.graphs[0].suite_instance[1] == "ffnn-3x2x4-ccr4@doppler-unit-4"
    raw = cfg.to_dict()
    raw["data"]["graphs"] = [{"name": cfg.data.graphs[0].name, "cluster": "p100x4"}]
    with pytest.raises(ValueError, match=r"data\.graphs\[0\]\.cluster: must be 'doppler-unit-4'"):
        config_from_dict(raw)
    with pytest.raises(ValueError, match=r"data\.graphs\[0\]\.name: suite comm-heavy-v0 has no"):
        load_config(PLAN_CONFIG, ["data.graphs=[comm-heavy-v0/nope]"])


def test_plan_imitation_makes_the_greedy_policy_reproduce_its_plan(tmp_path):
    g, c = small_dag(), unit_cluster(3)
    g.save(tmp_path / "g.json")
    c.save(tmp_path / "c.json")
    raw = load_config(PLAN_CONFIG).to_dict()
    raw.update(name="pi", out=str(tmp_path / "run"), progress=False)
    raw["policy"].update(hidden=16, layers=2)
    raw["data"].update(cluster=str(tmp_path / "c.json"), graphs=[str(tmp_path / "g.json")])
    raw["phase1"].update(updates=60, lr=0.01, teacher_kwargs={"budget": 200, "restarts": 2})
    raw["eval"].update(every=20, k=2, teachers=["critical_path"], gantt=False)
    raw["wandb"] = {"mode": "disabled"}
    Trainer(config_from_dict(raw)).run()
    plan = DeviceAnnealTeacher(budget=200, restarts=2, seed=0).place(g, c)
    target = simulate(g, c, plan).makespan
    single_pass = ("critical_path", "heft", "nest", "metis", "round_robin", "single_device")
    assert target < min(simulate(g, c, get_teacher(h).place(g, c)).makespan for h in single_pass)
    agent = load_agent(tmp_path / "run" / "checkpoints" / "final.pt")
    assert simulate(g, c, agent.place(g, c)).makespan == target
    assert simulate(g, c, agent.place(g, c, seed=5)).makespan == target
