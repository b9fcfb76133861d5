"""What shared links cost (``make bench``): ``links="port"`` next to ``"pair"`` in the
same run, on the graphs and placements of :mod:`benchmarks.test_sim_speed`.

- ``simulate`` and ``simulate_makespan``: CPU time per call, best of interleaved rounds,
  on the 230-node / 290-edge bench graph and DOPPLER-sized graphs, on p100x4 (4 devices,
  one level) and h100-2x8 (16 devices, two levels);
- ``simulate_batch``: placements per second of 2048 random placements of the bench graph,
  one thread and the default threads, with and without memory tracking.

Ports add a table of ``2 D L`` free times and one more comparison per transfer, so
``"port"`` should cost about what ``"pair"`` does; the check is loose (<= 1.5x), the
figures are the point.
"""

import numpy as np
import pytest
from benchmarks.test_sim_speed import bench_graphs, layered_dag, random_placement
from benchmarks.timing import cpu_per_call, load_note, wall_per_call

from placegym.envs import load_cluster, simulate, simulate_batch
from placegym.envs.sim.simulator import default_threads, simulate_makespan

pytestmark = pytest.mark.benchmark

LINKS = ("pair", "port")


def time_links(g, clusters, p) -> dict[tuple[str, str], float]:
    """CPU seconds per call of simulate (``"sim"``) and simulate_makespan (``"span"``)
    per links value, best of three interleaved rounds."""
    best = dict.fromkeys([(x, f) for x in LINKS for f in ("sim", "span")], np.inf)
    for _ in range(3):
        for x, c in clusters.items():
            t = cpu_per_call(lambda c=c: simulate(g, c, p), 200)
            best[x, "sim"] = min(best[x, "sim"], t)
            t = cpu_per_call(lambda c=c: simulate_makespan(g, c, p), 200)
            best[x, "span"] = min(best[x, "span"], t)
    return best


def test_simulate_with_ports_next_to_pairs():
    rows, ratios = [], []
    for preset in ("p100x4", "h100-2x8"):
        clusters = {x: load_cluster(preset).with_links(x) for x in LINKS}
        rng = np.random.default_rng(0)
        for g in bench_graphs():
            p = random_placement(g, clusters["pair"].num_devices, rng)
            spans = {x: simulate(g, c, p).makespan for x, c in clusters.items()}
            best = time_links(g, clusters, p)
            ratio = best["port", "sim"] / best["pair", "sim"]
            ratios.append(ratio)
            rows.append(
                f"| {preset} | {g.name} | {best['pair', 'sim'] * 1e6:.1f} µs | "
                f"{best['port', 'sim'] * 1e6:.1f} µs | **{ratio:.2f}x** | "
                f"{best['pair', 'span'] * 1e6:.1f} µs | {best['port', 'span'] * 1e6:.1f} µs | "
                f"{spans['port'] / spans['pair']:.3f} |"
            )
    print(
        f"\n\nsimulate, links pair vs port: CPU time per call, best of 3x5 rounds ({load_note()})"
    )
    print("random devices, topological priority; makespan ratio = port / pair")
    print(
        "| cluster | graph | simulate pair | simulate port | port / pair | "
        "simulate_makespan pair | port | makespan ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    geomean = float(np.exp(np.mean(np.log(ratios))))
    print(f"port / pair, geometric mean over the rows: {geomean:.3f}x")
    assert geomean <= 1.5, f"simulate with ports costs {geomean:.2f}x pairs"


def test_batch_throughput_with_ports_next_to_pairs():
    g = layered_dag(230, 290, seed=0)
    clusters = {x: load_cluster("p100x4").with_links(x) for x in LINKS}
    rng = np.random.default_rng(1)
    b = 2048
    devs = rng.integers(0, 4, (b, g.num_nodes))
    orders = np.tile(g.topological_order, (b, 1))
    threads = default_threads()
    for c in clusters.values():
        one = simulate_batch(g, c, devs, orders, threads=1)
        many = simulate_batch(g, c, devs, orders, threads=threads)
        assert one.makespan.tobytes() == many.makespan.tobytes()
    rate: dict[tuple[str, int, bool], float] = {}
    for _ in range(3):  # interleaved rounds
        for th in (1, threads):
            for memory in (False, True):
                for x, c in clusters.items():
                    t = wall_per_call(
                        lambda c=c, th=th, memory=memory: simulate_batch(
                            g, c, devs, orders, memory=memory, threads=th
                        ),
                        1,
                        rounds=3,
                    )
                    rate[x, th, memory] = max(rate.get((x, th, memory), 0.0), b / t)
    print(f"\n\nsimulate_batch, links pair vs port: {b} placements of {g.name} on p100x4")
    print(f"placements/s, wall clock, best of 3x3 rounds ({load_note()})")
    print("| threads | memory | pair | port | port / pair |")
    print("|---|---|---|---|---|")
    for th in (1, threads):
        for memory in (False, True):
            r0, r1 = rate["pair", th, memory], rate["port", th, memory]
            print(f"| {th} | {memory} | {r0:,.0f}/s | {r1:,.0f}/s | **{r1 / r0:.2f}x** |")
    assert rate["port", 1, False] >= rate["pair", 1, False] / 1.5
