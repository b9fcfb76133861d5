"""The ``placegym`` command line: outputs, JSON, Gantt files and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

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
    assert out[2] == (
        f"{files['placement']}: ok (placegym.placement/v1, 3 nodes on 2 devices; "
        f"fits {files['graph']} on {files['cluster']})"
    )


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
    assert "noise: must be a number in [0, 1]" in capsys.readouterr().err
    for huge in ("40", "1e308", "nan"):  # refused at once, never a hang or vanished compute
        assert main(["simulate", *problem_args(files), "--noise", huge]) == 2
        assert f"got {float(huge)!r}" in capsys.readouterr().err


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


# ------------------------------------------------------------------ one-line errors
def one_line_error(capsys, command: str) -> str:
    """The message of the one-line error ``command`` printed (stdout aside)."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    prefix = f"placegym {command}: error: "
    assert err.startswith(prefix), err
    return err[len(prefix) : -1]


def test_a_number_too_large_for_a_float(files, capsys):
    doc = json.loads(files["graph"].read_text())
    doc["nodes"][0]["flops"] = 10**400
    files["graph"].write_text(json.dumps(doc))
    expected = (
        f"{files['graph']}: nodes[0].flops: too large for a float, "
        "got an integer of about 401 digits"
    )
    assert main(["validate", str(files["graph"])]) == 2
    assert one_line_error(capsys, "validate") == expected
    assert main(["simulate", *problem_args(files)]) == 2
    assert one_line_error(capsys, "simulate") == expected


def test_a_binary_file_is_named(files, capsys):
    files["graph"].write_bytes(b"\xbf\x00\xff binary")
    assert main(["validate", str(files["graph"])]) == 2
    assert one_line_error(capsys, "validate") == (
        f"{files['graph']}: not a placegym JSON file (not UTF-8 text: byte 0xbf at offset 0)"
    )
    assert main(["simulate", *problem_args(files)]) == 2
    assert one_line_error(capsys, "simulate") == (
        f"{files['graph']}: not a graph JSON file (not UTF-8 text: byte 0xbf at offset 0)"
    )


def test_a_placement_of_the_wrong_length_names_its_file(files, capsys):
    short = {"format": "placegym.placement/v1", "device": [0, 1], "order": [1, 0]}
    files["placement"].write_text(json.dumps(short))
    expected = (
        f"{files['placement']}: device: expected 3 entries (one per node of graph 'tiny'), got 2"
    )
    for command in ("simulate", "show"):
        assert main([command, *problem_args(files)]) == 2
        assert one_line_error(capsys, command) == expected
    # validate checks placements against the graph among its files, --graph or not
    assert main(["validate", str(files["graph"]), str(files["placement"])]) == 2
    assert one_line_error(capsys, "validate") == expected


def test_validate_says_which_graph_placements_fit(files, tmp_path, capsys):
    assert main(["validate", str(files["placement"])]) == 0
    assert capsys.readouterr().out == (
        f"{files['placement']}: ok (placegym.placement/v1, 3 nodes, uses devices 0..1 "
        "(2 distinct); not checked against a graph or a cluster: add --graph and --cluster)\n"
    )
    other = tmp_path / "other.json"
    other.write_text(files["graph"].read_text())
    paths = [str(files["graph"]), str(other), str(files["placement"])]
    assert main(["validate", *paths]) == 2
    assert one_line_error(capsys, "validate") == (
        f"--graph: 2 graph files given ({files['graph']}, {other}); say with --graph which "
        "one the placements must fit"
    )
    assert main(["validate", *paths, "--graph", str(other)]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .endswith(f"; fits {other}; not checked against a cluster: add --cluster)")
    )


