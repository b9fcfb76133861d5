"""Progress of long runs in a log: a line every few seconds on stderr when it is not a
terminal (``bench``, ``anytime``, ``train``), the bar on a terminal, nothing when off."""

import io

import pytest
from tiny_suite import tiny  # noqa: F401 (fixture)

from placegym.train import progress
from placegym.train.cli import main
from placegym.train.progress import LineProgress, progress_bar


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_line_at_most_every_few_seconds_with_count_elapsed_and_time_left():
    clock, log = Clock(), io.StringIO()
    bar = LineProgress(10, desc="bench", unit="runs", every=5, stream=log, clock=clock)
    for step in range(1, 11):
        clock.now += 2.0
        bar.set_postfix_str(f"item {step}")
        bar.update()
    assert log.getvalue().splitlines() == [
        "bench: 3/10 runs (30%), 6 s elapsed, 14 s left; item 3",
        "bench: 6/10 runs (60%), 12 s elapsed, 8 s left; item 6",
        "bench: 9/10 runs (90%), 18 s elapsed, 2 s left; item 9",
    ]
    resumed = LineProgress(8, desc="phase1", unit="upd", initial=4, every=0, stream=log)
    resumed.update()
    assert log.getvalue().splitlines()[-1].startswith("phase1: 5/8 upd (62%), 0 s elapsed")


def test_the_mode_picks_bar_lines_or_nothing(monkeypatch):
    assert isinstance(progress_bar(3, mode="auto"), LineProgress)  # stderr is no terminal here
    assert not isinstance(progress_bar(3, mode=True), LineProgress)
    off = progress_bar(3, mode=False)
    assert not isinstance(off, LineProgress) and off.disable
    with pytest.raises(ValueError, match=r"progress: expected true, false or 'auto', got 'x'"):
        progress_bar(3, mode="x")


def test_bench_writes_progress_lines_to_a_log_and_none_with_no_progress(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(progress, "EVERY", 0.0)
    args = ["bench", "--workloads", "ffnn", "--teachers", "critical_path,heft"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("bench: 1/2 runs (50%), ") and err[0].endswith(
        "ffnn/p100x4/critical_path"
    )
    assert err[1].startswith("bench: 2/2 runs (100%), ")
    assert main([*args, "--out", str(tmp_path), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_a_suite_bench_counts_placer_runs(tiny, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setattr(progress, "EVERY", 0.0)
    args = ["bench", "--suite", "tiny-v0", "--teachers", "heft", "--out", str(tmp_path)]
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    # heft and critical_path (the reference) on each of the two instances
    assert [line.split(",")[0] for line in err] == [
        f"tiny-v0: {k}/4 runs ({k * 25}%)" for k in (1, 2, 3, 4)
    ]


def test_train_writes_update_lines_to_a_log(tmp_path, monkeypatch, capsys):
    from test_train_run import tiny_config

    from placegym.train.trainer import Trainer

    monkeypatch.setattr(progress, "EVERY", 0.0)
    Trainer(tiny_config(tmp_path, phases=["phase1"], progress="auto")).run()
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("phase1: ")]
    assert [x.split(" (")[0] for x in lines] == [f"phase1: {k}/4 upd" for k in (1, 2, 3, 4)]
    assert all(" s elapsed" in x for x in lines)
    assert all("; loss " in x for x in lines[1:])  # the metrics of the update before
