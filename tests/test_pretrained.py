"""Shipped agents: each loads, its card names what it was trained on, and it reproduces
its recorded results on today's code; ``--agents pretrained:NAME`` puts one in a bench."""

import pytest
from tiny_suite import tiny  # noqa: F401 (fixture)

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
    assert main([*args, "--one-pass"]) == 0  # its greedy column by the one-pass decode
    assert "generalist-memory-v1" in capsys.readouterr().out
    assert main([*args[:-3], "--agents", "pretrained:nope", "--out", str(tmp_path)]) == 2


# ---------------------------------------------------------------------- a shipped agent places
def _card(name):
    import json

    from placegym.agents.zoo import ZOO

    return json.loads((ZOO / name / "card.json").read_text())


@pytest.mark.parametrize("name", ["generalist-v1", "generalist-memory-v2"])
def test_a_shipped_agent_places_under_its_trained_mask_with_its_card(name, one_torch_thread):
    from placegym.agents.doppler.placer import AgentPlacer
    from placegym.envs import Placement, load_cluster, simulate
    from placegym.envs.workloads import make_graph

    agent = pretrained(name)
    card = _card(name)
    assert agent.card == card and agent.name == name and isinstance(agent, AgentPlacer)
    assert agent.memory_mask == card["config"]["data"].get("memory_mask", True)
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    p = agent.place(g, c)
    assert isinstance(p, Placement) and p.device.shape == (g.num_nodes,)
    p.check(g, c)
    s = simulate(g, c, p)
    assert s.makespan > 0 and not s.oom
    # the same placement as the policy decoded under the card's mask, by name or by seed
    same = AgentPlacer(agent.policy, memory_mask=agent.memory_mask).place(g, "p100x4", seed=0)
    assert (same.device == p.device).all() and (same.order == p.order).all()


def test_the_trained_mask_travels_with_the_agent_into_every_loader(monkeypatch):
    from placegym.agents.doppler import search
    from placegym.envs import load_cluster
    from placegym.envs.workloads import make_graph
    from placegym.train.evaluate import load_agent, load_search_agent
    from placegym.train.harness.agent_search import agent_search_placer
    from placegym.train.harness.anytime import Trace

    name = "generalist-memory-v2"
    assert _card(name)["config"]["data"]["memory_mask"] == "room"
    assert load_agent(f"pretrained:{name}").memory_mask == "room"
    assert load_search_agent(f"pretrained:{name}", 50).config.memory_mask == "room"
    seen = []

    def fake_search(policy, graph, cluster, config, seed=0):
        seen.append(config.memory_mask)
        raise RuntimeError("stop")

    monkeypatch.setattr(search, "policy_search", fake_search)
    label, run = agent_search_placer(f"pretrained:{name}")
    assert label == f"{name}-search"
    with pytest.raises(RuntimeError, match="stop"):
        run(make_graph("ffnn"), load_cluster("p100x4"), 100, 0, Trace(100))
    assert seen == ["room"]


def test_as_placer_takes_a_shipped_agent_and_the_harness_runs_it(one_torch_thread):
    from placegym.benchmark import as_placer
    from placegym.envs import load_cluster
    from placegym.envs.workloads import make_graph
    from placegym.train.harness.feasibility import place

    agent = pretrained("generalist-memory-v2")
    assert as_placer(agent) is agent
    out = place(agent, make_graph("ffnn"), load_cluster("p100x4"), 0)
    assert out.feasible and out.makespan > 0 and out.calls >= 0


# ---------------------------------------------------------------------- torch threads
def test_an_agent_places_on_one_torch_thread_and_puts_the_callers_back(monkeypatch):
    import torch

    from placegym.agents.doppler import search
    from placegym.agents.doppler.placer import AgentPlacer
    from placegym.envs import load_cluster
    from placegym.envs.workloads import make_graph
    from placegym.train.evaluate import load_agent, load_search_agent

    name, seen = "generalist-memory-v2", []
    real = AgentPlacer._place

    def spy(self, graph, cluster, seed):
        seen.append(torch.get_num_threads())
        if seed == 99:
            raise RuntimeError("stop")
        return real(self, graph, cluster, seed)

    def fake_search(policy, graph, cluster, config, seed=0):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stop")

    monkeypatch.setattr(AgentPlacer, "_place", spy)
    monkeypatch.setattr(search, "policy_search", fake_search)
    g, c = make_graph("ffnn"), load_cluster("p100x4")
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        pretrained(name).place(g, c)  # default: one thread while placing
        assert seen == [1] and torch.get_num_threads() == 3
        pretrained(name, threads=2).place(g, c)
        load_agent(f"pretrained:{name}", threads=None).place(g, c)  # the caller's setting
        with pytest.raises(RuntimeError, match="stop"):  # put back when placing fails too
            load_agent(f"pretrained:{name}").place(g, c, seed=99)
        with pytest.raises(RuntimeError, match="stop"):
            load_search_agent(f"pretrained:{name}", 50).place(g, c)
        assert seen == [1, 2, 3, 1, 1] and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match=r"threads: must be an integer >= 1 .*got 0"):
        pretrained(name, threads=0)


# ---------------------------------------------------------------------- a one-pass agent ships
def test_an_agent_shipped_one_pass_places_without_a_simulator_call(tiny, tmp_path, monkeypatch):  # noqa: F811
    import dataclasses

    from placegym.agents import zoo as zoo_pkg
    from placegym.envs import load_cluster
    from placegym.envs.workloads import make_graph
    from placegym.train.checkpoint import CHECKPOINT_FORMAT, save_checkpoint
    from placegym.train.evaluate import load_agent
    from placegym.train.experiments import zoo
    from placegym.train.harness.calls import counting, patched

    shipped = pretrained("generalist-memory-v2")
    ckpt = tmp_path / "one.pt"
    payload = {
        "policy_config": dataclasses.asdict(shipped.policy.config),
        "policy": shipped.policy.state_dict(),
        "config": shipped.card["config"],
        "name": "one",
        "format": CHECKPOINT_FORMAT,
    }
    save_checkpoint(ckpt, payload)
    card = zoo.add("one", ckpt, "tiny-v0/test", "d", folder=tmp_path, one_pass=True)
    assert card["one_pass"] is True and card["summary"]["calls"] == 0
    monkeypatch.setattr(zoo_pkg, "ZOO", tmp_path)
    agent = pretrained("one")
    assert agent.one_pass and not pretrained("one", one_pass=False).one_pass
    assert load_agent("pretrained:one").one_pass and not load_agent(ckpt).one_pass
    assert load_agent(ckpt, one_pass=True).one_pass
    assert reproduce(agent) == []
    graph, cluster = make_graph("ffnn"), load_cluster("p100x4")
    with patched(), counting() as calls:
        agent.place(graph, cluster)
    assert calls.calls == 0
