"""The environment's backend objects (placegym.envs.mdp.backends) and its public read-only
views: a custom backend is used, the default is simulated, bad values name ``backend``;
``PlacementState.frontier_mask`` cannot be written; the views that replace private
reach-ins."""

import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from simcases import unit_cluster

import placegym.envs  # registers the ids
from placegym.envs import PlacementEnv, Schedule
from placegym.envs.mdp.backends import Backend, SimulatedBackend, TorchBackend, make_backend
from placegym.envs.mdp.reward import reference_makespan, terminal_reward
from placegym.envs.mdp.state import PlacementState
from placegym.envs.mdp.vector import PlacementVectorEnv
from placegym.envs.workloads import make_graph


class Doubled(Backend):
    """A backend of its own: the simulated makespan times 2 (T_ref as simulated)."""

    def __init__(self) -> None:
        self.calls = 0

    def reference_makespan(self, graph, cluster, placer, *, dispatch="priority"):
        return reference_makespan(graph, cluster, placer, dispatch)

    def makespan(self, graph, cluster, placement, schedule):
        self.calls += 1
        return 2 * schedule.makespan, {"doubled": True}


def episode(env, seed=0):
    """A masked random episode (actions drawn with ``default_rng(seed)``); last step."""
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while True:
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return reward, info


def test_a_custom_backend_prices_the_placement():
    backend = Doubled()
    env = PlacementEnv("ffnn", backend=backend)
    assert env.backend is backend
    plain_reward, plain = episode(PlacementEnv("ffnn"))
    reward, info = episode(env)
    assert backend.calls == 1 and info["doubled"] is True
    assert info["makespan"] == 2 * plain["makespan"]
    assert info["reference_makespan"] == plain["reference_makespan"]
    assert reward == terminal_reward("relative", info["makespan"], info["reference_makespan"])
    assert reward < plain_reward
    np.testing.assert_array_equal(info["placement"], plain["placement"])
    assert env.schedule is not None and env.schedule.makespan == plain["makespan"]


def test_a_simulated_backend_subclass_keeps_the_rest():
    class Tripled(SimulatedBackend):
        def makespan(self, graph, cluster, placement, schedule):
            t, extra = super().makespan(graph, cluster, placement, schedule)
            return 3 * t, extra

    _, plain = episode(PlacementEnv("chainmm", noise=0.1))
    _, info = episode(PlacementEnv("chainmm", noise=0.1, backend=Tripled()))
    assert info["makespan"] == pytest.approx(3 * plain["makespan"], rel=1e-12)
    assert "doubled" not in info and "simulated_makespan" not in info


def test_the_default_backend_is_the_simulator():
    env = PlacementEnv("ffnn")
    assert type(env.backend) is SimulatedBackend and env.backend.deterministic
    assert type(PlacementEnv("ffnn", backend="sim").backend) is SimulatedBackend
    assert env.cluster.name == "p100x4"
    r1, a = episode(env, seed=3)
    r2, b = episode(PlacementEnv("ffnn", backend=SimulatedBackend()), seed=3)
    assert r1 == r2 and a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert isinstance(make_backend("torch"), TorchBackend)


@pytest.mark.parametrize("bad", ["gpu", "SIM", 3, None, TorchBackend, object()])
def test_a_bad_backend_is_named(bad):
    with pytest.raises(ValueError, match=r"^backend: expected 'sim', 'torch' or a Backend"):
        PlacementEnv("ffnn", backend=bad)


def test_the_torch_backend_object(monkeypatch):
    from placegym.envs.real import calibrate as calibration

    calls = []

    def fake_calibrate(devices, graphs=()):
        calls.append((devices, [g.name for g in graphs]))
        return unit_cluster(2)

    monkeypatch.setattr(calibration, "calibrate", fake_calibrate)
    backend = TorchBackend("cpu#2", scale=8, repeats=1)
    assert not backend.deterministic and backend.num_devices == 2
    ffnn = make_graph("ffnn")
    env = PlacementEnv(ffnn, backend=backend)  # cluster None: calibrated
    [(devices, names)] = calls
    assert devices == "cpu#2" and len(names) == 1 and names[0].endswith("/scale8")
    assert env.cluster.num_devices == 2 and env.source.graphs[0].name == names[0]
    other = PlacementEnv(ffnn, backend=backend, cluster="calibrate")
    assert len(calls) == 1  # calibrated once per backend
    assert other.source.graphs[0] is env.source.graphs[0]  # one scaled graph, shared
    with pytest.raises(
        ValueError, match=r"devices: 'cpu#2' has 2 devices but cluster 'p100x4' has 4"
    ):
        PlacementEnv("ffnn", "p100x4", backend=backend)
    with pytest.raises(ValueError, match=r"scale: must be a number > 0, got 0"):
        PlacementEnv("ffnn", backend=TorchBackend(scale=0))


