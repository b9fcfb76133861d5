"""Shared links: the cluster option ``links="port"`` (one send and one receive port per
device and network level, FIFO) against ``"pair"`` (one channel per ordered device pair).

Hand-solved cases use :func:`simcases.unit_cluster` (1 FLOP/s, bandwidth 1 B/s, no
latency): a node's duration is its flops and a transfer takes its bytes in seconds.
"""

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from simcases import clusters, dags, graph, placement, problems, unit_cluster
from test_simulator_properties import assert_same, check_invariants, random_rows

from placegym.envs import Cluster, Device, Level, Schedule, simulate, simulate_batch
from placegym.envs.sim.oracle import simulate_oracle
from placegym.envs.sim.simulator import simulate_makespan

SIMULATORS = [simulate, simulate_oracle]
dispatches = st.sampled_from(["priority", "fifo"])


@pytest.fixture(params=SIMULATORS, ids=["compiled", "reference"])
def sim(request):
    return request.param


def both(sim, g, c, p) -> tuple[Schedule, Schedule]:
    """``(pair, port)`` schedules of one placement."""
    return sim(g, c.with_links("pair"), p), sim(g, c.with_links("port"), p)


def two_nodes_and_a_rack() -> Cluster:
    """d0, d1, d2 on one node (level 0), d3 on another (level 1); unit speeds."""
    devs = tuple(Device(f"d{i}", 1.0, 1e18, path=(0 if i < 3 else 1,)) for i in range(4))
    return Cluster(devices=devs, levels=(Level("node", 1.0), Level("rack", 1.0)), name="2lv")


# ---------------------------------------------------------------- hand-solved cases
def test_one_producer_two_consumers_pair_overlaps_port_serialises(sim):
    # 0 on d0 sends 4 bytes to 1 on d1 and 2 on d2
    g = graph([1, 1, 1], [[0, 1], [0, 2]], out_bytes=[4, 0, 0])
    pair, port = both(sim, g, unit_cluster(3), placement([0, 1, 2], [0, 1, 2]))
    assert pair.transfers.start.tolist() == [1.0, 1.0]
    assert pair.makespan == 6.0
    # the send port of d0 takes d1's copy first (ascending destination), then d2's
    assert port.transfers.dst.tolist() == [1, 2]
    assert port.transfers.start.tolist() == [1.0, 5.0]
    assert port.transfers.arrival.tolist() == [5.0, 9.0]
    assert port.start.tolist() == [0.0, 5.0, 9.0]
    assert port.makespan == 10.0


def test_two_producers_one_receiver_the_receive_port_serialises(sim):
    # 0 on d0 (1 s) and 1 on d1 (2 s) each send 3 bytes to 2 on d2
    g = graph([1, 2, 1], [[0, 2], [1, 2]], out_bytes=[3, 3, 0])
    pair, port = both(sim, g, unit_cluster(3), placement([0, 1, 2], [0, 1, 2]))
    assert pair.transfers.start.tolist() == [1.0, 2.0]
    assert pair.makespan == 6.0  # arrivals 4 and 5
    assert port.transfers.node.tolist() == [0, 1]  # in the order they became ready
    assert port.transfers.start.tolist() == [1.0, 4.0]
    assert port.transfers.arrival.tolist() == [4.0, 7.0]
    assert port.makespan == 8.0


@pytest.mark.parametrize(
    ("order", "first", "expected"), [([0, 1, 2, 3], 0, 10.0), ([1, 0, 2, 3], 1, 12.0)]
)
def test_producers_finishing_together_take_the_port_in_rank_order(sim, order, first, expected):
    # 0 on d0 and 1 on d1 both finish at 1 and send 3 bytes to d2, where 2 (5 s) needs
    # 0's output and 3 (1 s) needs 1's: the lower rank's copy goes first
    g = graph([1, 1, 5, 1], [[0, 2], [1, 3]], out_bytes=[3, 3, 0, 0])
    p = placement([0, 1, 2, 2], order)
    pair, port = both(sim, g, unit_cluster(3), p)
    assert pair.makespan == 10.0  # both copies at 4: 2 (rank 2) then 3
    assert port.transfers.node.tolist() == [first, 1 - first]
    assert port.transfers.start.tolist() == [1.0, 4.0]
    assert port.makespan == expected


