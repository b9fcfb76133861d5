"""The polish: the eager estimate solved by hand and equal, bit for bit, to a plain
Python statement of its rule on random graphs; the local search never worsens the
estimate, keeps co-location groups whole, is deterministic and makes no simulator
call."""

from __future__ import annotations

import numpy as np
import pytest
from simcases import fork_join, graph, unit_cluster

from placegym.agents.doppler.onepass import OnePassDecoder
from placegym.agents.doppler.polish import (
    ALL_DEVICES,
    EagerInputs,
    eager_makespan,
    eager_peak,
    eager_schedule,
    polish,
)
from placegym.agents.doppler.selector import ProposalSelector, one_pass_select, polish_kept
from placegym.agents.doppler.summaries import ready_order
from placegym.agents.zoo import pretrained
from placegym.envs import Graph, Placement, simulate
from placegym.envs.analysis.levels import step_costs
from placegym.envs.suites import get_suite
from placegym.envs.workloads.training import to_training_step
from placegym.train.harness import calls
from placegym.train.harness.calls import counting, patched

HINTS = ("nest", "metis", "heft", "critical_path")


def reference(g, c, p, insert):
    """The estimate's rule in plain Python (the module docstring), as the oracle."""
    costs = step_costs(g, c)
    dev = p.device.tolist()
    dur = costs.duration[np.arange(g.num_nodes), p.device].tolist()
    lat, inv_bw, level = costs.latency.tolist(), costs.inv_bandwidth.tolist(), c.pair_level
    start, finish, busy = [0.0] * len(dev), [0.0] * len(dev), [0.0] * c.num_devices
    gaps: list[list[tuple[float, float]]] = [[] for _ in range(c.num_devices)]
    taken: dict[tuple, float] = {}
    arrival: dict[tuple[int, int], float] = {}
    for v in ready_order(costs, p.rank):
        d = dev[v]
        wait = max(
            [finish[u] if dev[u] == d else arrival[(u, d)] for u in costs.predecessors[v]],
            default=0.0,
        )
        if insert:
            t, k = wait, 0
            while k < len(gaps[d]) and t + dur[v] > gaps[d][k][0]:
                t = max(t, gaps[d][k][1])
                k += 1
            gaps[d].insert(k, (t, t + dur[v]))
        else:
            t = max(wait, busy[d])
            busy[d] = t + dur[v]
        start[v], finish[v] = t, t + dur[v]
        for b in sorted({dev[w] for w in costs.successors[v]} - {d}):
            lv = int(level[d, b])
            keys = [("s", d, lv), ("r", b, lv)] if c.links == "port" else [("c", d, b)]
            sent = max([finish[v]] + [taken.get(k, 0.0) for k in keys])
            arrival[(v, b)] = sent + lat[d][b] + g.out_bytes[v] * inv_bw[d][b]
            for k in keys:
                taken[k] = arrival[(v, b)]
    return np.array(start), np.array(finish)


def test_copies_leave_when_their_producer_finishes():
    # 0 (1 s) on device 0 sends 2 s of bytes to 2 and 3 on device 1; 1 (0.5 s) on device
    # 0 sends 2 s to 2. 3 is listed before 2. 0 finishes at 1, its copy arrives at 3;
    # 1 finishes at 1.5, its copy waits for the channel and arrives at 5
    g = graph([1.0, 0.5, 1.0, 1.0], [(0, 2), (1, 2), (0, 3)], out_bytes=[2.0, 2.0, 1.0, 1.0])
    c = unit_cluster(2)
    p = Placement(device=np.array([0, 0, 1, 1]), order=np.array([0, 1, 3, 2]))
    start, finish = eager_schedule(g, c, p)
    assert start.tolist() == [0.0, 1.0, 5.0, 3.0]
    assert finish.tolist() == [1.0, 1.5, 6.0, 4.0]
    assert finish.max() == simulate(g, c, p).makespan
    # the peaks by DESIGN's lifetimes: device 0 holds 0's and 1's outputs (1's from its
    # start at 1) until 0's copy arrives at 3; device 1 holds both copies (from 1 and 3
    # until 2 finishes at 6) and 3's output while 3 runs
    assert eager_peak(g, c, p).tolist() == [4.0, 5.0] == simulate(g, c, p).peak_memory.tolist()


