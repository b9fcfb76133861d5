"""The live room's :class:`~placegym.envs.analysis.room.Headroom`: the bounds that answer
a mask without the room's pass never answer otherwise than the pass, its held bytes on
one device are the room's bit for bit, and the environment's live masks are unchanged
with it."""

from __future__ import annotations

import numpy as np
import pytest

from placegym.envs.analysis.memory import Room, memory_may_bind
from placegym.envs.analysis.room import Headroom
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.mdp.state import PlacementState, mask_recompute
from placegym.envs.suites import get_suite


def pipedream(iid: str):
    inst = get_suite("pipedream-v0").instance(iid)
    return inst.graph, inst.cluster


def with_memory(g, cluster: Cluster, factor: float) -> Cluster:
    """``cluster`` with every device's memory times ``factor``; ``factor`` 0: nine tenths
    of the graph's resident bytes and outputs, ample on each of many devices, yet below
    what a device could be made to hold, so that memory may bind."""
    data = cluster.to_dict()
    worst = float(g.param_bytes.sum() + g.out_bytes.sum())
    for dev in data["devices"]:
        dev["memory"] = dev["memory"] * factor if factor else 0.9 * worst
    return Cluster.from_dict(data)


def fractional(g):
    """``g`` with every output's bytes times a factor in (1, 1.001): sums of these are
    not exact, so the order of a sum shows in its bits."""
    data = g.to_dict()
    rng = np.random.default_rng(0)
    for node in data["nodes"]:
        node["out_bytes"] = node["out_bytes"] * (1 + 1e-3 * rng.random())
    return Graph.from_dict(data)


CASES = [
    ("resnet18-train@p100x2-recompute1.1", 1.0),
    ("vgg16-train@p100x4-live1.25", 1.0),
    ("gnmt-train@p100x8-live1.05", 1.0),
    ("gnmt-train@p100x8-live1.05", 0.0),  # ample on each device, yet memory may bind
]


def _walk(g, c, recompute, reserve, seed):
    """A random decode's states, each with its room, headroom and selected node."""
    rng = np.random.default_rng(seed)
    room = Room(g, c, reserve, live=True, recompute=recompute)
    head = Headroom(room)
    state = PlacementState(g, c)
    while not state.done:
        v = int(state.frontier()[rng.integers(len(state.frontier()))])
        state.select(v)
        yield room, head, state, v
        d = int(rng.choice(np.flatnonzero(state.place_mask())))
        head.place(v, d)
        state.place(d)


@pytest.mark.parametrize(("iid", "factor"), CASES)
def test_a_sure_answer_is_the_rooms_own_and_held_on_is_held_bit_for_bit(iid, factor):
    g, c = pipedream(iid)
    g = fractional(g)
    c = with_memory(g, c, factor)
    assert memory_may_bind(g, c)
    recompute = mask_recompute(g, c, "live")
    reserve = np.linspace(0.0, 1e7, c.num_devices)
    sure = steps = 0
    for room, head, state, v in _walk(g, c, recompute, reserve, seed=len(iid)):
        steps += 1
        held = room.held(state.device)
        for b in range(c.num_devices):
            assert head.held_on(state.device, b).hex() == float(held[b]).hex()
        need = state.resident_need(v)
        fits = state.param_used + need <= c.memory
        if head.sure(fits, need):
            sure += 1
            assert room.mask(state.device, state.param_used, v, fits).tolist() == fits.tolist()
    assert steps == g.num_nodes
    if not factor:  # ample memory: the bounds answer (nearly) every step
        assert sure >= 0.9 * steps
    else:
        assert sure < steps  # tight memory: the pass decides where it must


def test_a_copied_headroom_is_independent():
    g, c = pipedream("resnet18-train@p100x2-live1.05")
    head = Headroom(Room(g, c, np.zeros(c.num_devices), live=True))
    twin = head.copy()
    head.place(0, 1)
    assert twin.outputs.tolist() == [0.0, 0.0] and twin.pending.tolist() != head.pending.tolist()
    assert head.outputs[1] == g.out_bytes[0] and not twin.opened.any()


def _lockstep(g, c, mask: str, seed: int):
    """A random decode under ``mask``: its masks, its copies' demands (``timed``) and
    its placement's devices."""
    state = PlacementState(g, c, memory_mask=mask)
    rng = np.random.default_rng(seed)
    masks = []
    while not state.done:
        state.select(int(state.frontier()[rng.integers(len(state.frontier()))]))
        legal = state.place_mask()
        masks.append(legal.tolist())
        state.place(int(rng.choice(np.flatnonzero(legal))))
    demand = None if state.copy_times is None else state.copy_times.demand.tobytes()
    return masks, demand, state.to_placement().device.tolist()


@pytest.mark.parametrize("mask", ["live", "timed"])
@pytest.mark.parametrize(("iid", "factor"), CASES[1:])
def test_the_environments_live_masks_are_unchanged_by_the_headroom(mask, iid, factor, monkeypatch):
    """The same random decode with the headroom and with a headroom that never answers
    (the room's pass every step): the same masks, and under ``timed`` the same demands
    bit for bit."""
    g, c = pipedream(iid)
    c = with_memory(g, c, factor)
    fast = _lockstep(g, c, mask, 7)
    with monkeypatch.context() as m:
        m.setattr(Headroom, "sure", lambda self, candidates, need: False)
        slow = _lockstep(g, c, mask, 7)
    assert fast == slow
    assert (fast[1] is not None) == (mask == "timed")
