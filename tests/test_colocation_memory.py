"""Measured node times, co-location groups and memory feasibility (``placegym.graph/v2``):
the format, every duration consumer, the rejection of split groups in every path, the
schedule's account of an out-of-memory placement, the state's masks and the
environment's scoring of infeasible episodes."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from simcases import dags, graph, placement, unit_cluster
from test_costs import chain, two_kinds

from placegym.envs import Graph, PlacementEnv, load_graph, simulate
from placegym.envs.analysis.bounds import serial_upper_bound
from placegym.envs.analysis.levels import step_costs
from placegym.envs.mdp.reward import oom_makespan, terminal_reward
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim.oracle import simulate_oracle
from placegym.envs.sim.simulator import simulate_batch, simulate_makespan
from placegym.train.cli import main

NAN = float("nan")


def measured(time, edges, group=None, param=None, out=None) -> Graph:
    n = len(time)
    return Graph(
        flops=[1e9] * n,  # ignored where a time is measured
        out_bytes=out if out is not None else [0.0] * n,
        param_bytes=param,
        edges=edges,
        time=time,
        group=group,
        name="m",
    )


# ---------------------------------------------------------------------- the format
def test_v2_round_trips_and_v1_graphs_stay_v1():
    g = measured([0.5, NAN, 2.0], [(0, 1), (1, 2)], group=[0, -1, 0])
    doc = g.to_dict()
    assert doc["format"] == "placegym.graph/v2"
    assert doc["nodes"][0]["time"] == 0.5 and "time" not in doc["nodes"][1]
    assert doc["nodes"][2]["group"] == 0 and "group" not in doc["nodes"][1]
    back = load_graph(json.loads(json.dumps(doc)))
    np.testing.assert_array_equal(back.time, g.time)
    np.testing.assert_array_equal(back.group, [0, -1, 0])
    assert back.groups.keys() == {0} and back.groups[0].tolist() == [0, 2]
    assert back.group_first.tolist() == [0, -1, 0]
    plain = graph([1.0, 2.0], [(0, 1)])
    assert plain.to_dict()["format"] == "placegym.graph/v1" and not plain.groups
    assert not plain.measured and np.isnan(plain.time).all()
    assert Graph.from_networkx(g.to_networkx()).to_dict() == {**doc, "name": "m"}


@pytest.mark.parametrize(
    ("node", "fmt", "message"),
    [
        ({"group": 1}, "placegym.graph/v1", r"nodes\[0\]\.group: needs the format tag"),
        ({"time": 1.0}, "placegym.graph/v1", r"nodes\[0\]\.time: needs the format tag"),
        ({"time": -1.0}, "placegym.graph/v2", r"nodes\[0\]\.time: .*>= 0, got -1"),
        ({"time": "x"}, "placegym.graph/v2", r"nodes\[0\]\.time"),
        ({"group": -2}, "placegym.graph/v2", r"nodes\[0\]\.group.*got -2"),
        ({"group": 1.5}, "placegym.graph/v2", r"nodes\[0\]\.group"),
    ],
)
def test_bad_v2_fields_are_named(node, fmt, message):
    doc = {"format": fmt, "nodes": [{"flops": 1, "out_bytes": 1, **node}], "edges": []}
    with pytest.raises(ValueError, match=message):
        load_graph(doc)


def test_constructor_rejects_infinite_times_naming_the_node():
    with pytest.raises(ValueError, match=r"nodes\[1\]\.time: .* got inf"):
        measured([1.0, float("inf")], [])


# ---------------------------------------------------------------------- measured times
def test_measured_times_replace_the_roofline_hand_solved():
    # 0 -> 1 -> 2; node 1 has no time (roofline: 2 FLOP at 1 FLOP/s = 2 s); unit transfers
    g = Graph(
        flops=[100.0, 2.0, 100.0],
        out_bytes=[1.0, 1.0, 0.0],
        edges=[(0, 1), (1, 2)],
        time=[0.5, NAN, 3.0],
    )
    c = unit_cluster(2, launch=0.25)
    p = placement([0, 0, 1], [0, 1, 2])
    s = simulate(g, c, p)
    # 0: 0.5 + 0.25; 1: 2 + 0.25 after it; transfer 1 s; 2: 3 + 0.25
    assert s.finish.tolist() == [0.75, 3.0, 7.25]
    assert simulate_oracle(g, c, p).makespan == s.makespan
    assert simulate_makespan(g, c, p) == s.makespan
    batch = simulate_batch(g, c, p.device[None], p.order[None])
    assert batch.makespan.tolist() == [s.makespan]
    np.testing.assert_array_equal(step_costs(g, c).duration[:, 0], [0.75, 2.25, 3.25])


def test_a_profiled_cost_wins_over_a_measured_time():
    g0 = chain(2)
    sig = g0.to_dict()
    for nd in sig["nodes"]:
        nd["time"] = 7.0
    sig["format"] = "placegym.graph/v2"
    g = load_graph(sig)
    from placegym.envs.core.costs import kernel_signature

    c = two_kinds({"fast": {kernel_signature(g, 1): 0.125}})
    table = step_costs(g, c).duration
    # node 1 on the fast kind (launch 0.5): profiled 0.125; elsewhere the measured 7
    assert table[1, 0] == 0.625 and table[1, 1] == 7.0 and table[0, 0] == 7.5


# ---------------------------------------------------------------------- groups
GROUPED = measured([1.0] * 4, [(0, 1), (1, 2), (2, 3)], group=[3, -1, 3, -1])


def test_every_simulation_path_rejects_a_split_group_naming_it_and_two_nodes():
    c = unit_cluster(2)
    bad = placement([0, 0, 1, 1], [0, 1, 2, 3])
    msg = r"splits co-location group 3 of graph 'm': node 0 is on device 0, node 2 on device 1"
    with pytest.raises(ValueError, match=r"device: " + msg):
        bad.check(GROUPED, c)
    with pytest.raises(ValueError, match=msg):
        simulate(GROUPED, c, bad)
    with pytest.raises(ValueError, match=msg):
        simulate_makespan(GROUPED, c, bad)
    with pytest.raises(ValueError, match=msg):
        simulate_oracle(GROUPED, c, bad)
    good = placement([1, 0, 1, 0], [0, 1, 2, 3])
    devs = np.array([good.device, bad.device])
    with pytest.raises(ValueError, match=r"devices\[1\]: " + msg):
        simulate_batch(GROUPED, c, devs, devs * 0 + np.arange(4))
    assert simulate(GROUPED, c, good).makespan > 0


def test_validate_cli_rejects_a_split_group(tmp_path, capsys):
    GROUPED.save(tmp_path / "g.json")
    unit_cluster(2).save(tmp_path / "c.json")
    placement([0, 0, 1, 1], [0, 1, 2, 3]).save(tmp_path / "p.json")
    rc = main(["validate", str(tmp_path / "g.json"), str(tmp_path / "p.json"),
               "--cluster", str(tmp_path / "c.json")])  # fmt: skip
    err = capsys.readouterr()
    assert rc != 0
    assert "splits co-location group 3" in err.out + err.err


def test_the_state_keeps_groups_together_and_reserves_the_whole_group():
    g = measured([1.0] * 4, [(0, 1), (0, 2), (1, 3)], group=[-1, 0, -1, 0], param=[1, 4, 1, 4])
    c = unit_cluster(3, memory=9.0)
    s = PlacementState(g, c)
    s.select(0)
    s.place(2)  # param_used [0, 0, 1]
    s.select(1)
    # node 1 opens group 0, which needs 8 bytes: device 2 (1 used) has room, so all do
    assert s.resident_need(1) == 8.0 and s.place_mask().tolist() == [True, True, True]
    assert s.group_device(1) == -1
    s.place(1)
    assert s.group_device(3) == 1 and s.resident_need(3) == 4.0
    before = s.copy()
    s.select(2)
    s.place(0)
    s.select(3)
    assert s.place_mask().tolist() == [False, True, False]
    assert s.is_legal(1) and not s.is_legal(0) and not s.is_legal(2)
    with pytest.raises(ValueError, match="device 0 is not legal for node 3"):
        s.place(0)
    assert before.group_device(3) == 1 and before.selected == -1  # copies are independent
    s.place(1)
    assert s.to_placement().device.tolist() == [2, 1, 0, 1]


def test_the_memory_mask_counts_the_whole_group_when_it_opens():
    g = measured([1.0] * 3, [(0, 1), (1, 2)], group=[0, -1, 0], param=[4, 1, 4])
    c = unit_cluster(2, memory=10.0)
    s = PlacementState(g, c)
    s.param_used[:] = [0.0, 3.0]  # device 1 has 7 free: room for node 0, not its group
    s.select(0)
    assert s.place_mask().tolist() == [True, False]


def test_a_masked_random_agent_never_splits_a_group():
    g = measured([1.0] * 6, [(0, 2), (1, 2), (2, 3), (2, 4), (4, 5)], group=[0, 1, -1, 0, 1, 0])
    env = PlacementEnv(g, unit_cluster(3))
    rng = np.random.default_rng(0)
    for seed in range(10):
        env.reset(seed=seed)
        done = False
        while not done:
            legal = np.flatnonzero(env.action_masks())
            _, _, done, _, info = env.step(int(rng.choice(legal)))
        dev = info["placement"]
        assert dev[0] == dev[3] == dev[5] and dev[1] == dev[4]
        assert info["infeasible"] is None


# ---------------------------------------------------------------------- memory
def test_the_schedule_names_the_device_over_memory_and_by_how_much():
    g = graph([1.0, 1.0, 1.0], [(0, 1)], param_bytes=[8.0, 8.0, 1.0])
    c = unit_cluster(2, memory=10.0)
    s = simulate(g, c, placement([1, 1, 0], [0, 1, 2]))
    assert s.oom
    np.testing.assert_array_equal(s.memory_excess, [0.0, 6.0])
    assert s.infeasibility == ("out of memory on device 1 (d1): peak 16 bytes, 6 over its 10")
    summary = s.summary()
    assert summary["infeasible"] == s.infeasibility
    assert [d["excess"] for d in summary["devices"]] == [0.0, 6.0]
    fine = simulate(g, c, placement([0, 1, 0], [0, 1, 2]))
    assert not fine.oom and fine.infeasibility is None


def test_an_infeasible_episode_scores_the_serial_bound_and_says_why():
    g = graph([1.0, 2.0], [(0, 1)], out_bytes=[1.0, 0.0], param_bytes=[6.0, 6.0])
    c = unit_cluster(2, memory=10.0)
    env = PlacementEnv(g, c, memory_mask=False, reward="relative")
    env.reset(seed=0)
    for a in (0, 0, 1, 0):  # both on device 0: 12 bytes resident, over its 10
        _, reward, done, _, info = env.step(a)
    assert done and info["oom"] and info["infeasible"].startswith("out of memory on device 0")
    bound = serial_upper_bound(g, c)
    assert bound == 1.0 + 2.0 + 1.0  # both nodes' durations and one possible transfer
    assert oom_makespan(g, c) == bound and info["makespan"] == 3.0
    assert reward == terminal_reward("relative", bound, info["reference_makespan"])
    # the same graph with room: the reward reads the makespan itself
    env = PlacementEnv(g, unit_cluster(2, memory=20.0), memory_mask=False)
    env.reset(seed=0)
    for a in (0, 0, 1, 0):
        _, reward, done, _, info = env.step(a)
    assert info["infeasible"] is None
    assert reward == terminal_reward("relative", 3.0, info["reference_makespan"])


@given(dags(max_nodes=10), st.integers(1, 4), st.data())
def test_no_placement_is_slower_than_the_serial_upper_bound(g, d, data):
    c = unit_cluster(d, latency=0.5, launch=0.1)
    n = g.num_nodes
    dev = data.draw(st.lists(st.integers(0, d - 1), min_size=n, max_size=n))
    order = data.draw(st.permutations(range(n)))
    for dispatch in ("priority", "fifo"):
        s = simulate(g, c, placement(dev, order), dispatch=dispatch)
        assert s.makespan <= serial_upper_bound(g, c) * (1 + 1e-12)


def test_the_vector_environment_refuses_grouped_graphs():
    from placegym.envs.mdp.vector import PlacementVectorEnv

    venv = PlacementVectorEnv(2, graph=GROUPED, cluster=unit_cluster(2))
    with pytest.raises(ValueError, match="co-location groups"):
        venv.reset(seed=0)
