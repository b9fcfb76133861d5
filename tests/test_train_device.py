"""``device``: the learner on a GPU when there is one, episodes on the CPU.

On a CPU-only machine the split path (a CPU actor copy that takes the learner's weights
after every update) is run on the CPU (``Trainer(split_actor=True)``) and must give the
unsplit run's weights bit for bit; the ``gpu`` tests (deselected by default) train on
CUDA itself.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from simcases import diamond_graph, fork_join, unit_cluster
from test_train_robustness import one_error_line
from test_train_run import _metric_rows

from placegym.agents.doppler import DopplerPolicy, PolicyConfig
from placegym.agents.doppler.episodes import play_episodes
from placegym.agents.doppler.inputs import graph_inputs
from placegym.agents.doppler.scoring import score
from placegym.envs import PlacementEnv
from placegym.train.checkpoint import cpu_state, load_checkpoint
from placegym.train.config import apply_overrides, config_from_dict
from placegym.train.config_checks import resolve_device
from placegym.train.trainer import Trainer

CUDA = torch.cuda.is_available()


def _graphs():
    fork = fork_join()
    diamond = diamond_graph()
    return [fork, diamond]


def device_config(tmp_path: Path, **extra):
    """Phase I (3 updates) and phase II (3: greedy baseline, plan self-imitation) on two
    small graphs, both in every update, over a 2-device unit cluster."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    names = []
    for i, g in enumerate(_graphs()):
        g.save(tmp_path / f"g{i}.json")
        names.append(str(tmp_path / f"g{i}.json"))
    unit_cluster(2).save(tmp_path / "unit.json")
    raw = {
        "name": "device",
        "out": str(tmp_path / "run"),
        "progress": False,
        "checkpoint_every": 2,
        "policy": {"hidden": 8, "layers": 1},
        "data": {"cluster": str(tmp_path / "unit.json"), "graphs": names},
        "phase1": {"updates": 3, "episodes_per_graph": 2, "graphs_per_update": 2, "lr": 0.01},
        "phase2": {
            "updates": 3,
            "episodes_per_graph": 2,
            "graphs_per_update": 2,
            "lr": 0.01,
            "baseline": "greedy",
            "self_imitation": {"coef": 1.0, "states": "plan", "teacher": "single_device"},
        },
        "eval": {"every": 0, "k": 1, "teachers": ["critical_path"], "gantt": False},
        "wandb": {"mode": "disabled"},
        **extra,
    }
    return config_from_dict(raw)


# ---------------------------------------------------------------------- the config
@pytest.mark.parametrize("value", ["tpu", "CPU", "cuda:", "cuda:x", "cuda:01", "cuda:-1", ""])
def test_a_device_of_unknown_form_is_refused_naming_it(tmp_path, value):
    with pytest.raises(ValueError) as e:
        device_config(tmp_path, device=value)
    assert str(e.value) == f"device: expected auto, cpu, cuda, cuda:N, got {value!r}"
    with pytest.raises(ValueError, match=r"^device: expected auto, cpu, cuda, cuda:N"):
        resolve_device(value)


def test_cuda_without_cuda_is_refused_when_training_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for value in ("cuda", "cuda:0", "cuda:3"):
        cfg = device_config(tmp_path, device=value)  # a config, on any machine: it loads
        with pytest.raises(ValueError, match=rf"^device: '{value}' needs CUDA, which torch"):
            Trainer(cfg)
    # placegym train: one line, exit code 2, before anything is trained
    cfg_path = tmp_path / "cuda.yaml"
    cfg_path.write_text(device_config(tmp_path, device="cuda").to_yaml())
    line = one_error_line(capsys, ["train", str(cfg_path)])
    assert "device: 'cuda' needs CUDA" in line and "use cpu, or auto" in line
    assert not (tmp_path / "run").exists()


def test_a_cuda_index_beyond_the_device_count_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    assert resolve_device("cuda") == resolve_device("auto") == torch.device("cuda", 1)
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError) as e:
        resolve_device("cuda:2")
    it_has = "(it has cuda:0 to cuda:1)"
    assert str(e.value) == f"device: 'cuda:2' is not a CUDA device of this machine {it_has}"


