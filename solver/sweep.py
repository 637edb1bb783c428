"""`cosine sweep`: many specs x many budgets, on a Dask cluster, resumable.

One output row per (spec, budget, provider). One task per spec: it builds
that spec's design tables once and solves every budget it still needs with
them. Tasks run on a Dask cluster (:mod:`solver.dask_cluster`: an embedded
local cluster by default, or an existing scheduler), or, with one worker, one
after another in this process (the serial loop). Each finished task's rows go
to the sweep file's journal at once (:mod:`solver.sweepfile`), so an
interrupted sweep keeps everything that finished, and a rerun solves only the
(spec, budget, provider) rows the file lacks. A worker that dies mid-task
loses nothing written: Dask reruns its task on another worker. A sweep holds
its file's lock while it runs (solver.output_lock): a second sweep on the same
file is refused before any work.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from solver.rundir import PointColumns, SweepRow
from solver.sweepfile import Key, SweepFile, row_key
from specs.errors import InputError, check_range
from specs.schema import MAX_BUDGET_USD, Spec

#: Most budgets of one sweep (each is a MIP solve per spec and provider; the frontier of
#: `cosine solve` has at most solver.solve.MAX_BANDS too).
MAX_SWEEP_BUDGETS = 1000


def parse_budgets(text: str) -> np.ndarray:
    """'LO:HI:N' -> N budgets spaced geometrically from LO to HI."""
    parts = text.split(":")
    if len(parts) != 3:
        raise InputError(f"--budgets {text!r}: expected LO:HI:N, e.g. 100:100000:20")
    try:
        lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise InputError(f"--budgets {text!r}: LO and HI must be numbers and N an integer") from None
    check_range("--budgets LO", lo, 0.0, MAX_BUDGET_USD, lo_open=True)
    check_range("--budgets HI", hi, lo, MAX_BUDGET_USD)
    check_range("--budgets N", n, 1, MAX_SWEEP_BUDGETS, integer=True)
    return np.geomspace(lo, hi, n) if n > 1 else np.array([lo])


@dataclass(frozen=True)
class SpecTask:
    """One spec's share of a sweep: the (budget, provider) solves its file still lacks.
    It carries the parsed spec, so a worker on another machine needs no file."""

    spec: Spec
    spec_path: str
    budgets: tuple[float, ...]
    providers: tuple[str, ...]
    cache_dir: str | None = None  # the table and re-evaluation caches' directory; None: no cache

    @property
    def solves(self) -> int:
        return len(self.budgets) * len(self.providers)


@dataclass
class TaskResult:
    """What a task hands back: its rows, and the one-line notes of its caches (a refused file)."""

    rows: list[SweepRow]
    notes: list[str] = field(default_factory=list)


def solve_spec(task: SpecTask, backend_name: str) -> TaskResult:
    """One task: the design tables of each of the spec's replication plans, built once (or read
    from the table cache), shared by every budget it solves, and the plans' frontiers merged as
    ``cosine solve`` merges them (solver.replicas); exact re-evaluations read from and added to
    their cache."""
    from cost_models.pricing.catalog import load_catalog
    from solver.backends import get_backend
    from solver.replicas import plan_tables, solve_plans
    from solver.table_cache import TableCache

    spec = task.spec
    cat = load_catalog(spec.pricing)
    cache = TableCache(Path(task.cache_dir)) if task.cache_dir is not None else None
    runs = plan_tables(spec, cat, task.providers, workers=1, cache=cache)
    pf = solve_plans(spec, cat, runs, get_backend(backend_name), cache=cache, budgets=np.array(task.budgets))
    pf.save()
    fr = pf.merged
    rows = [
        SweepRow(**PointColumns.of(pt), spec=spec.name, spec_path=task.spec_path, backend=fr.backend)
        for pts in fr.points.values()
        for pt in pts
    ]
    return TaskResult(rows, list(cache.notes) if cache is not None else [])


def plan(
    specs: list[tuple[Spec, str]],
    budgets: np.ndarray,
    providers: list[str] | None,
    done: set[Key],
    cache_dir: str | None = None,
) -> tuple[list[SpecTask], int]:
    """The tasks still to run (a budget is redone if any of its providers lacks a row), and how many
    (spec, budget, provider) rows are already done. ``cache_dir``: the tasks' cache directory."""
    tasks, skipped = [], 0
    for spec, path in specs:
        provs = tuple(p for p in (spec.providers if providers is None else providers) if p in spec.providers)
        todo = tuple(float(b) for b in budgets if any(row_key(spec.name, b, p) not in done for p in provs))
        skipped += (len(budgets) - len(todo)) * len(provs)
        if todo:
            tasks.append(SpecTask(spec, path, todo, provs, cache_dir))
    return tasks, skipped


