"""An agent's placement time on one torch thread (the default of every agent placer and
of the benchmark harness) and on every core (torch's own default), in the same run
(``make bench``).

Measured in wall time (threads are the point), best of a few rounds, on the largest
instances of ``generalize-v0`` test, the split ``placegym bench --suite generalize-v0
--agents pretrained:generalist-v1`` places. Target: one thread takes at most 1.5x the
time of every core (on a loaded many-core machine it is many times faster; on an idle
one about as fast).
"""

import os

import pytest
from benchmarks.timing import load_note, wall_per_call

from placegym.agents import pretrained
from placegym.envs.suites import get_suite

pytestmark = pytest.mark.benchmark


def test_agent_placement_on_one_thread_vs_every_core():
    import torch

    insts = sorted(get_suite("generalize-v0").instances("test"), key=lambda i: -i.graph.num_nodes)
    insts = insts[:3]
    cores = os.cpu_count() or 1
    before = torch.get_num_threads()
    print(f"\n\ngeneralist-v1 greedy placement, wall seconds ({load_note()})")
    print(f"| instance | nodes | 1 thread (default) | {cores} threads | ratio |")
    print("|---|---|---|---|---|")
    totals = {1: 0.0, cores: 0.0}
    for inst in insts:
        times = {}
        for threads in (1, cores):
            agent = pretrained("generalist-v1", threads=threads)
            g, c = inst.graph, inst.cluster
            agent.place(g, c)  # warm: kernels compiled, caches filled
            times[threads] = wall_per_call(lambda a=agent, g=g, c=c: a.place(g, c), 1, 3)
            totals[threads] += times[threads]
        print(
            f"| {inst.id} | {inst.graph.num_nodes} | {times[1]:.3f} | {times[cores]:.3f} "
            f"| {times[cores] / times[1]:.2f}x |"
        )
    print(f"| all | | {totals[1]:.3f} | {totals[cores]:.3f} | {totals[cores] / totals[1]:.2f}x |")
    assert torch.get_num_threads() == before  # each placement put the count back
    assert totals[1] <= 1.5 * totals[cores], (
        f"one thread {totals[1] / totals[cores]:.2f}x the time of {cores}"
    )