def test_validate_without_a_cluster_gives_the_device_range_not_a_count(files, capsys):
    far = {"format": "placegym.placement/v1", "device": [0, 9, 9], "order": [0, 1, 2]}
    files["placement"].write_text(json.dumps(far))
    assert main(["validate", str(files["graph"]), str(files["placement"])]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{files['placement']}: ok (placegym.placement/v1, 3 nodes, uses devices 0..9 "
        f"(2 distinct); fits {files['graph']}; not checked against a cluster: add --cluster)"
    )
    # against the 2-device cluster (with or without the graph), device 9 is out of range
    expected = (
        f"{files['placement']}: device[1]: device index out of range for cluster 'two' with "
        "2 devices, got 9"
    )
    for graph in ([], ["--graph", str(files["graph"])]):
        args = [str(files["placement"]), *graph, "--cluster", str(files["cluster"])]
        assert main(["validate", *args]) == 2
        assert one_line_error(capsys, "validate") == expected
    files["placement"].write_text(json.dumps({**far, "device": [0, 1, 1]}))
    assert main(["validate", str(files["placement"]), "--cluster", str(files["cluster"])]) == 0
    assert capsys.readouterr().out == (
        f"{files['placement']}: ok (placegym.placement/v1, 3 nodes on 2 devices; fits "
        f"{files['cluster']}; not checked against a graph: add --graph)\n"
    )


def test_show_creates_its_folder_and_an_unwritable_path_is_one_line(files, tmp_path, capsys):
    out = tmp_path / "nowhere" / "deeper" / "x.png"
    assert main(["show", *problem_args(files), "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG" and "OOM" not in capsys.readouterr().out
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["show", *problem_args(files), "--out", str(blocker / "x.png")]) == 2
    assert one_line_error(capsys, "show").startswith(
        f"--out {blocker / 'x.png'}: cannot create its folder {blocker} ("
    )
    folder = tmp_path / "a-folder.png"
    folder.mkdir()
    assert main(["show", *problem_args(files), "--out", str(folder)]) == 2
    assert one_line_error(capsys, "show").startswith(f"--out {folder}: cannot write it (")


@pytest.mark.parametrize("text", ["", "# only a comment\n", "{}\n", "null\n"])
def test_train_refuses_an_empty_config(tmp_path, capsys, text):
    cfg = tmp_path / "empty.yaml"
    cfg.write_text(text)
    assert main(["train", str(cfg)]) == 2
    assert one_line_error(capsys, "train") == (
        f"{cfg}: the config is empty; expected a mapping of keys (phases, data, phase1, ...; "
        "see configs/quickstart.yaml)"
    )
    cfg.write_text("- phase1\n")
    assert main(["train", str(cfg)]) == 2
    assert one_line_error(capsys, "train") == f"{cfg}: expected a mapping of keys, got list"


def test_a_corrupt_checkpoint_is_one_line_naming_it(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint " * 20)
    expected = (
        f"{bad}: not a placegym checkpoint (torch.load(weights_only=True) failed: "
        "UnpicklingError); use a .pt file written by placegym train"
    )
    args = ["bench", "--workloads", "ffnn", "--teachers", "critical_path", "--agents", str(bad)]
    assert main([*args, "--out", str(tmp_path / "b")]) == 2
    assert one_line_error(capsys, "bench") == expected
    quickstart = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
    overrides = [f"out={tmp_path / 'run'}", f"init={bad}", "wandb.mode=disabled"]
    assert main(["train", str(quickstart), *overrides]) == 2
    assert one_line_error(capsys, "train") == expected


def test_bench_errors_do_not_share_the_progress_bar_line(capsys):
    assert main(["bench", "--workloads", "ffnn,nosuch", "--teachers", "critical_path"]) == 2
    assert capsys.readouterr().err == (
        "placegym bench: error: graph: unknown workload or file 'nosuch' (workloads: "
        "chainmm, ffnn, llama_block, llama_layer, moe, random_dag)\n"
    )


# ------------------------------------------------------------------ help and listings
def test_graphs_list_shows_each_generators_parameters(capsys):
    import inspect

    from placegym.envs.workloads import WORKLOADS

    assert main(["graphs", "list"]) == 0
    out = capsys.readouterr().out
    assert "--param defaults: batch=1024 dims=2048,4096,4096,2048 batch_blocks=2 " in out
    for fn in WORKLOADS.values():
        for name in inspect.signature(fn).parameters:
            assert f" {name}=" in out


def test_graphs_export_help_example_runs(tmp_path, capsys, monkeypatch):
    from placegym.train.cli.main import build_parser

    helptext = build_parser()._subparsers._group_actions[0].choices["graphs"]
    export = helptext._subparsers._group_actions[0].choices["export"].format_help()
    example = export.split("example:\n")[1].strip()
    assert example.startswith("placegym graphs export ffnn ")
    monkeypatch.chdir(tmp_path)
    assert main(example.split()[1:]) == 0
    assert "ffnn.json: ffnn-" in capsys.readouterr().out


def test_calibrate_and_validate_help(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for default in ("cpu#2", "cluster.json", "5", "ffnn", "2", "20", "0"):
        assert f"(default: {default})" in out
    assert "(None: 256 on CPU workers, 2048 on GPUs) (default: None)" in out
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "FILE a placegym graph, cluster or placement JSON file" in out