def test_one_producers_copies_go_in_ascending_destination_order(sim):
    # consumers on d2 (5 s) and d1 (1 s): d1's copy first whatever the consumer ids
    g = graph([1, 5, 1], [[0, 1], [0, 2]], out_bytes=[2, 0, 0])
    _, port = both(sim, g, unit_cluster(3), placement([0, 2, 1], [0, 1, 2]))
    assert port.transfers.dst.tolist() == [1, 2]
    assert port.transfers.start.tolist() == [1.0, 3.0]
    assert port.finish.tolist() == [1.0, 10.0, 4.0]


def test_transfers_on_different_levels_do_not_block_each_other(sim):
    # 0 on d0 sends to d1 (same node, level 0) and to d3 (other node, level 1) at once
    g = graph([1, 1, 1], [[0, 1], [0, 2]], out_bytes=[4, 0, 0])
    pair, port = both(sim, g, two_nodes_and_a_rack(), placement([0, 1, 3], [0, 1, 2]))
    assert port.transfers.start.tolist() == pair.transfers.start.tolist() == [1.0, 1.0]
    assert port.makespan == pair.makespan == 6.0
    # the same fan-out within one level serialises
    _, same_level = both(sim, g, two_nodes_and_a_rack(), placement([0, 1, 2], [0, 1, 2]))
    assert same_level.makespan == 10.0


def test_a_device_sends_and_receives_at_once(sim):
    # d0 sends to d1 while d2 sends to d0: d0's send and receive ports are independent
    g = graph([1, 1, 1, 1], [[0, 1], [2, 3]], out_bytes=[4, 0, 4, 0])
    pair, port = both(sim, g, unit_cluster(3), placement([0, 1, 2, 0], [0, 1, 2, 3]))
    assert port.transfers.start.tolist() == [1.0, 1.0]
    assert port.makespan == pair.makespan == 6.0


def test_a_later_transfer_waits_for_an_earlier_one_on_its_port_no_back_filling(sim):
    # 0 on d2 holds d1's receive port on [1, 11]; 1 on d0 finishes at 2 and sends to d1
    # (waits until 11) and then to d3: d0's send port is idle on [2, 11] but the copy to
    # d3 was enqueued after the one to d1, so it starts when that one arrives, at 13
    g = graph([1, 2, 1, 1, 1], [[0, 2], [1, 3], [1, 4]], out_bytes=[10, 2, 0, 0, 0])
    p = placement([2, 0, 1, 1, 3], [0, 1, 2, 3, 4])
    pair, port = both(sim, g, unit_cluster(4), p)
    assert pair.transfers.start.tolist() == [1.0, 2.0, 2.0]
    assert pair.makespan == 12.0
    assert port.transfers.start.tolist() == [1.0, 11.0, 13.0]
    assert port.transfers.arrival.tolist() == [11.0, 13.0, 15.0]
    assert port.start.tolist() == [0.0, 0.0, 11.0, 13.0, 15.0]
    assert port.makespan == 16.0


def test_ports_can_shorten_a_schedule_a_list_scheduling_anomaly(sim):
    """Why no test asserts port >= pair: a later arrival changes the dispatch order.

    P (d0) sends to W (d1) and X (d2, 4 s, high priority); Q (d3, 2.5 s) sends nothing
    but a 0-byte signal to Y (d2), whose output feeds Z (d3, 5 s). With pairs X arrives
    at 2 and takes d2 until 6, so Y waits: 6..7, Z 8..13. With ports X's copy waits for
    W's on d0's send port and arrives at 3, after Y became ready at 2.5: Y runs first,
    Z runs 4.5..9.5 and X 3.5..7.5."""
    g = graph(
        [1, 1, 4, 2.5, 1, 5],
        [[0, 1], [0, 2], [3, 4], [4, 5]],
        out_bytes=[1, 0, 0, 0, 1, 0],
    )
    p = placement([0, 1, 2, 3, 2, 3], [0, 3, 2, 1, 4, 5])
    pair, port = both(sim, g, two_nodes_and_a_rack(), p)
    assert pair.start.tolist() == [0.0, 2.0, 2.0, 0.0, 6.0, 8.0]
    assert pair.makespan == 13.0
    assert port.start.tolist() == [0.0, 2.0, 3.5, 0.0, 2.5, 4.5]
    assert port.makespan == 9.5


