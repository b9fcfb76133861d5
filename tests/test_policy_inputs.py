"""The tables of the policy's optional inputs (placegym.agents.doppler.inputs): the heads'
widths, the device rows and the concatenations follow from them."""

import dataclasses

import numpy as np
import pytest
import torch

import placegym.agents.doppler.inputs as inputs_module
from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.inputs import (
    DEVICE_INPUTS,
    PLC_INPUTS,
    SEL_INPUTS,
    PlcInput,
    device_width,
    plc_width,
    sel_width,
)
from placegym.agents.doppler.scoring import score
from placegym.envs import PlacementEnv

CONFIGS = [
    PolicyConfig(hidden=8, layers=1),
    PolicyConfig(hidden=8, layers=1, siblings=False, affinity=True),
    PolicyConfig(hidden=8, layers=1, hints=("nest", "heft"), hint_quality=True, rules=True),
    PolicyConfig(hidden=9, layers=1, topology=True, insertion=True, positions=True),
    PolicyConfig(hidden=8, layers=1, prices=True, insertion=True, affinity=True, rules=True),
]


def test_every_entry_is_switched_by_a_policy_config_field():
    fields = {f.name for f in dataclasses.fields(PolicyConfig)}
    for table in (SEL_INPUTS, DEVICE_INPUTS, PLC_INPUTS):
        assert len({e.name for e in table}) == len(table)
        assert all(e.flag in fields for e in table)


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_the_heads_read_the_widths_the_tables_declare(config):
    torch.manual_seed(0)
    policy = DopplerPolicy(config)
    assert policy.sel_dynamic.in_features == sel_width(config)
    assert policy.plc_head[0].in_features == plc_width(config)
    env = PlacementEnv("chainmm", "p100x4")
    [rec] = play_episodes(policy, [env], [0], rng=np.random.default_rng(0))
    assert rec.plc_dev.shape[-1] == device_width(config)
    enc = policy.encode(rec.graph)
    node, placed, dev = (torch.from_numpy(x) for x in (rec.plc_node, rec.plc_placed, rec.plc_dev))
    columns = inputs_module.plc_columns(policy, enc, node, placed, dev)
    assert columns.shape == (len(node), env.unwrapped.cluster.num_devices, plc_width(config))
    assert torch.isfinite(score(policy, [rec])[0].logp).all()


def test_an_input_is_one_entry(monkeypatch):
    """A new PLC input declared in the table only: the head widens and reads it."""
    config = PolicyConfig(hidden=8, layers=1, rules=True)
    narrow = DopplerPolicy(config).plc_head[0].in_features
    idle = PlcInput(
        "idle", "rules", lambda c: 1, lambda b: (b.count == 0).to(b.agg.dtype)[..., None]
    )
    monkeypatch.setattr(inputs_module, "PLC_INPUTS", (*PLC_INPUTS, idle))
    policy = DopplerPolicy(config)
    assert policy.plc_head[0].in_features == narrow + 1
    [rec] = play_episodes(
        policy, [PlacementEnv("ffnn", "p100x4")], [0], rng=np.random.default_rng(0)
    )
    assert torch.isfinite(score(policy, [rec])[0].logp).all()
