"""The SB3 recipe: per-phase diagnostics, learning on a small graph, bench of a saved zip."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import placegym.envs  # noqa: F401
from placegym.agents.sb3 import AnchoredMaskablePPO, make_maskable_ppo
from placegym.agents.sb3.bc import greedy_makespans, pretrain, tie_log_likelihood
from placegym.agents.sb3.callbacks import PhaseDiagnostics
from placegym.agents.sb3.placer import Sb3Placer
from placegym.envs import load_cluster, simulate
from placegym.envs.workloads import make_graph
from placegym.train.experiments.sb3_recipe import run_recipe

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = {"policy_kwargs": {"features_extractor_kwargs": {"hidden": 16, "layers": 2}}}
PHASE_KEYS = [f"phase/{p}_{k}" for p in ("sel", "plc") for k in ("entropy", "approx_kl")]


def small_ppo(**overrides):
    kw = dict(n_envs=1, n_steps=64, batch_size=32, n_epochs=2, **SMALL)
    return make_maskable_ppo("placegym/ChainMM-v0", **{**kw, **overrides})


def test_phase_diagnostics_measure_each_update_and_reach_the_logger():
    model = small_ppo(learning_rate=3e-3)
    cb = PhaseDiagnostics()
    model.learn(128, callback=cb)
    assert [h["timesteps"] for h in cb.history] == [64, 128]
    for h in cb.history:
        assert all(np.isfinite(h[k]) for k in PHASE_KEYS)
        for p in ("sel", "plc"):
            assert 0 <= h[f"phase/{p}_entropy"] <= h[f"phase/{p}_uniform"] + 1e-6
            assert h[f"phase/{p}_approx_kl"] >= 0 and 0 <= h[f"phase/{p}_clip_frac"] <= 1
        assert "train/value_loss" in h and "train/explained_variance" in h
    assert max(h["phase/sel_approx_kl"] for h in cb.history) > 0  # the policy moved


def test_phase_diagnostics_see_no_change_when_nothing_is_learned():
    model = small_ppo(learning_rate=0.0)
    cb = PhaseDiagnostics()
    model.learn(64, callback=cb)
    [h] = cb.history
    for p in ("sel", "plc"):
        assert h[f"phase/{p}_approx_kl"] == pytest.approx(0, abs=1e-6)
        assert h[f"phase/{p}_clip_frac"] == 0
    # untrained output layers (gain 0.01): close to uniform over the legal actions
    assert h["phase/plc_entropy"] == pytest.approx(h["phase/plc_uniform"], abs=0.01)


def test_a_saved_model_places_graphs_for_the_benchmark(tmp_path):
    model = small_ppo()
    model.save(tmp_path / "ppo_chain")
    placer = Sb3Placer(tmp_path / "ppo_chain.zip")
    assert placer.name == "ppo_chain"
    env = gym.make("placegym/ChainMM-v0")
    env.reset(seed=0)
    graph, cluster = env.unwrapped.graph, load_cluster("p100x4")
    placement = placer(graph, cluster, 0)
    assert sorted(placement.order) == list(range(graph.num_nodes))
    assert simulate(graph, cluster, placement).makespan > 0
    np.testing.assert_array_equal(placer(graph, cluster, 0).device, placement.device)
    with pytest.raises(ValueError, match="cluster: 'v100x8' has 8 devices, the model"):
        placer(graph, "v100x8", 0)
    with pytest.raises(ValueError, match="max_nodes"):
        placer(make_graph("ffnn"), cluster, 0)


def test_bench_cli_accepts_an_sb3_zip(tmp_path, capsys):
    from placegym.train.cli import main

    small_ppo().save(tmp_path / "ppo_chain")
    code = main(
        [
            "bench",
            "--teachers",
            "critical_path",
            "--workloads",
            "chainmm",
            "--agents",
            str(tmp_path / "ppo_chain.zip"),
            "--out",
            str(tmp_path / "bench"),
            "--no-progress",
        ]
    )
    assert code == 0
    assert "ppo_chain" in capsys.readouterr().out


def tie_nll(model) -> float:
    """Mean tie negative log-likelihood of the model's anchor demonstrations."""
    demos = model.demonstrations
    obs, _ = model.policy.obs_to_tensor(demos.obs)
    with torch.no_grad():
        dist = model.policy.get_distribution(obs, action_masks=demos.obs["action_mask"])
        ties = torch.as_tensor(demos.ties)
        return float(-tie_log_likelihood(dist.distribution.logits, ties).mean())


