"""Teacher speed (``make bench``): the lookahead teacher's placement with compiled
base-rule completions next to the same completions through ``PlacementState``, in the
same run (the placements are equal: tests/test_rule_kernel.py).

Target: compiled >= 10x faster on a 120-node random DAG on v100x8 (960 completions), and
on a memory-tight instance with co-location groups where the rule chooses among devices
with room (memory-tight-v0's random_dag-128-s101 on 8 devices of two memory sizes).
The fortified lookahead (its six starting placers, the incumbent's bookkeeping) is timed
beside the plain one; target: at most 3x its time.
"""

import pytest
from benchmarks.timing import cpu_per_call, load_note

from placegym.envs import get_preset
from placegym.envs.suites import get_suite
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher
from placegym.teachers.lookahead import LookaheadTeacher

pytestmark = pytest.mark.benchmark


def test_lookahead_compiled_completions_vs_python():
    g, c = make_graph("random_dag", nodes=120, seed=0), get_preset("v100x8")
    print(f"\n\nlookahead placement, {g.num_nodes} nodes on {c.name} ({load_note()})")
    print("| base | compiled s | PlacementState s | speed-up |")
    print("|---|---|---|---|")
    ratios = []
    for base in ("heft_rule", "critical_path"):
        # cache_size=0: every call completes every state again
        fast_teacher = LookaheadTeacher(base, cache_size=0)
        slow_teacher = LookaheadTeacher(base, cache_size=0, compiled=False)
        fast = cpu_per_call(lambda t=fast_teacher: t.place(g, c), 3, 3)
        slow = cpu_per_call(lambda t=slow_teacher: t.place(g, c), 1, 2)
        ratios.append(slow / fast)
        print(f"| {base} | {fast:.3f} | {slow:.2f} | {slow / fast:.0f}x |")
    assert min(ratios) >= 10, f"compiled completions only {min(ratios):.1f}x faster"


def test_fortified_lookahead_overhead():
    g, c = make_graph("random_dag", nodes=120, seed=0), get_preset("v100x8")
    plain = cpu_per_call(lambda: LookaheadTeacher(cache_size=0).place(g, c), 3, 3)
    fort = cpu_per_call(lambda: get_teacher("fortified_lookahead").place(g, c), 3, 3)
    print(f"\n\nfortified lookahead, {g.num_nodes} nodes on {c.name} ({load_note()})")
    print("| teacher | s | ratio |")
    print("|---|---|---|")
    print(f"| lookahead | {plain:.3f} | 1.00 |")
    print(f"| fortified_lookahead | {fort:.3f} | {fort / plain:.2f} |")
    assert fort <= 3 * plain, f"fortified lookahead {fort / plain:.1f}x the plain one"


def test_lookahead_compiled_completions_with_groups_and_room():
    inst = next(
        i
        for i in get_suite("memory-tight-v0").instances("test")
        if i.spec.id == "random_dag-128-s101@v100x8-mem0.7-r1-2"
    )
    g, c = inst.graph, inst.cluster
    assert g.groups and get_teacher("heft_rule").room(g, c) is not None
    print(f"\n\nlookahead placement, {inst.spec.id}: {len(g.groups)} groups ({load_note()})")
    print("| base | compiled s | PlacementState s | speed-up |")
    print("|---|---|---|---|")
    fast_teacher = LookaheadTeacher(cache_size=0)
    slow_teacher = LookaheadTeacher(cache_size=0, compiled=False)
    fast = cpu_per_call(lambda: fast_teacher.place(g, c), 2, 3)
    slow = cpu_per_call(lambda: slow_teacher.place(g, c), 1, 1)
    print(f"| heft_rule | {fast:.3f} | {slow:.2f} | {slow / fast:.0f}x |")
    assert slow / fast >= 10, f"compiled completions only {slow / fast:.1f}x faster"
