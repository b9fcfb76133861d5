"""The proposal selector of a one-pass agent (:mod:`placegym.agents.doppler.selector`)
and its training (:mod:`placegym.train.selector`): the summaries on a case solved by
hand, the choice rule, the memory replay, no simulator call, and the files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from simcases import fork_join, graph, unit_cluster

from placegym.agents.doppler.onepass import one_pass_greedy
from placegym.agents.doppler.placer import AgentPlacer
from placegym.agents.doppler.selector import (
    FEATURES,
    INSTANCE_FIELDS,
    PLACEMENT_FIELDS,
    ROLLOUT_DEVICES,
    ROLLOUTS,
    ROOM,
    ProposalSelector,
    choose,
    fits_mask,
    fits_statically,
    instance_summary,
    load_selector,
    one_pass_select,
    placement_summary,
    rule_proposals,
    save_selector,
)
from placegym.agents.zoo import pretrained
from placegym.envs import Placement, simulate
from placegym.envs.suites import get_suite
from placegym.train.harness.calls import counting, patched
from placegym.train.selector import CLIP, collect, fit_selector, selection_report

HINTS = ("nest", "metis", "heft", "critical_path")
ROOMS = tuple(r + ROOM for r in ROLLOUTS)


class Fixed(torch.nn.Module):
    """A network that predicts the given log ratio for each proposal by its name, whatever
    the rest of its input."""

    def __init__(self, values):
        super().__init__()
        self.values = torch.tensor(values, dtype=torch.float32)

    def forward(self, x):
        names = len(self.values)
        start = FEATURES - len(INSTANCE_FIELDS)  # the proposal's name one-hot (fresh scaling)
        onehot = x[:, start : start + names]
        return self.values[onehot.argmax(1), None]


def fixed(names, values, margin=0.02):
    sel = ProposalSelector(names, margin=margin)
    sel.nets = torch.nn.ModuleList([Fixed(values)])
    return sel


def split_fork_join():
    """fork_join's 0, 1, 2 and 5 on device 0, its 3 and 4 on device 1, in id order."""
    return Placement(device=np.array([0, 0, 0, 1, 1, 0]), order=np.arange(6))


def test_the_placement_summary_of_a_case_solved_by_hand():
    g, c = fork_join(), unit_cluster(2)
    s = dict(zip(PLACEMENT_FIELDS, placement_summary(g, c, split_fork_join()).tolist()))
    # device 0: 0 [0, 1), 1 [1, 3), 2 [3, 5); device 1: 3 from 1.5 (0's copy of 0.5
    # bytes at 1 B/s), 4 [3.5, 5.5); 5 waits for 4's copy: [6, 7)
    assert s["estimate"] == 7.0
    assert s["estimate"] == simulate(g, c, split_fork_join()).makespan  # no contention here
    assert s["load"] == 6.0  # device 0: 1 + 2 + 2 + 1
    # one copy of 0's output to device 1 (read by 3 and 4), 3's and 4's back to device 0
    assert s["comm"] == 1.5 and s["channel"] == 1.0
    assert s["egress"] == 1.0 and s["ingress"] == 1.0
    assert s["used"] == 1.0 and s["resident"] == 0.0
    one = Placement(device=np.zeros(6, dtype=np.int64), order=np.arange(6))
    s1 = dict(zip(PLACEMENT_FIELDS, placement_summary(g, c, one).tolist()))
    assert s1["estimate"] == 10.0 and s1["comm"] == 0.0 and s1["used"] == 0.5


def test_the_instance_summary():
    g, c = fork_join(), unit_cluster(2)
    s = dict(zip(INSTANCE_FIELDS, instance_summary(g, c).tolist()))
    assert s["log_nodes"] == pytest.approx(np.log(6)) and s["log_devices"] == pytest.approx(
        np.log(2)
    )
    assert s["link_levels"] == 1.0 and s["device_speeds"] == 1.0
    assert s["memory_may_bind"] == 0.0 and s["edges_per_node"] == pytest.approx(8 / 6)


def tight():
    """Two independent nodes of 60 parameter bytes on two devices of 100 bytes."""
    return graph([1.0, 1.0], [], param_bytes=[60.0, 60.0]), unit_cluster(2, memory=100.0)


def test_the_replay_refuses_a_placement_the_mask_would_not_make():
    g, c = tight()
    both = Placement(device=np.array([0, 0]), order=np.array([0, 1]))
    apart = Placement(device=np.array([0, 1]), order=np.array([0, 1]))
    assert fits_mask(g, c, both, True) is None
    kept = fits_mask(g, c, apart, True)
    assert kept is not None and kept.device.tolist() == [0, 1]


