"""`placegym train` runs: checkpoints, resume, W&B offline logging, bench --agents."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from simcases import fork_join, unit_cluster

from placegym.envs import load_cluster, simulate
from placegym.envs.workloads import chainmm
from placegym.train.checkpoint import CHECKPOINT_FORMAT, load_checkpoint
from placegym.train.cli import main
from placegym.train.config import apply_overrides, config_from_dict
from placegym.train.evaluate import evaluate_policy, load_agent
from placegym.train.tracking import resolve_wandb_mode
from placegym.train.trainer import Trainer

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"


def tiny_config(tmp_path: Path, algo: str = "reinforce", **extra):
    """Phase I (4 updates) and phase II (5) on a 6-node graph over a 2-device unit cluster."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    g = fork_join()
    g.save(tmp_path / "fork.json")
    unit_cluster(2).save(tmp_path / "unit.json")
    raw = {
        "name": "tiny",
        "out": str(tmp_path / "run"),
        "progress": False,
        "checkpoint_every": 2,
        "policy": {"hidden": 8, "layers": 1},
        "data": {
            "cluster": str(tmp_path / "unit.json"),
            "graphs": [str(tmp_path / "fork.json")],
        },
        "phase1": {"updates": 4, "episodes_per_graph": 3, "lr": 0.01},
        "phase2": {
            "updates": 5,
            "algo": algo,
            "episodes_per_graph": 4,
            "lr": 0.01,
            "lr_schedule": "linear",
        },
        "eval": {"every": 3, "k": 2, "teachers": ["critical_path", "heft"], "gantt": False},
        "wandb": {"mode": "disabled"},
    }
    for key, value in extra.items():
        raw[key] = value
    return config_from_dict(raw)


def _weights(path: Path) -> dict:
    return load_checkpoint(path)["policy"]


@pytest.mark.parametrize("algo, stop", [("reinforce", 3), ("reinforce", 7), ("ppo", 6)])
def test_resume_after_a_kill_matches_an_uninterrupted_run(tmp_path, algo, stop):
    full = Trainer(tiny_config(tmp_path / "a", algo))
    full.run()
    ref = _weights(full.ckpt_dir / "final.pt")

    cfg = tiny_config(tmp_path / "b", algo)
    killed = Trainer(cfg)
    assert killed.run(stop_after=stop) == []  # "killed" after `stop` updates, nothing saved
    latest = load_checkpoint(killed.ckpt_dir / "latest.pt")
    # at most one checkpoint interval (2 updates) is lost
    assert stop - 2 < latest["progress"]["global_update"] <= stop
    assert not (killed.ckpt_dir / "final.pt").exists()
    resumed = Trainer(cfg)
    resumed.run()
    assert resumed.progress.global_update == 9 and resumed.progress.complete
    out = _weights(resumed.ckpt_dir / "final.pt")
    assert out.keys() == ref.keys()
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], rtol=0, atol=0)
    # the log was cut back to the checkpoint: the redone updates appear once, and the
    # whole log is the uninterrupted run's (but for the wall-clock rates)
    rows, ref_rows = _metric_rows(cfg.run_dir), _metric_rows(full.cfg.run_dir)
    assert [r["step"] for r in rows] == [r["step"] for r in ref_rows]
    assert rows == ref_rows


