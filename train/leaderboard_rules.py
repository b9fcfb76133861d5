"""What a leaderboard entry may hold, and the suite's numbers it is ranked by.

The rules of :mod:`placegym.train.leaderboard`, each a check that raises one
``ValueError`` naming the field and the value:

- names (:func:`check_name`, :func:`check_placer_name`): plain text: letters and digits,
  with single ``.``, ``_``, ``-`` (and in a placer's column name ``#``, ``+``) between
  them, at most 64 characters: nothing markdown or HTML would render, nothing a path
  would resolve elsewhere;
- a URL (:func:`check_url`): empty, or ``http://`` / ``https://`` with a host, at most
  300 characters, none of the characters that end a markdown link or an HTML attribute;
- the run (:func:`check_config`): the suite, split and seeds are declared, the suite is
  installed and the split is one of its splits, the seeds are ``0 .. k-1`` (a run does
  not pick its lucky seeds; at most :data:`SEED_LIMIT`), the simulator is the suite's
  own: noise 0, no ``links`` or other cluster setting of the run's own (an instance's
  cluster, links included, is the suite's and its digest says so), and a ``budget`` is a
  positive integer or null;
- an entry's file (:func:`entry_path`): ``<dir>/<suite>/<split>/<name>.json``, every part
  checked above, and the resolved path inside the resolved ``<dir>``.

The suite's numbers (:func:`suite_values`): per instance of a split, the best known
(:func:`~placegym.train.harness.suite_bench.instance_bounds`: the suite's reference file
as installed) and the *random makespan* ``T_random``: the makespan of the ``random``
teacher's placement with seed 0 (:class:`~placegym.teachers.simple.RandomTeacher`, a
fresh ``numpy.random.default_rng(0)``), simulated exactly (noise 0), whether or not it
fits in memory: the uniform policy's reference point, reproducible from the installed
package alone (the seed-0 rows of the ``random`` teacher's entry are these placements).
The normalized score of one row is ``100 * (T_random - T) / (T_random - T_best)``: 0 is
the random placement, 100 the best known, above 100 a new best known, below 0 slower than
random; an infeasible row scores 0. See :func:`summarize`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from placegym.envs.core import validate as V
from placegym.envs.suites import Suite, get_suite
from placegym.train.stats import geomean

__all__ = [
    "SEED_LIMIT",
    "SuiteValues",
    "check_config",
    "check_name",
    "check_placer_name",
    "check_seeds",
    "check_spec",
    "check_url",
    "entry_path",
    "reproduce_command",
    "suite_values",
    "summarize",
]

#: The most seeds an entry may declare.
SEED_LIMIT = 32
_WORD = r"[A-Za-z0-9]+"
_NAME = re.compile(rf"^{_WORD}(?:[._-]{_WORD})*$")
_PLACER = re.compile(rf"^{_WORD}(?:[._#+-]{_WORD})*$")
_URL_BAD = re.compile(r"[\s<>()\[\]{}|`\"'\\^]")
#: ``--placer`` of ``placegym leaderboard run``: a teacher, ``pretrained:NAME``, a plug-in
#: or ``module:attribute``, optionally ``=`` and a JSON object (no quotes that a shell or
#: a markdown list would take apart: they are quoted when printed).
_SPEC = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}(=\{[^`\n\r\t|<>\\]{0,256}\})?$")
#: Config keys that would set the simulator or the cluster apart from the suite's.
_SIMULATOR_KEYS = ("links", "cluster", "clusters", "workloads", "noise_seed", "rng")


def _fail(where: str, expected: str, value: Any) -> ValueError:
    return V.fail(where, f"expected {expected}", value)


def check_name(name: Any, where: str = "--name") -> str:
    """An entry's name: plain text, also its file name (module docstring)."""
    if not isinstance(name, str) or len(name) > 64 or not _NAME.match(name):
        raise _fail(
            where,
            "1-64 letters and digits, with single '.', '_' or '-' between them",
            name,
        )
    return name


def check_placer_name(name: Any, where: str = "placer") -> str:
    """A placer's column name as a table shows it: plain text (module docstring)."""
    if not isinstance(name, str) or len(name) > 64 or not _PLACER.match(name):
        raise _fail(
            where,
            "a plain name (1-64 letters and digits, with single '.', '_', '-', '#' or '+' "
            "between them; set the placer's name attribute)",
            name,
        )
    return name