def test_the_static_fit_counts_everything_a_device_ever_holds():
    g, c = tight()
    assert fits_statically(g, c, Placement(device=np.array([0, 1]), order=np.array([0, 1])))
    assert not fits_statically(g, c, Placement(device=np.array([0, 0]), order=np.array([0, 1])))
    # a chain of three 40-byte outputs on one 100-byte device: 120 bytes in all, but the
    # simulated peak is 80 (an output is freed once its consumer finishes); the static
    # bound refuses it and the replay under the live mask takes it
    chain = graph([1.0, 1.0, 1.0], [(0, 1), (1, 2)], out_bytes=[40.0, 40.0, 40.0])
    one = unit_cluster(2, memory=100.0)
    p = Placement(device=np.zeros(3, dtype=np.int64), order=np.arange(3))
    assert not fits_statically(chain, one, p)
    assert fits_mask(chain, one, p, "live") is not None
    assert simulate(chain, one, p).peak_memory[0] == 80.0
    # a copy counts on its receiver: 0's output (60) sent to device 1 and 1's own (50)
    fork = graph([1.0, 1.0], [(0, 1)], out_bytes=[60.0, 50.0])
    apart = Placement(device=np.array([0, 1]), order=np.arange(2))
    assert not fits_statically(fork, unit_cluster(2, memory=100.0), apart)
    assert fits_statically(fork, unit_cluster(2, memory=110.0), apart)


def test_the_choice_keeps_its_own_unless_a_proposal_clears_the_margin():
    g, c = fork_join(), unit_cluster(2)
    own = split_fork_join()
    a = Placement(device=np.zeros(6, dtype=np.int64), order=np.arange(6))
    b = Placement(device=np.ones(6, dtype=np.int64), order=np.arange(6))
    props = {"a": a, "b": b}
    assert choose(fixed(("a", "b"), [-0.01, 0.3]), g, c, own, props) == (None, own)
    name, got = choose(fixed(("a", "b"), [-0.05, -0.2]), g, c, own, props)
    assert name == "b" and got is b
    assert choose(fixed(("a", "b"), [-0.05, -0.2], margin=0.5), g, c, own, props)[0] is None


def test_a_single_device_and_a_nan_prediction_keep_the_own_placement():
    g, one = fork_join(), unit_cluster(1)
    assert np.isfinite(instance_summary(g, one)).all()  # no channel: no copy time
    own = Placement(device=np.zeros(6, dtype=np.int64), order=np.arange(6))
    other = Placement(device=np.zeros(6, dtype=np.int64), order=np.arange(6)[::-1].copy())
    got = choose(fixed(("a",), [float("nan")]), g, one, own, {"a": other})
    assert got == (None, own)


def test_where_memory_binds_a_proposal_over_it_is_passed_over():
    g, c = tight()
    own = Placement(device=np.array([1, 0]), order=np.array([0, 1]))
    props = {
        "both": Placement(device=np.array([0, 0]), order=np.array([0, 1])),
        "apart": Placement(device=np.array([0, 1]), order=np.array([0, 1])),
    }
    name, got = choose(fixed(("both", "apart"), [-0.4, -0.1]), g, c, own, props, True)
    assert name == "apart" and got.device.tolist() == [0, 1]
    name, got = choose(fixed(("both", "apart"), [-0.4, 0.1]), g, c, own, props, True)
    assert name is None and got is own


def test_bad_selectors_and_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="names: expected distinct"):
        ProposalSelector(["heft", "heft"])
    with pytest.raises(ValueError, match="hidden: must be >= 1"):
        ProposalSelector(["heft"], hidden=0)
    with pytest.raises(ValueError, match="members: must be >= 1"):
        ProposalSelector(["heft"], members=0)
    with pytest.raises(ValueError, match="margin: must be >= 0"):
        ProposalSelector(["heft"], margin=-0.1)
    bad = tmp_path / "bad.pt"
    torch.save({"format": "other"}, bad)
    with pytest.raises(ValueError, match="format: expected"):
        load_selector(bad)


