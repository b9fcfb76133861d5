"""Memory relief by checkpointing (:mod:`placegym.agents.doppler.relief`): the per-device
stash floors bound every simulated peak; the estimate of a placement with a recompute set
is its extended graph's; the polish of such a placement keeps its set, its groups and its
room; :func:`relieve` takes a checkpointed placement that fits where the kept one is over
memory, by hand and on a published training step, with no simulator call."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from simcases import unit_cluster
from test_recompute import training_problems

from placegym.agents.doppler.onepass import OnePassDecoder
from placegym.agents.doppler.polish import eager_estimate, eager_makespan, eager_peak, polish
from placegym.agents.doppler.relief import (
    STAGES,
    Settings,
    checkpointed_within,
    relieve,
    weigh_polished,
)
from placegym.agents.doppler.selector import (
    ProposalSelector,
    choose,
    gather_proposals,
    one_pass_select,
    relieve_selected,
)
from placegym.agents.zoo import pretrained
from placegym.envs import Graph, Placement, simulate
from placegym.envs.analysis.memory import stage_placement, stash_floors
from placegym.envs.core.recompute import expand
from placegym.envs.suites import get_suite
from placegym.envs.workloads.training import to_training_step
from placegym.train.harness.calls import counting, patched

HINTS = ("nest", "metis", "heft", "critical_path")


def chain_step() -> Graph:
    """The training step of a 3-layer chain (outputs 10 20 30 B, resident 5 B per layer,
    x2 under sgd): on two devices of 75 B only recomputation fits (``test_recompute``)."""
    g = Graph(flops=[1.0] * 3, out_bytes=[10, 20, 30], param_bytes=[5] * 3, edges=[[0, 1], [1, 2]])
    return to_training_step(g, optimizer="sgd")


@settings(max_examples=60, deadline=None)
@given(training_problems())
def test_stash_floors_bound_the_simulated_and_the_estimated_peaks(problem):
    t, c, p = problem
    floors = stash_floors(t, c, p.device, p.recompute)
    resident = np.bincount(p.device, weights=t.param_bytes, minlength=c.num_devices)
    assert (floors >= resident - 1e-9).all()
    assert (floors <= simulate(t, c, p).peak_memory + 1e-9).all()
    assert (floors <= eager_peak(t, c, p) + 1e-9).all()
    plain = Placement(device=p.device, order=p.order)
    assert (stash_floors(t, c, p.device) >= floors - 1e-9).all()  # recompute lowers it
    assert (stash_floors(t, c, p.device) <= simulate(t, c, plain).peak_memory + 1e-9).all()


def test_stash_floors_of_the_chain_by_hand():
    # layers (0, 0, 1): when 2' starts, d0 holds 20 B resident and the stashes of 0
    # and 1 (10 + 20 B); d1 holds 10 B resident, the stash of 2 (30 B) and the output of
    # 2' itself (the gradient of 2's input, 20 B)
    t = chain_step()
    c = unit_cluster(2, bandwidth=100.0, memory=75.0)
    dev = np.array([0, 0, 1, 0, 0, 1])
    assert t.out_bytes[5] == 20.0
    assert stash_floors(t, c, dev).tolist() == [50.0, 60.0]
    assert stash_floors(t, c, dev, recompute=[0]).tolist() == [40.0, 60.0]
    one = Graph(flops=[1.0], out_bytes=[1.0], param_bytes=[3.0], edges=np.zeros((0, 2)))
    assert stash_floors(one, unit_cluster(2), np.array([1])).tolist() == [0.0, 3.0]


@settings(max_examples=40, deadline=None)
@given(training_problems())
def test_a_recompute_set_is_estimated_on_the_extended_graph(problem):
    t, c, p = problem
    rc = expand(t, c, p)
    makespan, peak = eager_estimate(t, c, p)
    ext_makespan, ext_peak = eager_estimate(rc.graph, c, rc.placement)
    assert makespan == ext_makespan == eager_makespan(t, c, p)
    assert peak.tolist() == ext_peak.tolist() == eager_peak(t, c, p).tolist()


@settings(max_examples=40, deadline=None)
@given(training_problems())
def test_the_polish_of_a_recompute_set_keeps_it_groups_and_room(problem):
    t, c, p = problem
    room = eager_peak(t, c, p) * 1.05
    got = polish(t, c, p, evals=60, memory=room)
    assert got.recompute.tolist() == p.recompute.tolist()
    assert got.order.tolist() == p.order.tolist()
    simulate(t, c, got)  # groups whole, else it raises
    assert eager_makespan(t, c, got) <= eager_makespan(t, c, p)
    assert (eager_peak(t, c, got) <= np.maximum(room, eager_peak(t, c, p))).all()
    if got is not p:
        assert eager_makespan(t, c, got) < eager_makespan(t, c, p)


def test_relief_takes_a_checkpointed_placement_where_the_kept_one_is_over_memory():
    t = chain_step()
    c = unit_cluster(2, bandwidth=100.0, memory=75.0)
    kept = Placement(np.array([0, 0, 1, 0, 0, 1]), t.topological_order.copy())
    assert eager_peak(t, c, kept).max() > 75.0 and simulate(t, c, kept).oom
    with patched(), counting() as n:
        relief = relieve(t, c, kept, {}, c.memory)
    assert n.calls == 0
    assert relief is not None and relief.every > 0 and relief.placement.recompute.size
    s = simulate(t, c, relief.placement)
    assert not s.oom
    assert (eager_peak(t, c, relief.placement) <= c.memory).all()
    # the least estimate of the candidates that fit: the kept devices and the stages
    fits = [checkpointed_within(t, c, b, c.memory) for b in (kept, stage_placement(t, c))]
    assert eager_makespan(t, c, relief.placement) == min(f[2] for f in fits if f is not None)
    assert relief.base in ("kept", STAGES)


def test_relief_leaves_what_fits_and_what_is_not_a_training_step():
    t = chain_step()
    roomy = unit_cluster(2, bandwidth=100.0, memory=1000.0)
    tight = unit_cluster(2, bandwidth=100.0, memory=75.0)
    kept = Placement(np.array([0, 0, 1, 0, 0, 1]), t.topological_order.copy())
    assert relieve(t, roomy, kept, {}, roomy.memory) is None  # memory cannot bind
    g = Graph(flops=[1.0, 1.0], out_bytes=[60.0, 60.0], edges=[[0, 1]])
    p = Placement(np.array([0, 0]), np.array([0, 1]))
    small = unit_cluster(2, memory=100.0)
    assert relieve(g, small, p, {}, small.memory) is None  # not a training step
    # a kept placement with a recompute set that fits and is fastest stays
    every = relieve(t, tight, kept, {}, tight.memory)
    assert every is not None
    assert relieve(t, tight, every.placement, {}, tight.memory) is None
    with pytest.raises(ValueError, match=r"room: expected 2 values \(one per device\)"):
        relieve(t, tight, kept, {}, np.ones(3))


def test_a_relieving_selector_fits_a_published_step_the_mask_does_not():
    inst = get_suite("pipedream-v0").instance("vgg16-train@p100x2-recompute1.1")
    g, c = inst.graph, inst.cluster
    agent = pretrained("onepass-v9")
    sel = ProposalSelector(**{**agent.selector.spec(), "relieve": True})
    sel.load_state_dict(agent.selector.state_dict())
    assert ProposalSelector(**sel.spec()).relieve and "relieve" not in agent.selector.spec()
    with patched(), counting() as n:
        dec = OnePassDecoder(agent.policy, g, c, agent.memory_mask)
        proposals = gather_proposals(sel, dec.hints, g, c, agent.memory_mask)
        name, kept = choose(sel, g, c, dec.greedy(), proposals, agent.memory_mask)
        got = one_pass_select(agent.policy, sel, g, c, agent.memory_mask)
        assert relieve_selected(agent.selector, g, c, name, kept, proposals) is None
    assert n.calls == 0
    assert simulate(g, c, kept).oom  # the mask's recompute set is not enough here
    s = simulate(g, c, got.placement)
    assert not s.oom and got.placement.recompute.size
    assert "@every" in got.name or got.name.endswith("@plain")
    assert (eager_peak(g, c, got.placement) <= (1 - sel.peak_margin) * c.memory).all()


def test_a_weighing_selector_takes_a_faster_checkpointed_or_staged_placement():
    # a training step where memory binds and the kept placement fits: the polished
    # placement is weighed against the bases, and contiguous stages win by estimate
    inst = get_suite("pipedream-v0").instance("vgg16-train@p100x2-live1.05")
    g, c = inst.graph, inst.cluster
    agent = pretrained("onepass-v10")
    sel = ProposalSelector(**{**agent.selector.spec(), "weigh": True})
    sel.load_state_dict(agent.selector.state_dict())
    assert ProposalSelector(**sel.spec()).weigh and "weigh" not in agent.selector.spec()
    with patched(), counting() as n:
        before = one_pass_select(agent.policy, agent.selector, g, c, agent.memory_mask)
        after = one_pass_select(agent.policy, sel, g, c, agent.memory_mask)
    assert n.calls == 0
    assert after.name == "stages@plain" and after.polished
    assert eager_makespan(g, c, after.placement) < eager_makespan(g, c, before.placement)
    s = simulate(g, c, after.placement)
    assert not s.oom and s.makespan < simulate(g, c, before.placement).makespan
    settings = Settings(sel.peak_margin, sel.polish, sel.polish_pairs)
    # nothing to weigh where memory cannot bind
    roomy = unit_cluster(2, bandwidth=100.0, memory=1e6)
    t = chain_step()
    kept = Placement(np.array([0, 0, 1, 0, 0, 1]), t.topological_order.copy())
    assert weigh_polished(t, roomy, None, kept, {}, settings) is None
