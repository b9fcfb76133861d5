"""DOPPLER's graph text format: files in the published shape (100+ nodes, overlapping
input ids, irregular separators, trailing commas, repeated edges, op words), hand-made
files with exact costs, malformed files, and ``placegym graphs import-doppler``."""

import json

import numpy as np
import pytest
from doppler_files import chainmm_like, doppler_text, ffnn_like

from placegym.envs import Placement, load_cluster, load_graph, simulate
from placegym.envs.importers import from_doppler, parse_doppler
from placegym.train.cli import main

STRUCTURES = {
    "chainmm-4x3": (lambda: chainmm_like(4, 3), 108, 135),
    "chainmm-5x4": (lambda: chainmm_like(5, 4), 320, 448),
    "ffnn-3x2x4": (lambda: ffnn_like(3, 2, 4), 120, 160),
    "ffnn-2x4x4": (lambda: ffnn_like(2, 4, 4), 160, 192),
}


@pytest.mark.parametrize("name", STRUCTURES)
def test_published_shape_imports_with_its_counts_and_costs(name, tmp_path):
    build, nodes, edges = STRUCTURES[name]
    s = build()
    text = doppler_text(s, seed=len(name))
    lines = text.splitlines()
    assert int(lines[0]) == nodes + s.inputs
    assert lines[1].split(",")[0].strip() == "0"  # input ids overlap node ids
    assert len(lines[2].rstrip(",").split(",")) == len(s.edges) + 5  # 5 edges listed twice
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    g = from_doppler(path)
    assert (g.num_nodes, g.num_edges) == (nodes, edges) == (len(s.comp), len(set(s.edges)))
    assert g.name == name
    assert g.flops.tolist() == s.comp and g.out_bytes.tolist() == [4 * c for c in s.comp]
    assert sorted(map(tuple, g.edges.tolist())) == sorted(set(s.edges))
    words = [s.op[v] if v % 3 else "op" for v in range(nodes)]
    assert list(g.op) == words
    # the input vertices are not nodes: node 0 is the chain's first block product
    assert g.in_degree[0] == 0 and g.op[0] == "op" and g.flops[0] == s.comp[0]
    assert all(sp == {"kind": "opaque"} for sp in g.spec)


def test_hand_made_file_costs_and_makespans():
    # 6 vertices, 2 inputs whose ids (0 and 3) coincide with node ids: 4 nodes.
    text = (
        "6\n0, 3,\n0,0, 1, 2,0,\n1,2, 3, 3,1,\n"
        "2e10,8e10,matmul\n1e10, 4e10\n\n1e10,4e10 add\n3e10,0\n"
    )
    g = parse_doppler(text)
    assert g.num_nodes == 4 and g.edges.tolist() == [[0, 1], [0, 2], [1, 3], [2, 3]]
    assert g.flops.tolist() == [2e10, 1e10, 1e10, 3e10]
    assert g.out_bytes.tolist() == [8e10, 4e10, 4e10, 0]
    assert g.op == ("matmul", "op", "add", "op")
    c = load_cluster("doppler-unit-4")
    one = simulate(g, c, Placement(device=[0, 0, 0, 0], order=[0, 1, 2, 3]))
    assert one.makespan == pytest.approx(7.0)  # (2 + 1 + 1 + 3)e10 units / 1e10
    # node 2 on device 1: 2 + 8 (transfer of node 0) + 1, then 4 back, then 3
    split = simulate(g, c, Placement(device=[0, 0, 1, 0], order=[0, 1, 2, 3]))
    assert split.makespan == pytest.approx(2 + 8 + 1 + 4 + 3)