def test_a_saved_selector_loads_with_the_same_predictions(tmp_path):
    sel = ProposalSelector(HINTS, hidden=8, margin=0.03, members=3)
    x = torch.randn(4, sel.mean.numel())
    save_selector(sel, tmp_path / "s.pt")
    back = load_selector(tmp_path / "s.pt")
    assert back.spec() == {"names": list(HINTS), "hidden": 8, "margin": 0.03, "members": 3}
    assert torch.equal(back(x), sel(x))
    assert torch.equal(sel(x), sel.each(x).mean(0)) and sel.each(x).shape == (3, 4)


@pytest.fixture(scope="module")
def agent():
    return pretrained("onepass-v1")


@pytest.fixture(scope="module")
def instance():
    return get_suite("generalize-v0").instance("random_dag-64-s0@p100x4")


def test_the_one_pass_choice_makes_no_simulator_call(agent, instance):
    g, c = instance.graph, instance.cluster
    own = one_pass_greedy(agent.policy, g, c, agent.memory_mask)
    with patched(), counting() as calls:
        name, kept, _ = one_pass_select(agent.policy, fixed(HINTS, [0.0] * 4), g, c)
        assert name is None and kept.device.tolist() == own.device.tolist()
        name, kept, _ = one_pass_select(agent.policy, fixed(HINTS, [0.0, 0.0, -1.0, 0.0]), g, c)
    assert calls.calls == 0
    from placegym.agents.doppler.hints import plain_hint_placements

    (heft,) = plain_hint_placements(g, c, ("heft",))
    assert name == "heft" and kept.device.tolist() == heft.device.tolist()


def test_an_agent_places_through_its_selector(agent, instance):
    sel = fixed(HINTS, [0.0, -1.0, 0.0, 0.0])
    placer = AgentPlacer(agent.policy, one_pass=True, selector=sel, memory_mask=True)
    placer.place(instance.graph, instance.cluster)
    assert placer.last_choice == "metis"
    with pytest.raises(ValueError, match="needs one_pass=True"):
        AgentPlacer(agent.policy, selector=sel)
    with pytest.raises(ValueError, match=r"selector: scores or polishes hints \['pipe'\]"):
        AgentPlacer(agent.policy, one_pass=True, selector=fixed(("pipe",), [0.0]))


def test_collected_rows_fit_a_selector_that_reports(tmp_path):
    rows = tmp_path / "rows.jsonl"
    kw = {"nodes": (50, 80), "devices": (2, 4)}
    assert collect("pretrained:onepass-v1", 7, 2, rows, **kw) == 2
    assert collect("pretrained:onepass-v1", 7, 2, rows, **kw) == 0  # resumes: none missing
    data = [json.loads(line) for line in rows.open()]
    assert [r["index"] for r in data] == [0, 1] and data[0]["names"] == [*HINTS, *ROOMS]
    for r in data:
        # every rollout where memory may bind, else heft_lookahead's alone
        bound = r["instance"][INSTANCE_FIELDS.index("memory_may_bind")] == 1.0
        rolled = [n for n in ROOMS if n in r]
        assert rolled == (list(ROOMS) if bound else ["heft_lookahead@room"])
        for key in ("own", *HINTS, *rolled):
            assert len(r[key]["summary"]) == len(PLACEMENT_FIELDS) and r[key]["makespan"] > 0
            assert key == "own" or isinstance(r[key]["admitted"], bool)
            assert bound or r[key].get("admitted", True)
    sel = fit_selector(data, steps=5, hidden=4, members=2)
    report = selection_report(data, sel)
    assert set(report) == {"kept_over_own", "taken", "over_memory", "own_over_memory"}
    assert 0.0 <= report["taken"] <= 1.0


def test_labels_are_clipped_log_ratios_and_proposals_over_memory_left_out_or_penalised():
    from placegym.train.selector import _label

    ok = {"makespan": 1.0, "oom": False}
    assert _label(ok, {"makespan": 0.8, "oom": False}) == pytest.approx(np.log(0.8))
    assert _label(ok, {"makespan": 0.01, "oom": False}) == -CLIP
    assert _label(ok, {"makespan": 100.0, "oom": False}) == CLIP
    assert _label(ok, {"makespan": 0.1, "oom": True}) is None  # the replay passes it over
    assert _label(ok, {"makespan": 0.1, "oom": True, "admitted": False}) is None
    # over memory, yet the choice would take it: learn to leave it
    assert _label(ok, {"makespan": 0.1, "oom": True, "admitted": True}) == CLIP
    assert _label({"makespan": 1.0, "oom": True}, {"makespan": 0.1, "oom": True}) is None
    assert _label({"makespan": 1.0, "oom": True}, {"makespan": 9.0, "oom": False}) == -CLIP


