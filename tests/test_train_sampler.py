"""Training on instances drawn fresh (``data.sampler``): every update new graphs, drawn
by index from the global update (so a run and its resume draw the same), and bad options
refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_train_run import tiny_config

from placegym.envs.suites.sampler import InstanceSampler
from placegym.train.config import config_from_dict
from placegym.train.trainer import Trainer

SAMPLER = {
    "nodes": [20, 60],
    "devices": [2, 4],
    "families": ["random_dag", "chainmm", "ffnn"],
    "memory_share": 0.0,
    "training_share": 0.0,
}


def sampler_config(tmp_path: Path, **data):
    cfg = tiny_config(tmp_path, phases=["phase1", "phase2"])
    raw = cfg.to_dict()
    raw["data"]["sampler"] = dict(SAMPLER)
    raw["data"].update(data)
    raw["phase1"].update(updates=2, graphs_per_update=2, episodes_per_graph=2)
    raw["phase2"].update(updates=2, graphs_per_update=2, episodes_per_graph=2)
    raw["eval"]["every"] = 0
    return config_from_dict(raw)


def test_each_update_trains_on_fresh_instances_drawn_by_index(tmp_path, monkeypatch):
    seen: list[list[str]] = []
    draw = Trainer._draw

    def spy(self, pcfg, pool, **job):
        out = draw(self, pcfg, pool, **job)
        seen.append(list(self.drawn))
        return out

    monkeypatch.setattr(Trainer, "_draw", spy)
    cfg = sampler_config(tmp_path, graphs=[])
    Trainer(cfg).run()
    sampler = InstanceSampler(cfg.seed, **SAMPLER)
    # 4 updates (2 per phase) of 2 instances each: indices 0..7, none drawn twice
    assert seen == [[sampler.draw(2 * u + i).id for i in range(2)] for u in range(4)]
    assert len({i for ids in seen for i in ids}) == 8


def test_the_fixed_graphs_are_then_only_evaluated_on(tmp_path):
    cfg = sampler_config(tmp_path)  # tiny_config's fork graph stays in data.graphs
    trainer = Trainer(cfg)
    assert trainer.sampler is not None and len(trainer.train_set) == 1
    rows = trainer.run()
    assert rows and {(r["split"], r["graph"]) for r in rows} == {("train", "fork")}


@pytest.mark.parametrize(
    ("data", "top", "match"),
    [
        ({"sampler": {"bogus": 1}}, {}, r"data\.sampler\.bogus: unknown \(options: seed, nodes"),
        ({"sampler": {"nodes": [1, 2]}}, {}, r"data\.sampler\.nodes: expected"),
        ({"sampler": {}, "graphs": []}, {}, r"data\.graphs: expected at least one graph"),
    ],
)
def test_bad_sampler_options_are_refused_naming_the_key(tmp_path, data, top, match):
    raw = tiny_config(tmp_path).to_dict()
    raw["data"].update(data)
    raw.update(top)
    with pytest.raises(ValueError, match=match):
        config_from_dict(raw)


def test_the_shipped_one_pass_recipe_trains_from_the_zoo_on_fresh_instances(tmp_path):
    import torch

    from placegym.agents import pretrained
    from placegym.train.config import apply_overrides, load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "onepass.yaml")
    cfg = apply_overrides(
        cfg,
        [
            f"out={tmp_path / 'run'}",
            "phase2.updates=1",
            "phase2.episodes_per_graph=2",
            "eval.every=0",
            "data.graphs=[]",
            "data.sampler={nodes: [20, 40], devices: [2, 4]}",
            "wandb.mode=disabled",
            "progress=false",
        ],
    )
    assert cfg.init == "pretrained:generalist-memory-v2" and cfg.phases == ["phase2"]
    trainer = Trainer(cfg)
    trainer._restore()  # the shipped generalist's weights, before any update
    start = pretrained("generalist-memory-v2").policy.state_dict()
    for k, v in start.items():
        torch.testing.assert_close(trainer.policy.state_dict()[k], v)
    trainer.run()
    assert (tmp_path / "run" / "checkpoints" / "final.pt").is_file()


def test_a_greedy_baseline_plays_one_greedy_episode_per_fresh_graph(tmp_path, monkeypatch):
    """phase2.baseline=greedy: each update plays the policy's greedy episode of each drawn
    graph before the samples (at phase2.temperature) and logs how many samples beat it."""
    import json

    from placegym.agents.doppler import episodes

    raw = sampler_config(tmp_path).to_dict()
    raw["phases"] = ["phase2"]
    raw["phase2"].update(baseline="greedy", temperature=0.5, episodes_per_graph=1)
    cfg = config_from_dict(raw)
    calls: list[tuple[int, bool, float]] = []
    play = episodes.play_episodes

    def spy(policy, envs, seeds, **kw):
        calls.append((len(envs), kw.get("greedy", False), kw.get("temperature", 1.0)))
        return play(policy, envs, seeds, **kw)

    monkeypatch.setattr("placegym.train.trainer.play_episodes", spy)
    monkeypatch.setattr("placegym.train.players.play_episodes", spy)
    Trainer(cfg).run()
    # per update: the 2 graphs' greedy episodes, then their 2 samples at T = 0.5
    assert calls[:4] == [(2, True, 1.0), (2, False, 0.5), (2, True, 1.0), (2, False, 0.5)]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in rows if "charts/beats_greedy" in r]
    assert len(logged) == 2
    assert all(0.0 <= r["charts/beats_greedy"] <= 1.0 for r in logged)


def test_self_imitation_on_fresh_instances_keeps_plans_for_one_update(tmp_path, monkeypatch):
    """phase2.self_imitation with data.sampler (expert iteration on fresh instances): each
    update's drawn graphs get plans (the teacher's placement, or a better sampled episode)
    and imitate them; the plans are dropped before the next update draws new graphs."""
    import json

    from placegym.train.self_imitation import SelfImitation

    raw = sampler_config(tmp_path, graphs=[]).to_dict()
    raw["phases"] = ["phase2"]
    raw["phase2"].update(updates=3, temperature=1.0)
    raw["phase2"]["self_imitation"] = {"coef": 1.0, "teacher": "heft_lookahead", "states": "plan"}
    cfg = config_from_dict(raw)
    planned: list[list[bool]] = []
    earlier: list = []  # the previous updates' graphs
    step = SelfImitation.step

    def spy(self, policy, envs, groups, records, **kw):
        firsts = list({g: env for g, env in zip(groups, envs, strict=True)}.values())
        # only this update's graphs may have plans, and not yet (the batch's episodes
        # were played without the plan teacher); the earlier updates' plans are gone
        planned.append([self.plans.has_plan(e.graph, e.cluster) for e in firsts])
        assert not any(self.plans.has_plan(e.graph, e.cluster) for e in earlier)
        out = step(self, policy, envs, groups, records, **kw)
        assert all(self.plans.has_plan(e.graph, e.cluster) for e in firsts)
        earlier.extend(firsts)
        return out

    monkeypatch.setattr(SelfImitation, "step", spy)
    Trainer(cfg).run()
    assert planned == [[False, False]] * 3 and len(earlier) == 6
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in rows if "losses/self_imitation" in r]
    assert len(logged) == 3 and all(r["losses/self_imitation"] > 0 for r in logged)
    assert all(0 <= r["charts/plans_improved"] <= 2 for r in logged)