def test_a_copy_waiting_for_its_send_port_is_allocated_when_it_starts(sim):
    # 0 on d0 sends 4 bytes to d1 ([1, 5]) then d2 ([5, 9]); 3 on d2 holds 10 bytes on
    # [0, 2): the copy on d2 lives [5, 10), so d2's peak is 10 (14 if it began at 1)
    g = graph([1, 1, 1, 2], [[0, 1], [0, 2]], out_bytes=[4, 3, 3, 10])
    _, port = both(sim, g, unit_cluster(3), placement([0, 1, 2, 2], [0, 1, 2, 3]))
    assert port.transfers.start.tolist() == [1.0, 5.0]
    assert port.peak_memory.tolist() == [4.0, 7.0, 10.0]


def test_a_copy_waiting_for_its_receive_port_is_allocated_when_it_starts(sim):
    # copies of 0 (d0) and 1 (d1) to d2 run [1, 4] and [4, 7]; 3 on d2 holds 10 bytes on
    # [0, 3.5): d2 peaks at 13 on [1, 3.5) (16 if the second copy began at 2)
    g = graph([1, 2, 1, 3.5], [[0, 2], [1, 2]], out_bytes=[3, 3, 0, 10])
    _, port = both(sim, g, unit_cluster(3), placement([0, 1, 2, 2], [0, 1, 2, 3]))
    assert port.transfers.start.tolist() == [1.0, 4.0]
    assert port.peak_memory.tolist() == [3.0, 3.0, 13.0]


# ---------------------------------------------------------------- cluster format
def test_links_round_trip_and_pair_is_left_out():
    c = unit_cluster(3)
    assert c.links == "pair" and "links" not in c.to_dict()
    port = c.with_links("port")
    doc = port.to_dict()
    assert doc["links"] == "port"
    back = Cluster.from_dict(json.loads(json.dumps(doc)))
    assert back.links == "port" and back.to_dict() == doc
    assert Cluster.from_dict(c.to_dict()).links == "pair"
    assert repr(port).endswith("links='port')") and "links" not in repr(c)
    three = [Level(f"l{k}", 1.0) for k in range(3)]
    assert Cluster.homogeneous(Device("g", 1.0, 1.0), 2, three, links="port").links == "port"


@pytest.mark.parametrize("bad", ["ports", "PAIR", 1, None])
def test_a_bad_links_value_is_refused_naming_field_and_value(bad):
    doc = {**unit_cluster(2).to_dict(), "links": bad}
    with pytest.raises(ValueError, match=rf"links: expected 'pair' or 'port', got {bad!r}"):
        Cluster.from_dict(doc)
    with pytest.raises(ValueError, match=r"links: expected 'pair' or 'port', got 'bus'"):
        unit_cluster(2).with_links("bus")  # type: ignore[arg-type]


def test_a_port_cluster_file_simulates_with_ports(tmp_path):
    g = graph([1, 1, 1], [[0, 1], [0, 2]], out_bytes=[4, 0, 0])
    path = tmp_path / "c.json"
    unit_cluster(3).with_links("port").save(path)
    p = placement([0, 1, 2], [0, 1, 2])
    assert simulate(g, path, p).makespan == 10.0
    assert simulate_makespan(g, path, p) == 10.0


