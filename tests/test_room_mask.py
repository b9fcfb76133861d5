"""The ``memory_mask="room"`` rule (:func:`placegym.envs.analysis.room.room_mask`):
hand-solved dead ends it avoids, the working-set bound it applies (and that the simulator
confirms), its agreement with the resident rule where memory cannot bind, its fallback,
its state under copies, and its plumbing through the environment, the agents and the
search."""

import numpy as np
import pytest
import torch
from simcases import graph, unit_cluster

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.decoder import Decoder, reserved_greedy
from placegym.agents.doppler.search import SearchConfig, policy_search
from placegym.envs import PlacementEnv, simulate
from placegym.envs.analysis.memory import packs, room_mask
from placegym.envs.core.cluster import Cluster, Device, Level
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.envs.mdp.vector import PlacementVectorEnv
from placegym.envs.suites import get_suite
from placegym.train.evaluate import AgentPlacer


def chain(params, out=None):
    """A chain 0 -> 1 -> ... with unit flops and these resident bytes."""
    n = len(params)
    return graph([1.0] * n, [(i, i + 1) for i in range(n - 1)], out_bytes=out, param_bytes=params)


def cluster(*memory):
    devs = tuple(Device(f"d{i}", flops=1.0, memory=m) for i, m in enumerate(memory))
    return Cluster(devices=devs, levels=(Level("net", 1.0, 0.0),), name="mem")


def walk(state, devices):
    """Select each node in id order (a chain's only order) and place it on ``devices``."""
    for v, d in enumerate(devices):
        state.select(v)
        state.place(d)


# ------------------------------------------------------------------ the dead end
def test_room_avoids_the_dead_end_the_resident_mask_walks_into():
    # params 5, 5, 6, 4 on two devices of 10: the only packings are {0,1} | {2,3}
    g, c = chain([5.0, 5.0, 6.0, 4.0]), unit_cluster(2, memory=10.0)
    resident = PlacementState(g, c)
    walk(resident, [0, 1])  # legal under the resident mask ...
    resident.select(2)
    assert resident.place_mask().all()  # ... and node 2 now fits nowhere: every device
    room = PlacementState(g, c, memory_mask="room")
    walk(room, [0])
    room.select(1)
    assert room.place_mask().tolist() == [True, False]  # device 1 would strand node 2
    assert room.is_legal(0) and not room.is_legal(1)
    with pytest.raises(ValueError, match="device 1 is not legal for node 1"):
        room.place(1)
    room.place(0)
    room.select(2)
    assert room.place_mask().tolist() == [False, True]  # 10 bytes placed on device 0
    room.place(1)
    room.select(3)
    assert room.place_mask().tolist() == [False, True]
    room.place(1)
    assert not simulate(g, c, room.to_placement()).oom


