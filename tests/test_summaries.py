"""The proposal selector's summaries: the contended list schedule solved by hand (and
equal to the simulator where the list's order is the simulator's), the contention-free
one beside it, and the selector that reads them."""

from __future__ import annotations

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.agents.doppler.onepass import plain_hint_placements
from placegym.agents.doppler.selector import (
    ProposalSelector,
    admit,
    load_selector,
    save_selector,
)
from placegym.agents.doppler.summaries import (
    CONTENTION_FEATURES,
    FEATURES,
    PLACEMENT_FIELDS,
    estimated_peak,
    instance_summary,
    placement_summary,
    proposal_features,
)
from placegym.envs import Placement, simulate
from placegym.envs.suites import get_suite
from placegym.train.selector import dataset

ESTIMATE, CONTENDED = PLACEMENT_FIELDS.index("estimate"), PLACEMENT_FIELDS.index("contended")


def test_copies_queue_on_their_channel_in_the_contended_estimate():
    # 0 (1 s) and 1 (0.5 s) on device 0 each send 2 bytes (2 s) to device 1, where 3
    # reads 0 and 2 reads both; 3 is listed before 2
    g = graph([1.0, 0.5, 1.0, 1.0], [(0, 2), (1, 2), (0, 3)], out_bytes=[2.0, 2.0, 1.0, 1.0])
    c = unit_cluster(2)
    p = Placement(device=np.array([0, 0, 1, 1]), order=np.array([0, 1, 3, 2]))
    s = placement_summary(g, c, p)
    # no contention: 0's copy arrives at 3, 1's at 3.5; 3 runs 3-4, 2 runs 4-5
    assert s[ESTIMATE] == 5.0
    # one channel (0, 1): 1's copy waits for 0's to arrive (3) and arrives at 5; 3 runs
    # 3-4 on the copy 2 shares with it (sent once), 2 runs 5-6: the simulator's schedule
    assert s[CONTENDED] == 6.0
    assert simulate(g, c, p).makespan == 6.0
    # the peak of that schedule, by DESIGN's lifetimes: device 0 holds 0's and 1's
    # outputs (2 + 2 bytes) from 1 until 0's copy arrives at 3; device 1 holds both
    # copies (from their transfers' starts, 1 and 3, until 2 finishes at 6) and 3's
    # output (1 byte) while 3 runs, or 2's while 2 runs
    assert estimated_peak(g, c, p).tolist() == [4.0, 5.0]
    assert estimated_peak(g, c, p).tolist() == simulate(g, c, p).peak_memory.tolist()


@pytest.mark.parametrize(("links", "makespan"), [("pair", 4.5), ("port", 6.0)])
def test_copies_to_one_device_share_its_receive_port_only_with_port_links(links, makespan):
    # 0 on device 0 and 1 on device 2 each send 2 s of bytes to 2 on device 1: separate
    # channels, but one receive port of device 1
    g = graph([1.0, 1.5, 1.0], [(0, 2), (1, 2)], out_bytes=[2.0, 2.0, 0.0])
    c = unit_cluster(3).with_links(links)
    p = Placement(device=np.array([0, 2, 1]), order=np.array([0, 1, 2]))
    s = placement_summary(g, c, p)
    assert s[ESTIMATE] == 4.5  # contention-free whatever the links
    assert s[CONTENDED] == makespan == simulate(g, c, p).makespan


def test_the_contended_estimate_is_never_below_the_free_one_on_random_placements():
    rng = np.random.default_rng(0)
    n = 40
    edges = [(u, v) for v in range(1, n) for u in rng.choice(v, size=min(v, 2), replace=False)]
    g = graph(rng.uniform(0.1, 1.0, n).tolist(), edges, out_bytes=rng.uniform(0, 2, n).tolist())
    for links in ("pair", "port"):
        c = unit_cluster(4, latency=0.01).with_links(links)
        for _ in range(5):
            p = Placement(device=rng.integers(0, 4, n), order=np.arange(n))
            s = placement_summary(g, c, p)
            assert s[CONTENDED] >= s[ESTIMATE] - 1e-12


def test_a_contention_selector_reads_three_more_features_and_saves_the_flag(tmp_path):
    g = graph([1.0, 1.0], [(0, 1)], out_bytes=[1.0, 0.0])
    c = unit_cluster(2)
    own = placement_summary(g, c, Placement(device=np.array([0, 1]), order=np.arange(2)))
    other = placement_summary(g, c, Placement(device=np.array([0, 0]), order=np.arange(2)))
    inst = instance_summary(g, c)
    plain = proposal_features(own, other, 0, 2, inst)
    more = proposal_features(own, other, 0, 2, inst, contention=True)
    assert len(plain) == FEATURES + 2 and len(more) == len(plain) + CONTENTION_FEATURES
    assert more[: len(plain)].tolist() == plain.tolist()
    # own: 0 -> 1 across devices (1 + 1 + 1 s); other: both on device 0 (2 s)
    assert more[len(plain)] == pytest.approx(np.log(2.0 / 3.0))
    sel = ProposalSelector(["metis", "heft"], contention=True)
    assert sel.nets[0][0].in_features == len(more)
    save_selector(sel, tmp_path / "s.pt")
    back = load_selector(tmp_path / "s.pt")
    assert back.contention and back.spec() == sel.spec()
    assert "contention" not in ProposalSelector(["metis"]).spec()  # old files read as before


def test_contention_refuses_rows_collected_before_the_contended_estimate():
    row = {
        "index": 7,
        "names": ["metis"],
        "instance": [0.0] * 8,
        "own": {"summary": [1.0] * 8, "makespan": 1.0, "oom": False},
        "metis": {"summary": [1.0] * 8, "makespan": 0.9, "oom": False},
    }
    x, _ = dataset([row], ["metis"])
    assert x.shape == (1, FEATURES + 1)
    with pytest.raises(ValueError, match=r"row 7 has 8 summary fields, contention reads 9"):
        dataset([row], ["metis"], contention=True)


def test_an_estimated_peak_admits_a_proposal_the_replay_refuses_only_with_a_margin():
    suite = get_suite("pipedream-v0")
    inst = suite.instance("alexnet-train@p100x2-live1.05")
    g, c = inst.graph, inst.cluster
    fits, over = plain_hint_placements(g, c, ("metis", "nest"))
    # the replay under the timed mask refuses both
    assert admit(g, c, fits, "timed") is None and admit(g, c, over, "timed") is None
    assert (estimated_peak(g, c, fits) <= 0.97 * c.memory).all()
    assert admit(g, c, fits, "timed", peak_margin=0.03) is fits
    assert not simulate(g, c, fits).oom
    assert simulate(g, c, over).oom and admit(g, c, over, "timed", peak_margin=0.03) is None
    sel = ProposalSelector(["metis"], peak_margin=0.03)
    assert sel.spec()["peak_margin"] == 0.03
    assert "peak_margin" not in ProposalSelector(["x"]).spec()
    with pytest.raises(ValueError, match="peak_margin: must be in"):
        ProposalSelector(["metis"], peak_margin=1.0)
