"""Fuzzed results and leaderboard files: every input loads, or fails with one line.

Seeded mutations of three valid documents (a suite run's ``results.json``, a workloads
run's, a stored leaderboard entry) -- a key deleted, a value swapped for a wrong type, a
huge or negative integer, NaN or infinity, a long string or list, deep nesting, a list
cut short, a row duplicated, the file cut or made binary -- go through ``replay``,
``submit_entry``, ``verify_entry`` and ``leaderboard_table``. Each must return, or raise
``ValueError`` / ``FileNotFoundError`` whose message is one line, within a time limit
(no hang: the work per row is bounded).
"""

import copy
import json
import math
import random
import signal

import pytest
from tiny_suite import TINY

from placegym.envs.suites import catalog
from placegym.train.harness.bench import BenchConfig, run_benchmark
from placegym.train.harness.replay import replay
from placegym.train.harness.suite_bench import run_suite
from placegym.train.leaderboard import leaderboard_table, submit_entry, verify_entry

#: Inputs per document kind (seeded: the same inputs every run).
CASES = 150
#: Seconds one input may take before it counts as a hang.
LIMIT = 20

DEEP = "[" * 50_000 + "]" * 50_000
VALUES = [None, True, False, -1, 0, 1, 3, -(2**70), 2**70, 10**400, 1e308, -1e308, 0.5,
          -0.5, math.nan, math.inf, -math.inf, "", "x", "../../../escaped", "/tmp/abs",
          "javascript:alert(1)", "**bold**", "a" * 100_000, "/dev/zero", "/proc/kcore", [],
          {}, [0] * 100_000, [1, 2], {"a": 1}, [[[[[[[[]]]]]]]], "tiny-v0", "test", "train",
          "heft", "critical_path"]  # fmt: skip


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """The three valid documents (suite run, workloads run, entry) and a folder."""
    d = tmp_path_factory.mktemp("fuzz")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(catalog.SUITES, TINY.name, TINY)
        run_suite(TINY, "test", ["heft", "random"], seeds=[0, 1], out=d / "s", progress=False)
        cfg = BenchConfig(teachers=["critical_path", "random"], workloads=["ffnn"],
                          clusters=["p100x4"], seeds=[0], out=d / "w")  # fmt: skip
        run_benchmark(cfg, progress=False)
        e = submit_entry(d / "s" / "results.json", name="e", placer="heft", folder=d / "board")
        yield (
            d,
            {
                "suite": json.loads((d / "s" / "results.json").read_text()),
                "workloads": json.loads((d / "w" / "results.json").read_text()),
                "entry": json.loads(e.path.read_text()),
            },
        )


def _paths(doc, pre=()):
    yield pre
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*pre, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            yield from _paths(v, (*pre, i))


def mutate(doc: dict, rng: random.Random) -> str:
    """The text of ``doc`` with one seeded mutation."""
    op = rng.random()
    if op < 0.04:
        text = json.dumps(doc)
        return text[: rng.randrange(len(text))]  # cut short
    if op < 0.06:
        return rng.choice(["", "[]", "null", "\x00\xff", DEEP, '{"records": ' + DEEP + "}"])
    doc = copy.deepcopy(doc)
    path = rng.choice([p for p in _paths(doc) if p])
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key, value = path[-1], parent[path[-1]]
    if op < 0.2 and isinstance(parent, dict):
        del parent[key]
    elif op < 0.28 and isinstance(value, list) and value:
        parent[key] = value[: rng.randrange(len(value))]  # wrong length
    elif op < 0.32 and isinstance(value, list) and value:
        parent[key] = [*value, copy.deepcopy(value[-1])]  # a duplicate
    elif op < 0.36 and isinstance(value, int | float) and not isinstance(value, bool):
        parent[key] = value * rng.choice([-1, 10, 1e300, 0])
    elif op < 0.4:
        parent[key] = DEEP  # replaced below by the raw nesting
        return json.dumps(doc).replace(json.dumps(DEEP), DEEP)
    else:
        parent[key] = copy.deepcopy(rng.choice(VALUES))
    return json.dumps(doc)  # NaN and Infinity as Python writes them


def _alarm(*_):
    raise TimeoutError("input took too long (a hang?)")


def _check(fn, text: str, outcomes: dict) -> None:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT)
    try:
        fn()
        outcomes["loaded"] += 1
    except (ValueError, FileNotFoundError) as e:
        msg = str(e)
        assert msg and "\n" not in msg, (msg, text[:300])
        outcomes["refused"] += 1
    except Exception as e:  # a traceback: the failure this test is about
        raise AssertionError(f"{type(e).__name__}: {e} on input {text[:300]!r}") from e
    finally:
        signal.alarm(0)


@pytest.mark.parametrize("kind", ["suite", "workloads", "entry"])
def test_fuzzed_files_load_or_fail_in_one_line(docs, kind, monkeypatch):
    monkeypatch.setitem(catalog.SUITES, TINY.name, TINY)
    d, base = docs
    rng = random.Random(f"leaderboard-fuzz-{kind}")
    outcomes = {"loaded": 0, "refused": 0}
    board = d / f"board-{kind}"
    for n in range(CASES):
        text = mutate(base[kind], rng)
        if kind == "entry":
            f = board / "tiny-v0" / "test" / "e.json"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text, errors="surrogatepass")
            _check(lambda f=f: verify_entry(f), text, outcomes)
            _check(lambda: leaderboard_table("tiny-v0", "test", board), text, outcomes)
        else:
            f = d / f"{kind}-{n}.json"
            f.write_text(text, errors="surrogatepass")
            _check(lambda f=f: replay(f), text, outcomes)
            if kind == "suite":
                out = d / f"b-{n}"
                _check(lambda f=f, out=out: submit_entry(f, name="x", placer="heft", folder=out),
                       text, outcomes)  # fmt: skip
    # the mutations reach both outcomes (a fuzzer that only ever fails tests nothing)
    assert outcomes["loaded"] > 0 and outcomes["refused"] > CASES // 4, outcomes


def test_the_unmutated_documents_load(docs, monkeypatch):
    monkeypatch.setitem(catalog.SUITES, TINY.name, TINY)
    d, base = docs
    for kind in ("suite", "workloads"):
        f = d / f"{kind}-clean.json"
        f.write_text(json.dumps(base[kind]))
        assert replay(f)[1] == []
    assert verify_entry(d / "board" / "tiny-v0" / "test" / "e.json").placer == "heft"


@pytest.mark.parametrize(("key", "spec"), [("clusters", "/dev/zero"), ("workloads", "/dev/zero")])
def test_a_config_naming_a_device_is_refused_not_read(docs, key, spec):
    """A workloads run's config is read for its clusters and graphs: a device that never
    ends (the fuzzer's hang) is refused by name before anything is read."""
    d, base = docs
    doc = copy.deepcopy(base["workloads"])
    doc["config"][key] = [spec]
    f = d / f"device-{key}.json"
    f.write_text(json.dumps(doc))
    outcomes = {"loaded": 0, "refused": 0}
    _check(lambda: replay(f), f.read_text(), outcomes)
    assert outcomes == {"loaded": 0, "refused": 1}
    with pytest.raises(ValueError, match=rf"config: {key}\[0\]: expected a preset, .*/dev/zero"):
        replay(f)