@pytest.mark.skipif(CUDA, reason="this machine has CUDA")
def test_auto_trains_on_the_cpu_here_with_one_policy(tmp_path):
    cfg = device_config(tmp_path)
    assert cfg.device == "auto" and resolve_device("auto") == torch.device("cpu")
    trainer = Trainer(cfg)
    assert trainer.device == torch.device("cpu")
    assert trainer.actor is trainer.policy  # nothing copied on the CPU


def test_the_actor_of_a_learner_off_the_cpu_cannot_be_the_learner(tmp_path, monkeypatch):
    monkeypatch.setattr("placegym.train.trainer.resolve_device", lambda d: torch.device("meta"))
    with pytest.raises(ValueError, match=r"split_actor: a learner on meta needs its CPU actor"):
        Trainer(device_config(tmp_path), split_actor=False)


# ---------------------------------------------------------------------- the split path
def _hooks(trainer: Trainer) -> dict[str, list[bool]]:
    """Record, at every forward of the learner's and the actor's SEL encoder, whether
    gradients were on (episodes are played without, scores computed with), and at the
    actor's whether it held the learner's weights."""
    seen: dict[str, list[bool]] = {"learner": [], "actor": [], "synced": []}

    def synced() -> bool:
        learner = trainer.policy.state_dict()
        return all(torch.equal(v, learner[k]) for k, v in trainer.actor.state_dict().items())

    def on_learner(module, args):
        seen["learner"].append(torch.is_grad_enabled())

    def on_actor(module, args):
        seen["actor"].append(torch.is_grad_enabled())
        seen["synced"].append(synced())

    trainer.policy.sel_encoder.register_forward_pre_hook(on_learner)
    trainer.actor.sel_encoder.register_forward_pre_hook(on_actor)
    return seen


def test_the_split_path_gives_the_unsplit_weights_bit_for_bit(tmp_path, capsys):
    one = Trainer(device_config(tmp_path / "one"))
    assert one.actor is one.policy
    one.run()
    assert "training on cpu\n" in capsys.readouterr().out

    split = Trainer(device_config(tmp_path / "split"), split_actor=True)
    assert split.actor is not split.policy
    seen = _hooks(split)
    split.run()
    assert "training on cpu (episodes on cpu)" in capsys.readouterr().out
    # the learner only scored (gradients on), the actor only played (rollouts, greedy
    # baselines, plan episodes, evaluation: gradients off)
    assert seen["learner"] and all(seen["learner"])
    assert seen["actor"] and not any(seen["actor"])
    assert all(seen["synced"])  # whenever the actor played, it held the learner's weights

    ref = one.policy.state_dict()
    for name, params in (("learner", split.policy), ("actor", split.actor)):
        state = params.state_dict()
        assert state.keys() == ref.keys()
        for k in ref:
            assert torch.equal(state[k], ref[k]), (name, k)
    a = load_checkpoint(one.ckpt_dir / "final.pt")
    b = load_checkpoint(split.ckpt_dir / "final.pt")
    assert a["best_plans"] == b["best_plans"]
    for k in a["policy"]:
        assert torch.equal(a["policy"][k], b["policy"][k])
    # every update logged the same metrics (losses, returns), and evaluated the same
    assert _metric_rows(split.run_dir) == _metric_rows(one.run_dir)
    assert split.last_eval == one.last_eval


def test_a_split_run_resumes_unsplit_on_another_device_setting(tmp_path):
    """``device`` may change on resume (a GPU run resumes on a CPU machine): the split
    run's checkpoint (weights and Adam's state), resumed by an unsplit trainer with
    ``device: cpu``, ends with the uninterrupted run's weights."""
    full = Trainer(device_config(tmp_path / "full"))
    full.run()
    cfg = device_config(tmp_path / "cut")
    cut = Trainer(cfg, split_actor=True)
    assert cut.run(stop_after=5) == []
    latest = load_checkpoint(cut.ckpt_dir / "latest.pt")  # phase II's second update
    assert latest["progress"]["global_update"] == 5 and latest["optimizer"]["state"]
    resumed = Trainer(apply_overrides(cfg, ["device=cpu"]))
    resumed.run()
    assert resumed.progress.global_update == 6
    ref = load_checkpoint(full.ckpt_dir / "final.pt")["policy"]
    out = load_checkpoint(resumed.ckpt_dir / "final.pt")["policy"]
    for k in ref:
        assert torch.equal(out[k], ref[k])


