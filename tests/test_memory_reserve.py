"""What ``memory`` means: the peak of allocated tensors, less the allocator's reserve
(``memory_reserve``, a fraction of each device's memory, default 0)."""

import numpy as np
import pytest

from placegym.envs import Graph, Placement, load_cluster, simulate


def _cluster(memory: float, reserve: float | None) -> dict:
    dev = {"flops": 1.0, "memory": memory}
    if reserve is not None:
        dev["memory_reserve"] = reserve
    return {
        "format": "placegym.cluster/v1",
        "devices": [dev],
        "levels": [{"name": "link", "bandwidth": 1.0}],
    }


def test_the_reserve_takes_its_share_of_memory_and_round_trips():
    c = load_cluster(_cluster(100.0, 0.2))
    assert c.memory.tolist() == [80.0] and c.device_memory.tolist() == [100.0]
    again = load_cluster(c.to_dict())
    assert again.memory.tolist() == [80.0] and again.to_dict() == c.to_dict()
    plain = load_cluster(_cluster(100.0, None))
    assert plain.memory.tolist() == plain.device_memory.tolist() == [100.0]
    assert "memory_reserve" not in plain.to_dict()["devices"][0]


def test_the_simulator_counts_allocated_bytes_against_memory_less_the_reserve():
    # one node: 50 resident bytes and a 20-byte output live while it runs: peak 70
    g = Graph(flops=[1.0], out_bytes=[20.0], param_bytes=[50.0], edges=[])
    p = Placement(device=np.zeros(1, dtype=np.int64), order=np.zeros(1, dtype=np.int64))
    assert simulate(g, load_cluster(_cluster(75.0, None)), p).peak_memory.tolist() == [70.0]
    assert not simulate(g, load_cluster(_cluster(75.0, None)), p).oom
    assert simulate(g, load_cluster(_cluster(75.0, 0.1)), p).oom  # 67.5 bytes left
    assert not simulate(g, load_cluster(_cluster(80.0, 0.1)), p).oom  # 72 bytes left


@pytest.mark.parametrize(
    ("reserve", "message"),
    [
        (1.0, r"devices\[0\]\.memory_reserve: must be a fraction in \[0, 1\), got 1\.0"),
        (-0.1, r"devices\[0\]\.memory_reserve"),
        ("0.1", r"devices\[0\]\.memory_reserve: expected a number"),
        (float("nan"), r"devices\[0\]\.memory_reserve: must be finite"),
    ],
)
def test_a_bad_reserve_is_refused_naming_the_field(reserve, message):
    with pytest.raises(ValueError, match=message):
        load_cluster(_cluster(100.0, reserve))
