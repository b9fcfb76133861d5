"""PipeDream profiles (``graph.txt``): hand-written files in the published shape with
exact counts and times, partitioned files, one clear error per malformed line, and
``placegym graphs import-pipedream``."""

from pathlib import Path

import numpy as np
import pytest
from test_cli import one_line_error

from placegym.envs import GRAPH_FORMAT_V2, load_graph
from placegym.envs.importers import from_pipedream, parse_pipedream
from placegym.envs.workloads import to_training_step
from placegym.train.cli import main

DATA = Path(__file__).resolve().parent / "data" / "pipedream"
GNMT = DATA / "gnmt_tiny" / "graph.txt"
VGG = DATA / "vgg_partitioned.txt"

# gnmt_tiny/graph.txt by hand: (id, op, forward ms, backward ms, activation, parameters)
ROWS = [
    ("node1", "Input0", 12.500, 0.0, 65536.0, 0.0),
    ("node4", "Embedding", 0.073, 6.949, 6291456.0, 132382720.0),
    ("node7", "LSTM", 3.190, 5.348, 6291456.0 + 131072.0 + 131072.0, 50364416.0),
    ("node9", "__getitem__", 0.0, 0.0, 6291456.0, 0.0),
    ("node8", "__getitem__", 0.0, 0.0, 131072.0, 0.0),
    ("node20", "Classifier", 5.609, 1.227, 194437120.0, 132512000.0),
    ("node3", "Input1", 0.0, 0.0, 0.0, 0.0),
    ("node12", "RecurrentAttention", 4.546, 6.141, 6160384.0 + 131072.0, 41979904.0),
]
EDGES = [
    ("node1", "node4"),
    ("node4", "node7"),
    ("node7", "node9"),
    ("node7", "node8"),
    ("node9", "node12"),
    ("node8", "node12"),
    ("node3", "node12"),
    ("node12", "node20"),
]
FORWARD_MS = 0.073 + 3.190 + 5.609 + 4.546  # the inputs' loading time excluded
LOAD_MS = 12.5
BACKWARD_MS = 6.949 + 5.348 + 1.227 + 6.141


def test_fixture_has_the_published_shape():
    lines = GNMT.read_text().split("\n")
    assert not GNMT.read_text().endswith("\n")  # as the published files
    assert sum(not x.startswith("\t") for x in lines) == 8 == len(ROWS)
    assert sum(x.startswith("\t") for x in lines) == 8 == len(EDGES)
    assert "[6291456.0; 131072.0; 131072.0]" in lines[2]  # a tuple output
    assert "BahdanauAttention(    (linear_q): Linear(in_features=1024" in lines[7]


def test_profile_imports_with_exact_counts_times_and_bytes():
    g = from_pipedream(GNMT)
    assert g.name == "gnmt_tiny" and g.format == GRAPH_FORMAT_V2
    assert (g.num_nodes, g.num_edges) == (8, 8)
    ids = [s["source_id"] for s in g.spec]
    assert ids == [r[0] for r in ROWS]  # the file's order, not the ids' order
    at = {x: i for i, x in enumerate(ids)}
    assert g.edges.tolist() == [[at[a], at[b]] for a, b in EDGES]
    assert g.op == tuple(r[1] for r in ROWS)
    assert g.out_bytes.tolist() == [r[4] for r in ROWS]
    assert g.param_bytes.tolist() == [r[5] for r in ROWS]
    assert g.flops.tolist() == [0.0] * 8 and g.layer.tolist() == [-1] * 8
    assert g.group.tolist() == [-1] * 8
    assert g.time.sum() == pytest.approx(FORWARD_MS / 1000, abs=1e-15)
    assert g.time.tolist() == [0.0 if r[1].startswith("Input") else r[2] / 1000 for r in ROWS]
    backward = [s["backward_time"] for s in g.spec]
    assert backward == [r[3] / 1000 for r in ROWS]
    assert sum(backward) == pytest.approx(BACKWARD_MS / 1000, abs=1e-15)
    assert g.spec[2] == {
        "kind": "opaque",
        "source_id": "node7",
        "desc": "LSTM(2048, 1024)",
        "backward_time": 5.348 / 1000,
    }
    assert g.spec[7]["desc"].startswith("RecurrentAttention(  (rnn): LSTM(1024, 1024)  (attn)")
    assert g.spec[7]["desc"].endswith("(dropout): Dropout(p=0)  ))")
    # the two inputs: no producer, a description starting with Input
    assert [i for i in range(8) if g.spec[i].get("input")] == [0, 6]
    assert g.spec[0]["load_time"] == LOAD_MS / 1000 and g.spec[6]["load_time"] == 0.0
    assert g.measured and load_graph(g.to_dict()).to_dict() == g.to_dict()


