"""The real backend on CPU workers: kernels, work-conserving execution, calibration."""

import json

import numpy as np
import pytest
import torch

from placegym.envs import Placement, load_cluster, simulate
from placegym.envs.core.costs import signatures
from placegym.envs.core.graph import Graph
from placegym.envs.real import BackendError, TorchExecutor, parse_devices, scale_graph
from placegym.envs.real.calibrate import calibrate
from placegym.envs.real.check import rank_check, spearman
from placegym.envs.real.devices import shared_hardware
from placegym.envs.real.executor import copy_side, copy_tensor
from placegym.envs.real.kernels import build_kernels
from placegym.envs.real.probes import (
    Sharing,
    copy_times,
    dispatch_overhead,
    hop_latency,
    measure_sharing,
    node_errors,
    node_times,
)
from placegym.envs.real.profile import profile_kernels, time_kernel
from placegym.envs.workloads import WORKLOADS, make_graph

SCALES = {
    "ffnn": 8,
    "chainmm": 16,
    "llama_block": 16,
    "llama_layer": 16,
    "moe": 16,
    "random_dag": 8,
}


def small(name):
    return scale_graph(make_graph(name), SCALES[name])


def test_parse_devices():
    assert [d.name for d in parse_devices("cpu#3")] == ["cpu#0", "cpu#1", "cpu#2"]
    assert [d.name for d in parse_devices("cuda:1")] == ["cuda:1"]
    assert [(d.torch_device, d.lane) for d in parse_devices("cuda:0#2")] == [
        ("cuda:0", 0),
        ("cuda:0", 1),
    ]
    assert len(parse_devices("cuda:0,cuda:1")) == 2
    (part,) = parse_devices("cuda:1%32")
    assert (part.name, part.torch_device, part.index, part.sms) == ("cuda:1%32", "cuda:1", 1, 32)
    mixed = parse_devices("cuda:0,cpu#2")
    assert [(d.name, d.is_cuda) for d in mixed] == [
        ("cuda:0", True),
        ("cpu#0", False),
        ("cpu#1", False),
    ]
    with pytest.raises(
        ValueError,
        match=r"devices: expected 'cpu#k', 'cuda:i', 'cuda:i#k' or 'cuda:i%N', got 'tpu:0'",
    ):
        parse_devices("tpu:0")
    with pytest.raises(ValueError, match=r"devices: 'cpu' is listed twice"):
        parse_devices("cpu,cpu")
    for bad in ("cpu%4", "cuda:0%8#2", "cuda:0%0"):
        with pytest.raises(ValueError, match=r"devices: an SM partition is 'cuda:i%N' with N"):
            parse_devices(bad)


def test_shared_hardware_is_named_by_construction():
    assert shared_hardware(parse_devices("cuda:0,cuda:1,cpu#2"), cores=4) == []
    (note,) = shared_hardware(parse_devices("cuda:0#2,cpu#1"), cores=4)
    assert note.startswith("cuda:0#0, cuda:0#1 share cuda:0 (streams or SM partitions")
    (note,) = shared_hardware(parse_devices("cpu#3"), cores=2)
    assert note.startswith("cpu#0, cpu#1, cpu#2: 3 CPU workers on 2 usable cores")


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_scaled_graph_is_consistent(name):
    g = make_graph(name)
    s = small(name)
    assert (s.num_nodes, s.num_edges) == (g.num_nodes, g.num_edges)
    assert (s.flops <= g.flops + 1e-6).all() and s.flops.sum() < g.flops.sum()
    for v in range(s.num_nodes):
        spec = s.spec[v]
        assert s.out_bytes[v] == np.prod(spec["shape"]) * 4
    assert scale_graph(g, 1) is g and scale_graph(g, 1.0) is g
    for bad in (0, -2, float("nan"), "4"):
        with pytest.raises(ValueError, match=r"scale: must be a number > 0, got"):
            scale_graph(g, bad)