def test_cpu_state_keeps_cpu_tensors_and_module_metadata():
    policy = DopplerPolicy(PolicyConfig(hidden=8, layers=1))
    state = policy.state_dict()
    out = cpu_state({"policy": state, "steps": [torch.ones(2)], "betas": (0.9, 0.99), "n": 3})
    for k, v in state.items():
        assert out["policy"][k] is v  # on the CPU already: not copied
    assert out["policy"]._metadata == state._metadata and type(out["policy"]) is type(state)
    assert out["betas"] == (0.9, 0.99) and out["n"] == 3 and out["policy"] is not state


def _episode_inputs(config: PolicyConfig):
    policy = DopplerPolicy(config)
    g = _graphs()[0]
    env = PlacementEnv(g, unit_cluster(2))
    obs, _ = env.reset(seed=0)
    return policy, env, graph_inputs(policy, obs, g, env.cluster)


def test_graph_inputs_move_as_a_copy_and_stay_when_there():
    _, _, inputs = _episode_inputs(PolicyConfig(hidden=8, layers=1, topology=True))
    assert inputs.to("cpu") is inputs and inputs.to(torch.device("cpu")) is inputs
    moved = inputs.to("meta")  # another device on any machine
    assert moved is not inputs and moved.scale == inputs.scale
    assert moved.x.device.type == "meta" and moved.links is not None
    assert moved.links.device.type == "meta"
    assert moved.siblings is not None and all(t.device.type == "meta" for t in moved.siblings)
    assert inputs.x.device.type == "cpu" and inputs.siblings is not None
    assert all(t.device.type == "cpu" for t in inputs.siblings)  # unchanged


# ---------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_training_on_cuda_keeps_the_learner_there_and_the_actor_on_the_cpu(tmp_path, capsys):
    cfg = device_config(tmp_path, device="cuda")
    cfg.phase1.updates, cfg.phase2.updates = 1, 1  # two updates
    trainer = Trainer(cfg)
    trainer.run()
    assert f"training on {trainer.device} (episodes on cpu)" in capsys.readouterr().out
    assert trainer.device.type == "cuda"
    assert all(p.device == trainer.device for p in trainer.policy.parameters())
    assert all(p.device.type == "cpu" for p in trainer.actor.parameters())
    learner = trainer.policy.state_dict()
    for k, v in trainer.actor.state_dict().items():
        assert torch.equal(v, learner[k].cpu())
    ckpt = torch.load(trainer.ckpt_dir / "final.pt", weights_only=True)  # no map_location
    assert all(v.device.type == "cpu" for v in ckpt["policy"].values())
    assert trainer.progress.global_update == 2


def scores_match_the_cpu(device: str) -> None:
    """Episodes played on the CPU, scored by a copy of the policy on ``device`` with
    every optional input enabled: the CPU's scores (up to rounding), the gradients on
    ``device``, the records' inputs left on the CPU."""
    config = PolicyConfig(
        hidden=8,
        layers=1,
        hints=("heft", "critical_path"),
        positions=True,
        affinity=True,
        rules=True,
        hint_quality=True,
        topology=True,
        insertion=True,
        prices=True,
    )
    cpu_policy, env, _ = _episode_inputs(config)
    envs = [env, PlacementEnv(env.graph, env.cluster)]
    records = play_episodes(cpu_policy, envs, [0, 1], rng=np.random.default_rng(0))
    policy = DopplerPolicy(config)
    policy.load_state_dict(cpu_policy.state_dict())
    policy.to(device)
    on_cpu, there = score(cpu_policy, records), score(policy, records)
    for a, b in zip(on_cpu, there, strict=True):
        assert b.logp.device == b.entropy.device == torch.device(device)
        torch.testing.assert_close(b.logp.cpu(), a.logp, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(b.entropy.cpu(), a.entropy, rtol=1e-4, atol=1e-5)
    loss = -torch.stack([s.logp.mean() for s in there]).mean()
    loss.backward()
    grads = [p.grad for p in policy.parameters() if p.grad is not None]
    assert grads and all(g.device == torch.device(device) for g in grads)
    assert all(r.graph.x.device.type == "cpu" for r in records)  # the records' inputs stay


def test_scores_of_a_policy_copy_match_with_every_input_on_the_cpu():
    scores_match_the_cpu("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_scores_on_cuda_match_the_cpu_with_every_policy_input():
    scores_match_the_cpu("cuda:0")