def test_a_later_copy_does_not_jump_the_queue():
    # 0 (1 s) sends 4 s of bytes to 3 on device 1, which is listed last; 1 (2 s) sends
    # 1 s of bytes to 2 on device 1, listed first among the consumers. 0's copy leaves at
    # 1 and holds the channel until 5, so 1's copy (ready at 3) arrives at 6: the order
    # in which copies are asked for does not matter, their producers' finish does.
    # Listed, 2 runs 6-7 and 3 after it; inserted, 3 runs 5-6 as the simulator runs it
    g = graph([1.0, 2.0, 1.0, 1.0], [(0, 3), (1, 2)], out_bytes=[4.0, 1.0, 0.0, 0.0])
    c = unit_cluster(2)
    p = Placement(device=np.array([0, 0, 1, 1]), order=np.array([0, 1, 2, 3]))
    assert eager_schedule(g, c, p)[1].tolist() == [1.0, 3.0, 7.0, 8.0]
    finish = eager_schedule(g, c, p, insert=True)[1]
    assert finish.tolist() == [1.0, 3.0, 7.0, 6.0] == simulate(g, c, p).finish.tolist()


def test_insertion_fills_an_idle_gap_as_a_work_conserving_device_would():
    # on device 1: 1 waits for 0's copy (0 runs 0-1 on device 0, the copy arrives at
    # 4), 2 is a source listed after 1. Listed, 2 runs after 1 (5-6); inserted, in the
    # gap before it (0-1), as the simulator runs it
    g = graph([1.0, 1.0, 1.0], [(0, 1)], out_bytes=[3.0, 0.0, 0.0])
    c = unit_cluster(2)
    p = Placement(device=np.array([0, 1, 1]), order=np.array([0, 1, 2]))
    assert eager_schedule(g, c, p)[0].tolist() == [0.0, 4.0, 5.0]
    assert eager_schedule(g, c, p, insert=True)[0].tolist() == [0.0, 4.0, 0.0]
    assert simulate(g, c, p).start.tolist() == [0.0, 4.0, 0.0]


@pytest.mark.parametrize("links", ["pair", "port"])
@pytest.mark.parametrize("insert", [False, True])
def test_the_compiled_estimate_equals_its_rule_on_random_graphs(links, insert):
    rng = np.random.default_rng(7)
    for n in (1, 2, 30, 80):
        edges = [
            (int(u), v) for v in range(1, n) for u in rng.choice(v, size=min(v, 3), replace=False)
        ]
        flops, out = rng.uniform(0.1, 1.0, n).tolist(), rng.uniform(0, 2, n).tolist()
        g = graph(flops, edges, out_bytes=out)
        c = unit_cluster(5, latency=0.01).with_links(links)
        for _ in range(4):
            p = Placement(device=rng.integers(0, 5, n), order=rng.permutation(n))
            start, finish = eager_schedule(g, c, p, insert=insert)
            want = reference(g, c, p, insert)
            assert np.array_equal(start, want[0]) and np.array_equal(finish, want[1])


def reference_polish(g, c, p, evals, memory=None, pairs=False):
    """The search's rule (the module docstring) in plain Python on full schedules, as
    the oracle of the compiled search's partial, bounded ones."""
    inputs = EagerInputs(g, c, p.rank)
    dev = p.device.astype(np.int64)
    peak = lambda: eager_peak(g, c, Placement(device=dev, order=p.order))  # noqa: E731
    best = inputs.schedule(dev, False)
    finish, binding = inputs.finish.copy(), inputs.binding.copy()
    limit = None if memory is None else np.maximum(memory, peak())
    members = {k: list(v) for k, v in g.groups.items()}
    used, width = 1, 1
    while used < evals:
        chain, v = [], int(np.argmax(finish))
        while v >= 0:
            chain.append(v)
            v = int(binding[v])
        improved = False
        for i in range(len(chain) - width + 1):
            heads = chain[i : i + width]
            v = heads[0]
            nodes = np.array(
                list(dict.fromkeys(u for x in heads for u in members.get(g.group[x], [x])))
            )
            near = {int(dev[u]) for x in heads for u in (*g.predecessors(x), *g.successors(x))}
            for t in range(c.num_devices) if c.num_devices <= ALL_DEVICES else sorted(near):
                if t == dev[v] and (width == 1 or (dev[nodes] == t).all()):
                    continue
                olds = dev[nodes].copy()
                dev[nodes] = t
                span = inputs.schedule(dev, False)
                used += 1
                if span < best * (1 - 1e-9) and (limit is None or (peak() <= limit).all()):
                    best, improved = span, True
                    finish, binding = inputs.finish.copy(), inputs.binding.copy()
                    break
                dev[nodes] = olds
                if used >= evals:
                    break
            if improved or used >= evals:
                break
        if improved:
            width = 1
        elif width == 1 and pairs:
            width = 2
        else:
            break
    return dev