def test_the_report_passes_over_proposals_over_memory_as_the_replay_would():
    summary = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    row = {
        "names": ["a", "b"],
        "instance": [0.0] * len(INSTANCE_FIELDS),
        "own": {"summary": summary, "makespan": 2.0, "oom": False},
        "a": {"summary": summary, "makespan": 0.5, "oom": True},
        "b": {"summary": summary, "makespan": 1.0, "oom": False},
    }
    report = selection_report([row], fixed(("a", "b"), [-0.4, -0.1]))
    assert report == {
        "kept_over_own": 0.5,  # b, the first prediction below the margin that fits
        "taken": 1.0,
        "over_memory": 0.0,
        "own_over_memory": 0.0,
    }
    assert selection_report([row], fixed(("a", "b"), [-0.4, 0.1]))["taken"] == 0.0


def test_rule_proposals_roll_out_in_the_agents_room_where_memory_binds():
    from placegym.envs.analysis.room import Room
    from placegym.envs.mdp.state import mask_recompute
    from placegym.teachers import get_teacher

    inst = get_suite("pipedream-v0").instance("vgg16-train@p100x2-recompute1.1")
    g, c = inst.graph, inst.cluster
    rc = mask_recompute(g, c, "timed")
    assert len(rc) > 0  # the timed mask recomputes here, and so do the rollouts
    with patched(), counting() as calls:
        got = rule_proposals(g, c, "timed")
    assert calls.calls == 0 and list(got) == list(ROOMS)
    room = Room(g, c, np.zeros(c.num_devices), live=True, recompute=rc)
    rolled = {r + ROOM: get_teacher(r).roll(g, c, room) for r in ROLLOUTS}
    for name, p in got.items():
        assert p.device.tolist() == rolled[name].device.tolist(), name
        assert p.recompute.tolist() == rc.tolist(), name
    # the plain hints are placed as if memory could not bind: at least one differs here
    from placegym.agents.doppler.hints import plain_hint_placements

    plain = plain_hint_placements(g, c, ("critical_path", "heft"))
    assert any(
        p.device.tolist() != got[n + ROOM].device.tolist()
        for n, p in zip(("critical_path", "heft"), plain, strict=True)
    )
    # a resident mask's room counts no live tensors and recomputes nothing
    assert all(not p.recompute.size for p in rule_proposals(g, c, True).values())


def test_rule_proposals_where_memory_cannot_bind_and_on_many_devices():
    from placegym.teachers import get_teacher

    g = fork_join()
    got = rule_proposals(g, unit_cluster(3), "timed")
    assert list(got) == ["heft_lookahead@room"]  # the other two are the plain hints
    plain = get_teacher("heft_lookahead").place(g, unit_cluster(3))
    assert got["heft_lookahead@room"].device.tolist() == plain.device.tolist()
    assert rule_proposals(g, unit_cluster(3), False).keys() == got.keys()
    assert rule_proposals(g, unit_cluster(ROLLOUT_DEVICES + 1), "timed") == {}


def test_a_name_not_proposed_is_never_taken():
    g, c = fork_join(), unit_cluster(2)
    own, b = split_fork_join(), Placement(device=np.ones(6, dtype=np.int64), order=np.arange(6))
    sel = fixed(("a", "b"), [-0.9, -0.1])
    pred = sel.predict(g, c, own, {"b": b, "other": own})
    assert pred[0] == np.inf and pred[1] == pytest.approx(-0.1)
    assert choose(sel, g, c, own, {"b": b}) == ("b", b)
    assert choose(sel, g, c, own, {}) == (None, own)


def test_a_selector_scoring_rollouts_places_through_them(agent):
    inst = get_suite("memory-tight-v0").instance("random_dag-96-s0@p100x4-mem0.7-r1-2")
    g, c = inst.graph, inst.cluster
    sel = fixed((*HINTS, *ROOMS), [0.0] * 4 + [0.0, -1.0, 0.0])
    with patched(), counting() as calls:
        name, kept, _ = one_pass_select(agent.policy, sel, g, c, agent.memory_mask)
    assert calls.calls == 0 and name == "heft@room"
    room = rule_proposals(g, c, agent.memory_mask)["heft@room"]
    assert kept.device.tolist() == room.device.tolist()
    assert not simulate(g, c, kept).oom
    placer = AgentPlacer(agent.policy, one_pass=True, selector=sel, memory_mask=agent.memory_mask)
    placer.place(g, c)
    assert placer.last_choice == "heft@room"