def test_the_anchor_keeps_ppo_on_the_teachers_tie_sets(tmp_path):
    """With a learning rate that drives PPO off the cloned tie sets, the anchored model
    ends with a lower tie NLL than the same run unanchored; the anchor's data is not saved."""
    nll = {}
    for steps in (0, 16):
        model = small_ppo(learning_rate=3e-3, anchor_steps=steps, seed=0)
        assert isinstance(model, AnchoredMaskablePPO) and model.demonstrations is None
        pretrain(model, "placegym/ChainMM-v0", epochs=4)
        before = tie_nll(model)
        model.learn(320)
        nll[steps] = tie_nll(model)
    assert nll[0] > before + 0.05, (before, nll)  # PPO alone leaves the ties
    assert nll[16] < 0.5 * nll[0], (before, nll)
    assert model.logger.name_to_value["train/anchor_tie_nll"] >= 0
    model.save(tmp_path / "anchored")
    loaded = AnchoredMaskablePPO.load(tmp_path / "anchored")
    assert loaded.demonstrations is None and loaded.anchor_steps == 16
    with pytest.raises(ValueError, match="anchor_steps, anchor_batch_size"):
        small_ppo(anchor_steps=-1)


def test_ppo_improves_on_the_untrained_and_the_cloned_policy_on_a_small_graph():
    """Cloned from round_robin (33% slower than critical_path on this 16-node DAG), PPO's
    greedy placement beats both the untrained and the cloned policy within 2,400 steps
    (unanchored: the anchor would hold PPO to round_robin's choices)."""
    env_kwargs = {"graph": make_graph("random_dag", nodes=16)}
    env = gym.make("placegym/Placement-v0", **env_kwargs)
    env.reset(seed=0)
    reference = env.unwrapped.reference_makespan
    model = make_maskable_ppo(
        "placegym/Placement-v0",
        env_kwargs=env_kwargs,
        n_steps=160,  # 5 episodes of 2n = 32 steps
        batch_size=80,
        learning_rate=1e-3,
        anchor_steps=0,
        **SMALL,
    )
    untrained = greedy_makespans(model.policy, env)[0] / reference
    pretrain(model, env, teacher="round_robin", epochs=2)
    cloned = greedy_makespans(model.policy, env)[0] / reference
    assert cloned > 1.25  # round_robin: 1.45
    model.learn(2_400)
    learned = greedy_makespans(model.policy, env)[0] / reference
    assert learned < min(untrained, cloned) - 0.15, (untrained, cloned, learned)


SEED_2_GAP = "measured 0.952 after 20,480 steps (README)"


@pytest.mark.slow
@pytest.mark.parametrize(
    "seed", [0, 1, pytest.param(2, marks=pytest.mark.xfail(reason=SEED_2_GAP, strict=False))]
)
def test_the_documented_recipe_beats_the_teacher_and_never_collapses(seed):
    """README's recipe on FFNN-v0 (about 10 CPU-minutes a seed): BC within 2% of
    critical_path, never worse than 1.05 after BC, at most 0.95 after 20,480 steps."""
    run = run_recipe("placegym/FFNN-v0", seed=seed, log=None)
    bc, *ppo = run.ratios[1:]
    assert run.steps[2:] == [5_120, 10_240, 15_360, 20_480]
    assert bc <= 1.02
    assert max(ppo) <= 1.05
    assert ppo[-1] <= 0.95