def test_every_room_episode_of_the_dead_end_graph_fits():
    g, c = chain([5.0, 5.0, 6.0, 4.0]), unit_cluster(2, memory=10.0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = PlacementState(g, c, memory_mask="room")
        for v in range(4):
            s.select(v)
            s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
        assert not simulate(g, c, s.to_placement()).oom


def test_room_keeps_a_group_whole_and_reserves_its_bytes():
    # nodes 0 and 2 share a group of 8 bytes: opening it on a device reserves all 8
    g = Graph(
        flops=[1.0] * 3,
        out_bytes=[0.0] * 3,
        param_bytes=[4.0, 3.0, 4.0],
        edges=[(0, 1), (1, 2)],
        group=[0, -1, 0],
    )
    c = unit_cluster(2, memory=9.0)
    s = PlacementState(g, c, memory_mask="room")
    walk(s, [0])
    s.select(1)
    # device 0 holds 4 placed + 4 still to come of the group: node 1's 3 bytes overflow it
    assert s.place_mask().tolist() == [False, True]
    s.place(1)
    s.select(2)
    assert s.place_mask().tolist() == [True, False]  # the group's device alone


# ------------------------------------------------------------------ the working set
def test_room_counts_the_working_set_and_the_simulator_agrees():
    # 8 resident bytes and a 3-byte output: peak 11 on the device that runs it
    g, c = chain([8.0], out=[3.0]), cluster(10.0, 12.0)
    assert PlacementState(g, c).place_mask(0).tolist() == [True, True]
    s = PlacementState(g, c, memory_mask="room")
    s.select(0)
    assert s.place_mask().tolist() == [False, True]
    one = Placement(device=np.array([0]), order=np.array([0]))
    assert simulate(g, c, one).oom  # device 0 was rightly masked
    two = Placement(device=np.array([1]), order=np.array([0]))
    assert float(simulate(g, c, two).peak_memory[1]) == 11.0


def test_room_falls_back_to_the_resident_rule_where_no_device_has_room():
    g, c = chain([8.0], out=[3.0]), cluster(10.0, 10.0)  # 11 > 10 everywhere
    s = PlacementState(g, c, memory_mask="room")
    s.select(0)
    assert s.place_mask().tolist() == [True, True]


def test_room_mask_function_matches_packs_device_by_device():
    rng = np.random.default_rng(3)
    for _ in range(200):
        d = int(rng.integers(2, 6))
        memory = rng.integers(8, 20, d).astype(float)
        committed = rng.integers(0, 8, d).astype(float)
        ws_max = rng.integers(0, 3, d).astype(float)
        ws = rng.integers(0, 4, d).astype(float)
        need = float(rng.integers(0, 6))
        items = np.sort(rng.integers(1, 9, int(rng.integers(0, 7))).astype(float))[::-1]
        fits = committed + need <= memory
        got = room_mask(fits, need, ws, items, memory, committed, ws_max)
        for e in range(d):
            f = np.maximum(memory - committed - ws_max, 0.0)
            own = memory[e] - committed[e] - need - max(ws_max[e], ws[e])
            f[e] = own
            want = bool(fits[e]) and own >= 0 and packs(items, f)
            assert got[e] == want, (e, memory, committed, ws_max, ws, need, items)


# ------------------------------------------------------------------ where memory cannot bind
def test_room_equals_the_resident_rule_where_memory_cannot_bind():
    inst = get_suite("memory-tight-v0").instance("moe-8x2x4-s0@p100x4-mem0.9")
    g = inst.graph
    c = unit_cluster(4, memory=1e18)
    rng = np.random.default_rng(1)
    a, b = PlacementState(g, c), PlacementState(g, c, memory_mask="room")
    while not a.done:
        v = int(rng.choice(a.frontier()))
        a.select(v), b.select(v)
        assert np.array_equal(a.place_mask(), b.place_mask())
        d = int(rng.choice(np.flatnonzero(a.place_mask())))
        a.place(d), b.place(d)


def test_a_copy_has_its_own_room_state():
    g, c = chain([5.0, 5.0, 6.0, 4.0]), unit_cluster(2, memory=10.0)
    s = PlacementState(g, c, memory_mask="room")
    walk(s, [0])
    t = s.copy()
    t.select(1)
    t.place(0)
    s.select(1)
    assert s.place_mask().tolist() == [True, False]  # the copy's placement left s alone
    t.select(2)
    assert t.place_mask().tolist() == [False, True]


def test_room_reaches_fewer_dead_ends_on_memory_tight_instances():
    # uniformly random legal episodes: resident bytes over memory, resident vs room rule
    inst = get_suite("memory-tight-v0").instance("random_dag-128-s101@p100x4-mem0.9")
    g, c = inst.graph, inst.cluster
    over = {}
    for mode in (True, "room"):
        rng = np.random.default_rng(0)
        count = 0
        for _ in range(8):
            s = PlacementState(g, c, memory_mask=mode)
            while not s.done:
                s.select(int(rng.choice(s.frontier())))
                s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
            count += bool((s.param_used > c.memory).any())
        over[mode] = count
    assert over["room"] == 0 < over[True], over


# ------------------------------------------------------------------ plumbing
@pytest.mark.parametrize("bad", ["rooms", 1, None])
def test_a_bad_memory_mask_is_refused_naming_the_field(bad):
    g, c = chain([1.0]), unit_cluster(2)
    with pytest.raises(
        ValueError,
        match="memory_mask: expected True, False, 'resident', 'room', 'live' or 'timed'",
    ):
        PlacementState(g, c, memory_mask=bad)
    with pytest.raises(ValueError, match="memory_mask"):
        PlacementEnv(g, c, memory_mask=bad)
    with pytest.raises(ValueError, match="memory_mask"):
        SearchConfig(memory_mask=bad)


def test_the_vector_env_refuses_room():
    g, c = chain([1.0, 1.0]), unit_cluster(2)
    with pytest.raises(ValueError, match="memory_mask: 'room' is not compiled"):
        PlacementVectorEnv(2, graph=g, cluster=c, memory_mask="room")
    env = PlacementVectorEnv(2, graph=g, cluster=c, memory_mask="resident")
    env.reset(seed=0)


def test_the_environment_offers_the_room_mask():
    g, c = chain([5.0, 5.0, 6.0, 4.0]), unit_cluster(2, memory=10.0)
    env = PlacementEnv(g, c, memory_mask="room")
    env.reset(seed=0)
    for action in (0, 0, 1):  # SEL 0, PLC 0, SEL 1
        _, _, _, _, info = env.step(action)
    assert env.action_masks()[:2].tolist() == [True, False]
    assert info["action_mask"][:2].tolist() == [True, False]
    _, reward, _, _, info = env.step(1)  # masked: penalised, state unchanged
    assert info["illegal_action"] and reward == -1.0


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return DopplerPolicy(PolicyConfig(hidden=16, layers=2)).eval()


def test_agents_and_search_decode_under_room(policy):
    g, c = chain([5.0, 5.0, 6.0, 4.0]), unit_cluster(2, memory=10.0)
    for p in (
        Decoder(policy, g, c, "room").greedy(),
        AgentPlacer(policy, memory_mask="room")._place(g, c, 0),
        AgentPlacer(policy, mode="best_of_k", k=4, memory_mask="room")._place(g, c, 0),
        policy_search(policy, g, c, SearchConfig(budget=20, memory_mask="room")).placement,
    ):
        assert not simulate(g, c, p).oom
    with pytest.raises(ValueError, match="memory_mask"):
        AgentPlacer(policy, memory_mask="rooms")


def test_a_policy_trained_under_room_decodes_under_it(tmp_path):
    from test_train_run import tiny_config

    from placegym.train.evaluate import load_agent, load_search_agent
    from placegym.train.trainer import Trainer

    g, c = chain([5.0, 5.0, 6.0, 4.0]), unit_cluster(2, memory=10.0)
    g.save(tmp_path / "chain.json")
    c.save(tmp_path / "mem.json")
    cfg = tiny_config(
        tmp_path,
        phases=["phase1"],
        data={
            "cluster": str(tmp_path / "mem.json"),
            "graphs": [str(tmp_path / "chain.json")],
            "memory_mask": "room",
        },
    )
    Trainer(cfg).run()
    ckpt = cfg.run_dir / "checkpoints" / "final.pt"
    agent = load_agent(ckpt)
    assert agent.memory_mask == "room"
    assert load_search_agent(ckpt, 50).config.memory_mask == "room"
    raw = Decoder(agent.policy, g, c, agent.memory_mask).greedy()
    assert not simulate(g, c, raw).oom


# ------------------------------------------------- memory reserves, the reserved greedy pass
def test_a_memory_reserve_raises_the_working_set_term():
    g, c = chain([4.0, 4.0], out=[1.0, 1.0]), cluster(9.5, 12.0)  # 10 bytes in all: binds
    s = PlacementState(g, c, memory_mask="room", memory_reserve=np.array([6.0, 0.0]))
    s.select(0)
    assert s.place_mask().tolist() == [False, True]  # 4 + 6 > 9.5 on device 0
    plain = PlacementState(g, c, memory_mask="room")
    plain.select(0)
    assert plain.place_mask().tolist() == [True, True]


@pytest.mark.parametrize(
    ("mask", "reserve", "message"),
    [
        (
            True,
            [0.0, 0.0],
            "memory_reserve: applies to memory_mask='room', 'live' or 'timed' only",
        ),
        ("room", [1.0], "memory_reserve: expected 2 finite bytes >= 0"),
        ("room", [1.0, -1.0], "memory_reserve: expected 2 finite bytes >= 0"),
        ("room", [1.0, float("nan")], "memory_reserve: expected 2 finite bytes >= 0"),
    ],
)
def test_a_bad_memory_reserve_is_refused(mask, reserve, message):
    with pytest.raises(ValueError, match=message):
        PlacementState(chain([1.0]), unit_cluster(2), memory_mask=mask, memory_reserve=reserve)


def test_the_reserved_greedy_fits_where_the_plain_and_room_passes_do_not(policy):
    inst = get_suite("memory-tight-v0").instance("llama_layer-1x16x16@v100x8-mem0.7-r1-2")
    g, c = inst.graph, inst.cluster
    assert simulate(g, c, Decoder(policy, g, c).greedy()).oom
    assert simulate(g, c, Decoder(policy, g, c, "room").greedy()).oom  # live tensors
    passes = []
    fitted = reserved_greedy(Decoder(policy, g, c), passes)
    assert not simulate(g, c, fitted).oom
    assert len(passes) >= 3 and passes[-1] is fitted  # plain, room, then with reserves
    assert all(simulate(g, c, p).oom for p in passes[:-1])
    again = reserved_greedy(Decoder(policy, g, c))
    assert np.array_equal(fitted.device, again.device)
    assert np.array_equal(fitted.order, again.order)
    # the placer returns it as it is: no repair was needed
    p = AgentPlacer(policy).place(g, c)
    assert np.array_equal(p.device, fitted.device) and np.array_equal(p.order, fitted.order)


def test_the_reserved_greedy_is_the_greedy_pass_where_it_fits(policy):
    inst = get_suite("memory-tight-v0").instance("moe-8x2x4-s0@h100-2x8-mem0.6-r1-2")
    g, c = inst.graph, inst.cluster
    plain = Decoder(policy, g, c).greedy()
    assert not simulate(g, c, plain).oom
    passes = []
    fitted = reserved_greedy(Decoder(policy, g, c), passes)
    assert len(passes) == 1
    assert np.array_equal(plain.device, fitted.device)
    assert np.array_equal(plain.order, fitted.order)


def test_the_placer_reserves_a_greedy_episode_played_in_environments(policy, monkeypatch):
    # a priced policy plays its greedy pass in environments; over memory, the placer
    # decodes it again with raised reserves, as the decoded path does
    inst = get_suite("memory-tight-v0").instance("llama_layer-1x16x16@v100x8-mem0.7-r1-2")
    g, c = inst.graph, inst.cluster
    fitted = reserved_greedy(Decoder(policy, g, c))
    placer = AgentPlacer(policy)
    monkeypatch.setattr(placer, "_decodes_greedy", lambda: False)
    p = placer._place(g, c, 0)
    assert np.array_equal(p.device, fitted.device) and np.array_equal(p.order, fitted.order)