@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("links", ["pair", "port"])
def test_the_compiled_search_makes_the_moves_of_full_schedules(links, pairs):
    # the search runs each move's schedule from a recorded state and stops it once a
    # bound shows it cannot gain: the same moves as full schedules, budget and all
    rng = np.random.default_rng(11)
    # (nodes, devices, bytes): with few bytes on few devices the devices' work binds
    for n, d, size in (
        (12, 3, 2),
        (40, 5, 2),
        (90, 4, 2),
        (80, 2, 0.05),
        (60, ALL_DEVICES + 4, 2),
    ):
        edges = [
            (int(u), v) for v in range(1, n) for u in rng.choice(v, size=min(v, 3), replace=False)
        ]
        group = np.full(n, -1)
        group[[2, 5, 7]] = 0
        g = Graph(
            flops=rng.uniform(0.1, 1.0, n).tolist(),
            out_bytes=rng.uniform(0, size, n).tolist(),
            param_bytes=rng.uniform(0, 1, n).tolist(),
            edges=edges,
            group=group,
        )
        c = unit_cluster(d, latency=0.01).with_links(links)
        for evals, memory in ((40, None), (400, None), (400, np.full(d, n / d))):
            dev = rng.integers(0, d, n)
            dev[[5, 7]] = dev[2]
            p = Placement(device=dev, order=rng.permutation(n))
            got = polish(g, c, p, evals, memory=memory, pairs=pairs)
            want = reference_polish(g, c, p, evals, memory, pairs)
            assert got.device.tolist() == want.tolist()


def test_polish_spreads_independent_work_and_never_worsens_the_estimate():
    g = fork_join()
    c = unit_cluster(2)
    one = Placement(device=np.zeros(6, dtype=int), order=np.arange(6))
    before = eager_makespan(g, c, one)
    with calls.counting() as n:
        got = polish(g, c, one, evals=200)
    assert n.calls == 0
    after = eager_schedule(g, c, got)[1].max()
    # 10 s on one device; 0, 1, 2 on one device and 3, 4, 5 on the other: 0 runs 0-1,
    # its copy arrives at 1.5, 3 and 4 run 1.5-5.5, 2's copy (2 ends at 5) arrives at 5.5
    assert before == 10.0
    assert after == 6.5 == simulate(g, c, got).makespan
    assert got.order.tolist() == one.order.tolist()
    again = polish(g, c, one, evals=200)
    assert again.device.tolist() == got.device.tolist()
    # nothing to gain: the same object back
    assert polish(g, c, got, evals=200) is got


def test_polish_moves_a_colocation_group_whole_and_keeps_the_recompute_set():
    base = fork_join()
    g = Graph(
        flops=base.flops,
        out_bytes=base.out_bytes,
        edges=base.edges,
        group=[-1, 0, 0, -1, -1, -1],
    )
    c = unit_cluster(2)
    p = Placement(device=np.zeros(6, dtype=int), order=np.arange(6))
    got = polish(g, c, p, evals=200)
    assert got.device[1] == got.device[2]
    assert eager_schedule(g, c, got)[1].max() < eager_schedule(g, c, p)[1].max()
    # a training step with a recompute set: each layer's forward and backward (and its
    # recompute node) move together, the set stays
    t = to_training_step(base)
    p = Placement(device=np.zeros(12, dtype=int), order=t.topological_order, recompute=[1])
    got = polish(t, c, p, evals=200)
    assert got.recompute.tolist() == [1]
    assert (got.device[:6] == got.device[6:]).all()
    assert eager_makespan(t, c, got) < eager_makespan(t, c, p)


def test_on_many_devices_a_node_moves_only_to_its_neighbours_devices():
    g = fork_join()
    c = unit_cluster(ALL_DEVICES + 8)
    one = Placement(device=np.zeros(6, dtype=int), order=np.arange(6))
    assert polish(g, c, one, evals=200) is one  # no neighbour elsewhere: nowhere to go
    p = Placement(device=np.array([0, 0, 0, 0, 7, 7]), order=np.arange(6))
    got = polish(g, c, p, evals=200)
    assert set(got.device.tolist()) == {0, 7}
    assert eager_schedule(g, c, got)[1].max() < eager_schedule(g, c, p)[1].max()


