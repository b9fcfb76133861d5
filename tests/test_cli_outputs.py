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


def error_and_note(capsys, command: str) -> tuple[str, str]:
    """The error line and the note line ``command`` printed on stderr."""
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err, err
    error, note = err.splitlines()
    assert error.startswith(f"placegym {command}: error: "), err
    assert note.startswith(f"placegym {command}: note: "), err
    return error.split(": error: ", 1)[1], note.split(": note: ", 1)[1]


def test_validate_refuses_a_placement_over_memory_and_says_one_fits(tight, capsys):
    args = ["validate", str(tight["placement"]), "--graph", str(tight["graph"])]
    assert main([*args, "--cluster", str(tight["cluster"])]) == 2
    assert error_and_note(capsys, "validate") == (
        f"{tight['placement']}: does not fit {tight['cluster']}: {OVER}",
        "a placement that fits exists (certified by simulation): e.g. the resident bytes "
        "spread worst-fit decreasing",
    )
    # a preset with room: it fits (and says so)
    assert main([*args, "--cluster", "p100x4"]) == 0
    assert f"fits {tight['graph']} on p100x4" in capsys.readouterr().out


#: Three independent nodes of 600 resident bytes and a 100-byte output each.
THREE = {
    "format": "placegym.graph/v1",
    "name": "three",
    "nodes": [
        {"id": v, "op": "w", "flops": 1e9, "out_bytes": 100, "param_bytes": 600} for v in range(3)
    ],
    "edges": [],
}


@pytest.mark.parametrize(
    ("memory", "note"),
    [
        # two nodes on one device hold 1,200 resident bytes and an output: every
        # placement is over, but no certificate proves it
        (1250, "no placement is known to fit this graph and cluster, nor proven not to"),
        (
            800,
            "no placement fits this graph and cluster (certified): resident bytes 1800 "
            "exceed the total device memory 1600",
        ),
        (
            1500,
            "a placement that fits exists (certified by simulation): e.g. the resident "
            "bytes spread worst-fit decreasing",
        ),
    ],
)
def test_validate_over_memory_says_whether_any_placement_fits(tmp_path, capsys, memory, note):
    cluster = {**CLUSTER, "devices": [{**d, "memory": memory} for d in CLUSTER["devices"]]}
    placement = {"format": "placegym.placement/v1", "device": [0, 0, 0], "order": [0, 1, 2]}
    for name, doc in (("graph", THREE), ("cluster", cluster), ("placement", placement)):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    args = [str(tmp_path / f"{name}.json") for name in ("placement", "graph", "cluster")]
    assert main(["validate", args[0], "--graph", args[1], "--cluster", args[2]]) == 2
    error, said = error_and_note(capsys, "validate")
    assert error.startswith(f"{args[0]}: does not fit {args[2]}: out of memory on device 0")
    assert said == note


def test_validate_over_memory_where_only_recomputation_fits(tmp_path, capsys):
    from placegym.envs.analysis.memory import stage_placement
    from placegym.envs.suites import get_suite

    inst = get_suite("pipedream-v0").instance("resnet18-train@p100x2-recompute1.1")
    inst.graph.save(tmp_path / "g.json")
    inst.cluster.save(tmp_path / "c.json")
    stage_placement(inst.graph, inst.cluster).save(tmp_path / "p.json")
    args = ["validate", str(tmp_path / "p.json"), "--graph", str(tmp_path / "g.json")]
    assert main([*args, "--cluster", str(tmp_path / "c.json")]) == 2
    error, note = error_and_note(capsys, "validate")
    assert "does not fit" in error and "device 0 (gpu0)" in error
    assert note == (
        "a placement that fits exists (certified by simulation): e.g. contiguous stages "
        "recomputing 47 forward nodes; none without recompute does"
    )


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
