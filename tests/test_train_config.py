"""`placegym train` configuration: presets, overrides, errors, schedules."""

import itertools
from pathlib import Path

import pytest
import torch

from placegym.train.config import (
    GraphEntry,
    TrainConfig,
    apply_overrides,
    config_from_dict,
    load_config,
)
from placegym.train.imitation import epsilon
from placegym.train.optim import lr_factor, make_optimizer

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PRESETS = sorted(CONFIGS.glob("*.yaml"))


def test_presets_exist_for_every_workload_and_transfer():
    names = {p.stem for p in PRESETS}
    assert {"quickstart", "chainmm", "ffnn", "llama_block", "llama_layer"} <= names
    assert any("transfer" in n for n in names)


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.stem)
def test_every_preset_loads(path):
    cfg = load_config(path)
    assert cfg.name == path.stem
    assert cfg.run_dir == Path("runs") / path.stem
    assert cfg.phases and cfg.data.graphs


def test_defaults_and_yaml_round_trip(tmp_path):
    cfg = config_from_dict({"name": "x"})
    assert cfg == TrainConfig(name="x")
    p = tmp_path / "x.yaml"
    p.write_text(cfg.to_yaml())
    assert load_config(p) == cfg


def test_progress_is_auto_by_default_and_auto_means_a_terminal():
    import io

    from placegym.train.progress import wants_bar as progress_enabled

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert TrainConfig().progress == "auto"
    for text, value in (("true", True), ("false", False), ("auto", "auto")):
        assert apply_overrides(TrainConfig(), [f"progress={text}"]).progress == value
    assert config_from_dict({"progress": False}).progress is False  # YAML progress: false
    assert progress_enabled("auto", io.StringIO()) is False  # a log file: no bars
    assert progress_enabled("auto", Tty()) is True
    assert progress_enabled(True, io.StringIO()) and not progress_enabled(False, Tty())


def test_graph_shorthand_and_params():
    cfg = config_from_dict(
        {"data": {"graphs": ["ffnn", {"name": "llama_layer", "params": {"mlp_blocks": 4}}]}}
    )
    assert cfg.data.graphs == [GraphEntry("ffnn"), GraphEntry("llama_layer", {"mlp_blocks": 4})]
    assert cfg.data.graphs[1].label == "llama_layer[mlp_blocks=4]"


def test_overrides_parse_yaml_values_and_numbers():
    cfg = apply_overrides(
        TrainConfig(),
        [
            "phase2.lr=3e-4",  # YAML reads 3e-4 as a string: a float field converts it
            "phase2.target_kl=0.02",
            "phase2.algo=ppo",
            "data.graphs=[chainmm, ffnn]",
            "phases=[phase2]",
            "wandb.mode=disabled",
            "wandb.entity=null",
            "eval.teachers=[critical_path]",
            "seed=7",
        ],
    )
    assert cfg.phase2.lr == 3e-4 and cfg.phase2.target_kl == 0.02
    assert cfg.phase2.algo == "ppo" and cfg.phases == ["phase2"] and cfg.seed == 7
    assert [g.name for g in cfg.data.graphs] == ["chainmm", "ffnn"]


