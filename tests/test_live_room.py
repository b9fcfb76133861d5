"""The teachers' live-memory room: the live bytes of a partial schedule, checked by hand,
its compiled twin, recomputation where only it fits, and the placements it makes."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import Placement, simulate
from placegym.envs.analysis.memory import (
    CHECKPOINT_EVERY,
    Room,
    checkpoints,
    fit_certificate,
    memory_may_bind,
    stash_infeasibility,
)
from placegym.envs.mdp.state import PlacementState, mask_recompute
from placegym.envs.suites import get_suite
from placegym.envs.workloads.training import to_training_step
from placegym.teachers import get_teacher, make_teacher
from placegym.teachers._memory import MAX_REPAIR_CALLS, make_feasible, reserve_room
from placegym.teachers.anneal import anneal

INF = 1e18


def chain_step():
    """A 3-node forward chain 0 -> 1 -> 2 made into one training step (nodes 3, 4, 5 are
    the backward nodes of 0, 1, 2; groups {v, v + 3})."""
    fwd = graph([1.0, 1.0, 1.0], [[0, 1], [1, 2]], out_bytes=[10.0, 20.0, 30.0])
    return to_training_step(fwd, optimizer=0)


def pipedream(iid: str):
    suite = get_suite("pipedream-v0")
    for split in ("train", "test"):
        for inst in suite.instances(split):
            if inst.id == iid:
                return inst.graph, inst.cluster
    raise KeyError(iid)


def test_held_bytes_are_the_outputs_awaiting_a_consumer():
    # 0 -> 1, 0 -> 2, 1 -> 3: with 0 and 1 placed, 0 awaits 2 and 1 awaits 3
    g = graph([1.0] * 4, [[0, 1], [0, 2], [1, 3]], out_bytes=[5.0, 7.0, 11.0, 13.0])
    c = unit_cluster(2, memory=100.0)
    room = Room(g, c, np.zeros(2), live=True)
    device = np.array([0, 1, -1, -1])
    assert room.held(device).tolist() == [5.0, 7.0]
    device = np.array([0, 1, 0, -1])  # 0's consumers are all placed: it is freed
    assert room.held(device).tolist() == [0.0, 7.0]
    # node 3's working set: its output, plus node 1's bytes where it is not local
    assert room.working(device, 3).tolist() == [13.0 + 7.0, 13.0]


def test_a_training_step_holds_its_stash_and_counts_the_backward_working_set():
    g = chain_step()
    n = g.num_nodes
    assert n == 6 and g.groups  # forward 0..2, backward 3..5
    c = unit_cluster(2, memory=INF)
    room = Room(g, c, np.zeros(2), live=True)
    # forward placed on device 0: every forward output is stashed for its backward node
    device = np.array([0, 0, 0, -1, -1, -1])
    assert room.held(device).tolist() == [60.0, 0.0]
    # backward node 4 (of 1) reads its stash (1's output, inside its unit) and the
    # gradient of 5 (outside): its working set to come is its output plus that gradient
    ptr, idx = g.producer_csr
    assert sorted(idx[ptr[4] : ptr[5]].tolist()) == [1, 5]
    assert room.future[4] == g.out_bytes[4] + g.out_bytes[5] == 30.0
    # recomputing node 1 drops its stash edge 1 -> 4: held no longer counts it once its
    # forward consumer 2 is placed, and 4's working set counts the rebuilt output
    rc = Room(g, c, np.zeros(2), live=True, recompute=np.array([1]))
    assert rc.held(device).tolist() == [40.0, 0.0]
    assert rc.future[4] == room.future[4] + g.out_bytes[1]


def test_the_live_room_refuses_a_device_whose_stash_would_overflow():
    g = chain_step()
    # room for every resident byte (none) and 40 bytes of tensors per device
    c = unit_cluster(2, memory=40.0)
    state = PlacementState(g, c)
    room = Room(g, c, np.zeros(2), live=True)
    state.select(0)
    assert room.checker(state.device, state.param_used, 0)(0)
    state.place(0)
    state.select(1)
    fits = room.checker(state.device, state.param_used, 1)
    # device 0 holds 0's output (10) and keeps room for backward node 3 to come (its
    # output 0 + the gradient of 4, 10): 20 left; node 1 opens {1, 4} and 4's working
    # set is 30 (its output 10 + the gradient of 5, 20) > 20. Device 1 has 40 for it.
    assert not fits(0)
    assert fits(1)
    plain = Room(g, c, np.zeros(2))  # resident bytes only: everything fits anywhere
    assert plain.checker(state.device, state.param_used, 1)(0)


@pytest.mark.parametrize(
    "iid",
    ["alexnet-train@p100x4-live1.05", "vgg16-train@p100x4-live1.25", "gnmt-train@p100x8-live1.05"],
)
def test_rule_rollouts_fit_with_the_live_room_where_the_plain_ones_do_not(iid):
    g, c = pipedream(iid)
    for name in ("critical_path", "heft_rule"):
        t = get_teacher(name)
        room = t.room(g, c)
        assert room is not None and room.live
        # the rollout under the room fits by itself: no repair was needed
        p = t._roll(g, c, room)
        assert not simulate(g, c, p).oom, (name, iid)


def test_a_training_step_that_needs_recomputation_gets_a_checkpointed_room():
    g, c = pipedream("vgg16-train@p100x2-recompute1.1")
    assert stash_infeasibility(g, c) is not None
    t = get_teacher("critical_path")
    room = t.room(g, c)
    assert room is not None and room.recompute.size
    k = next(k for k in range(2, 13) if np.array_equal(checkpoints(g, k), room.recompute))
    assert k >= 2
    p = t.place(g, c)
    assert np.array_equal(p.recompute, room.recompute)
    assert not simulate(g, c, p).oom


def test_the_compiled_completions_keep_the_live_room_with_recomputation():
    from test_rule_kernel import check_state, random_state

    g, c = pipedream("vgg16-train@p100x2-recompute1.1")
    rng = np.random.default_rng(5)
    for base in ("critical_path", "heft_rule"):
        assert get_teacher(base).room(g, c).recompute.size
        for steps in (0, 9, 40, 70):
            check_state(random_state(g, c, rng, steps), base)


def test_repair_recomputes_where_nothing_else_fits():
    g, c = pipedream("resnet18-train@p100x2-recompute1.1")
    calls = []

    def sim(graph, cluster, placement):
        calls.append(1)
        return simulate(graph, cluster, placement)

    bad = Placement(np.zeros(g.num_nodes, dtype=np.int64), g.topological_order)
    fixed = make_feasible(g, c, bad, sim)
    assert fixed.recompute.size and not simulate(g, c, fixed).oom
    assert len(calls) <= MAX_REPAIR_CALLS
    name, cert = fit_certificate(g, c)
    assert "recomputing" in name and cert.recompute.size


def test_anneal_carries_the_recompute_set_of_its_start():
    g, c = pipedream("vgg16-train@p100x2-recompute1.1")
    start = make_teacher("heft").place(g, c)
    assert start.recompute.size and not simulate(g, c, start).oom
    plain = Placement(start.device, start.order)  # the same devices without recompute
    assert simulate(g, c, plain).oom
    result = anneal(g, c, [plain, start], budget=60, seed=0)
    assert result.feasible and np.array_equal(result.placement.recompute, start.recompute)
    s = simulate(g, c, result.placement)
    assert not s.oom and s.makespan == pytest.approx(result.makespan)
    assert result.makespan <= simulate(g, c, start).makespan


def test_where_memory_does_not_bind_no_room_is_built():
    g, c = pipedream("resnet18-train@p100x4-live1.05")
    roomy = replace(c, devices=tuple(replace(d, memory=1e15) for d in c.devices))
    assert not memory_may_bind(g, roomy)
    calls = []
    assert reserve_room(g, roomy, lambda room: calls.append(room)) is None
    assert calls == []  # not even the rule's own placement was asked for


def _random_states(g, c, rng, count):
    """States of random rollouts (legal devices under the resident mask) with a node
    awaiting a device."""
    for _ in range(count):
        s = PlacementState(g, c)
        steps = int(rng.integers(0, g.num_nodes))
        for _ in range(steps):
            s.select(int(rng.choice(s.frontier())))
            s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
        if not s.done:
            s.select(int(rng.choice(s.frontier())))
            yield s


@pytest.mark.parametrize("live", [False, True])
def test_the_vectorized_mask_answers_as_the_checker(live):
    rng = np.random.default_rng(3)
    cases = [pipedream("vgg16-train@p100x4-live1.25"), pipedream("gnmt-train@p100x8-live1.05")]
    for g, c in cases:
        for rc in (None, checkpoints(g, 3)):
            room = Room(g, c, rng.uniform(0, 1e8, c.num_devices), live=live, recompute=rc)
            for s in _random_states(g, c, rng, 6):
                v = s.selected
                every = np.ones(c.num_devices, dtype=bool)
                fits = room.checker(s.device, s.param_used, v)
                got = room.mask(s.device, s.param_used, v, every)
                assert got.tolist() == [fits(d) for d in range(c.num_devices)]


@pytest.mark.parametrize(
    "iid",
    [
        "alexnet-train@p100x4-live1.05",
        "resnet18-train@p100x4-live1.05",
        "densenet121-train@p100x8-live1.05",
        "gnmt-train@p100x8-live1.05",
    ],
)
def test_a_greedy_rule_under_the_live_mask_fits_where_the_room_mask_does_not(iid):
    g, c = pipedream(iid)
    cp = get_teacher("critical_path")
    oom = {}
    for mask in ("room", "live"):
        s = PlacementState(g, c, memory_mask=mask)
        while not s.done:  # critical_path's rule, with the mask's legal devices
            s.select(int(cp.select_actions(s)[0]))
            legal = np.flatnonzero(s.place_mask())
            s.place(int(legal[np.argmin(s.earliest_start()[legal])]))
        oom[mask] = simulate(g, c, s.to_placement()).oom
    assert oom == {"room": True, "live": False}


def test_the_live_mask_takes_a_reserve_and_allows_every_device_where_memory_cannot_bind():
    g, c = pipedream("resnet18-train@p100x4-live1.05")  # every weight fits one device
    reserve = np.zeros(4)
    reserve[3] = c.memory[3]  # device 3 keeps all its memory free: no room there
    s = PlacementState(g, c, memory_mask="live", memory_reserve=reserve)
    s.select(int(s.frontier()[0]))
    assert np.flatnonzero(s.place_mask()).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"memory_reserve: applies to memory_mask='room', 'live'"):
        PlacementState(g, c, memory_mask=True, memory_reserve=np.zeros(4))
    roomy = replace(c, devices=tuple(replace(d, memory=1e15) for d in c.devices))
    s = PlacementState(g, roomy, memory_mask="live")
    s.select(int(s.frontier()[0]))
    assert s.place_mask().all()


def test_the_live_mask_recomputes_the_first_checkpoints_where_nothing_fits_without():
    g, c = pipedream("resnet18-train@p100x2-recompute1.1")
    assert stash_infeasibility(g, c) is not None
    first = checkpoints(g, CHECKPOINT_EVERY[0])
    assert first.size and np.array_equal(mask_recompute(g, c, "live"), first)
    for mask in (True, False, "resident", "room"):  # only the live room counts stashes
        assert mask_recompute(g, c, mask).size == 0
    s = PlacementState(g, c, memory_mask="live")
    assert np.array_equal(s.recompute, first)
    cp = get_teacher("critical_path")
    while not s.done:  # critical_path's rule, with the live mask's legal devices
        s.select(int(cp.select_actions(s)[0]))
        legal = np.flatnonzero(s.place_mask())
        s.place(int(legal[np.argmin(s.earliest_start()[legal])]))
    p = s.to_placement()
    assert np.array_equal(p.recompute, first)
    p.check(g, c)  # a valid recompute set
    plain = Placement(p.device, p.order)
    assert simulate(g, c, plain).oom  # provably: nothing fits without recompute
    assert simulate(g, c, p).memory_excess.max() < simulate(g, c, plain).memory_excess.max()
    # a training step that fits without recompute keeps every stash
    g2, c2 = pipedream("resnet18-train@p100x4-live1.05")
    assert mask_recompute(g2, c2, "live").size == 0
    assert PlacementState(g2, c2, memory_mask="live").recompute.size == 0


def test_the_live_mask_skips_spacings_whose_kept_stash_cannot_fit():
    # every other stash kept is still over the total memory there: the next spacing
    g, c = pipedream("densenet121-train@p100x2-recompute1.1")
    why = stash_infeasibility(g, c, checkpoints(g, CHECKPOINT_EVERY[0]))
    assert why is not None and why.startswith("recomputing those")
    assert stash_infeasibility(g, c, checkpoints(g, CHECKPOINT_EVERY[1])) is None
    assert np.array_equal(mask_recompute(g, c, "live"), checkpoints(g, CHECKPOINT_EVERY[1]))


def test_the_environment_simulates_and_reports_the_live_masks_recompute_set():
    from placegym.agents.doppler.placer import episode_placement
    from placegym.envs import PlacementEnv

    g, c = pipedream("resnet18-train@p100x2-recompute1.1")
    rc = mask_recompute(g, c, "live")
    env = PlacementEnv(g, c, memory_mask="live")
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        legal = np.flatnonzero(info["action_mask"])
        obs, _, done, _, info = env.step(int(rng.choice(legal)))
    assert np.array_equal(info["recompute"], rc)
    p = Placement(info["placement"], info["order"], rc)
    s = simulate(g, c, p)
    assert info["makespan"] == s.makespan and info["oom"] == s.oom

    record = SimpleNamespace(info=info)  # what episode_placement reads of a record
    assert np.array_equal(episode_placement(record).recompute, rc)


def _numpy_free(room, device, param_used, v):
    """The capacity left of ``Room._state`` written with numpy (bincounts, held, the
    working sets to come): what the compiled ``live_free`` must equal bit for bit."""
    u, pb = room.units, room.graph.param_bytes
    placed = np.flatnonzero(device >= 0)
    unit_dev = np.full(u.count, -1, dtype=np.int64)
    unit_dev[u.of[placed]] = device[placed]
    done = np.bincount(u.of[placed], weights=pb[placed], minlength=u.count)
    open_ = unit_dev >= 0
    pending = np.bincount(
        unit_dev[open_], weights=(u.nbytes - done)[open_], minlength=len(room.capacity)
    )
    free = room.capacity - param_used - pending
    if room.live:
        runs_on = unit_dev[u.of]
        rest = (device < 0) & (runs_on >= 0)
        rest[v] = False
        # the largest working set to come per device, less its inputs already there
        src, dst, out = room._src, room._dst, room.graph.out_bytes
        fut = room.future.copy()
        there = room.counts & rest[dst] & (device[src] == runs_on[dst])
        np.subtract.at(fut, dst[there], out[src[there]])
        waits = np.zeros(len(room.capacity))
        np.maximum.at(waits, runs_on[rest], fut[rest])
        free = free - room.held(device) - waits
    return free


@pytest.mark.parametrize(
    "iid", ["resnet18-train@p100x2-live1.05", "resnet18-train@p100x2-recompute1.1"]
)
@pytest.mark.parametrize("live", [False, True])
def test_the_compiled_room_state_is_the_numpy_one(iid, live):
    g, c = pipedream(iid)
    rng = np.random.default_rng(0)
    recompute = mask_recompute(g, c, "live") if live else None
    room = Room(g, c, np.full(c.num_devices, 1e6), live=live, recompute=recompute)
    state = PlacementState(g, c)
    seen = 0
    while not state.done:
        v = int(state.frontier()[rng.integers(len(state.frontier()))])
        state.select(v)
        free, _, items = room._state(state.device, state.param_used, v)
        assert free.tobytes() == _numpy_free(room, state.device, state.param_used, v).tobytes()
        opened = np.zeros(room.units.count, dtype=bool)
        opened[room.units.of[state.device >= 0]] = True
        unopened = room.units.unopened(opened, int(room.units.of[v]))
        assert items.tobytes() == unopened.tobytes()
        seen += 1
        state.place(int(rng.choice(np.flatnonzero(state.place_mask()))))
    assert seen == g.num_nodes
