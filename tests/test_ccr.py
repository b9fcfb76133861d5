"""Communication-to-computation ratio: hand-computed values, exact rescaling (roofline
included), the generators' ``ccr=`` option, errors."""

import numpy as np
import pytest
from doppler_files import chainmm_like, doppler_text

from placegym.envs import Cluster, Device, Graph, Level, load_cluster
from placegym.envs.analysis.ccr import ccr, fastest_level, mean_compute_time, scale_to_ccr
from placegym.envs.analysis.levels import durations_on
from placegym.envs.importers import parse_doppler
from placegym.envs.workloads import WORKLOADS, make_graph
from placegym.train.cli import main


def chain3() -> Graph:
    return Graph(flops=[1e9, 2e9, 3e9], out_bytes=[2e9, 4e9, 0.0], edges=[[0, 1], [1, 2]])


def two_devices(latency=0.0, mem_bandwidth=None, flops=(1e9, 1e9)) -> Cluster:
    devs = tuple(
        Device(f"d{i}", flops=f, memory=1e12, mem_bandwidth=mem_bandwidth)
        for i, f in enumerate(flops)
    )
    return Cluster(devices=devs, levels=(Level("link", bandwidth=1e9, latency=latency),))


def test_hand_computed_ratio():
    # edges carry 2e9 and 4e9 bytes at 1e9 B/s: 3 s on average; nodes take 1, 2, 3 s
    assert ccr(chain3(), two_devices()) == pytest.approx(3.0 / 2.0)
    assert ccr(chain3(), two_devices(latency=0.5)) == pytest.approx(3.5 / 2.0)
    # a device twice as fast: durations 1, 2, 3 and 0.5, 1, 1.5, mean 1.5
    assert ccr(chain3(), two_devices(flops=(1e9, 2e9))) == pytest.approx(3.0 / 1.5)


def test_fastest_level_is_among_the_used_ones():
    assert fastest_level(load_cluster("p100x4")) == 0  # intra-rack is faster but unused
    assert fastest_level(load_cluster("v100x8")) == 0  # two NVLinks
    assert fastest_level(load_cluster("h100-2x8")) == 0


@pytest.mark.parametrize("cluster", ["p100x4", "p100x8", "doppler-unit-4", "v100x8"])
@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("target", [1.0, 4.0])
def test_rescaling_hits_the_target_exactly(cluster, workload, target):
    c, g = load_cluster(cluster), make_graph(workload)
    h = scale_to_ccr(g, c, target)
    assert ccr(h, c) == pytest.approx(target, rel=1e-12)
    factor = h.out_bytes / np.where(g.out_bytes > 0, g.out_bytes, 1.0)
    assert np.allclose(factor[g.out_bytes > 0], factor[g.out_bytes > 0][0], rtol=1e-15)
    assert (h.flops == g.flops).all() and (h.param_bytes == g.param_bytes).all()
    assert (h.edges == g.edges).all() and h.name == f"{g.name}-ccr{target:g}"


def test_the_roofline_makes_the_solve_nonlinear():
    # On p100x4 the tensors enter the durations: one proportional step misses the target.
    c, g = load_cluster("p100x4"), make_graph("ffnn")
    h = scale_to_ccr(g, c, 10.0)
    assert ccr(h, c) == pytest.approx(10.0, rel=1e-12)
    dur = durations_on(h, c)
    memory_bound = h.io_bytes / c.mem_bandwidth[0] > h.flops / c.flops[0]
    assert memory_bound.any() and not memory_bound.all()
    naive = Graph(
        flops=g.flops, out_bytes=g.out_bytes * 10.0 / ccr(g, c), edges=g.edges, name="naive"
    )
    assert abs(ccr(naive, c) - 10.0) > 0.1
    assert mean_compute_time(h, c) == pytest.approx(dur.mean())


def test_doppler_files_are_about_ccr_4_on_doppler_unit_4():
    s = chainmm_like(4, 3)
    g = parse_doppler(doppler_text(s))
    comp = np.array(s.comp, dtype=float)
    expected = 4 * comp[g.edges[:, 0]].mean() / comp.mean()
    assert ccr(g, load_cluster("doppler-unit-4")) == pytest.approx(expected, rel=1e-12)
    assert 3 < expected < 5


def test_generators_take_ccr():
    g = make_graph("chainmm", ccr=4)
    assert ccr(g, load_cluster("p100x4")) == pytest.approx(4.0, rel=1e-12)
    assert g.name == "chainmm-6x2-ccr4"
    g = make_graph("random_dag", nodes=40, seed=3, ccr="10", ccr_cluster="doppler-unit-8")
    assert ccr(g, load_cluster("doppler-unit-8")) == pytest.approx(10.0, rel=1e-12)
    assert make_graph("ffnn", ccr=None).to_dict() == make_graph("ffnn").to_dict()
    with pytest.raises(ValueError, match=r"workload ffnn: parameter ccr: expected a number"):
        make_graph("ffnn", ccr="lots")


def test_cli_export_with_ccr(tmp_path, capsys):
    out = tmp_path / "g.json"
    args = ["graphs", "export", "ffnn", "--param", "ccr=4", "--param", "ccr_cluster=p100x8"]
    assert main([*args, "--out", str(out)]) == 0
    from placegym.envs import load_graph

    assert ccr(load_graph(out), load_cluster("p100x8")) == pytest.approx(4.0, rel=1e-12)


def test_errors():
    c = load_cluster("v100x8")
    with pytest.raises(ValueError, match=r"ccr: 10 is not reachable for 'ffnn-3x2x4' on 'v100x8'"):
        scale_to_ccr(make_graph("ffnn"), c, 10)
    with pytest.raises(ValueError, match=r"tending to 7\.27"):
        scale_to_ccr(make_graph("ffnn"), c, 10)
    lonely = Graph(flops=[1.0, 2.0], out_bytes=[1.0, 1.0], edges=[], name="lonely")
    with pytest.raises(ValueError, match=r"graph: CCR needs at least one edge, 'lonely' has none"):
        ccr(lonely, c)
    with pytest.raises(ValueError, match=r"no tensor bytes on any edge of 'lonely'"):
        scale_to_ccr(lonely, c, 1.0)
    one = Cluster(devices=(Device("d", 1e9, 1e9),), levels=(Level("l", 1e9),), name="one")
    with pytest.raises(ValueError, match=r"cluster: CCR needs at least two devices, 'one' has 1"):
        ccr(chain3(), one)
    for bad in (0, -1.0, float("nan"), float("inf"), "x"):
        with pytest.raises(ValueError, match=r"ccr: must be a finite number > 0"):
            scale_to_ccr(chain3(), c, bad)
    # latency alone above the target: no factor reaches it
    with pytest.raises(ValueError, match=r"the CCR is 5 with no tensor bytes"):
        scale_to_ccr(chain3(), two_devices(latency=10.0), 1.0)