def check_url(url: Any, where: str = "--url") -> str:
    """An entry's URL: empty or http(s) (module docstring)."""
    if url == "":
        return url
    ok = isinstance(url, str) and len(url) <= 300 and not _URL_BAD.search(url)
    if ok:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.netloc) and url.isprintable()
    if not ok:
        raise _fail(where, "an http:// or https:// URL with a host (or nothing)", url)
    return url


def check_spec(spec: Any, where: str = "--placer") -> str:
    """A placer spec of ``placegym leaderboard run`` (no characters a printed command
    or a markdown list would break on)."""
    if not isinstance(spec, str) or not _SPEC.match(spec):
        raise _fail(
            where,
            "a teacher, pretrained:NAME, a plug-in or MODULE:ATTRIBUTE[=JSON object]",
            spec,
        )
    return spec


def check_seeds(value: Any, where: str = "--seeds") -> tuple[int, ...]:
    """Declared seeds: ``0, 1, ..., k-1`` with ``1 <= k <=`` :data:`SEED_LIMIT`."""
    ok = (
        isinstance(value, list)
        and 0 < len(value) <= SEED_LIMIT
        and all(type(s) is int for s in value)
        and value == list(range(len(value)))
    )
    if not ok:
        raise _fail(where, f"the declared seeds 0, 1, ..., k-1 (1 <= k <= {SEED_LIMIT})", value)
    return tuple(value)


def check_config(config: Any, where: str = "config") -> tuple[Suite, str, tuple[int, ...]]:
    """The suite, split and seeds a run declares, run as the suite defines it (module
    docstring)."""
    if not isinstance(config, dict):
        raise _fail(where, "the run's config (a JSON object)", config)
    name, split = config.get("suite"), config.get("split")
    if not isinstance(name, str) or len(name) > 64 or not _NAME.match(name):
        raise _fail(f"{where}.suite", "an installed suite's name", name)
    if not isinstance(split, str) or len(split) > 64 or not _NAME.match(split):
        raise _fail(f"{where}.split", "one split (train or test)", split)
    try:
        suite = get_suite(name)
        suite.specs(split)
    except ValueError as e:
        raise ValueError(f"{where}.{e}") from None
    seeds = check_seeds(config.get("seeds"), f"{where}.seeds")
    noise = config.get("noise", 0.0)
    if noise is not None and (isinstance(noise, bool) or noise not in (0, 0.0)):
        raise _fail(
            f"{where}.noise", "0 (a leaderboard simulates as the suite does: exactly)", noise
        )
    for key in _SIMULATOR_KEYS:
        if config.get(key) is not None:
            raise _fail(
                f"{where}.{key}",
                "nothing (the simulator and the clusters are the suite's own)",
                config[key],
            )
    budget = config.get("budget")
    if budget is not None and (type(budget) is not int or not 0 < budget < 2**63):
        raise _fail(f"{where}.budget", "a positive number of simulator calls or null", budget)
    return suite, split, seeds


def entry_path(folder: str | Path, suite: str, split: str, name: str) -> Path:
    """``<folder>/<suite>/<split>/<name>.json``, checked to resolve inside ``folder``.

    Raises:
        ValueError: a part that is not a plain name, or a path that leaves ``folder``
            (through a link).
    """
    check_name(suite, "suite")
    check_name(split, "split")
    check_name(name)
    root = Path(folder).resolve()
    out = Path(folder) / suite / split / f"{name}.json"
    if not out.resolve().is_relative_to(root):
        raise ValueError(f"{out}: resolves outside the leaderboard folder {root}")
    return out


# ---------------------------------------------------------------------- the suite's numbers
@dataclass(frozen=True)
class SuiteValues:
    """The suite's numbers of one instance (module docstring)."""

    best_known: float | None
    random_makespan: float | None


_CACHE: dict[tuple[str, int, str], dict[str, SuiteValues]] = {}


