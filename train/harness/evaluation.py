"""``placegym.benchmark.evaluate``: a user's placer over a suite split, run and recorded
exactly as ``placegym bench --suite`` runs and records it.

:func:`evaluate` goes through :func:`~placegym.train.harness.suite_bench.run_suite`, so
its :class:`Results` hold the same :class:`~placegym.train.harness.suite_bench.SuiteRecord`
rows as the command's ``results.json``: :meth:`Results.table` is the table the command
prints, :meth:`Results.save` writes the file it writes (``placegym bench --replay``
re-checks it), :meth:`Results.to_pandas` is a DataFrame of the rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from placegym.envs.suites import Suite, get_suite
from placegym.train.harness.bench import REFERENCE
from placegym.train.harness.placers import (
    TORCH_THREADS,
    placer_name,
    unique_name,
    with_budget,
)
from placegym.train.harness.suite_bench import (
    SuiteRecord,
    run_suite,
    suite_config,
    suite_markdown,
    write_results_json,
    write_suite_outputs,
)

__all__ = ["Results", "evaluate"]


@dataclass
class Results:
    """The records of a suite run (:class:`~placegym.train.harness.suite_bench.
    SuiteRecord`, one per placer, instance and seed) and its configuration.

    Attributes:
        records: the rows, in run order (instance, seed, placer).
        config: what ran: suite, split, seeds, noise, placers, budget.
    """

    records: list[SuiteRecord]
    config: dict[str, Any]

    def table(self) -> str:
        """The markdown tables ``placegym bench --suite`` prints: a summary per placer
        (ratio to critical_path, gaps to the lower bound and the best known, over the
        instances it and critical_path solved; time, simulator calls, feasible count,
        instances compared), then the gaps per instance."""
        return suite_markdown(self.records)

    def save(self, path: str | Path) -> Path:
        """Write the results: to ``path`` itself when it ends in ``.json`` (the
        ``results.json`` of the command), else into the folder ``path`` as the command
        does (``results.json``, ``results.csv``, ``table.md``). Returns the JSON file's
        path, which ``placegym bench --replay`` accepts."""
        path = Path(path)
        if path.suffix == ".json":
            path.parent.mkdir(parents=True, exist_ok=True)
            write_results_json(self.records, path, self.config)
            return path
        write_suite_outputs(self.records, path, self.config)
        return path / "results.json"

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with a row per record and a column per field.

        Raises:
            ImportError: pandas is not installed (:attr:`records` has the same rows).
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "Results.to_pandas: pandas is not installed (pip install pandas); "
                "Results.records holds the same rows"
            ) from None
        return pd.DataFrame([asdict(r) for r in self.records])

    def placers(self) -> list[str]:
        """The placers' column names, in table order."""
        return list(dict.fromkeys(r.placer for r in self.records))

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[SuiteRecord]:
        return iter(self.records)

    def __repr__(self) -> str:
        return (
            f"Results({self.config.get('suite')!r}, split={self.config.get('split')!r}, "
            f"{len(self.records)} records, placers={self.placers()!r})"
        )


def evaluate(
    placer: Any,
    *,
    suite: str | Suite = "generalize-v0",
    split: str | None = "test",
    seeds: Sequence[int] = (0,),
    budget: int | None = None,
    teachers: Sequence[str] = (REFERENCE,),
    name: str | None = None,
    noise: float = 0.0,
    out: str | Path | None = None,
    progress: bool | str = False,
    torch_threads: int | None = TORCH_THREADS,
) -> Results:
    """Benchmark ``placer`` on a suite split, beside ``teachers``, as ``placegym bench
    --suite SUITE --split SPLIT --placer ...`` does.

    Args:
        placer: a :class:`~placegym.train.harness.placers.Placer`, a
            :class:`~placegym.train.harness.placers.SearchPlacer` (needs ``budget``), a
            teacher object, a function ``(graph, cluster, seed)``; or a mapping of column
            names to such placers, to compare several.
        suite: a suite name (``placegym suites``) or a :class:`Suite`.
        split: ``train``, ``test``, or None for every split.
        seeds: one run of every placer per instance and seed.
        budget: simulator calls each of ``placer`` may make per placement: a search
            placer's ``sim`` has this budget, a one-pass placer is stopped where it would
            exceed it; a stopped run is recorded ``over budget`` (table mark ``budget``).
            None: no limit (calls are counted all the same). Teachers have none.
        teachers: registered teachers in the same table (``critical_path`` always runs,
            as the ratios' reference; :data:`~placegym.train.harness.bench.
            DEFAULT_TEACHERS` are the command's default).
        name: the column name of a single ``placer`` (default: its ``name`` attribute,
            else its class's or function's name; ``#2`` appended on a clash).
        noise: σ of the simulator's noise when scoring placements (0: exact).
        out: also write the command's files into this folder.
        progress: show a progress bar (``"auto"``: a bar on a terminal, else a line
            every few seconds on stderr).
        torch_threads: torch threads the placers run with (default 1, as a trained
            agent places; None: the process's setting). A placer that sets its own (an
            agent's ``threads``) keeps it.

    A placer that raises, or returns anything but a
    :class:`~placegym.envs.Placement`, gets failed rows (``infeasible`` says what it
    returned) and the run goes on.

    Raises:
        ValueError: a bad suite, split, teacher, budget, thread count, or an object that
            is not a placer.
    """
    the_suite = get_suite(suite) if isinstance(suite, str) else suite
    given = dict(placer) if isinstance(placer, Mapping) else {name or placer_name(placer): placer}
    placers: dict[str, Any] = {}
    for label, p in given.items():
        key = unique_name(str(label), set(teachers) | set(placers))
        placers[key] = p if budget is None else with_budget(p, budget)
    records = run_suite(
        the_suite,
        split,
        teachers,
        extra_placers=placers,
        seeds=seeds,
        noise=noise,
        out=None,
        progress=progress,
        torch_threads=torch_threads,
    )
    names = list(dict.fromkeys(r.placer for r in records))
    config = suite_config(the_suite, split, seeds, noise, names, {"budget": budget})
    results = Results(records, config)
    if out is not None:
        results.save(Path(out))
    return results