@pytest.mark.parametrize("name", ["ffnn", "chainmm"])
def test_a_scale_below_one_grows_blocks(name):
    """Halving then doubling every dimension is the same graph as halving once, and
    scale 0.25 makes every large block dimension 4x larger (64x the matmul FLOP)."""
    g = make_graph(name)
    back = scale_graph(scale_graph(g, 8), 0.5)
    four = scale_graph(g, 4)
    assert back.name.endswith("/scale8/scale0.5")
    assert [s["shape"] for s in back.spec] == [s["shape"] for s in four.spec]
    np.testing.assert_allclose(back.flops, four.flops, rtol=1e-12)
    np.testing.assert_array_equal(back.out_bytes, four.out_bytes)
    big = scale_graph(g, 0.25)
    for s, t in zip(g.spec, big.spec, strict=True):
        assert t["shape"] == [d if d <= 16 else 4 * d for d in s["shape"]]
    mm = [v for v in range(g.num_nodes) if g.spec[v]["kind"] == "einsum"]
    np.testing.assert_allclose(big.flops[mm], 64 * g.flops[mm], rtol=1e-12)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_executes_and_results_do_not_depend_on_placement(name):
    g = small(name)
    ex = TorchExecutor(g, "cpu#2", warmup=0, repeats=1)
    one = ex.outputs(Placement(device=np.zeros(g.num_nodes), order=g.topological_order.copy()))
    rng = np.random.default_rng(0)
    two = ex.outputs(
        Placement(device=rng.integers(0, 2, g.num_nodes), order=rng.permutation(g.num_nodes))
    )
    for v in range(g.num_nodes):
        assert list(one[v].shape) == list(g.spec[v]["shape"]), v
        torch.testing.assert_close(one[v], two[v], rtol=1e-4, atol=1e-4)
        assert torch.isfinite(one[v]).all(), v


def test_measured_schedule_is_work_conserving_and_ordered():
    g = small("ffnn")
    ex = TorchExecutor(g, "cpu#2", warmup=1, repeats=3)
    p = Placement(device=np.arange(g.num_nodes) % 2, order=g.topological_order.copy())
    m = ex.run(p)
    assert m.makespans.shape == (3,) and m.makespan == np.median(m.makespans)
    assert np.isfinite(m.start).all() and (m.finish >= m.start).all()
    for u, v in g.edges.tolist():
        assert m.start[v] >= m.finish[u]
    for d in range(2):
        on = np.flatnonzero(p.device == d)
        on = on[np.argsort(m.start[on])]
        assert (m.start[on][1:] >= m.finish[on][:-1]).all()


def test_bad_spec_and_device_errors_name_the_node():
    g = Graph(
        flops=[1.0, 1.0],
        out_bytes=[16.0, 16.0],
        edges=[[0, 1]],
        spec=(
            {"kind": "input", "shape": [2, 2]},
            {"kind": "warp", "shape": [2, 2], "args": [{"node": 0}]},
        ),
    )
    with pytest.raises(ValueError, match=r"node 1: spec kind 'warp' is not executable"):
        TorchExecutor(g, "cpu#1")
    bad = Graph(
        flops=[1.0, 1.0],
        out_bytes=[16.0, 16.0],
        edges=[[0, 1]],
        spec=(
            {"kind": "input", "shape": [2, 2]},
            {
                "kind": "einsum",
                "equation": "ij,jk->ik",
                "shape": [2, 2],
                "args": [{"node": 0}, {"param": [3, 2]}],
            },
        ),
    )
    ex = TorchExecutor(bad, "cpu#2", warmup=0, repeats=1)
    with pytest.raises(BackendError, match=r"node 1 \(einsum\) on cpu#1: "):
        ex.run(Placement(device=np.array([0, 1]), order=np.array([0, 1])))
    ok = small("ffnn")
    with pytest.raises(
        ValueError,
        match=r"device\[0\]: device index out of range for 2 "
        r"backend devices, got 2",
    ):
        TorchExecutor(ok, "cpu#2").run(
            Placement(device=np.full(ok.num_nodes, 2), order=ok.topological_order.copy())
        )