def _metric_rows(run_dir: Path) -> list[dict]:
    """The rows of a run's ``metrics.jsonl`` without its wall-clock rates."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("charts/episodes_per_second", None)
    return rows


def test_checkpoint_contents_are_weights_only_and_schedule_is_applied(tmp_path):
    cfg = tiny_config(tmp_path)
    Trainer(cfg).run()
    ckpt = torch.load(cfg.run_dir / "checkpoints" / "final.pt", weights_only=True)
    assert ckpt["format"] == CHECKPOINT_FORMAT and ckpt["progress"]["complete"]
    assert ckpt["config"]["phase2"]["algo"] == "reinforce"
    rows = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    lr2 = [r["charts/learning_rate"] for r in rows if r.get("charts/phase") == 2.0]
    # linear decay from 0.01 to 0.001 over 5 updates, read from the optimiser itself
    np.testing.assert_allclose(lr2, [0.01 * (1 - 0.9 * i / 5) for i in range(5)], rtol=1e-6)
    eps = [r["charts/epsilon"] for r in rows if "charts/epsilon" in r]
    assert eps[0] == 1.0 and eps[-1] == 0.0
    assert any("eval/train/fork/greedy_ratio" in r for r in rows)
    results = json.loads((cfg.run_dir / "results.json").read_text())
    assert {"greedy", "best_of_2", "critical_path", "heft"} <= set(results["rows"][0])
    assert (cfg.run_dir / "results.md").read_text().startswith("| split | graph |")


def test_init_from_checkpoint_and_policy_size_mismatch(tmp_path):
    src = tiny_config(tmp_path / "src", phases=["phase1"])
    Trainer(src).run()
    final = src.run_dir / "checkpoints" / "final.pt"
    cfg = apply_overrides(tiny_config(tmp_path / "dst"), [f"init={final}", "phases=[phase2]"])
    t = Trainer(cfg)
    t._restore()
    for k, v in _weights(final).items():
        torch.testing.assert_close(t.policy.state_dict()[k], v)
    bad = apply_overrides(cfg, ["policy.hidden=4"])
    with pytest.raises(ValueError, match=r"init: the checkpoint's policy sizes .* differ"):
        Trainer(bad)._restore()


def test_init_from_a_shipped_agent(tmp_path):
    from placegym.agents import pretrained
    from placegym.train.checkpoint import init_weights

    shipped = pretrained("generalist-memory-v2").policy
    path, weights = init_weights("pretrained:generalist-memory-v2", None, shipped.config)
    assert path.name == "policy.pt"
    for k, v in shipped.state_dict().items():
        torch.testing.assert_close(weights[k], v)
    with pytest.raises(ValueError, match=r"init: no shipped agent 'nope' \(shipped: "):
        init_weights("pretrained:nope", None, shipped.config)
    with pytest.raises(ValueError, match=r"init: the checkpoint's policy sizes .* differ"):
        init_weights("pretrained:generalist-memory-v2", None, tiny_config(tmp_path).policy)


V2_CHECKPOINT = Path(__file__).resolve().parent / "data" / "checkpoint_v2.pt"


def test_a_v2_checkpoint_loads_with_its_config_in_the_current_shape(tmp_path):
    """A checkpoint of the previous format (phase II's self-imitation keys flat, phase III
    with RL-only keys) loads converted and places exactly as it did."""
    from placegym.envs.workloads import ffnn
    from placegym.train.config import SelfImitationConfig

    raw = torch.load(V2_CHECKPOINT, weights_only=True)
    assert (
        raw["format"] == "placegym.checkpoint/v2" and "imitation_coef" in raw["config"]["phase2"]
    )
    ckpt = load_checkpoint(V2_CHECKPOINT)
    assert ckpt["format"] == CHECKPOINT_FORMAT
    assert "imitation_coef" not in ckpt["config"]["phase2"]
    assert "reward" not in ckpt["config"]["phase3"]
    cfg = config_from_dict(ckpt["config"])
    assert cfg.phase2.self_imitation == SelfImitationConfig(
        coef=0.5, states="plan", teacher="single_device"
    )
    g, c = ffnn(), load_cluster("p100x4")
    agent = load_agent(V2_CHECKPOINT)
    # its greedy placement (ties by the fixed rule; any seed)
    assert simulate(g, c, agent.place(g, c)).makespan == 0.005279631114683587
    assert simulate(g, c, agent.place(g, c, seed=7)).makespan == 0.005279631114683587
    old = tmp_path / "v1.pt"
    torch.save(dict(raw, format="placegym.checkpoint/v1"), old)
    with pytest.raises(ValueError, match=r"format: expected 'placegym\.checkpoint/v3'.*v1'"):
        load_checkpoint(old)


def test_wandb_mode_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert resolve_wandb_mode("auto") == "offline"  # no key: never the network
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_wandb_mode("auto") == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert resolve_wandb_mode("auto") == "disabled"
    assert resolve_wandb_mode("offline") == "offline"


def test_train_cli_end_to_end_offline_wandb_then_bench_agents(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "qs"
    rc = main(
        [
            "train",
            str(QUICKSTART),
            f"out={out}",
            "progress=false",
            "phase1.updates=2",
            "phase1.episodes_per_graph=2",
            "phase2.updates=2",
            "phase2.episodes_per_graph=2",
            "eval.k=2",
            "eval.teachers=[critical_path]",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| train | ffnn |" in printed and "best_of_2" in printed
    final = out / "checkpoints" / "final.pt"
    ckpt = torch.load(final, weights_only=True)
    assert ckpt["name"] == "quickstart" and ckpt["progress"]["global_update"] == 4
    [run] = list((tmp_path / "wandb").glob("offline-run-*"))
    [log] = list(run.glob("run-*.wandb"))
    data = log.read_bytes()
    for key in (b"losses/imitation", b"losses/policy", b"charts/episodes_per_second"):
        assert key in data
    assert list((run / "files" / "media").rglob("*.png"))  # the Gantt chart
    assert (out / "metrics.jsonl").is_file() and (out / "config.yaml").is_file()

    rc = main(
        [
            "bench",
            "--teachers",
            "critical_path,heft",
            "--workloads",
            "chainmm",
            "--agents",
            str(final),
            "--agent-k",
            "2",
            "--search",
            "40",
            "--out",
            str(tmp_path / "bench"),
            "--no-progress",
        ]
    )
    assert rc == 0
    table = capsys.readouterr().out
    assert "quickstart" in table and "quickstart-best2" in table
    assert "quickstart-search40" in table


def test_load_agent_places_any_graph_on_any_cluster(tmp_path):
    cfg = tiny_config(tmp_path, phases=["phase1"])
    Trainer(cfg).run()
    for mode in ("greedy", "sample", "best_of_k"):
        agent = load_agent(cfg.run_dir / "checkpoints" / "final.pt", mode=mode, k=3)
        g = chainmm()
        for cluster in ("p100x4", "v100x8"):
            placement = agent.place(g, cluster)
            c = load_cluster(cluster)
            placement.check(g, c)
            assert simulate(g, c, placement).makespan > 0
    assert repr(agent) == "AgentPlacer('tiny-best3', mode='best_of_k', k=3)"
    # the benchmark placer and the training evaluation agree
    c = load_cluster("p100x4")
    res = evaluate_policy(agent.policy, g, c, k=3, seed=5)
    assert simulate(g, c, agent.place(g, c, seed=5)).makespan == res.best
    greedy = load_agent(cfg.run_dir / "checkpoints" / "final.pt")
    assert simulate(g, c, greedy.place(g, c, seed=5)).makespan == res.greedy
    assert res.best <= res.sampled
    with pytest.raises(ValueError, match="mode: expected one of"):
        load_agent(cfg.run_dir / "checkpoints" / "final.pt", mode="beam")
    bad = tmp_path / "bad.pt"
    torch.save({"format": "other"}, bad)
    with pytest.raises(
        ValueError,
        match=r"bad\.pt: format: expected 'placegym\.checkpoint/v3' \(a placegym checkpoint\), "
        r"got 'other'$",
    ):
        load_agent(bad)


def test_phase3_fine_tunes_on_the_real_backend(tmp_path):
    """Phase II on the simulator, then phase III on two CPU workers with measured rewards."""
    cfg = tiny_config(
        tmp_path, phases=["phase2", "phase3"], data={"cluster": "p100x4", "graphs": ["ffnn"]}
    )
    cfg = apply_overrides(
        cfg,
        [
            "phase2.updates=2",
            "phase3.updates=2",
            "phase3.episodes_per_graph=2",
            "phase3.scale=8",
            "phase3.devices=cpu#2",
            "eval.every=0",
            "eval.teachers=[]",
        ],
    )
    metrics = []
    trainer = Trainer(cfg)
    trainer.run()
    for line in (Path(cfg.out) / "metrics.jsonl").read_text().splitlines():
        metrics.append(json.loads(line))
    real = [m for m in metrics if "charts/sim_real_gap" in m]
    assert len(real) == 2
    for m in real:
        assert m["charts/measured_makespan_ms"] > 0 and np.isfinite(m["charts/sim_real_gap"])
    pool, cluster = trainer._real
    assert cluster.num_devices == 2 and cluster.name == "calibrated-cpu#2"
    assert (Path(cfg.out) / "checkpoints" / "final.pt").is_file()


def test_plan_self_imitation_resumes_with_its_best_plans(tmp_path):
    phase2 = {
        "updates": 5,
        "episodes_per_graph": 4,
        "lr": 0.01,
        "self_imitation": {"coef": 1.0, "states": "plan", "teacher": "single_device"},
    }
    full = Trainer(tiny_config(tmp_path / "a", phase2=phase2))
    full.run()
    ref = load_checkpoint(full.ckpt_dir / "final.pt")
    [plan] = ref["best_plans"].values()
    # the single-device start plan (makespan 10) was replaced by a better sampled one
    assert plan["makespan"] < 10.0 and len(set(plan["device"])) == 2
    rows = [json.loads(x) for x in (full.cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert sum("losses/self_imitation" in r for r in rows) == 5

    cfg = tiny_config(tmp_path / "b", phase2=phase2)
    Trainer(cfg).run(stop_after=8)
    resumed = Trainer(cfg)
    resumed.run()
    out = load_checkpoint(resumed.ckpt_dir / "final.pt")
    assert out["best_plans"] == ref["best_plans"]
    for k in ref["policy"]:
        torch.testing.assert_close(out["policy"][k], ref["policy"][k], rtol=0, atol=0)


def test_restarts_keep_the_run_of_best_training_greedy(tmp_path, capsys):
    from placegym.train.restarts import restart_configs, train

    cfg = tiny_config(tmp_path, restarts=3, phase2={"updates": 2, "episodes_per_graph": 2})
    subs = restart_configs(cfg)
    assert [s.seed for s in subs] == [0, 1, 2] and all(s.restarts == 1 for s in subs)
    assert subs[1].run_dir == cfg.run_dir / "restart1"
    rows = train(cfg)
    summary = json.loads((cfg.run_dir / "restarts.json").read_text())
    scores = [r["train_greedy_ratio"] for r in summary["restarts"]]
    assert summary["chosen"] == int(np.argmin(scores))
    chosen = cfg.run_dir / summary["restarts"][summary["chosen"]]["run"]
    assert chosen.name == f"restart{summary['chosen']}"
    assert rows == json.loads((chosen / "results.json").read_text())["rows"]
    assert (cfg.run_dir / "results.json").read_text() == (chosen / "results.json").read_text()
    top = load_checkpoint(cfg.run_dir / "checkpoints" / "final.pt")
    assert top["config"]["seed"] == summary["chosen"]
    assert "chose restart" in capsys.readouterr().out
    # a second call loads the finished restarts instead of training again
    mtime = (chosen / "checkpoints" / "final.pt").stat().st_mtime_ns
    assert train(cfg) == rows
    assert (chosen / "checkpoints" / "final.pt").stat().st_mtime_ns == mtime
    with pytest.raises(ValueError, match="restarts"):
        tiny_config(tmp_path / "bad", restarts=0)


def test_truncate_metrics_keeps_steps_up_to_the_checkpoint(tmp_path):
    from placegym.train.tracking import truncate_metrics

    log = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "x": s} for s in (0, 1, 2, 2, 3, 4)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 5, "x"')
    assert truncate_metrics(log, 2) == 3  # steps 3 and 4, and the torn line
    assert [json.loads(x) for x in log.read_text().splitlines()] == rows[:4]
    assert truncate_metrics(log, 2) == 0


# ------------------------------------------------------------------ one run, one config
def _yaml(tmp_path: Path, **extra) -> Path:
    """A tiny config written as a YAML file, for the command line."""
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_config(tmp_path, **extra).to_yaml())
    return path


def test_a_resume_with_another_config_is_refused_naming_the_keys(tmp_path, capsys):
    from placegym.train.checkpoint import ConfigChanged, check_resume

    path = _yaml(tmp_path)
    assert main(["train", str(path)]) == 0
    run = tmp_path / "run"
    saved = (run / "config.yaml").read_text()
    mtime = (run / "checkpoints" / "final.pt").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["train", str(path), "phase2.updates=50", "phase2.lr=0.02"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err == (
        f"placegym train: error: {run}: this run was trained with another config "
        "(phase2.updates: 5 -> 50; phase2.lr: 0.01 -> 0.02); resuming would mix the two. "
        "Train a new run with out=<another folder>, or start this one over with "
        "resume=false\n"
    )
    assert (run / "config.yaml").read_text() == saved  # nothing rewritten
    assert (run / "checkpoints" / "final.pt").stat().st_mtime_ns == mtime
    # keys that cannot change the result may change; resume=false starts over
    cfg = tiny_config(tmp_path)
    check_resume(apply_overrides(cfg, ["progress=true", "threads=2", "wandb.mode=offline"]))
    with pytest.raises(
        ConfigChanged, match=r"data\.graphs: \[\"\S*fork\.json\"\] -> \[.*, \"ffnn\"\]"
    ):
        check_resume(apply_overrides(cfg, [f"data.graphs=[{tmp_path / 'fork.json'}, ffnn]"]))
    check_resume(apply_overrides(cfg, ["phase2.updates=50", "resume=false"]))
    # the trainer itself refuses too (a resume that does not go through the run layer)
    with pytest.raises(ConfigChanged, match=r"phase2\.updates: 5 -> 7"):
        Trainer(apply_overrides(cfg, ["phase2.updates=7"])).run()


class FakeWandb:
    """A stand-in for the ``wandb`` module that records runs, steps and artifacts."""

    def __init__(self) -> None:
        self.runs: list[dict] = []
        self.artifacts: list[dict] = []

    def init(self, **kwargs):
        fake = self
        record = {"id": kwargs["id"], "steps": []}
        self.runs.append(record)

        class Run:
            summary: dict = {}  # noqa: RUF012

            def log(self, metrics, step):
                record["steps"].append(step)

            def log_artifact(self, art):
                fake.artifacts.append(art.__dict__)

            def finish(self):
                pass

        return Run()

    @staticmethod
    def Settings(**kwargs):
        return kwargs

    @staticmethod
    def Artifact(name, type, metadata=None):
        class Art:
            def add_file(self, path):
                self.file = path

        art = Art()
        art.name, art.type, art.metadata = name, type, metadata
        return art


@pytest.fixture
def fake_wandb(monkeypatch):
    import sys

    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return fake


def test_wandb_resume_continues_one_run_and_a_finished_run_opens_none(
    tmp_path, fake_wandb, capsys
):
    from placegym.train.restarts import train

    cfg = tiny_config(tmp_path, wandb={"mode": "offline"})
    assert Trainer(cfg).run(stop_after=7) == []  # killed after update 7 (checkpoint: 6)
    train(cfg)  # resumes from update 6
    first, second = fake_wandb.runs
    assert first["id"] == second["id"]  # the same W&B run
    # no step twice: the resumed session sends only the steps after the killed one's
    assert max(first["steps"]) == 7 < min(second["steps"]) == 8
    steps = [r["step"] for r in _metric_rows(cfg.run_dir)]
    assert sorted(set(first["steps"]) | set(second["steps"])) == sorted(set(steps))
    [art] = fake_wandb.artifacts
    assert art["name"] == "tiny-model" and art["file"].endswith("final.pt")
    meta = art["metadata"]
    assert meta["run"] == "tiny" and meta["config"] == cfg.to_dict()
    results = json.loads((cfg.run_dir / "results.json").read_text())["rows"]
    [row] = [r for r in results if r["split"] == "train"]
    assert meta["final"] == {
        row["graph"]: {
            "greedy_makespan": row["greedy"],
            "greedy_ratio": row["greedy"] / row["critical_path"],
        }
    }
    capsys.readouterr()
    # a finished run, same config: no W&B run, no second artifact, nothing trained
    mtime = (cfg.run_dir / "checkpoints" / "final.pt").stat().st_mtime_ns
    assert train(cfg) == results
    assert len(fake_wandb.runs) == 2 and len(fake_wandb.artifacts) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{cfg.run_dir}: finished at update 9, nothing to train;")
    assert "| train | fork |" in out
    assert (cfg.run_dir / "checkpoints" / "final.pt").stat().st_mtime_ns == mtime


def test_ctrl_c_is_one_line_and_exit_130_then_the_same_command_resumes(
    tmp_path, monkeypatch, capsys
):
    path = _yaml(tmp_path)
    update = Trainer._update

    def interrupted_at_5(self, *args):
        if self.progress.global_update == 5:
            raise KeyboardInterrupt
        return update(self, *args)

    monkeypatch.setattr(Trainer, "_update", interrupted_at_5)
    assert main(["train", str(path)]) == 130
    latest = tmp_path / "run" / "checkpoints" / "latest.pt"
    assert capsys.readouterr().err == (
        f"placegym train: interrupted at update 5; run the same command to resume from "
        f"{latest} (update 4)\n"
    )
    monkeypatch.setattr(Trainer, "_update", update)
    assert main(["train", str(path)]) == 0
    assert f"resuming {latest} at update 4" in capsys.readouterr().out
    assert load_checkpoint(latest)["progress"]["global_update"] == 9


def test_a_second_run_into_a_held_folder_is_refused_naming_the_holder(tmp_path, capsys):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from placegym.train.runlock import RunLock

    path = _yaml(tmp_path)
    run = tmp_path / "run"
    # the first run: a real `placegym train`, long enough to be caught training
    first = subprocess.Popen(
        [sys.executable, "-m", "placegym.train.cli", "train", str(path), "phase2.updates=100000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "WANDB_MODE": "disabled"},
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "checkpoints" / "latest.pt").is_file():  # it holds the folder
            assert first.poll() is None, first.stderr.read().decode()
            assert time.monotonic() < deadline, "the first run never checkpointed"
            time.sleep(0.2)
        assert main(["train", str(path), "phase2.updates=100000"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith(
            f"placegym train: error: {run}: the run folder is in use by another placegym "
            f"train (pid {first.pid} on {socket.gethostname()}, started "
        )
        assert err.endswith("wait for it to end, or train into another folder with out=<folder>\n")
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: the lock must not outlive it
        first.wait()
    with RunLock(run):  # free again
        pass


def test_greedy_rollin_plays_the_learners_argmax_in_phase1(tmp_path, monkeypatch):
    from placegym.train import players

    seen = []
    real = players.play_episodes

    def spy(*args, **kwargs):
        seen.append((kwargs["greedy"], kwargs["teacher_prob"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(players, "play_episodes", spy)
    over = ["phase1.rollin=greedy", "phase1.eps_start=0", "phase1.eps_end=0", "phase1.updates=2"]
    cfg = apply_overrides(tiny_config(tmp_path, phases=["phase1"]), over)
    records = []
    real_update = Trainer._imitation_step

    def keep(self, *args):
        out = real_update(self, *args)
        records.append(out[0])
        return out

    monkeypatch.setattr(Trainer, "_imitation_step", keep)
    Trainer(cfg).run()
    assert (True, 0.0) in seen and records
    for batch in records:  # no teacher step, argmax actions: the episodes of a graph agree
        assert all(np.array_equal(r.plc_action, batch[0].plc_action) for r in batch)
    with pytest.raises(ValueError, match=r"phase1.rollin: expected one of sample, greedy"):
        apply_overrides(cfg, ["phase1.rollin=argmax"])
