"""Label-invariant plan imitation, one-phase (ablation) policies, self-imitation, keep_best
and the agent report's smoke run."""

import json

import numpy as np
import pytest
import torch
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.scoring import score
from placegym.envs import Placement, PlacementEnv, load_cluster, simulate
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import ffnn
from placegym.teachers import get_teacher, make_teacher
from placegym.teachers.canonical_plan import CanonicalPlanTeacher, automorphisms, device_mapping


class _Fixed:
    """A source teacher that returns one given plan."""

    def __init__(self, plan: Placement) -> None:
        self.plan = plan

    def place(self, graph, cluster) -> Placement:
        return self.plan


def _follow(teacher, g, cluster, rng, noise=0.0):
    """Roll the teacher's tie sets out (uniform picks; ``noise``: random devices)."""
    s = PlacementState(g, cluster)
    while not s.done:
        sel = teacher.select_actions(s)
        s.select(int(sel[rng.integers(len(sel))]))
        plc = teacher.place_actions(s)
        if rng.random() < noise:
            s.place(int(rng.integers(cluster.num_devices)))
        else:
            s.place(int(plc[rng.integers(len(plc))]))
    return s


def test_automorphisms_of_presets():
    assert len(automorphisms(load_cluster("p100x4"))) == 24  # four interchangeable GPUs
    auts = automorphisms(load_cluster("v100x8"))  # hybrid cube-mesh: a few symmetries
    level = load_cluster("v100x8").pair_level
    assert 1 < len(auts) < 40320
    assert any((a == np.arange(8)).all() for a in auts)
    for a in auts:
        np.testing.assert_array_equal(level[np.ix_(a, a)], level)


@pytest.mark.parametrize("cluster_name", ["p100x4", "v100x8"])
def test_following_the_tie_sets_reproduces_the_plans_makespan(cluster_name):
    g, cluster = ffnn(), load_cluster(cluster_name)
    teacher = CanonicalPlanTeacher(get_teacher("nest"))
    target = teacher.plan_makespan(g, cluster)
    for seed in range(3):
        s = _follow(teacher, g, cluster, np.random.default_rng(seed))
        assert simulate(g, cluster, s.to_placement()).makespan == pytest.approx(target)


def test_tie_sets_are_invariant_to_relabelling_symmetric_devices():
    g, cluster = ffnn(), load_cluster("p100x4")
    plan = get_teacher("nest").place(g, cluster)
    perm = np.array([2, 0, 3, 1])
    relabelled = Placement(device=perm[plan.device], order=plan.order)
    a, b = CanonicalPlanTeacher(_Fixed(plan)), CanonicalPlanTeacher(_Fixed(relabelled))
    s = PlacementState(g, cluster)
    rng = np.random.default_rng(0)
    while not s.done:  # a learner that deviates now and then
        np.testing.assert_array_equal(a.select_actions(s), b.select_actions(s))
        s.select(int(a.select_actions(s)[0]))
        np.testing.assert_array_equal(a.place_actions(s), b.place_actions(s))
        ties = a.place_actions(s)
        s.place(int(rng.integers(4)) if rng.random() < 0.2 else int(ties[-1]))


def test_device_mapping_follows_first_use():
    g = graph([1.0, 1.0, 1.0], [(0, 1), (1, 2)])
    cluster = unit_cluster(3)
    plan_device = np.array([2, 0, 2])
    s = PlacementState(g, cluster)
    assert device_mapping(s, plan_device) == {}
    s.select(0)
    s.place(1)  # plan label 2 -> learner device 1
    assert device_mapping(s, plan_device) == {2: 1}
    t = CanonicalPlanTeacher(
        _Fixed(Placement(device=plan_device, order=np.arange(3, dtype=np.int64)))
    )
    s.select(1)
    np.testing.assert_array_equal(t.place_actions(s), [0, 2])  # label 0: any free device
    s.place(2)
    s.select(2)
    np.testing.assert_array_equal(t.place_actions(s), [1])  # label 2 is device 1


def test_offer_adopts_only_better_plans():
    g, cluster = ffnn(), load_cluster("p100x4")
    t = CanonicalPlanTeacher(get_teacher("critical_path"))
    base = t.plan_makespan(g, cluster)
    worse = get_teacher("single_device").place(g, cluster)
    assert not t.offer(g, cluster, worse, simulate(g, cluster, worse).makespan)
    better = get_teacher("nest").place(g, cluster)
    ms = simulate(g, cluster, better).makespan
    assert ms < base and t.offer(g, cluster, better, ms)
    assert t.place(g, cluster) is better and t.plan_makespan(g, cluster) == ms


def test_make_teacher_wraps_plan_teachers_only():
    assert isinstance(make_teacher("nest", canonical=True), CanonicalPlanTeacher)
    assert not isinstance(make_teacher("nest"), CanonicalPlanTeacher)
    assert not isinstance(make_teacher("critical_path", canonical=True), CanonicalPlanTeacher)
    assert make_teacher("anneal", 3, canonical=True, kwargs={"budget": 50}).source.budget == 50