# ---------------------------------------------------------------- random cases
def check_port_rule(s: Schedule) -> None:
    """The rule, re-derived from the trace alone: transfers are listed in enqueue order
    (their producers' finish times never decrease; one producer's destinations ascend),
    and each starts at max(its producer's finish, the last arrival on its send port,
    the last arrival on its receive port)."""
    tr, level = s.transfers, s.cluster.pair_level
    assert (np.diff(s.finish[tr.node]) >= 0).all()
    same = tr.node[1:] == tr.node[:-1]
    assert (tr.dst[1:][same] > tr.dst[:-1][same]).all()
    free: dict[tuple[str, int, int], float] = {}
    for i in range(len(tr)):
        a, b = int(tr.src[i]), int(tr.dst[i])
        held = (("send", a, int(level[a, b])), ("recv", b, int(level[a, b])))
        ready = float(s.finish[tr.node[i]])
        assert tr.start[i] == max(ready, *(free.get(k, 0.0) for k in held))
        free.update(dict.fromkeys(held, float(tr.arrival[i])))


def as_ports(problem):
    g, c, p = problem
    return g, c.with_links("port"), p


@given(problems(), dispatches)
def test_compiled_matches_reference_with_ports(problem, dispatch):
    g, c, p = as_ports(problem)
    s = simulate(g, c, p, dispatch=dispatch)
    assert_same(s, simulate_oracle(g, c, p, dispatch=dispatch))
    assert simulate_makespan(g, c, p, dispatch=dispatch) == s.makespan


@given(problems(max_nodes=30, max_devices=6), dispatches)
def test_port_schedules_keep_the_invariants_and_the_rule(problem, dispatch):
    s = simulate(*as_ports(problem), dispatch=dispatch)
    check_invariants(s)
    check_port_rule(s)


@given(problems(), st.integers(0, 2**32 - 1))
def test_noise_with_ports_matches_reference(problem, seed):
    g, c, p = as_ports(problem)
    a = simulate(g, c, p, noise=0.3, rng=seed)
    assert_same(a, simulate_oracle(g, c, p, noise=0.3, rng=np.random.default_rng(seed)))


@given(problems(), dispatches, st.integers(1, 6), st.integers(1, 3))
def test_batch_with_ports_equals_one_by_one(problem, dispatch, b, threads):
    g, c, _ = as_ports(problem)
    devs, orders = random_rows(g.num_nodes, c.num_devices, b)
    res = simulate_batch(g, c, devs, orders, dispatch=dispatch, threads=threads)
    for i in range(b):
        s = simulate(g, c, placement(devs[i], orders[i]), dispatch=dispatch)
        assert res.makespan[i] == s.makespan
        assert res.peak_memory[i].tobytes() == s.peak_memory.tobytes()
        assert res.oom[i] == s.oom


@given(problems(), dispatches)
def test_on_two_devices_ports_are_pairs(problem, dispatch):
    """With at most two devices in use each port carries one channel's transfers."""
    g, c, p = problem
    p = placement(p.device % 2 if c.num_devices > 1 else p.device, p.order)
    pair, port = (simulate(g, c.with_links(x), p, dispatch=dispatch) for x in ("pair", "port"))
    assert pair.makespan == port.makespan
    assert pair.start.tobytes() == port.start.tobytes()
    assert pair.transfers.arrival.tobytes() == port.transfers.arrival.tobytes()
    assert pair.peak_memory.tobytes() == port.peak_memory.tobytes()


@st.composite
def one_node_per_device(draw):
    g = draw(dags(max_nodes=6))
    c = draw(clusters(max_devices=6).filter(lambda c: c.num_devices >= g.num_nodes))
    dev = draw(st.permutations(range(c.num_devices)))[: g.num_nodes]
    order = draw(st.permutations(range(g.num_nodes)))
    return g, c, placement(np.array(dev, dtype=np.int64), np.array(order, dtype=np.int64))


@given(one_node_per_device(), dispatches)
def test_with_one_node_per_device_ports_never_finish_earlier(problem, dispatch):
    """No device ever chooses between ready nodes, so no anomaly: every node starts no
    earlier with ports (with pairs no transfer ever waits)."""
    g, c, p = problem
    pair, port = (simulate(g, c.with_links(x), p, dispatch=dispatch) for x in ("pair", "port"))
    assert (pair.transfers.start == pair.finish[pair.transfers.node]).all()
    assert (port.start >= pair.start).all()
    assert port.makespan >= pair.makespan


