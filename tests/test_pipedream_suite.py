"""pipedream-v0: PipeDream's published profiles as training steps whose stashed
activations bind, each certified by simulation to have a placement that fits; its
recompute variants, where only recomputation fits; and the certificates and transforms
behind them."""

import numpy as np
import pytest

from placegym.envs import Graph, Placement, load_cluster, simulate
from placegym.envs.analysis.memory import (
    checkpoints,
    fit_certificate,
    fit_resident,
    live_certificate,
    recompute_certificate,
    recompute_placement,
    stage_placement,
    stash_bound,
    stash_infeasibility,
    units,
)
from placegym.envs.core.recompute import recomputable
from placegym.envs.sim.oracle import simulate_oracle
from placegym.envs.suites import get_suite
from placegym.envs.suites.reference import DATA, Reference, load_references
from placegym.envs.workloads.memory import fit_live, fit_recompute
from placegym.envs.workloads.training import to_training_step

SUITE = get_suite("pipedream-v0")
PROFILES = ("alexnet", "vgg16", "resnet18", "resnet50", "inception_v3", "densenet121", "gnmt")


def _live(split):
    return [i for i in SUITE.instances(split) if i.spec.graph.recompute is None]


def _again(split=None):
    return [i for i in SUITE.instances(split) if i.spec.graph.recompute is not None]


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
    for inst in _live(split):
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

    for inst in _live("test"):
        p = make_teacher(name, seed=0).place(inst.graph, inst.cluster)
        s = simulate(inst.graph, inst.cluster, p)
        assert not s.oom, f"{name} on {inst.id}: {s.infeasibility}"


# ---------------------------------------------------------------- recompute variants
def test_the_recompute_variants_and_their_ids():
    splits = SUITE.splits
    ids = {s: [i.id for i in splits[s] if i.graph.recompute is not None] for s in splits}
    assert ids == {
        "train": [
            "vgg16-train@p100x2-recompute1.1",
            "resnet50-train@p100x2-recompute1.1",
            "resnet50-train@p100x4-recompute1.1",
        ],
        "test": [
            "resnet18-train@p100x2-recompute1.1",
            "inception_v3-train@p100x2-recompute1.1",
            "inception_v3-train@p100x4-recompute1.1",
            "densenet121-train@p100x2-recompute1.1",
            "densenet121-train@p100x4-recompute1.1",
            "densenet121-train@p100x8-recompute1.1",
        ],
    }


def test_only_recomputation_fits_every_recompute_variant():
    """Proven, not just certified against candidates: the stash bound of every placement
    without recompute exceeds the total memory (by 5 % at least), while contiguous stages
    checkpointed fit with 10 % to spare."""
    for inst in _again():
        g, c = inst.graph, inst.cluster
        assert stash_infeasibility(g, c) is not None, inst.id
        assert stash_bound(g, c) > 1.05 * c.memory.sum(), inst.id
        cert = recompute_certificate(g, c)
        assert cert is not None and cert.recompute.size, inst.id
        s = simulate(g, c, cert)
        assert s.peak_memory.max() * 1.1 == pytest.approx(c.memory.max(), rel=1e-12), inst.id
        found = fit_certificate(g, c)
        assert found is not None and found[1].recompute.size, inst.id
        assert live_certificate(g, c) is None, inst.id
        # the candidates without recompute are over memory, as the bound says
        for p in (stage_placement(g, c), fit_resident(g, c)):
            assert p is None or simulate(g, c, p).oom, inst.id


@pytest.mark.parametrize("name", ["heft", "metis", "nest", "anneal"])
def test_the_teachers_fit_a_recompute_variant_only_by_recomputing(name):
    """No placement without recompute fits there (the stash bound); the teachers fit by
    recomputing: the repair's checkpointed placements, NEST's recompute relief, and
    anneal carrying its start's recompute set (at 300 calls here: each candidate with a
    recompute set is simulated on its own)."""
    from placegym.teachers import get_teacher

    for inst in _again("test"):
        kwargs = {"budget": 300} if name == "anneal" else {}
        p = get_teacher(name, **kwargs).place(inst.graph, inst.cluster)
        assert p.recompute.size, f"{name} on {inst.id}"
        assert not simulate(inst.graph, inst.cluster, p).oom, f"{name} on {inst.id}"


