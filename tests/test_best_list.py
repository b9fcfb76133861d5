"""The best_list teacher: the faster list heuristic per graph, answered state by state."""

import numpy as np
import pytest

from placegym.envs import get_preset, simulate
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import ffnn
from placegym.teachers import get_teacher, make_teacher
from placegym.teachers.base import roll_out
from placegym.teachers.best_list import BestListTeacher


def makespan(g, c, p):
    return simulate(g, c, p).makespan


def test_roll_out_is_the_step_teachers_placement():
    g, c = ffnn(), get_preset("p100x4")
    cp = get_teacher("critical_path")
    a, b = roll_out(cp, g, c), cp.place(g, c)
    assert np.array_equal(a.device, b.device) and np.array_equal(a.order, b.order)


def test_follows_heft_where_heft_is_faster_and_critical_path_on_ties():
    t = make_teacher("best_list")
    assert isinstance(t, BestListTeacher) and t.names == ("critical_path", "heft")
    cp, heft = get_teacher("critical_path"), get_teacher("heft")
    # ffnn on v100x8: HEFT 1.08 ms, critical_path 1.40 ms
    g, c = ffnn(), get_preset("v100x8")
    assert makespan(g, c, heft.place(g, c)) < 0.8 * makespan(g, c, cp.place(g, c))
    assert t.choice(g, c) == "heft"
    assert makespan(g, c, t.place(g, c)) == makespan(g, c, heft.place(g, c))
    # ffnn on p100x4: both equal, the first candidate wins
    g4, c4 = ffnn(), get_preset("p100x4")
    assert t.choice(g4, c4) == "critical_path"
    assert np.array_equal(t.place(g4, c4).device, cp.place(g4, c4).device)
    # with NEST among the candidates: NEST's level-wise plan is faster still on ffnn
    more = make_teacher("best_list", kwargs={"candidates": ["critical_path", "heft", "nest"]})
    assert more.choice(g, c) == "nest"
    nest = makespan(g, c, get_teacher("nest").place(g, c))
    assert makespan(g, c, more.place(g, c)) == nest < makespan(g, c, heft.place(g, c))


def test_state_answers_follow_the_chosen_candidate():
    t, cp = get_teacher("best_list"), get_teacher("critical_path")
    g, c = ffnn(), get_preset("v100x8")
    state = PlacementState(g, c)
    while not state.done:  # SEL: critical_path's tie sets; PLC: HEFT's map, relabelled
        sel = t.select_actions(state)
        assert np.array_equal(sel, cp.select_actions(state))
        state.select(int(sel[0]))
        plc = t.place_actions(state)
        assert len(plc) >= 1 and state.place_mask()[plc].all()
        state.place(int(plc[0]))
    # HEFT's device map in b-level order keeps HEFT's makespan here
    assert makespan(g, c, state.to_placement()) == pytest.approx(makespan(g, c, t.place(g, c)))
    followed = roll_out(t, g, c)
    assert np.array_equal(followed.device, state.device)


def test_bad_candidates():
    with pytest.raises(ValueError, match="candidates: expected teacher names other than"):
        BestListTeacher(candidates=())
    with pytest.raises(ValueError, match=r"other than 'best_list', got \['heft', 'best_list'\]"):
        BestListTeacher(candidates=("heft", "best_list"))
    with pytest.raises(ValueError, match="teacher: unknown name 'nope'"):
        BestListTeacher(candidates=("critical_path", "nope"))