def _serial(tasks: list[SpecTask], backend: str) -> Generator[tuple[SpecTask, TaskResult], None, None]:
    for task in tasks:
        yield task, solve_spec(task, backend)


def sweep(
    spec_paths: list[Path],
    budgets: np.ndarray,
    out: Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    backend: str = "highs",
    providers: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    cache: bool = True,
    notes: list[str] | None = None,
) -> dict[str, int]:
    """Run (or resume) a sweep; returns counts of rows in the file / new now / already there.

    ``scheduler``: an existing Dask cluster's ``tcp://HOST:PORT``. Otherwise a local cluster of
    ``workers`` processes (default: one per core); ``workers=1`` is the serial loop in this process.
    Every input is checked, and the file locked, before any solve. ``notes`` collects one-line
    reports of what was refused and redone (a journal part, a cache file), each once.
    """
    from cost_models.pricing.catalog import load_catalog
    from solver import dask_cluster
    from solver.sealed_json import default_dir
    from solver.solve import check_cluster_room
    from solver.tables.build import check_workers
    from specs.schema import load_spec

    check_workers(workers)
    if scheduler is not None:
        dask_cluster.parse_scheduler(scheduler)
        if workers is not None:
            raise InputError("--workers sizes the local cluster; an existing cluster (--scheduler) has its own")
    specs: list[tuple[Spec, str]] = []
    paths: dict[str, str] = {}
    for p in spec_paths:
        s = load_spec(p)
        if s.name in paths:
            raise InputError(f"{p}: spec name {s.name!r} is also {paths[s.name]}'s (sweep rows are keyed by name)")
        # what `cosine solve` refuses before its tables (a latency bound under every round trip, SLAs
        # no cluster may meet) is refused here before any solve too
        provs = tuple(x for x in s.providers if providers is None or x in providers)
        try:
            check_cluster_room(s, load_catalog(s.pricing), provs)
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None
        paths[s.name] = str(p)
        specs.append((s, str(p)))
    said = [] if notes is None else notes

    def note(lines: list[str]) -> None:
        said.extend(n for n in dict.fromkeys(lines) if n not in said)

    with SweepFile(out) as file:
        note(file.notes)
        cache_dir = str(default_dir()) if cache else None
        tasks, skipped = plan(specs, budgets, providers, file.done(), cache_dir)
        total = sum(t.solves for t in tasks)
        if progress:
            progress(0, total)
        finished = 0
        try:
            if tasks:
                with ExitStack() as stack:
                    if workers == 1 and scheduler is None:
                        results = _serial(tasks, backend)
                    else:
                        client = stack.enter_context(dask_cluster.connect(scheduler, workers))
                        results = dask_cluster.as_finished(client, solve_spec, tasks, backend)
                    for task, res in stack.enter_context(closing(results)):
                        file.add(res.rows)
                        note(res.notes)
                        finished += task.solves
                        if progress:
                            progress(finished, total)
        except BaseException:
            file.merge()  # interrupted or failed: FILE.parquet still gets every task that finished
            raise
        file.finish()
        return {"rows": len(file.rows), "new": len(file.rows) - file.on_disk, "skipped": skipped}