def test_the_real_ids_take_devices_scale_repeats(monkeypatch):
    from placegym.envs.real import calibrate as calibration

    monkeypatch.setattr(calibration, "calibrate", lambda devices, graphs=(): unit_cluster(3))
    env = gym.make("placegym/Real-v0", graph="ffnn", devices="cpu#3", scale=4, repeats=2)
    backend = env.unwrapped.backend
    assert isinstance(backend, TorchBackend) and (backend.devices, backend.scale) == ("cpu#3", 4)
    assert backend.repeats == 2 and isinstance(env.unwrapped, PlacementEnv)
    assert gym.spec("placegym/Real-v0").nondeterministic
    with pytest.raises(ValueError, match=r"backend: the real ids build TorchBackend"):
        gym.make("placegym/Real-v0", backend=SimulatedBackend())
    with pytest.raises(TypeError, match=r"devices"):  # a keyword of the real ids only
        PlacementEnv("ffnn", devices="cpu#2")


def test_the_vector_env_takes_only_the_plain_simulator():
    venv = PlacementVectorEnv(2, graph="chainmm", backend=SimulatedBackend())
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"backend: the vector environment supports only"):
        PlacementVectorEnv(2, graph="chainmm", backend=Doubled())


def test_the_low_level_backend_knows_no_environment():
    backend_dir = Path(placegym.envs.__file__).parent / "real"
    paths = sorted(backend_dir.glob("*.py"))
    assert len(paths) > 5
    for path in paths:
        text = path.read_text()
        for name in ("placegym.envs.mdp", "placegym.envs.suites"):
            assert name not in text, f"{path.name} imports {name}"


# ------------------------------------------------------------------ read-only views
def test_frontier_mask_is_a_read_only_live_view():
    g = make_graph("ffnn")
    state = PlacementState(g, unit_cluster(2))
    mask = state.frontier_mask
    np.testing.assert_array_equal(mask, g.in_degree == 0)
    with pytest.raises(ValueError, match="read-only"):
        mask[0] = False
    with pytest.raises(ValueError, match="read-only"):
        state.frontier_mask[:] = True
    v = int(np.flatnonzero(mask)[0])
    state.select(v, checked=False)
    assert not mask[v] and not state.frontier_mask[v]  # a view: no copy
    np.testing.assert_array_equal(state.select_mask(), np.zeros(g.num_nodes, bool))
    state.place(0, checked=False)
    np.testing.assert_array_equal(state.frontier_mask, state.select_mask())
    for other in (state.copy(), pickle.loads(pickle.dumps(state))):
        assert not np.shares_memory(other.frontier_mask, state.frontier_mask)
        np.testing.assert_array_equal(other.frontier_mask, state.frontier_mask)
        u = int(np.flatnonzero(other.frontier_mask)[0])
        other.select(u)
        assert not other.frontier_mask[u] and state.frontier_mask[u]  # its own, live


def test_unchecked_transitions_match_the_checked_ones():
    g, c = make_graph("chainmm"), unit_cluster(3)
    fast, slow = PlacementState(g, c), PlacementState(g, c)
    rng = np.random.default_rng(1)
    while not slow.done:
        v = int(rng.choice(slow.frontier()))
        slow.select(v)
        fast.select(v, checked=False)
        d = int(rng.integers(3))
        slow.place(d)
        fast.place(d, checked=False)
    np.testing.assert_array_equal(fast.device, slow.device)
    np.testing.assert_array_equal(fast.est_finish, slow.est_finish)
    assert fast.order == slow.order
    inner = int(np.flatnonzero(g.in_degree > 0)[0])
    with pytest.raises(ValueError, match=rf"select: node {inner} is not in the frontier"):
        PlacementState(g, c).select(inner)


def test_public_views_of_the_env():
    env = PlacementEnv("ffnn", reward="nest")
    assert env.num_actions == env.action_space.n and env.schedule is None
    assert env.potential is None
    with pytest.raises(gym.error.ResetNeeded, match=r"time_unit: call reset\(\) first"):
        _ = env.time_unit
    _, info = env.reset(seed=0)
    assert env.potential is not None and env.potential.cost() == 0.0
    builder, ref = env.prepare(env.graph)
    assert ref == env.reference_makespan and env.time_unit == builder.cp > 0
    big = make_graph("llama_layer")
    with pytest.raises(ValueError, match=r"graph 'llama_layer\S*' has \d+ nodes .*max_nodes="):
        env.check_size(big)
    episode(env)
    assert isinstance(env.schedule, Schedule)
    env.reset(seed=1)
    assert env.schedule is None
