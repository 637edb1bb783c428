"""`cosine sweep`: many specs x many budgets, in parallel processes, resumable.

One output row per (spec, budget, provider). Rows already in the output file
are skipped; each finished spec is merged into the file at once (write to a
temporary file, then rename), so an interrupted sweep keeps what it finished.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from solver.rundir import PointColumns, SweepRow
from specs.errors import InputError, check_range
from specs.io import check_output_file, read_rows, write_rows
from specs.schema import MAX_BUDGET_USD

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


def _key(spec: str, budget: float, provider: str) -> tuple[str, float, str]:
    return (spec, round(float(budget), 6), provider)


def _solve_spec(spec_path: str, budgets: list[float], providers: list[str], backend_name: str) -> list[SweepRow]:
    from cost_models.pricing import load_catalog
    from solver.backends import get_backend
    from solver.frontier import solve_frontier
    from solver.tables import build_tables
    from specs.schema import load_spec

    spec = load_spec(spec_path)
    cat = load_catalog(spec.pricing)
    provs = tuple(p for p in providers if p in spec.providers)
    tables = build_tables(spec, cat, provs, workers=1)
    fr = solve_frontier(
        spec,
        cat,
        tables,
        get_backend(backend_name),
        budgets=np.array(budgets),
        providers=tuple(p for p in provs if p in tables.contexts),
    )
    return [
        SweepRow(**PointColumns.of(pt), spec=spec.name, spec_path=spec_path, backend=fr.backend)
        for pts in fr.points.values()
        for pt in pts
    ]


def _read(out: Path) -> list[SweepRow]:
    return read_rows(out, SweepRow, "sweep file") if out.exists() else []


def sweep(
    spec_paths: list[Path],
    budgets: np.ndarray,
    out: Path,
    *,
    workers: int = 1,
    backend: str = "highs",
    providers: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Run (or resume) a sweep; returns counts of rows done now / skipped."""
    from specs.schema import load_spec

    if out.suffix != ".parquet":
        raise InputError(f"--out {out}: the sweep file must end in .parquet")
    check_output_file(out, "--out")
    specs = []
    for p in spec_paths:
        s = load_spec(p)  # validate everything before any work
        specs.append((str(p), s.name, list(s.providers if providers is None else providers)))
    existing = _read(out)
    done = {_key(r.spec, r.budget, r.provider) for r in existing}
    jobs = []
    skipped = 0
    for path, name, provs in specs:
        todo = [float(b) for b in budgets if any(_key(name, b, p) not in done for p in provs)]
        skipped += (len(budgets) - len(todo)) * len(provs)
        if todo:
            jobs.append((path, todo, provs))
    total = sum(len(b) * len(p) for _, b, p in jobs)
    finished = 0
    rows = list(existing)
    if progress:
        progress(0, total)
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            futs = {ex.submit(_solve_spec, sp, b, pr, backend): (sp, b, pr) for sp, b, pr in jobs}
            for f in as_completed(futs):
                new = [r for r in f.result() if _key(r.spec, r.budget, r.provider) not in done]
                rows += new
                write_rows(out, rows, SweepRow)
                finished += len(futs[f][1]) * len(futs[f][2])
                if progress:
                    progress(finished, total)
    else:
        for sp, b, pr in jobs:
            solved = _solve_spec(sp, b, pr, backend)
            new = [r for r in solved if _key(r.spec, r.budget, r.provider) not in done]
            rows += new
            write_rows(out, rows, SweepRow)
            finished += len(b) * len(pr)
            if progress:
                progress(finished, total)
    if not jobs and not out.exists():
        write_rows(out, rows, SweepRow)
    return {"rows": len(rows), "new": len(rows) - len(existing), "skipped": skipped}