def test_input_time_keeps_the_data_loading_time():
    g = from_pipedream(GNMT, input_time=True, name="x")
    assert g.name == "x" and g.time[0] == LOAD_MS / 1000
    assert g.time.sum() == pytest.approx((FORWARD_MS + LOAD_MS) / 1000, abs=1e-15)


def test_partitioned_profile_keeps_stage_ids_and_merges_repeated_edges():
    g = from_pipedream(VGG)
    assert g.name == "vgg_partitioned" and (g.num_nodes, g.num_edges) == (5, 4)
    assert [s["stage_id"] for s in g.spec] == [0, 0, 0, 1, 1]
    assert g.edges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]
    assert g.op == ("Input", "Conv2d", "ReLU", "MaxPool2d", "Linear")
    assert g.time.tolist() == [0.0, 0.003592, 0.0015, 0.00075, 0.002]
    assert g.spec[0]["load_time"] == 0.03


def test_text_rules_blank_lines_late_nodes_and_separators_in_descriptions():
    text = (
        "\n\ta -- b\n"  # an edge may come before its nodes' lines
        "a -- Lambda(x -- y, z=1) -- parameter_size=8, activation_size=[], "
        "backward_compute_time=2, forward_compute_time=1\r\n"
        "\n"
        "b -- Input -- forward_compute_time=4, backward_compute_time=0, "
        "activation_size=[1; 2.5], parameter_size=0 -- stage_id=3\n"
    )
    g = parse_pipedream(text)
    assert g.name == "pipedream" and g.edges.tolist() == [[0, 1]]
    assert g.spec[0]["desc"] == "Lambda(x -- y, z=1)" and g.op == ("Lambda", "Input")
    assert g.out_bytes.tolist() == [0.0, 3.5] and g.param_bytes.tolist() == [8.0, 0.0]
    # b has a producer, so it is no data input: its time is kept
    assert g.time.tolist() == [0.001, 0.004] and "input" not in g.spec[1]
    assert g.spec[1]["stage_id"] == 3


SIZES = "forward_compute_time=1, backward_compute_time=2, activation_size=3, parameter_size=4"
GOOD = f"node1 -- Input -- {SIZES}\nnode2 -- ReLU(inplace) -- {SIZES}\n"

BAD = {
    "no separator": (f"node3 ReLU {SIZES}", 3, "no ' -- ' after the node id"),
    "no sizes separator": (
        f"node3 -- ReLU, {SIZES}",
        3,
        "no ' -- ' between the description and the sizes",
    ),
    "edge without tab": (
        "node1 -- node2",
        3,
        "no ' -- ' between the description and the sizes (an edge line starts with a tab)",
    ),
    "two-word id": (f"node 3 -- ReLU -- {SIZES}", 3, "the node id 'node 3' is not one word"),
    "empty description": (f"node3 --   -- {SIZES}", 3, "empty module description"),
    "unknown key": (
        f"node3 -- ReLU -- {SIZES}, flops=3",
        3,
        "unknown key 'flops' (expected forward_compute_time, backward_compute_time, "
        "activation_size, parameter_size)",
    ),
    "repeated key": (
        f"node3 -- ReLU -- {SIZES}, parameter_size=4",
        3,
        "key 'parameter_size' appears twice",
    ),
    "missing key": (
        "node3 -- ReLU -- forward_compute_time=1, activation_size=3",
        3,
        "missing backward_compute_time, parameter_size",
    ),
    "not key=value": (f"node3 -- ReLU -- {SIZES}, 7", 3, "size entry 4 '7' is not key=value"),
    "not a number": (
        f"node3 -- ReLU -- {SIZES.replace('=1', '=1ms')}",
        3,
        "forward_compute_time: expected a number, '1ms' is not one",
    ),
    "negative": (
        f"node3 -- ReLU -- {SIZES.replace('=4', '=-4')}",
        3,
        "parameter_size: must be a finite number >= 0, not '-4'",
    ),
    "infinite": (
        f"node3 -- ReLU -- {SIZES.replace('=2', '=inf')}",
        3,
        "backward_compute_time: must be a finite number >= 0, not 'inf'",
    ),
    "bad list entry": (
        f"node3 -- ReLU -- {SIZES.replace('=3', '=[1.0; x]')}",
        3,
        "activation_size entry 1: expected a number, 'x' is not one",
    ),
    "open list": (
        f"node3 -- ReLU -- {SIZES.replace('=3', '=[1.0; 2.0')}",
        3,
        "activation_size: '[1.0; 2.0' is a list without its closing ']'",
    ),
    "bad stage": (
        f"node3 -- ReLU -- {SIZES} -- stage_id=x",
        3,
        "stage_id: expected an integer >= 0, 'x' is not one",
    ),
    "duplicate node": (f"node1 -- ReLU -- {SIZES}", 3, "duplicate node id 'node1' (line 1"),
    "unknown node": ("\tnode1 -- node9", 3, "edge: no node line has the id 'node9'"),
    "self-loop": ("\tnode2 -- node2", 3, "edge: self-loop on 'node2'"),
    "bad edge": ("\tnode1 node2", 3, "expected an edge '<id> -- <id>' after the tab"),
    "edge of three": ("\tnode1 -- node2 -- node1", 3, "expected an edge '<id> -- <id>'"),
}