@pytest.mark.parametrize("learn", ["select", "place"])
def test_one_phase_policies_take_the_critical_path_answer_in_the_other_phase(learn):
    torch.manual_seed(0)
    g, cluster = ffnn(), load_cluster("p100x4")
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1, learn=learn))
    cp = get_teacher("critical_path")
    envs = [PlacementEnv(g, cluster) for _ in range(2)]
    recs = play_episodes(
        policy, envs, [0, 1], rng=np.random.default_rng(0), teacher=cp, record_teacher=True
    )
    fixed = 0 if learn == "place" else 1  # the step parity of the teacher's phase
    for rec, sc in zip(recs, score(policy, recs)):
        assert (sc.logp.view(-1, 2)[:, fixed] == 0).all()
        assert (sc.entropy.view(-1, 2)[:, fixed] == 0).all()
        # every action of the fixed phase lies in the critical-path tie set
        ties = rec.sel_teacher if learn == "place" else rec.plc_teacher
        acts = rec.sel_action if learn == "place" else rec.plc_action
        assert ties[np.arange(len(acts)), acts].all()
    with pytest.raises(ValueError, match="learn"):
        PolicyConfig(learn="neither")


def test_self_imitation_and_keep_best_in_a_training_run(tmp_path):
    from test_train_run import tiny_config

    from placegym.train.trainer import Trainer

    cfg = tiny_config(
        tmp_path,
        phase1={
            "updates": 3,
            "episodes_per_graph": 3,
            "lr": 0.01,
            "teacher": "anneal",
            "teacher_kwargs": {"budget": 40},
        },
        phase2={
            "updates": 4,
            "episodes_per_graph": 4,
            "lr": 0.01,
            "self_imitation": {"coef": 0.5, "teacher_kwargs": {"budget": 40}},
        },
        eval={
            "every": 2,
            "k": 2,
            "teachers": ["critical_path"],
            "gantt": False,
            "keep_best": True,
        },
    )
    trainer = Trainer(cfg)
    rows = trainer.run()
    lines = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("losses/self_imitation" in x for x in lines)
    assert (cfg.run_dir / "checkpoints" / "best.pt").is_file()
    greedy = [
        x["eval/train/greedy_ratio_geomean"]
        for x in lines
        if "eval/train/greedy_ratio_geomean" in x
    ]
    final = rows[0]["greedy"] / rows[0]["critical_path"]
    assert final == pytest.approx(min(greedy))


@pytest.mark.slow
def test_agent_report_quick(tmp_path):
    from placegym.train.experiments.report import Budget, report

    text = report(tmp_path, ("main", "ablation"), Budget.quick())
    assert "geomean" in text and "SEL-only" in text
    assert (tmp_path / "report.md").read_text() == text
    # p100x4 runs two restarts per workload (quick budget), doppler-unit-4 one
    assert "±" in text and "mean over the restarts" in text
    assert (tmp_path / "main" / "p100x4" / "ffnn" / "restart1" / "results.json").is_file()
    assert not (tmp_path / "main" / "doppler-unit-4" / "ffnn" / "restart0").exists()


def test_select_teacher_answers_sel_and_the_plan_keeps_plc():
    g, cluster = ffnn(), load_cluster("p100x4")
    cp = get_teacher("critical_path")
    teacher = make_teacher("nest", canonical=True, select="critical_path")
    assert isinstance(teacher, CanonicalPlanTeacher) and teacher.select is not None
    plain = CanonicalPlanTeacher(get_teacher("nest"))
    rng = np.random.default_rng(0)
    s = PlacementState(g, cluster)
    while not s.done:
        sel = teacher.select_actions(s)
        np.testing.assert_array_equal(sel, cp.select_actions(s))
        s.select(int(sel[rng.integers(len(sel))]))
        np.testing.assert_array_equal(teacher.place_actions(s), plain.place_actions(s))
        s.place(int(teacher.place_actions(s)[0]))
    # NEST's device map under critical-path priorities: the same devices, up to symmetry
    plan = plain.place(g, cluster)
    mapping = device_mapping(s, plan.device)
    np.testing.assert_array_equal(s.device, [mapping[p] for p in plan.device])


def test_select_teacher_names_are_validated():
    from placegym.train.config import config_from_dict

    with pytest.raises(ValueError, match=r"phase1\.select_teacher"):
        config_from_dict({"phase1": {"teacher": "nest", "select_teacher": "oracle"}})
    with pytest.raises(ValueError, match=r"phase2\.self_imitation\.select_teacher"):
        config_from_dict({"phase2": {"self_imitation": {"coef": 1.0, "select_teacher": "oracle"}}})