def suite_values(suite: Suite, split: str) -> dict[str, SuiteValues]:
    """Per instance id of ``split``: the best known and the random makespan (module
    docstring); computed once per process."""
    from placegym.train.harness import suite_bench
    from placegym.train.harness.bench import teacher_placer
    from placegym.train.harness.calls import uncounted
    from placegym.train.harness.feasibility import place

    key = (suite.name, id(suite), split)
    if key not in _CACHE:
        refs = suite_bench.load_references(suite.name)
        rand = teacher_placer("random")
        out = {}
        for inst in suite.instances(split):
            _, best = suite_bench.instance_bounds(inst, refs)
            with uncounted():
                run = place(rand, inst.graph, inst.cluster, 0)
            out[inst.id] = SuiteValues(best, run.makespan)
        _CACHE[key] = out
    return _CACHE[key]


def _row_score(row: dict[str, Any], values: SuiteValues) -> float | None:
    best, rand = values.best_known, values.random_makespan
    if best is None or rand is None or not rand > best * (1 + 1e-9):
        return None  # no best known, or random is as fast: nothing to normalize by
    if not row.get("feasible", not row.get("oom", False)) or row.get("makespan") is None:
        return 0.0
    return 100.0 * (rand - float(row["makespan"])) / (rand - best)


def summarize(rows: Sequence[dict[str, Any]], values: dict[str, SuiteValues]) -> dict[str, Any]:
    """The ranked numbers of one entry's rows, from the suite's values (never the rows'
    own best known): ``rows``, ``feasible``, ``gap_instances`` and ``geomean_best`` (the
    geometric-mean ratio of makespan to the best known over the feasible rows with one),
    ``score`` (per instance the mean row score over the seeds, then the mean over the
    instances that have a best known slower than ``T_random``; None without any) and
    ``score_instances``, ``calls`` and ``seconds`` (summed)."""
    feasible = [r for r in rows if r.get("feasible", not r.get("oom", False))]
    ratios = []
    for r in feasible:
        best = values[r["instance"]].best_known
        if best and r.get("makespan") is not None:
            ratios.append(float(r["makespan"]) / best)
    per: dict[str, list[float]] = {}
    for r in rows:
        s = _row_score(r, values[r["instance"]])
        if s is not None:
            per.setdefault(r["instance"], []).append(s)
    means = [math.fsum(v) / len(v) for v in per.values()]
    return {
        "rows": len(rows),
        "feasible": len(feasible),
        "gap_instances": len(ratios),
        "geomean_best": geomean(ratios) if ratios else None,
        "score": math.fsum(means) / len(means) if means else None,
        "score_instances": len(means),
        "calls": sum(int(r.get("calls", 0)) for r in rows),
        "seconds": math.fsum(float(r.get("seconds", 0.0)) for r in rows),
    }


# ---------------------------------------------------------------------- reproducing
def _shipped_agents() -> set[str]:
    """The shipped agents' names, read from the package's files (no torch import)."""
    import importlib.util

    spec = importlib.util.find_spec("placegym.agents")
    if spec is None or spec.origin is None:
        return set()
    return {p.parent.name for p in (Path(spec.origin).parent / "zoo").glob("*/card.json")}


def reproduce_command(
    *,
    name: str,
    placer: str,
    suite: str,
    split: str,
    seeds: Sequence[int],
    spec: str | None,
    budget: int | None,
    path: Path | None,
) -> str:
    """The command that reproduces an entry: the ``placegym leaderboard run`` it was
    measured with; for a claimed entry, that run of a teacher or a shipped agent of the
    placer's name (it measures the costs); else ``placegym bench --replay`` of its file,
    which re-simulates its placements (the placer's code is not placegym's)."""
    from placegym.teachers import list_teachers

    if spec is None:
        if placer in list_teachers():
            spec = placer
        elif placer in _shipped_agents():
            spec = f"pretrained:{placer}"
        else:
            where = Path(path) if path is not None else Path(suite, split, f"{name}.json")
            if where.is_absolute() and where.is_relative_to(Path.cwd()):
                where = where.relative_to(Path.cwd())
            return f"placegym bench --replay {shlex.quote(str(where))}"
    cmd = (
        f"placegym leaderboard run --placer {shlex.quote(spec)} --suite {suite} --split {split} "
        f"--seeds {','.join(map(str, seeds))} --name {name}"
    )
    return cmd if budget is None else f"{cmd} --budget {budget}"