def test_polish_stops_at_its_budget_and_refuses_a_negative_one():
    # all on device 0, the chain from 5 back: 5 on device 1 is slower (the second
    # schedule), 4 on device 1 faster (the third); a budget of 2 finds nothing
    g = fork_join()
    c = unit_cluster(2)
    one = Placement(device=np.zeros(6, dtype=int), order=np.arange(6))
    assert polish(g, c, one, evals=3).device.tolist() == [0, 0, 0, 0, 1, 0]
    assert polish(g, c, one, evals=2) is one
    assert polish(g, c, one, evals=1) is one
    with pytest.raises(ValueError, match="evals: must be >= 0, got -1"):
        polish(g, c, one, evals=-1)


def test_a_selector_polishes_the_kept_placement_with_no_simulator_call():
    inst = get_suite("generalize-v0").instance("random_dag-64-s0@p100x4")
    g, c = inst.graph, inst.cluster
    policy = pretrained("onepass-v1").policy
    plain = ProposalSelector(HINTS)
    sel = ProposalSelector(HINTS, polish=500)
    sel.load_state_dict(plain.state_dict())
    with patched(), counting() as n:
        before = one_pass_select(policy, plain, g, c)
        after = one_pass_select(policy, sel, g, c)
    assert n.calls == 0
    assert not before.polished and after.name == before.name
    assert after.polished == (after.placement.device.tolist() != before.placement.device.tolist())
    est = [eager_schedule(g, c, s.placement)[1].max() for s in (before, after)]
    assert est[1] <= est[0]
    assert after.placement.device.tolist() == polish(g, c, before.placement, 500).device.tolist()


def test_a_selector_may_polish_on_the_inserting_estimate_where_memory_cannot_bind():
    inst = get_suite("generalize-v0").instance("random_dag-64-s0@p100x4")
    g, c = inst.graph, inst.cluster
    policy = pretrained("onepass-v1").policy
    plain = ProposalSelector(HINTS)
    sel = ProposalSelector(HINTS, polish=500, polish_insert=True)
    sel.load_state_dict(plain.state_dict())
    assert ProposalSelector(**sel.spec()).polish_insert
    assert "polish_insert" not in ProposalSelector(HINTS, polish=500).spec()
    with patched(), counting() as n:
        before = one_pass_select(policy, plain, g, c)
        after = one_pass_select(policy, sel, g, c)
    assert n.calls == 0
    want = polish(g, c, before.placement, 500, insert=True)
    assert after.placement.device.tolist() == want.device.tolist()
    assert want.device.tolist() != polish(g, c, before.placement, 500).device.tolist()
    est = [eager_makespan(g, c, s.placement, insert=True) for s in (before, after)]
    assert est[1] < est[0]


def test_where_memory_binds_a_polished_placement_is_admitted_or_dropped():
    # two 60-byte nodes on 100-byte devices with nothing to gain by moving: the polish
    # keeps the placement
    g = graph([1.0, 1.0], [], param_bytes=[60.0, 60.0])
    c = unit_cluster(2, memory=100.0)
    apart = Placement(device=np.array([0, 1]), order=np.array([0, 1]))
    assert polish_kept(ProposalSelector(HINTS, polish=50), g, c, apart) is None
    # 5 s instead of 6: 2 beside 0 on device 0 (the first move tried), but 60 + 50 bytes
    # do not fit; or 1 beside 0, 60 + 10 bytes. With memory in view the polish takes the
    # second
    g = graph([1.0, 4.0, 1.0], [(0, 1)], param_bytes=[60.0, 10.0, 50.0])
    p = Placement(device=np.array([0, 1, 1]), order=np.arange(3))
    assert polish(g, c, p, 50).device.tolist() == [0, 1, 0]
    assert polish(g, c, p, 50, memory=c.memory).device.tolist() == [0, 0, 1]
    assert polish(g, c, p, 50, memory=np.array([110.0, 100.0])).device.tolist() == [0, 1, 0]
    got = polish_kept(ProposalSelector(HINTS, polish=50), g, c, p)
    assert got is not None and got.device.tolist() == [0, 0, 1]
    # no move fits: the placement stays
    tight = unit_cluster(2, memory=60.0)
    assert polish(g, tight, p, 50, memory=tight.memory) is p
    assert polish_kept(ProposalSelector(HINTS, polish=50), g, tight, p) is None
    with pytest.raises(ValueError, match=r"memory: expected 2 values \(one per device\)"):
        polish(g, c, p, 50, memory=np.ones(3))


