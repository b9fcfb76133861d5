"""The ``placegym`` command line: outputs, JSON, Gantt files and one-line errors."""

import json
import subprocess
import sys

import pytest
from test_io import CLUSTER, GRAPH, PLACEMENT

from placegym.train.cli import main


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, doc in (("graph", GRAPH), ("cluster", CLUSTER), ("placement", PLACEMENT)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return paths


def problem_args(files, cluster=None):
    return [
        "--graph",
        str(files["graph"]),
        "--cluster",
        cluster or str(files["cluster"]),
        "--placement",
        str(files["placement"]),
    ]


def test_simulate_prints_makespan_utilisation_memory(files, capsys):
    assert main(["simulate", *problem_args(files)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("makespan: ")
    assert "oom: no" in out
    assert "gpu0" in out and "gpu1" in out and "peak memory" in out


def test_simulate_json_matches_the_api(files, capsys):
    from placegym.envs import simulate

    assert main(["simulate", *problem_args(files), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["makespan"] == simulate(GRAPH, CLUSTER, PLACEMENT).makespan
    assert [d["name"] for d in data["devices"]] == ["gpu0", "gpu1"]
    assert main(["simulate", *problem_args(files), "--json", "--noise", "0.2", "--seed", "4"]) == 0
    noisy = json.loads(capsys.readouterr().out)
    assert noisy["makespan"] == simulate(GRAPH, CLUSTER, PLACEMENT, noise=0.2, rng=4).makespan
    assert main(["simulate", *problem_args(files), "--json", "--dispatch", "fifo"]) == 0
    assert json.loads(capsys.readouterr().out)["dispatch"] == "fifo"


def test_simulate_with_a_preset(files, capsys):
    assert main(["simulate", *problem_args(files, cluster="p100x4"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["makespan"] > 0


def test_show_writes_a_png(files, tmp_path, capsys):
    out = tmp_path / "gantt.png"
    assert main(["show", *problem_args(files), "--out", str(out), "--color-by", "op"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Gantt chart written" in capsys.readouterr().out


def test_validate_each_format(files, capsys):
    assert main(["validate", *map(str, files.values())]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("ok (placegym.graph/v1, 3 nodes, 3 edges)")
    assert out[1].endswith("ok (placegym.cluster/v1, 2 devices, 3 levels)")
    assert out[2].endswith("ok (placegym.placement/v1, 3 nodes on 2 devices)")


def test_validate_checks_a_placement_against_graph_and_cluster(files, capsys):
    args = ["validate", str(files["placement"]), "--graph", str(files["graph"])]
    assert main([*args, "--cluster", str(files["cluster"])]) == 0
    one_device = {
        "format": "placegym.cluster/v1",
        "devices": [{"flops": 1, "memory": 1}],
        "levels": [{"bandwidth": 1}],
    }
    files["cluster"].write_text(json.dumps(one_device))
    assert main([*args, "--cluster", str(files["cluster"])]) == 2
    err = capsys.readouterr().err
    assert "placement.json: device[1]: device index out of range" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"format": "placegym.graph/v1", "edges": [],'
            ' "nodes": [{"flops": -1, "out_bytes": 0}]}',
            r"nodes[0].flops: must be >= 0, got -1",
        ),
        ('{"format": "nope"}', "format: unknown format tag"),
        ("{broken", "not valid JSON"),
    ],
)
def test_validate_bad_file_is_one_line_exit_2(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err and "bad.json" in err


def test_bad_inputs_to_simulate(files, tmp_path, capsys):
    assert main(["simulate", *problem_args(files, cluster="p100x9")]) == 2
    assert "unknown preset or file 'p100x9'" in capsys.readouterr().err
    args = problem_args(files)
    args[1] = str(tmp_path / "missing.json")
    assert main(["simulate", *args]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err
    assert main(["simulate", *problem_args(files), "--noise", "-1"]) == 2
    assert "noise: must be a finite number >= 0" in capsys.readouterr().err


def test_clusters_lists_presets_and_prints_one(capsys):
    assert main(["clusters"]) == 0
    out = capsys.readouterr().out
    for name in (
        "p100x4",
        "v100x8",
        "h100x8",
        "h100-2x8",
        "tpuv4-fattree-1024",
        "h100-spineleaf-64",
    ):
        assert name in out
    assert main(["clusters", "v100x8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "placegym.cluster/v1" and len(doc["level_matrix"]) == 8


def test_console_script_runs_as_a_process(files):
    """Through a real interpreter: exit code 2 and no traceback on a bad file."""
    bad = files["graph"].with_name("cyclic.json")
    doc = dict(GRAPH, edges=[[0, 1], [1, 2], [2, 0]])
    bad.write_text(json.dumps(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "placegym.train.cli", "validate", str(bad)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "cycle" in proc.stderr and "Traceback" not in proc.stderr


def test_demo_runs_end_to_end(tmp_path, capsys):
    from placegym.train.cli.demo import run_demo

    results = run_demo(tmp_path)
    assert set(results) == {"single_device", "round_robin", "layer_pipeline"}
    assert (tmp_path / "gantt.png").exists()
    assert (
        main(["validate", str(tmp_path / "graph.json"), str(tmp_path / "round_robin.json")]) == 0
    )


def test_report_and_train_by_preset_name(capsys, tmp_path):
    assert main(["train", "quickstart", "--print-config", "seed=4"]) == 0
    out = capsys.readouterr().out
    assert "name: quickstart" in out and "seed: 4" in out
    assert main(["report", "--parts", "main,bogus", "--out", str(tmp_path)]) == 2
    assert "parts: unknown part 'bogus'" in capsys.readouterr().err
    assert main(["report", "--clusters", "p100x5", "--out", str(tmp_path)]) == 2
    assert "unknown preset or file 'p100x5'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing was trained
