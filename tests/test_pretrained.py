"""Shipped agents: each loads, its card names what it was trained on, and it reproduces
its recorded results on today's code; ``--agents pretrained:NAME`` puts one in a bench."""

import pytest

import placegym.agents
from placegym.agents.zoo import available, pretrained
from placegym.envs.suites import get_suite
from placegym.train.cli import main
from placegym.train.experiments.zoo import reproduce

SHIPPED = available()


def test_the_rollout_generalist_and_a_one_pass_policy_ship():
    assert "generalist-v1" in SHIPPED and "generalist-memory-v1" in SHIPPED
    assert placegym.agents.pretrained is pretrained  # placegym.agents.pretrained(NAME)
    with pytest.raises(ValueError, match=r"pretrained: no agent 'nope' \(shipped: generalist"):
        pretrained("nope")


@pytest.mark.parametrize("name", SHIPPED)
def test_card_names_its_training_suites_and_every_evaluated_instance(name):
    agent = pretrained(name)
    card = agent.card
    assert card["name"] == name and card["config"]["data"]["graphs"]
    for split, digests in card["trained_on"].items():
        suite, _, which = split.partition("/")
        now = {i.id: i.digest for i in get_suite(suite).instances(which)}
        assert digests == now, f"{name} was trained on another version of {split}"
    on = agent.evaluated_on
    ids = {spec.id for _, spec in get_suite(on["suite"]).specs(on["split"])}
    assert set(agent.results) == ids
    assert card["summary"]["feasible"] == sum(r["feasible"] for r in agent.results.values())


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_agent_reproduces_its_recorded_results(name):
    assert reproduce(pretrained(name)) == []


def test_bench_takes_a_pretrained_agent(tmp_path, capsys):
    args = ["bench", "--workloads", "ffnn", "--clusters", "p100x4", "--teachers",
            "critical_path", "--agents", "pretrained:generalist-memory-v1", "--out",
            str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    assert "generalist-memory-v1" in capsys.readouterr().out
    assert main([*args[:-3], "--agents", "pretrained:nope", "--out", str(tmp_path)]) == 2
