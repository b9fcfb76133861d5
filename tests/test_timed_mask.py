"""The ``"timed"`` memory mask: the ``"live"`` mask plus each received copy counted at the
runs it shares its device with (:mod:`placegym.envs.mdp.copies`), on a case solved by hand
and on the suites' instances where the ``"live"`` mask was over memory."""

from __future__ import annotations

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import simulate
from placegym.envs.mdp.state import MEMORY_MASKS, PlacementState, mask_recompute
from placegym.envs.mdp.vector import PlacementVectorEnv
from placegym.envs.suites import get_suite
from placegym.teachers import get_teacher


def early_copy(memory=100.0):
    """w (node 1, 10 s, a 60-byte output nobody reads) and u (node 0, 1 s, 50 bytes) are
    sources; v (node 2, 1 s, 10 bytes) reads u. Devices of 100 bytes, links of 100 B/s:
    u's output reaches the other device 1.5 s in, while w still runs there."""
    g = graph([1.0, 10.0, 1.0], [[0, 2]], out_bytes=[50.0, 60.0, 10.0])
    return g, unit_cluster(2, bandwidth=100.0, memory=memory)


def placed_w_then_u(mask, memory=100.0):
    g, c = early_copy(memory)
    s = PlacementState(g, c, memory_mask=mask)
    s.select(1)
    s.place(0)  # w on device 0: [0, 10), its 60 bytes live throughout
    s.select(0)
    s.place(1)  # u on device 1: finishes at 1, its copy could reach device 0 at 1.5
    s.select(2)
    return g, c, s


def test_a_copy_that_arrives_while_another_node_runs_is_counted_there():
    # live: v's working set on device 0 (its output 10 + the copy 50) fits at its own run
    g, c, live = placed_w_then_u("live")
    assert live.place_mask().tolist() == [True, True]
    live.place(0)
    out = simulate(g, c, live.to_placement())
    assert out.oom and out.peak_memory[0] == 110.0  # w's 60 + the copy's 50, at 1.5 s
    # timed: the copy would share device 0 with w's run (60 + 50 > 100): not there
    g, c, timed = placed_w_then_u("timed")
    assert timed.place_mask().tolist() == [False, True]
    assert timed.copy_times is not None and timed.copy_times.demand[1] == 60.0
    timed.place(1)
    assert not simulate(g, c, timed.to_placement()).oom


def test_the_demand_of_a_run_grows_with_the_copies_that_overlap_it():
    g, roomy, s = placed_w_then_u("timed", memory=115.0)  # w's 60 and the copy's 50 fit
    assert s.place_mask().tolist() == [True, True]
    twin = s.copy()
    s.place(0)
    assert s.copy_times is not None and twin.copy_times is not None
    assert s.copy_times.demand[1] == 110.0  # w's 60 and v's copy of 50
    assert s.copy_times.demand[2] == 60.0  # v's own run: its output and its copy
    assert twin.copy_times.demand[1] == 60.0  # a copy of the state is independent
    assert simulate(g, roomy, s.to_placement()).peak_memory[0] == 110.0


def test_where_no_device_has_room_for_the_copies_the_live_devices_stay_legal(monkeypatch):
    from placegym.envs.mdp.copies import CopyTimes

    g, c, timed = placed_w_then_u("timed")
    monkeypatch.setattr(CopyTimes, "room", lambda self, *a: np.zeros(2, dtype=bool))
    assert timed.place_mask().tolist() == [True, True]  # the "live" devices


def test_timed_is_a_mask_like_the_others():
    assert "timed" in MEMORY_MASKS
    g, c = early_copy()
    assert mask_recompute(g, c, "timed").tolist() == mask_recompute(g, c, "live").tolist()
    s = PlacementState(g, c, memory_mask="timed", memory_reserve=np.zeros(2))
    assert s.mask_mode == "timed"
    with pytest.raises(ValueError, match="'live' or 'timed'"):
        PlacementState(g, c, memory_mask="timely")
    with pytest.raises(ValueError, match="not compiled in PlacementVectorEnv"):
        PlacementVectorEnv(2, graph=g, cluster=c, memory_mask="timed")


@pytest.mark.parametrize(
    ("split", "iid"),
    [
        ("train", "random_dag-96-s0@p100x4-mem0.7-r1-2"),
        ("test", "random_dag-256-s100@p100x4-mem0.9"),
        ("test", "random_dag-256-s100@v100x8-mem0.7-r1-2"),
    ],
)
def test_a_rule_over_memory_under_live_fits_under_timed(split, iid):
    """critical_path's rule on the legal devices (earliest start): over memory on these
    memory-tight-v0 instances under "live", within memory under "timed"."""
    suite = get_suite("memory-tight-v0")
    inst = next(i for i in suite.instances(split) if i.graph.name == iid)
    g, c = inst.graph, inst.cluster
    cp = get_teacher("critical_path")
    oom = {}
    for mask in ("live", "timed"):
        s = PlacementState(g, c, memory_mask=mask)
        while not s.done:
            s.select(int(cp.select_actions(s)[0]))
            legal = np.flatnonzero(s.place_mask())
            s.place(int(legal[np.argmin(s.earliest_start()[legal])]))
        oom[mask] = simulate(g, c, s.to_placement()).oom
    assert oom == {"live": True, "timed": False}