def test_spearman():
    assert spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1.0)
    assert spearman(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1.0)
    assert spearman(np.array([1, 1, 2]), np.array([1, 1, 2])) == pytest.approx(1.0)


def test_calibration_writes_a_valid_cluster(tmp_path):
    c = calibrate("cpu#2", size=64, copy_sizes=(16, 64), repeats=1)
    assert c.num_devices == 2 and c.level_matrix is not None
    assert (c.flops > 0).all() and (c.mem_bandwidth > 0).all()
    assert [d.kind for d in c.devices] == ["cpu", "cpu"] and c.profile is None
    c.save(tmp_path / "c.json")
    g = small("ffnn")
    p = Placement(device=np.arange(g.num_nodes) % 2, order=g.topological_order.copy())
    assert simulate(g, tmp_path / "c.json", p).makespan > 0


def test_profile_times_every_distinct_kernel_once_per_kind():
    g = small("ffnn")
    prof = profile_kernels([g, small("ffnn")], "cpu#2", warmup=0, repeats=2, seconds=0)
    assert list(prof) == ["cpu"]
    assert set(prof["cpu"]) == set(signatures(g)) - {None}
    assert all(t > 0 for t in prof["cpu"].values())
    times = time_kernel(g, build_kernels(g), 9, parse_devices("cpu")[0], repeats=3)
    assert times.shape == (3,) and (times > 0).all()


def test_profiled_calibration_gives_each_kernel_its_measured_time(tmp_path):
    g = small("ffnn")
    c = calibrate("cpu#2", graphs=[g], size=64, copy_sizes=(16, 64), repeats=1, profile_seconds=0)
    c.save(tmp_path / "c.json")
    c = load_cluster(tmp_path / "c.json")
    assert c.profile_kinds == ("cpu",) and c.profile_class.tolist() == [0, 0]
    p = Placement(device=np.arange(g.num_nodes) % 2, order=g.topological_order.copy())
    s = simulate(g, c, p)
    sig = signatures(g)
    want = [c.profile["cpu"][sig[v]] + c.launch_overhead[p.device[v]] for v in range(g.num_nodes)]
    np.testing.assert_allclose(s.duration, want, rtol=1e-9)


def test_copy_side_and_copies_between_cpu_workers():
    cpu0, cpu1, gpu0, gpu1 = parse_devices("cpu#2,cuda:0,cuda:1")
    assert copy_side(cpu0, gpu0) is gpu0 and copy_side(gpu0, cpu0) is gpu0
    assert copy_side(gpu0, gpu1) is gpu1 and not copy_side(cpu0, cpu1).is_cuda
    x = torch.randn(4, 4)
    y = copy_tensor(x, cpu1, None)
    assert y is not x and torch.equal(x, y)
    t = copy_times(cpu0, cpu1, [16, 64], repeats=2)
    assert t.shape == (2,) and (t > 0).all()
    assert hop_latency("cpu#2", 0, 1, count=8, repeats=1) >= 0


def test_probes_on_cpu_workers(monkeypatch):
    assert 0 <= dispatch_overhead("cpu#1", 0, count=16, repeats=2) < 5e-3
    sh = measure_sharing("cpu#2", length=2, repeats=1)
    assert sh.names == ["cpu#0", "cpu#1"] and (sh.alone > 0).all() and (sh.together > 0).all()
    g = small("ffnn")
    p, measured = node_times(g, "cpu#1", repeats=1)
    assert np.isnan(measured).sum() == 1 and (measured[np.isfinite(measured)] > 0).all()
    c = calibrate("cpu#1", graphs=[g], size=64, repeats=1, profile_seconds=0)
    assert node_errors(g, c, p, measured).shape == (g.num_nodes - 1,)


def test_sharing_verdicts():
    apart = Sharing(["a", "b"], np.array([1.0, 2.0]), np.array([1.1, 2.1]))
    assert apart.shared == [] and apart.parallel_speedup == pytest.approx(3.0 / 2.1)
    assert apart.lines()[-1] == "independent: parallel speedup 1.43 of 2"
    streams = Sharing(["s0", "s1"], np.array([1.0, 1.0]), np.array([2.0, 1.2]))
    assert streams.shared == ["s0"]
    assert streams.lines()[-1].startswith("shared hardware: s0 slow down more than 1.5x")


