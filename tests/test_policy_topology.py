"""PolicyConfig.topology: PLC's message passing over the cluster's links."""

import numpy as np
import pytest
import torch

from placegym.agents.doppler import DopplerPolicy, PolicyConfig, cluster_links
from placegym.agents.doppler.episodes import play_episodes
from placegym.envs import load_cluster
from placegym.envs.mdp.env import PlacementEnv


def one_device_busy(d: int, h: int, seed: int = 0):
    """Device inputs of a state where only device 0 holds nodes: every other device's
    row is the same."""
    g = torch.Generator().manual_seed(seed)
    dev = torch.rand(1, 1, 7, generator=g).expand(1, d, 7).clone()
    dev[0, 0] = torch.rand(7, generator=g)
    count = torch.zeros(1, d)
    count[0, 0] = 3
    agg = torch.zeros(1, d, h)
    agg[0, 0] = torch.randn(h, generator=g)
    return dev, count, agg


def test_links_are_normalised_bandwidth_and_latency():
    c = load_cluster("v100x8")
    links = cluster_links(c)
    assert links.shape == (8, 8, 2) and links.dtype == torch.float32
    assert (links[torch.arange(8), torch.arange(8)] == 0).all()
    bw = c.pair_bandwidth
    assert np.isclose(float(links[0, 1, 0]), bw[0, 1] / bw[~np.eye(8, dtype=bool)].max())
    assert float(links[..., 0].max()) == 1.0


def test_topology_tells_apart_devices_only_the_network_distinguishes():
    torch.manual_seed(0)
    pol = DopplerPolicy(PolicyConfig(hidden=16, topology=True))
    dev, count, agg = one_device_busy(8, 16)
    with torch.no_grad():
        out = pol.device_topology(cluster_links(load_cluster("v100x8")), dev, count, agg)[0]
    # devices 1 and 2 are both one NVLink from device 0 and look alike to every other
    # PLC input, but no symmetry of v100x8 that fixes device 0 exchanges them
    assert not torch.allclose(out[1], out[2])
    with torch.no_grad():  # p100x4: one network level, all idle devices interchangeable
        dev4, count4, agg4 = one_device_busy(4, 16)
        out4 = pol.device_topology(cluster_links(load_cluster("p100x4")), dev4, count4, agg4)[0]
    assert torch.allclose(out4[1], out4[2]) and torch.allclose(out4[2], out4[3])


def test_topology_is_permutation_equivariant():
    torch.manual_seed(1)
    pol = DopplerPolicy(PolicyConfig(hidden=16, topology=True))
    links = cluster_links(load_cluster("v100x8"))
    g = torch.Generator().manual_seed(2)
    dev, count, agg = torch.rand(2, 8, 7, generator=g), torch.rand(2, 8), torch.randn(2, 8, 16)
    perm = torch.tensor([3, 0, 7, 5, 1, 2, 6, 4])
    with torch.no_grad():
        out = pol.device_topology(links, dev, count, agg)
        moved = pol.device_topology(
            links[perm][:, perm], dev[:, perm], count[:, perm], agg[:, perm]
        )
    assert torch.allclose(moved, out[:, perm], atol=1e-6)


def test_topology_needs_the_links():
    pol = DopplerPolicy(PolicyConfig(hidden=8, topology=True))
    dev, count, agg = one_device_busy(4, 8)
    with pytest.raises(ValueError, match=r"cluster's links \(policy.topology\)"):
        pol.device_topology(None, dev, count, agg)


def test_topology_policy_plays_deterministic_greedy_episodes():
    torch.manual_seed(0)
    pol = DopplerPolicy(PolicyConfig(hidden=16, topology=True))
    c = load_cluster("v100x8")
    env = PlacementEnv("ffnn", c)
    runs = [
        play_episodes(pol, [env], [s], rng=np.random.default_rng(s), greedy=True)[0]
        for s in (0, 7)
    ]
    assert runs[0].info["makespan"] > 0
    assert np.array_equal(runs[0].plc_action, runs[1].plc_action)