def test_a_polish_with_memory_in_view_keeps_the_estimated_peaks_within_it():
    inst = get_suite("memory-tight-v0").instance("random_dag-96-s0@p100x4-mem0.7-r1-2")
    g, c = inst.graph, inst.cluster
    rng = np.random.default_rng(3)
    for _ in range(3):
        dev = rng.integers(0, c.num_devices, g.num_nodes)
        for nodes in g.groups.values():
            dev[nodes] = dev[nodes[0]]
        p = Placement(device=dev, order=np.arange(g.num_nodes))
        p.check(g, c)
        room = 0.97 * c.memory
        before = eager_peak(g, c, p)
        got = polish(g, c, p, 300, memory=room)
        assert (eager_peak(g, c, got) <= np.maximum(room, before)).all()
        assert eager_schedule(g, c, got)[1].max() <= eager_schedule(g, c, p)[1].max()
    with pytest.raises(ValueError, match="polish: must be >= 0, got -2"):
        ProposalSelector(HINTS, polish=-2)
    assert ProposalSelector(HINTS, polish=50).spec()["polish"] == 50
    assert "polish" not in ProposalSelector(HINTS).spec()


def test_a_selector_with_starts_keeps_the_polished_placement_of_least_estimate():
    inst = get_suite("generalize-v0").instance("random_dag-64-s1@p100x4")
    g, c = inst.graph, inst.cluster
    policy = pretrained("onepass-v1").policy
    # a margin no prediction passes: the kept placement is the policy's own
    one = ProposalSelector(HINTS, polish=300, margin=10.0)
    starts = ("heft", "critical_path", "metis")
    many = ProposalSelector(HINTS, polish=300, margin=10.0, polish_starts=starts)
    many.load_state_dict(one.state_dict())
    with patched(), counting() as n:
        kept = one_pass_select(policy, one, g, c)
        best = one_pass_select(policy, many, g, c)
    assert n.calls == 0
    dec_hints = OnePassDecoder(policy, g, c).hints
    polished = [polish_kept(one, g, c, dec_hints[s]) for s in many.polish_starts if s != kept.name]
    estimates = [eager_makespan(g, c, p) for p in polished if p is not None]
    assert estimates  # the hints' polish finds moves here
    assert eager_makespan(g, c, best.placement) == min(
        [eager_makespan(g, c, kept.placement), *estimates]
    )
    assert kept.name is None and best.name in starts and best.polished
    assert ProposalSelector(**many.spec()).polish_starts == many.polish_starts
    assert "polish_starts" not in one.spec() and "polish_pairs" not in one.spec()
    pairs = ProposalSelector(HINTS, polish=300, polish_pairs=True)
    assert ProposalSelector(**pairs.spec()).polish_pairs
    with pytest.raises(ValueError, match=r"polish_starts: expected distinct names"):
        ProposalSelector(HINTS, polish_starts=("heft", "heft"))
    with pytest.raises(ValueError, match=r"scores or polishes hints \['pipe'\]"):
        one_pass_select(policy, ProposalSelector(HINTS, polish_starts=("pipe",)), g, c)


def test_pairs_move_a_node_with_what_bound_it_where_no_single_move_helps():
    # device 0 runs w (4 s), a (2 s), b (2 s), x (0.5 s) in that order, device 1 y (1 s);
    # w sends 10 s of bytes to x, a 10 s to b: 8.5 s, the chain x <- b <- a <- w. Each
    # single move adds a 10 s copy; the pair b, a to device 1 sends none: device 1 runs
    # a, b, y (5 s), device 0 w, x (4.5 s)
    g = graph([4.0, 2.0, 2.0, 1.0, 0.5], [(0, 4), (1, 2)], out_bytes=[10.0, 10.0, 0, 0, 0])
    c = unit_cluster(2)
    p = Placement(device=np.array([0, 0, 0, 1, 0]), order=np.arange(5))
    assert eager_makespan(g, c, p) == 8.5
    assert polish(g, c, p, 50) is p
    paired = polish(g, c, p, 50, pairs=True)
    assert paired.device.tolist() == [0, 1, 1, 1, 0]
    assert eager_makespan(g, c, paired) == 5.0 == simulate(g, c, paired).makespan
    assert paired.device.tolist() == reference_polish(g, c, p, 50, pairs=True).tolist()