def test_rank_check_refuses_devices_that_share_hardware(monkeypatch):
    import placegym.envs.real.devices as devices

    monkeypatch.setattr(devices, "usable_cores", lambda: 2)
    g = small("ffnn")
    c = calibrate("cpu#3", size=64, copy_sizes=(16,), repeats=1)
    with pytest.raises(
        ValueError,
        match=r"devices: 'cpu#3' are not independent devices \(cpu#0, cpu#1, cpu#2: 3 CPU "
        r"workers on 2 usable cores",
    ):
        rank_check(g, c, "cpu#3", placements=2)
    res = rank_check(g, c, "cpu#3", placements=3, repeats=1, allow_shared=True)
    assert (res.runs >= 1).all() and (res.disturbed <= res.runs).all()
    assert res.simulated.shape == res.measured.shape == (3,)
    assert 0 < res.cpu_share <= 1.1 and res.median_relative_error >= 0


def test_real_backend_environment_episode():
    import gymnasium as gym

    import placegym.envs  # noqa: F401

    assert gym.spec("placegym/FFNN-CPU-v0").nondeterministic
    with pytest.raises(
        ValueError,
        match=r"devices: 'cpu#2' has 2 devices but cluster "
        r"'p100x4' has 4; they must match",
    ):
        gym.make("placegym/Real-v0", graph="ffnn", cluster="p100x4", devices="cpu#2")
    env = gym.make(
        "placegym/Real-v0", graph="ffnn", cluster="calibrate", devices="cpu#2", scale=8, repeats=1
    )
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        obs, reward, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    assert info["makespan"] in info["measured_makespans"]
    assert info["simulated_makespan"] > 0 and info["reference_makespan"] > 0
    assert reward == pytest.approx(
        (info["reference_makespan"] - info["makespan"]) / info["reference_makespan"]
    )
    assert env.unwrapped.graph.name.endswith("/scale8")


