"""Profiled kernel costs: signatures, the cluster's profile, and every consumer of
durations (simulator, reference, batch, analysis, teachers, environment) using them."""

import json

import numpy as np
import pytest

from placegym.envs import Cluster, Device, Level, Placement, load_cluster, simulate
from placegym.envs.analysis.levels import b_level, durations_on
from placegym.envs.core.costs import kernel_signature, node_durations, profiled_seconds, signatures
from placegym.envs.core.specs import GraphBuilder
from placegym.envs.sim.oracle import simulate_oracle
from placegym.envs.sim.simulator import simulate_batch
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher, list_teachers


def chain(length: int = 2, side: int = 32):
    """An input then ``length`` matmuls by a resident weight, all of one signature."""
    b = GraphBuilder()
    x = b.input([side, side])
    shape = [side, side]
    for _ in range(length):
        x = b.einsum("ik,kj->ij", [{"node": x}, {"param": shape}], shape, 0, [shape] * 2)
    return b.build("chain")


def two_kinds(profile, *, launch=(0.5, 0.0), latency=2.0, bandwidth=4096.0, count=2, flops=1e3):
    """Devices alternating kinds "fast" and "slow" (no memory roofline), one level."""
    devs = tuple(
        Device(f"d{i}", flops=flops, memory=1e12, launch_overhead=launch[i % 2], kind=k)
        for i, k in enumerate(["fast", "slow"] * (count // 2))
    )
    return Cluster(devs, (Level("l0", bandwidth, latency),), name="two-kinds", profile=profile)


def test_signatures_drop_node_ids_and_keep_shapes():
    g = chain(3)
    sig = signatures(g)
    assert sig[1] == sig[2] == sig[3] != sig[0]
    assert json.loads(sig[1]) == {
        "args": [["node", [32, 32]], ["param", [32, 32]]],
        "dtype": "float32",
        "equation": "ik,kj->ij",
        "kind": "einsum",
        "shape": [32, 32],
    }
    assert kernel_signature(chain(1, side=64), 1) != sig[1]
    from simcases import graph

    assert signatures(graph([1.0, 1.0], [[0, 1]])) == [None, None]  # no specs: roofline


def test_profiled_durations_replace_the_roofline_exactly():
    """Input on fast d0: roofline 0 (no FLOP, no memory term) + launch 0.5 -> 0.5; a 4096 B
    transfer takes 2 + 1 = 3 -> 3.5; matmul on slow d1: profiled 3 + launch 0 -> 6.5; back
    to d0 at 9.5; matmul on fast: profiled 1 + 0.5 -> 11."""
    g = chain(2)
    mm = signatures(g)[1]
    c = two_kinds({"fast": {mm: 1.0}, "slow": {mm: 3.0}})
    p = Placement(device=np.array([0, 1, 0]), order=np.array([0, 1, 2]))
    s = simulate(g, c, p)
    np.testing.assert_array_equal(s.start, [0.0, 3.5, 9.5])
    np.testing.assert_array_equal(s.finish, [0.5, 6.5, 11.0])
    assert s.makespan == 11.0
    assert simulate_oracle(g, c, p).makespan == 11.0
    # a kind without a profile, or a kernel not in it, falls back to the roofline
    plain = simulate(g, two_kinds({"fast": {mm: 1.0}}), p)
    assert plain.duration[1] == pytest.approx(g.flops[1] / 1e3)
    np.testing.assert_allclose(durations_on(g, c)[1:], [[1.5, 3.0], [1.5, 3.0]])


def test_noise_scales_the_profiled_term_and_all_simulators_agree():
    g = make_graph("ffnn")
    sig = signatures(g)
    rng = np.random.default_rng(0)
    kinds = sorted(set(sig))
    # half of the kernels profiled on "fast", all on "slow"
    profile = {
        "fast": {s: float(rng.uniform(1e-4, 1e-3)) for s in kinds[::2]},
        "slow": {s: float(rng.uniform(1e-4, 1e-3)) for s in kinds},
    }
    c = two_kinds(profile, launch=(1e-5, 2e-5), latency=1e-5, bandwidth=1e10, count=4, flops=1e12)
    devs = rng.integers(0, 4, (5, g.num_nodes))
    orders = np.tile(g.topological_order, (5, 1))
    batch = simulate_batch(g, c, devs, orders, noise=0.2, rng=np.random.default_rng(1))
    seq = np.random.default_rng(1)
    for i in range(5):
        p = Placement(device=devs[i], order=orders[i])
        fast = simulate(g, c, p, noise=0.2, rng=seq)
        ref = simulate_oracle(g, c, p, noise=0.2, rng=np.random.default_rng(1))
        if i == 0:
            assert ref.makespan == pytest.approx(fast.makespan, rel=1e-12)
        assert batch.makespan[i] == fast.makespan  # bit for bit
    exact = simulate(g, c, Placement(device=devs[0], order=orders[0]))
    np.testing.assert_allclose(
        exact.duration, node_durations(g, c, np.arange(g.num_nodes), devs[0]), rtol=1e-9
    )


def test_costs_scale_with_classes_not_devices():
    """A 1024-device cluster of two kinds costs an (n, 2) table, not n x 1024."""
    g = chain(4)
    mm = signatures(g)[1]
    c = two_kinds({"fast": {mm: 1.0}, "slow": {mm: 2.0}}, count=1024)
    assert profiled_seconds(g, c).shape == (g.num_nodes, 2)
    assert c.profile_class.tolist()[:4] == [0, 1, 0, 1]
    assert profiled_seconds(g, get_preset_cluster()).size == 0


def get_preset_cluster():
    return load_cluster("p100x4")


def test_profile_round_trips_and_bad_values_name_the_field(tmp_path):
    g = chain(1)
    mm = signatures(g)[1]
    c = two_kinds({"fast": {mm: 1.5}, "slow": {mm: 2.5}})
    c.save(tmp_path / "c.json")
    back = load_cluster(tmp_path / "c.json")
    assert back.profile == c.profile and [d.kind for d in back.devices] == ["fast", "slow"]
    p = Placement(device=np.array([0, 1]), order=np.array([0, 1]))
    assert simulate(g, back, p).makespan == simulate(g, c, p).makespan
    doc = c.to_dict()
    doc["profile"]["slow"][mm] = -1
    with pytest.raises(ValueError, match=r"profile\['slow'\]\['\{.*'\]: must be >= 0, got -1"):
        load_cluster(doc)
    doc = c.to_dict()
    doc["devices"][1]["kind"] = ""
    with pytest.raises(ValueError, match=r"devices\[1\]\.kind: expected a non-empty string"):
        load_cluster(doc)
    doc = c.to_dict()
    doc["profile"] = [1, 2]
    with pytest.raises(ValueError, match=r"profile: expected an object, got \[1, 2\]"):
        load_cluster(doc)


def test_teachers_and_levels_see_the_profile():
    """By FLOP/s the two kinds are equal; the profile makes "slow" 10x slower on the
    matmuls, so the critical-path and HEFT teachers keep the chain on fast devices and
    single_device picks a fast one."""
    g = chain(4)
    mm = signatures(g)[1]
    c = two_kinds({"fast": {mm: 1.0}, "slow": {mm: 10.0}}, launch=(0.0, 0.0), count=4)
    fast = {0, 2}
    for name in ("critical_path", "heft", "single_device"):
        p = get_teacher(name).place(g, c)
        assert set(p.device[1:].tolist()) <= fast, name
        assert simulate(g, c, p).makespan <= 4 * 1.0 + 3 * 3.0, name
    np.testing.assert_allclose(b_level(g, c)[-1], (1.0 + 10.0) / 2)
    for name in list_teachers():  # every teacher places on a profiled cluster
        kw = {"budget": 50} if name in ("anneal", "device_anneal") else {}
        p = get_teacher(name, **kw).place(g, c)
        assert np.isfinite(simulate(g, c, p).makespan), name
    opt = get_teacher("optimal").place(g, c)
    assert simulate(g, c, opt).makespan == 4.0  # the whole chain on one fast device


def test_environment_rewards_use_the_profile():
    import gymnasium as gym

    import placegym.envs  # noqa: F401

    g = chain(3)
    mm = signatures(g)[1]
    c = two_kinds({"fast": {mm: 1.0}, "slow": {mm: 10.0}}, count=2)
    env = gym.make("placegym/Placement-v0", graph=g, cluster=c)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        obs, reward, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    p = Placement(device=np.asarray(info["placement"]), order=np.asarray(info["order"]))
    assert info["makespan"] == simulate(g, c, p).makespan


def test_lower_bounds_and_ccr_rescaling_hold_with_profiles():
    """Profiled kernels 1000x faster than their roofline: the FLOP bound must not count
    them, and rescaling to a CCR is still exact (profiled times ignore tensor bytes)."""
    from placegym.envs.analysis.bounds import lower_bound
    from placegym.envs.analysis.ccr import ccr, scale_to_ccr

    g = make_graph("ffnn")
    sig = signatures(g)
    roof = two_kinds({}, launch=(0.0, 0.0), bandwidth=1e9, latency=0.0, count=4, flops=1e9)
    fast = {s: float(g.flops[sig.index(s)] / 1e12) for s in set(sig) if "einsum" in s}
    c = two_kinds(
        {"fast": fast, "slow": fast},
        launch=(0.0, 0.0),
        bandwidth=1e9,
        latency=0.0,
        count=4,
        flops=1e9,
    )
    assert lower_bound(g, c).value < lower_bound(g, roof).value / 100
    rng = np.random.default_rng(0)
    for _ in range(5):
        p = Placement(device=rng.integers(0, 4, g.num_nodes), order=g.topological_order.copy())
        assert lower_bound(g, c).value <= simulate(g, c, p).makespan
    half = {"fast": dict(sorted(fast.items())[::2]), "slow": fast}
    assert 0 < len(half["fast"]) < len(fast)
    mixed = two_kinds(half, launch=(1e-6, 0.0), bandwidth=1e9, latency=1e-6, count=4, flops=1e9)
    for target in (0.5, 2.0):
        assert ccr(scale_to_ccr(g, mixed, target), mixed) == pytest.approx(target, rel=1e-9)


def test_b_levels_are_computed_once_and_each_call_gets_its_own_copy():
    from placegym.envs import get_preset

    g, c = make_graph("random_dag", nodes=30, seed=1), get_preset("v100x8")
    first = b_level(g, c)
    first[:] = -1.0  # a caller's copy: the next call is not changed
    again = b_level(g, c)
    assert (again > 0).all() and again is not first
