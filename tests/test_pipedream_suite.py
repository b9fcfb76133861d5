"""pipedream-v0: PipeDream's published profiles as training steps whose stashed
activations bind, each certified by simulation to have a placement that fits; and the
live-memory certificate and transform behind it."""

import numpy as np
import pytest

from placegym.envs import Graph, Placement, load_cluster, simulate
from placegym.envs.analysis.memory import live_certificate, stage_placement
from placegym.envs.suites import get_suite
from placegym.envs.suites.reference import DATA
from placegym.envs.workloads.memory import fit_live
from placegym.envs.workloads.training import to_training_step

SUITE = get_suite("pipedream-v0")
PROFILES = ("alexnet", "vgg16", "resnet18", "resnet50", "inception_v3", "densenet121", "gnmt")


def test_the_seven_profiles_ship_with_their_licence_and_the_test_models_are_unseen():
    folder = DATA / "pipedream"
    assert "MIT" in (folder / "LICENSE.txt").read_text()
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(PROFILES)
    models = {s: {i.graph.name for i in SUITE.splits[s]} for s in ("train", "test")}
    assert models["train"] | models["test"] == set(PROFILES)
    assert models["train"].isdisjoint(models["test"])
    assert {i.cluster for i in SUITE.splits["test"]} == {"p100x2", "p100x4", "p100x8"}


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_instance_has_a_placement_certified_to_fit_and_live_tensors_bind(split):
    for inst in SUITE.instances(split):
        g, c = inst.graph, inst.cluster
        cert = live_certificate(g, c)
        assert cert is not None, inst.id
        assert not simulate(g, c, cert).oom, inst.id
        # where activations dwarf the weights (every model but alexnet and gnmt, whose
        # fully connected / LSTM weights dominate), every weight fits one device and
        # live tensors are most of the certificate's peak: the stash binds
        if g.out_bytes.sum() > 4 * g.param_bytes.sum():
            s = simulate(g, c, cert)
            d = int(np.argmax(s.peak_memory))
            resident = g.param_bytes[cert.device == d].sum()
            assert s.peak_memory[d] - resident > 0.5 * c.memory[d], inst.id
            assert g.param_bytes.sum() < c.memory.min(), inst.id
        else:
            assert inst.graph.name.split("-")[0] in ("alexnet", "gnmt"), inst.id
        one = Placement(device=np.zeros(g.num_nodes, dtype=np.int64), order=cert.order)
        assert simulate(g, c, one).oom, inst.id


def _chain_step() -> Graph:
    g = Graph(
        flops=[1.0] * 4,
        out_bytes=[40.0, 30.0, 20.0, 10.0],
        param_bytes=[1.0] * 4,
        edges=[[0, 1], [1, 2], [2, 3]],
        time=[1.0] * 4,
    )
    return to_training_step(g, optimizer="sgd")


def test_stage_placement_cuts_the_units_into_contiguous_runs_of_equal_bytes():
    t = _chain_step()  # units (forward v, backward 4 + v) of 40/30/20/10 B stash
    c = load_cluster("p100x2")
    p = stage_placement(t, c)
    assert p.device[:4].tolist() == [0, 0, 1, 1]
    assert (p.device[4:] == p.device[:4]).all()  # each backward with its forward
    p.check(t, c)


def test_fit_live_sets_memory_at_the_stage_peak_times_the_slack():
    t = _chain_step()
    g, c = fit_live(t, load_cluster("p100x2"), slack=1.1)
    peak = simulate(g, c, stage_placement(g, c)).peak_memory.max()
    assert c.memory.tolist() == pytest.approx([peak * 1.1] * 2)
    assert c.name == "p100x2-live1.1" and g is t
    assert live_certificate(g, c) is not None
    for bad in (0.9, float("inf"), "1.1"):
        with pytest.raises(ValueError, match=r"^slack: must be a finite number >= 1"):
            fit_live(t, load_cluster("p100x2"), slack=bad)


def test_no_certificate_where_memory_is_below_every_candidates_peak():
    t = _chain_step()
    g, c = fit_live(t, load_cluster("p100x2"), slack=1.0)
    tiny = load_cluster(
        {**c.to_dict(), "devices": [{**d, "memory": 1.0} for d in c.to_dict()["devices"]]}
    )
    assert live_certificate(g, tiny) is None


@pytest.mark.parametrize("name", ["heft", "nest", "metis", "anneal"])
def test_the_plan_teachers_and_anneal_fit_every_test_instance(name):
    """Their repair ends, where the rest fails, with contiguous stages, which spread the
    stash (``critical_path``, a step teacher, keeps no live-tensor room yet)."""
    from placegym.teachers import make_teacher

    for inst in SUITE.instances("test"):
        p = make_teacher(name, seed=0).place(inst.graph, inst.cluster)
        s = simulate(inst.graph, inst.cluster, p)
        assert not s.oom, f"{name} on {inst.id}: {s.infeasibility}"