def test_calibrate_cli_writes_the_cluster_and_refuses_shared_devices(tmp_path, capsys):
    from placegym.train.cli import main

    out = tmp_path / "cpu2.json"
    args = ["calibrate", "--devices", "cpu#2", "--out", str(out), "--size", "64"]
    assert main([*args, "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    assert "sharing probe (matmul chains, each device alone vs all at once):" in text
    assert load_cluster(out).num_devices == 2 and load_cluster(out).profile is None
    assert main(["calibrate", "--devices", "tpu", "--out", str(out)]) == 2
    assert "devices: expected 'cpu#k'" in capsys.readouterr().err
    assert main(["calibrate", "--devices", "cuda:0#2", "--check", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placegym calibrate: error: --check: cuda:0#0, cuda:0#1 share cuda:0")
    assert "pass --allow-shared" in err


#: The CPU workers count as undisturbed when they ran at least this share of the time
#: they were ready to run (``RankCheck.cpu_share``).
QUIET = 0.9


def profiled_check(tmp_path, capsys, *args: str):
    """``placegym calibrate --devices cpu#2 --profile --check`` with further ``args``:
    (summary, printed text)."""
    from placegym.train.cli import main

    out = tmp_path / "cpu2.json"
    argv = ["calibrate", "--devices", "cpu#2", "--out", str(out), "--profile", "--check"]
    assert main([*argv, *args]) == 0
    text = capsys.readouterr().out
    summary = json.loads(next(x for x in text.splitlines() if x.startswith("{")))
    assert load_cluster(out).profile_kinds == ("cpu",)
    assert summary["profiled"] and summary["placements"] == 20
    assert len(summary["simulated_ms"]) == len(summary["measured_ms"]) == 20
    assert 0 <= summary["disturbed_runs"] <= summary["runs"] - 20
    assert "median relative error, simulated vs measured:" in text
    print(text)
    return summary, text


def test_profiled_check_reports_its_figures(tmp_path, capsys):
    """The check's plumbing at a tiny size (FFNN / 8, 2 rounds, no least profiling time).

    Nothing is asserted of the figures at this size: kernels last 25-150 us and the
    workers' dispatch in Python, serialised by the interpreter lock, dominates them, so
    measured makespans barely depend on the placement (over the 20 placements they
    spread by 1.14x where the simulated ones spread by 1.9x, and two halves of the
    measurements rank them with a Spearman correlation of 0.06): the two workers are not
    independent devices there. The next test checks the figures at the CLI's size.
    """
    args = ["--scale", "8", "--rounds", "2", "--profile-seconds", "0", "--repeats", "1"]
    summary, _ = profiled_check(tmp_path, capsys, *args)
    assert summary["runs"] >= 2 * 20 and summary["graph"] == "ffnn-3x2x4/scale8"
    assert set(summary["interference"]) == {"cpu"} and summary["interference"]["cpu"] > -1


@pytest.mark.slow
def test_profiled_calibration_predicts_cpu_makespans(tmp_path, capsys):
    """Deselected by default (``make calibrate-check`` runs it): its outcome depends on
    the machine's load beyond what its probe sees, and a red default run blocks every
    change. The check as ``placegym calibrate --devices cpu#2 --profile --check`` runs
    it (FFNN / 2, 20 placements, 15 rounds, a 30 s profile; about 1.5 minutes on an idle
    2-core machine): Spearman >= 0.95 and median relative error <= 10% between
    simulated and measured makespans, with profiled costs.

    Wall-clock times on a shared machine include the other processes' load, which no
    simulator of this graph can predict; under it two workers are not two independent
    devices. The check measures both: ``cpu_share`` (of the time the workers were ready
    to run, the share they ran) and the sharing probe (each worker alone vs both busy).
    The thresholds are asserted when the workers had their cores (share >= QUIET and
    not found shared, as on an otherwise idle CI machine); on a busier machine the
    figures are reported and the test is skipped, naming them, rather than asserting
    something it cannot show. A short probe skips it at once on a busy machine.
    """
    share = idle_share()
    if share < QUIET:
        pytest.skip(f"machine busy: the CPU workers ran {share:.0%} of the time they were ready")
    summary, _ = profiled_check(tmp_path, capsys)
    assert_when_quiet(summary)


def idle_share() -> float:
    """The CPU share of two workers each running its own chain of matmuls (no copies),
    the best of three short executions: one alone reads 0.84-0.99 on an idle 2-core
    machine (eight in a row: 0.856, 0.968, 0.942, 0.835, 0.992, 0.993, 0.975, 0.994), a
    busy one keeps all three low."""
    from placegym.envs.real.probes import chains

    g = chains([256, 256], 8)
    p = Placement(device=np.repeat([0, 1], 9), order=np.arange(g.num_nodes))
    ex = TorchExecutor(g, "cpu#2", warmup=1, repeats=5)
    return max(ex.run(p).cpu_share for _ in range(3))


def assert_when_quiet(summary) -> None:
    rho, err, share = summary["spearman"], summary["median_relative_error"], summary["cpu_share"]
    if share < QUIET or summary["shared_hardware"]:
        pytest.skip(
            f"machine busy: the CPU workers ran {share:.0%} of the time they were ready to "
            f"run, shared: {summary['shared_hardware']} (Spearman {rho:.3f}, median "
            f"relative error {err:.1%})"
        )
    assert rho >= 0.95 and err <= 0.10, (rho, err, share)


def test_profile_in_run_times_kernels_as_the_executor_runs_them():
    g = small("ffnn")
    prof = profile_kernels([g], "cpu#2", warmup=0, repeats=2, seconds=0, mode="run")
    assert set(prof["cpu"]) == set(signatures(g)) - {None}
    assert all(np.isfinite(t) and t > 0 for t in prof["cpu"].values())
    with pytest.raises(ValueError, match="mode: expected one of auto, run, isolated, got 'x'"):
        profile_kernels([g], "cpu#2", mode="x")
