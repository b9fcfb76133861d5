"""The command line on placements over memory (simulate, show, validate) and on ``--out``
paths whose folders do not exist yet (every command creates them)."""

import json
from pathlib import Path

import pytest
from test_cli import one_line_error, problem_args
from test_io import CLUSTER, GRAPH, PLACEMENT

from placegym.train.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: gpu1 gets nodes 1 and 2 and their inputs: a peak of 10240.5 bytes, 4240.5 over.
TIGHT = {**CLUSTER, "devices": [CLUSTER["devices"][0], {**CLUSTER["devices"][1], "memory": 6000}]}
OVER = "out of memory on device 1 (gpu1) by 4.24 KB (peak 10.24 KB of 6 KB)"


@pytest.fixture
def tight(tmp_path):
    paths = {}
    for name, doc in (("graph", GRAPH), ("cluster", TIGHT), ("placement", PLACEMENT)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return paths


# ---------------------------------------------------------------------- over memory
def test_simulate_exits_1_on_a_placement_over_memory_unless_allowed(tight, capsys):
    assert main(["simulate", *problem_args(tight)]) == 1
    out, err = capsys.readouterr()
    assert "oom: yes" in out and "OOM (+4.24 KB)" in out
    assert err == f"placegym simulate: infeasible: {OVER} (--allow-infeasible: exit 0)\n"
    assert main(["simulate", *problem_args(tight), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["oom"] is True
    assert main(["simulate", *problem_args(tight), "--allow-infeasible"]) == 0
    out, err = capsys.readouterr()
    assert "oom: yes" in out and err == ""


def test_show_says_oom_naming_the_device(tight, tmp_path, capsys):
    out = tmp_path / "g.png"
    assert main(["show", *problem_args(tight), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"; OOM: {OVER}; Gantt chart written to {out}" in text and out.is_file()


def test_validate_refuses_a_placement_over_memory_in_one_line(tight, capsys):
    args = ["validate", str(tight["placement"]), "--graph", str(tight["graph"])]
    assert main([*args, "--cluster", str(tight["cluster"])]) == 2
    assert one_line_error(capsys, "validate") == (
        f"{tight['placement']}: does not fit {tight['cluster']}: {OVER}"
    )
    # a preset with room: it fits (and says so)
    assert main([*args, "--cluster", "p100x4"]) == 0
    assert f"fits {tight['graph']} on p100x4" in capsys.readouterr().out


def test_over_memory_names_every_device_over():
    from placegym.envs import load_cluster, load_graph, load_placement, simulate
    from placegym.train.cli.main import over_memory

    both = {**TIGHT, "devices": [{**d, "memory": 3000} for d in TIGHT["devices"]]}
    s = simulate(load_graph(GRAPH), load_cluster(both), load_placement(PLACEMENT))
    assert over_memory(s) == (
        "out of memory on device 0 (gpu0) by 2.12 KB (peak 5.12 KB of 3 KB), "
        "device 1 (gpu1) by 7.24 KB (peak 10.24 KB of 3 KB)"
    )


# ---------------------------------------------------------------------- --out folders
@pytest.mark.parametrize(
    "command",
    [
        ["graphs", "export", "ffnn"],
        ["graphs", "import-doppler", "--sample"],
        ["graphs", "import-pipedream", str(ROOT / "tests/data/pipedream/gnmt_tiny/graph.txt")],
    ],
    ids=["export", "import-doppler", "import-pipedream"],
)
def test_graph_commands_create_the_out_folder(command, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "g.json"
    assert main([*command, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["format"].startswith("placegym.graph/")
    assert capsys.readouterr().out.startswith(f"{out}: ")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main([*command, "--out", str(blocker / "g.json")]) == 2
    assert one_line_error(capsys, "graphs").startswith(
        f"--out {blocker / 'g.json'}: cannot create its folder {blocker} ("
    )


def test_import_dnn_partitioning_creates_the_out_folder(tmp_path, capsys):
    from placegym.envs.importers.dnn_partitioning import DATA_DIR

    src = DATA_DIR / "throughput-inputs" / "LayerGraphs" / "resnet50_training.json"
    out = tmp_path / "new" / "r50"
    assert main(["graphs", "import-dnn-partitioning", str(src), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "throughput-layer-resnet50_training.cluster.json",
        "throughput-layer-resnet50_training.graph.json",
    ]
    capsys.readouterr()


def test_bench_creates_its_out_folder_and_refuses_a_file_in_the_way(tmp_path, capsys):
    args = ["bench", "--workloads", "ffnn", "--teachers", "critical_path", "--no-progress"]
    out = tmp_path / "a" / "b"
    assert main([*args, "--out", str(out)]) == 0
    assert (out / "results.json").is_file()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    capsys.readouterr()
    assert main([*args, "--out", str(blocker / "run")]) == 2
    assert one_line_error(capsys, "bench") == (
        f"--out {blocker / 'run'}: {blocker} is a file, not a folder"
    )