def test_the_vector_env_scores_with_the_clusters_links():
    """The native vector env's terminal makespan is the simulator's on a port cluster
    (its compiled steps only estimate start times; the score comes from ``simulate``)."""
    from placegym.envs.mdp.vector import PlacementVectorEnv
    from placegym.envs.workloads import make_graph

    c = dataclasses.replace(unit_cluster(4, flops=1e10, bandwidth=1e7), links="port")
    g = make_graph("ffnn")
    venv = PlacementVectorEnv(2, graph=g, cluster=c)
    venv.reset(seed=3)
    rng = np.random.default_rng(0)
    term = np.zeros(2, dtype=bool)
    while not term.all():
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in venv.action_masks()])
        _, _, term, _, info = venv.step(actions)
    final = info["final_info"]
    spans = []
    for i in range(2):
        place = placement(final["placement"][i], final["order"][i])
        spans.append(simulate(g, c, place).makespan)
        assert final["makespan"][i] == spans[i]
    assert spans != [
        simulate(
            g, c.with_links("pair"), placement(final["placement"][i], final["order"][i])
        ).makespan
        for i in range(2)
    ]


def test_the_optimal_teacher_refuses_port_links():
    from placegym.teachers.optimal import solve

    g = graph([1, 10, 10, 10], [[0, 1], [0, 2], [0, 3]], out_bytes=[1, 0, 0, 0])
    assert solve(g, unit_cluster(4)).makespan == 12.0
    with pytest.raises(ValueError, match=r"cluster.links: .*\('pair'\) only, got 'port'"):
        solve(g, unit_cluster(4).with_links("port"))


# ---------------------------------------------------------------- rank-change report
def test_spearman_on_hand_solved_vectors():
    from placegym.train.experiments.links import spearman

    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8, abs=1e-15)
    assert spearman([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0, abs=1e-15)
    # ties share mean ranks: (0, 1.5, 1.5, 3) against (0, 1, 2, 3)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(3 / np.sqrt(10), rel=1e-14)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3])) and np.isnan(spearman([5], [6]))
    with pytest.raises(ValueError, match=r"y: expected 3 values like x, got shape \(2,\)"):
        spearman([1, 2, 3], [1, 2])


def test_suite_ranks_compare_each_placement_under_both_models():
    from placegym.envs.suites import InstanceSpec, Suite, workload
    from placegym.train.experiments.links import (
        InstanceRanks,
        markdown_table,
        placements_for,
        spearman,
        suite_ranks,
    )

    spec = InstanceSpec("ffnn@p100x4", workload("ffnn"), "p100x4")
    suite = Suite("tiny-v0", "one instance", {"test": (spec,)})
    teachers = ["critical_path", "single_device", "optimal"]  # optimal: over its size limit
    (row,) = suite_ranks(suite, teachers=teachers, random=3, seed=1)
    inst = suite.instance("ffnn@p100x4")
    ps = placements_for(inst.graph, inst.cluster, teachers, 3, 1)
    assert row.instance == "ffnn@p100x4" and row.placements == len(ps) == 5
    spans = {
        x: [simulate(inst.graph, inst.cluster.with_links(x), p).makespan for p in ps]
        for x in ("pair", "port")
    }
    assert row.rho == pytest.approx(spearman(spans["pair"], spans["port"]), rel=1e-12)
    ratio = np.exp(np.mean(np.log(np.divide(spans["port"], spans["pair"]))))
    assert row.ratio == pytest.approx(ratio, rel=1e-12)
    with pytest.raises(ValueError, match=r"teacher: unknown name 'nope'"):
        suite_ranks(suite, teachers=["nope"], random=0)
    table = markdown_table(
        {"s": [InstanceRanks("a", 5, 0.5, 1.2), InstanceRanks("b", 3, float("nan"), 1.0)]}
    )
    assert table.splitlines()[2] == "| s | 2 | 4.0 | 0.500 (1 undefined) | 0.500 | 1.095 |"