@pytest.mark.parametrize(
    "override, message",
    [
        ("phase2.lrr=1", r"phase2\.lrr: unknown key .*did you mean 'lr'"),
        ("bogus=1", r"bogus: unknown key"),
        ("phase2.lr=fast", r"phase2\.lr: expected a number, got 'fast'"),
        ("phase2.lr=-1", r"phase2\.lr: must be in \(0, 1\] .*got -1"),
        ("phase2.lr=1e30", r"phase2\.lr: must be in \(0, 1\] .*got 1e\+30"),
        ("phase1.lr=.nan", r"phase1\.lr: must be in \(0, 1\] .*got nan"),
        ("phase2.entropy_coef=.inf", r"phase2\.entropy_coef: must be >= 0, got inf"),
        ("seed=-1", r"seed: must be in \[0, 4294967295\], got -1"),
        ("phase2.lr.x=1", r"phase2\.lr: is a float, it has no keys"),
        ("seed=1.5", r"seed: expected an integer, got 1\.5"),
        ("progress=maybe", r"progress: expected true, false or auto, got 'maybe'"),
        ("progress=3", r"progress: expected true or false or a string, got 3"),
        ("phase2.algo=a2c", r"phase2\.algo: expected one of reinforce, ppo, got 'a2c'"),
        ("phase2.lr_schedule=step", r"phase2\.lr_schedule: expected one of constant"),
        ("phase1.teacher=oracle", r"phase1\.teacher: expected one of .*got 'oracle'"),
        ("phase2.episodes_per_graph=1", r"phase2\.episodes_per_graph: must be >= 2"),
        (
            "phase2.baseline=critic",
            r"phase2\.baseline: expected one of mean, greedy, got 'critic'",
        ),
        ("phase2.temperature=0", r"phase2\.temperature: must be > 0, got 0"),
        ("phase3.temperature=.nan", r"phase3\.temperature: must be > 0, got nan"),
        ("phase1.eps_end=2", r"phase1\.eps_end: must be in \[0, 1\], got 2"),
        ("data.graphs=[]", r"data\.graphs: expected at least one graph"),
        ("data.graphs=ffnn", r"data\.graphs: expected a list, got 'ffnn'"),
        ("phases=[phase1, phase9]", r"phases\[1\]: expected one of phase1, phase2"),
        ("wandb.mode=loud", r"wandb\.mode: expected one of auto, online"),
        (
            "data.memory_mask=rooms",
            r"data\.memory_mask: expected true, false, resident, room, live or timed",
        ),
        ("no_equals_sign", r"override: expected key=value, got 'no_equals_sign'"),
    ],
)
def test_bad_overrides_name_the_key_and_value(override, message):
    with pytest.raises(ValueError, match=message):
        apply_overrides(TrainConfig(), [override])


def test_a_greedy_baseline_needs_one_sampled_episode_per_graph():
    cfg = apply_overrides(
        TrainConfig(),
        ["phase2.baseline=greedy", "phase2.episodes_per_graph=1", "phase2.temperature=0.25"],
    )
    assert (cfg.phase2.baseline, cfg.phase2.episodes_per_graph) == ("greedy", 1)
    assert cfg.phase2.temperature == 0.25


def test_phase3_settings_and_their_errors(tmp_path):
    cfg = apply_overrides(
        TrainConfig(), ["phases=[phase2, phase3]", "phase3.devices=cuda:0#4", "phase3.scale=2"]
    )
    assert cfg.phases == ["phase2", "phase3"]
    assert (cfg.phase3.devices, cfg.phase3.scale, cfg.phase3.cluster) == (
        "cuda:0#4",
        2,
        "calibrate",
    )
    with pytest.raises(
        ValueError,
        match=r"phase3\.devices: expected 'cpu#k', 'cuda:i', 'cuda:i#k' or 'cuda:i%N', got 'gpu'",
    ):
        apply_overrides(TrainConfig(), ["phase3.devices=gpu"])
    with pytest.raises(ValueError, match=r"phase3\.scale: must be > 0, got 0"):
        apply_overrides(TrainConfig(), ["phase3.scale=0"])
    grown = apply_overrides(TrainConfig(), ["phase3.scale=0.25", "phase3.devices='cuda:0,cpu#2'"])
    assert (grown.phase3.scale, grown.phase3.devices, grown.phase3.profile) == (
        0.25,
        "cuda:0,cpu#2",
        True,
    )
    p = tmp_path / "c.yaml"
    p.write_text("phase3:\n  updates: 10\n")
    assert load_config(p).phase3.updates == 10


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "phase3.imitation_coef=1",
            r"phase3\.imitation_coef: unknown key .*self-imitation is a phase II setting",
        ),
        ("phase3.self_imitation.coef=1", r"phase3\.self_imitation: unknown key"),
        (
            "phase2.imitation_coef=1",
            r"phase2\.imitation_coef: unknown key .*it is phase2\.self_imitation\.coef now",
        ),
        ("phase2.improve_every=5", r"phase2\.improve_every: unknown key .*; removed: "),
        ("phase3.reward=relative", r"phase3\.reward: unknown key .*always relative"),
        ("phase1.reward=nest", r"phase1\.reward: unknown key"),
        ("phase1.entropy_coef=0.1", r"phase1\.entropy_coef: unknown key"),
        ("phase2.self_imitation.coeff=1", r"self_imitation\.coeff: unknown key .*'coef'"),
        ("phase2.self_imitation.coef=-1", r"phase2\.self_imitation\.coef: must be >= 0"),
        ("phase2.self_imitation.states=all", r"self_imitation\.states: expected one of"),
        ("policy.learn=neither", r"policy\.learn: expected one of both, select, place"),
        ("policy.hidden=0", r"policy\.hidden: must be >= 1, got 0"),
        ("policy.rollout=true", r"policy\.rollout: unknown key .*it is policy\.prices now"),
        (
            "policy.rollout_starts=[heft]",
            r"policy\.rollout_starts: unknown key .*it is policy\.price_starts now",
        ),
    ],
)
def test_keys_that_would_do_nothing_are_rejected(override, message):
    """Each key lives where it acts: phase III has no self-imitation and no reward
    choice, phase I no RL knobs; keys of earlier versions say where they went."""
    with pytest.raises(ValueError, match=message):
        apply_overrides(TrainConfig(), [override])