def test_entries_commas_spaces_and_trailing_commas():
    g = parse_doppler("21\n1,2,3,4,\n16,6, 16, 16,\n0 , 1,2,   3\n" + "1,4\n" * 17)
    assert g.num_nodes == 17 and g.edges.tolist() == [[6, 1], [16, 0], [16, 2], [16, 3]]
    g = parse_doppler("\r\n\n3\r\n\r\n1,\r\n2\r\n1,2\r\n3,4\r\n5 6\r\n")  # CRLF, no inputs
    assert g.flops.tolist() == [1, 3, 5] and g.edges.tolist() == [[1, 2]]
    g = parse_doppler("2\n0,1\n\n\n")  # only inputs: an empty graph
    assert g.num_nodes == 0 and g.num_edges == 0


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("x\n\n\n\n", r"^line 1: vertex count: expected integers, 'x' is not one, got 'x'"),
        ("3,4\n\n\n\n", r"^line 1: vertex count: expected one integer >= 0, got '3,4'"),
        ("3\n0\n", r"^line 3: missing \(edge sources\); the file has 2 lines"),
        ("3\n0\n0,a\n1,2\n", r"^line 3: edge sources: expected integers, 'a' is not one"),
        ("3\n0\n0,,1\n1,2\n", r"^line 3: edge sources: empty entry 2 \(two commas in a row\)"),
        ("3\n-1\n\n\n", r"^line 2: input vertex ids: -1 is negative"),
        ("2\n0,1,5\n\n\n", r"^line 2: input vertex ids: 3 ids for 2 vertices \(line 1\)"),
        (
            "4\n0\n0, 1,\n1,\n1,1\n1,1\n1,1\n",
            r"^line 4: edge destinations: 1 entries for the 2 sources of line 3, got '1,'",
        ),
        (
            "5\n3, 4\n0,1\n1,3\n1,1\n1,1\n1,1\n",
            r"^line 4: edge destinations: entry 1 is 3, outside the node ids 0..2 "
            r"\(n = 5 vertices - 2 inputs\), got '1,3'",
        ),
        ("3\n0\n1\n1\n1,1\n1,1\n", r"^line 3: edge 0 is a self-loop on node 1, got '1'"),
        ("3\n0\n0\n1\n1,2\n1,2,op,x\n", r"^line 6: node 1: expected comp,comm\[,op_type\], got"),
        ("3\n0\n0\n1\n1,2\n-1,2\n", r"^line 6: node 1: comp: must be a finite number >= 0"),
        ("3\n0\n0\n1\nabc,2\n1,2\n", r"^line 5: node 0: comp: expected a number, 'abc' is not"),
        ("3\n0\n0\n1\n1,inf\n1,2\n", r"^line 5: node 0: comm: must be a finite number >= 0"),
        ("3\n0\n0\n1\n1,2\n", r"^line 6: end of file after 1 node lines, expected 2 \(one per"),
        ("3\n0\n0\n1\n1,2\n1,2\n\n3,4\n", r"^line 8: more node lines than the 2 nodes, got '3,4'"),
        ("3\n\n1 2\n2 1\n1,1\n1,1\n1,1\n", r"edges: the graph has a cycle"),
    ],
)
def test_malformed_files_name_the_line_and_text(text, match):
    with pytest.raises(ValueError, match=match):
        parse_doppler(text)


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("3\n0\n0,a\n1,2\n")
    with pytest.raises(ValueError, match=r"bad.txt: line 3: edge sources"):
        from_doppler(path)
    with pytest.raises(FileNotFoundError, match=r"missing.txt: no such file"):
        from_doppler(tmp_path / "missing.txt")


def test_cli_import_doppler(tmp_path, capsys):
    src, out = tmp_path / "chain.txt", tmp_path / "g.json"
    src.write_text(doppler_text(chainmm_like(4, 3)))
    assert main(["graphs", "import-doppler", str(src), "--out", str(out)]) == 0
    assert "108 nodes, 135 edges" in capsys.readouterr().out
    assert load_graph(out).to_dict() == from_doppler(src).to_dict()
    assert json.loads(out.read_text())["nodes"][0]["spec"] == {"kind": "opaque"}
    np.testing.assert_array_equal(load_graph(out).edges, from_doppler(src).edges)


def test_cli_import_doppler_bad_file_is_one_line_exit_2(tmp_path, capsys):
    src = tmp_path / "bad.txt"
    src.write_text("3\n1\n0\n16\n1,4\n1,4\n")
    assert main(["graphs", "import-doppler", str(src), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 4: edge destinations: entry 0 is 16" in err
    assert main(["graphs", "import-doppler", str(tmp_path / "nope.txt"), "--out", "x"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_shipped_sample_file_imports_from_the_command_line(tmp_path, capsys):
    from placegym.envs.importers.doppler import SAMPLE

    s = chainmm_like(4, 2)  # what the sample describes, written as the published files are
    assert (
        from_doppler(SAMPLE).to_dict() == parse_doppler(doppler_text(s), "chainmm_4x2").to_dict()
    )
    out = tmp_path / "g.json"
    assert main(["graphs", "import-doppler", "--sample", "--out", str(out)]) == 0
    assert "chainmm_4x2, 36 nodes, 40 edges" in capsys.readouterr().out
    assert load_graph(out).num_nodes == 36
    with pytest.raises(SystemExit):
        main(["graphs", "import-doppler", "--help"])
    assert str(SAMPLE) in capsys.readouterr().out  # the path, to copy the file
    assert main(["graphs", "import-doppler", "--out", str(out)]) == 2
    assert "give a DOPPLER graph FILE or --sample" in capsys.readouterr().err
    assert main(["graphs", "import-doppler", str(SAMPLE), "--sample", "--out", str(out)]) == 2