@pytest.mark.parametrize("case", BAD)
def test_malformed_line_is_one_error_naming_file_line_and_problem(case, tmp_path):
    line, k, message = BAD[case]
    path = tmp_path / "graph.txt"
    path.write_text(GOOD + line + "\n")
    with pytest.raises(ValueError) as err:
        from_pipedream(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: line {k}: {message}"), msg
    assert msg.endswith(f", got {line.strip()!r}") or msg.endswith("..."), msg


def test_cycle_names_its_nodes_and_edge_lines(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text(GOOD + "\tnode1 -- node2\n\n\tnode2 -- node1\n")
    with pytest.raises(ValueError) as err:
        from_pipedream(path)
    assert str(err.value) == (
        f"{path}: line 3: the edges form a cycle node1 -> node2 -> node1 (edge lines 3, 5)"
    )


def test_empty_and_missing_files(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text("\n\n")
    with pytest.raises(ValueError, match=r"graph\.txt: no node lines \(expected 'nodeK -- "):
        from_pipedream(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        from_pipedream(tmp_path / "nope.txt")
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not a PipeDream profile file"):
        from_pipedream(path)


def test_long_lines_are_cut_in_messages(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text(f"node1 -- {'Conv2d(1, 2) ' * 20} -- {SIZES}, bad=1\n")
    with pytest.raises(ValueError) as err:
        from_pipedream(path)
    assert str(err.value).startswith(f"{path}: line 1: unknown key 'bad'")
    assert str(err.value).endswith("...") and len(str(err.value)) < 300


# ------------------------------------------------------------------ CLI
def test_cli_import_and_training(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["graphs", "import-pipedream", str(GNMT), "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{out}: gnmt_tiny, 8 nodes, 8 edges, 13.418 ms measured ")
    assert "(+ 19.665 ms backward)" in line
    assert load_graph(out).to_dict() == from_pipedream(GNMT).to_dict()
    argv = ["graphs", "import-pipedream", str(GNMT), "--out", str(out), "--training"]
    assert main([*argv, "--optimizer", "sgd", "--input-time"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{out}: gnmt_tiny-train, 16 nodes, 22 edges, 45.583 ms measured")
    t = load_graph(out)
    expected = to_training_step(from_pipedream(GNMT, input_time=True), optimizer="sgd")
    assert t.to_dict() == expected.to_dict()
    assert np.nansum(t.time) == pytest.approx((FORWARD_MS + LOAD_MS + BACKWARD_MS) / 1000)
    assert main([*argv, "--optimizer", "1", "--name", "n"]) == 0
    capsys.readouterr()
    assert load_graph(out).name == "n"
    assert load_graph(out).param_bytes.sum() == 3 * sum(r[5] for r in ROWS)


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "graph.txt"
    bad.write_text(GOOD + "\tnode1 -- node7\n")
    out = tmp_path / "g.json"
    assert main(["graphs", "import-pipedream", str(bad), "--out", str(out)]) == 2
    msg = one_line_error(capsys, "graphs")
    assert msg == f"{bad}: line 3: edge: no node line has the id 'node7', got 'node1 -- node7'"
    argv = ["graphs", "import-pipedream", str(GNMT), "--out", str(out), "--training"]
    assert main([*argv, "--optimizer", "lamb"]) == 2
    assert one_line_error(capsys, "graphs").startswith("optimizer: unknown optimizer")
    assert main([*argv, "--backward-factor", "-1"]) == 2
    assert (
        one_line_error(capsys, "graphs")
        == "backward_factor: must be a finite number >= 0, got -1.0"
    )
    assert not out.exists()