def test_sections_share_one_base_and_the_policy_sizes_are_the_policys():
    from placegym.agents.doppler import PolicyConfig
    from placegym.train.config import PhaseConfig, RLConfig

    cfg = TrainConfig()
    assert isinstance(cfg.policy, PolicyConfig)
    assert all(isinstance(getattr(cfg, p), PhaseConfig) for p in ("phase1", "phase2", "phase3"))
    assert isinstance(cfg.phase2, RLConfig) and isinstance(cfg.phase3, RLConfig)
    assert not hasattr(cfg.phase3, "self_imitation") and not hasattr(cfg.phase1, "algo")
    cfg = apply_overrides(cfg, ["phase2.self_imitation.coef=1", "policy.hidden=16"])
    assert cfg.phase2.self_imitation.coef == 1.0 and cfg.policy == PolicyConfig(hidden=16)


def test_bad_yaml_and_unknown_section_key(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("phase2: {updates: [\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(p)
    p.write_text("phase2:\n  update: 3\n")
    with pytest.raises(ValueError, match=r"phase2\.update: unknown key .*'updates'"):
        load_config(p)


def test_cli_print_config_and_bad_override_exit_code(capsys):
    from placegym.train.cli import main

    assert main(["train", str(CONFIGS / "quickstart.yaml"), "--print-config", "seed=3"]) == 0
    assert "seed: 3" in capsys.readouterr().out
    assert main(["train", str(CONFIGS / "quickstart.yaml"), "phase2.lr=x"]) == 2
    assert "phase2.lr: expected a number, got 'x'" in capsys.readouterr().err


# ---------------------------------------------------------------------- schedules
@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_lr_schedule_changes_the_optimizers_rate(schedule):
    p = torch.nn.Parameter(torch.zeros(3))
    opt, sched = make_optimizer([p], lr=0.1, schedule=schedule, total=10, end_factor=0.1)
    rates = []
    for _ in range(12):
        rates.append(opt.param_groups[0]["lr"])
        p.grad = torch.ones(3)
        opt.step()
        sched.step()
    assert rates[0] == pytest.approx(0.1)
    factor = lr_factor(schedule, 10, 0.1)
    assert rates == pytest.approx([0.1 * factor(i) for i in range(12)])
    if schedule == "constant":
        assert rates[-1] == pytest.approx(0.1)
    else:
        assert rates[10] == pytest.approx(0.01) and rates[11] == pytest.approx(0.01)
        assert all(a >= b for a, b in itertools.pairwise(rates))
        assert rates[5] == pytest.approx(0.055)  # linear and cosine meet halfway
    state = sched.state_dict()  # weights_only-safe: primitives only
    assert all(v is None or isinstance(v, int | float | bool | list) for v in state.values())


def test_epsilon_schedule():
    assert epsilon(0, 100, 1.0, 0.0, 0.5) == 1.0
    assert epsilon(25, 100, 1.0, 0.0, 0.5) == pytest.approx(0.5)
    assert epsilon(50, 100, 1.0, 0.0, 0.5) == 0.0
    assert epsilon(99, 100, 1.0, 0.0, 0.5) == 0.0
    assert epsilon(10, 100, 0.5, 0.5, 0.0) == 0.5


def test_the_memory_mask_takes_room():
    cfg = apply_overrides(TrainConfig(), ["data.memory_mask=room"])
    assert cfg.data.memory_mask == "room"
    assert apply_overrides(TrainConfig(), ["data.memory_mask=false"]).data.memory_mask is False