def test_recomputing_every_node_lowers_no_peak_but_checkpoints_do():
    """A stage recomputed whole is rebuilt at once when the backward pass reaches it, so
    its whole stash is live again; checkpoints rebuild one segment at a time."""
    inst = SUITE.instance("resnet50-train@p100x4-live1.05")
    g, c = inst.graph, inst.cluster
    stages = stage_placement(g, c)
    every = Placement(stages.device, stages.order, np.flatnonzero(recomputable(g)))
    peak = simulate(g, c, stages).peak_memory.max()
    assert simulate(g, c, every).peak_memory.max() == pytest.approx(peak, rel=1e-12)
    checkpointed = recompute_placement(g, c)
    assert checkpointed is not None and (checkpointed.device == stages.device).all()
    assert simulate(g, c, checkpointed).peak_memory.max() < 0.5 * peak


@pytest.mark.parametrize("seed", range(3))
def test_the_stash_bound_holds_for_every_placement_without_recompute(seed):
    """Random placements (groups whole), random orders, noise, fifo and the oracle: the
    devices' peaks always sum to at least the stash bound."""
    rng = np.random.default_rng(seed)
    inst = SUITE.instance("resnet18-train@p100x2-recompute1.1")
    cases = [(inst.graph, inst.cluster), (_chain_step(), load_cluster("p100x2"))]
    # the chain: 4 x 2 resident bytes, the stash 40 + 30 + 20 + 10, the loss turn's 20
    assert stash_bound(cases[1][0], cases[1][1]) == 8 + 100 + 20
    for g, c in cases:
        bound = stash_bound(g, c)
        u = units(g)
        assert bound > g.param_bytes.sum()
        for _ in range(20):
            device = rng.integers(0, c.num_devices, u.count)[u.of]
            p = Placement(device=device, order=rng.permutation(g.num_nodes))
            s = simulate(g, c, p, noise=0.3, rng=int(rng.integers(1 << 30)), dispatch="fifo")
            assert s.peak_memory.sum() >= bound * (1 - 1e-12)
            assert simulate_oracle(g, c, p).peak_memory.sum() >= bound * (1 - 1e-12)


def test_fit_recompute_refuses_what_it_cannot_prove():
    inst = SUITE.instance("resnet50-train@p100x4-recompute1.1")
    g, c = inst.graph, load_cluster("p100x4")
    g2, tight = fit_recompute(g, c, slack=1.1)
    assert g2 is g and tight.name == "p100x4-recompute1.1"
    assert tight.memory.tolist() == inst.cluster.memory.tolist()
    with pytest.raises(ValueError, match=r"^slack: 2 times the recompute certificate's peak"):
        fit_recompute(g, c, slack=2.0)
    with pytest.raises(ValueError, match=r"^slack: must be a finite number >= 1"):
        fit_recompute(g, c, slack=0.5)
    forward = Graph(flops=[1.0] * 2, out_bytes=[1.0] * 2, edges=[[0, 1]], time=[1.0] * 2)
    with pytest.raises(ValueError, match=r"^graph: .* has no node that may be recomputed"):
        fit_recompute(forward, c, slack=1.1)
    assert stash_bound(forward, c) == 0.0 and recompute_placement(forward, c) is None


def test_recompute_best_knowns_keep_their_recompute_set():
    refs = load_references("pipedream-v0")
    for inst in _again():
        ref = refs[inst.id]
        assert ref.best_placement.recompute.size, inst.id
        again = Reference.from_dict(ref.to_dict(), "x")
        assert again.best_placement.recompute.tolist() == ref.best_placement.recompute.tolist()
        assert not simulate(inst.graph, inst.cluster, again.best_placement).oom


@pytest.mark.parametrize("seed", range(2))
def test_the_stash_bound_with_a_recompute_set_drops_its_stashes_and_still_holds(seed):
    """With a recompute set the bound counts only the stashes kept, and every placement
    carrying that set still peaks at least at it in sum."""
    g, c = _chain_step(), load_cluster("p100x2")
    rc = np.array([0, 1])  # 40 and 30 B of stash dropped: 20 + 10 kept
    assert stash_bound(g, c, rc) == 8 + 30 + 20
    assert stash_bound(g, c, np.zeros(0, dtype=np.int64)) == stash_bound(g, c)
    rng = np.random.default_rng(seed)
    inst = SUITE.instance("resnet18-train@p100x2-recompute1.1")
    g, c = inst.graph, inst.cluster
    assert "without recompute no placement fits" in stash_infeasibility(g, c)
    u = units(g)
    for k in (2, 4):
        rc = checkpoints(g, k)
        bound = stash_bound(g, c, rc)
        assert g.param_bytes.sum() < bound < stash_bound(g, c)
        for _ in range(5):
            device = rng.integers(0, c.num_devices, u.count)[u.of]
            p = Placement(device=device, order=rng.permutation(g.num_nodes), recompute=rc)
            s = simulate(g, c, p, noise=0.3, rng=int(rng.integers(1 << 30)))
            assert s.peak_memory.sum() >= bound * (1 - 1e-12)
