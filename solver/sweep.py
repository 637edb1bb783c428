"""`cosine sweep`: many specs x many budgets, in parallel processes, resumable.

One output row per (spec, budget, provider). Rows already in the output file
are skipped; each finished spec is merged into the file at once (write to a
temporary file, then rename), so an interrupted sweep keeps what it finished.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from solver.errors import InputError

SCHEMA = pa.schema(
    [
        ("spec", pa.string()),
        ("spec_path", pa.string()),
        ("budget", pa.float64()),
        ("provider", pa.string()),
        ("status", pa.string()),
        ("monthly_cost", pa.float64()),
        ("throughput_ops", pa.float64()),
        ("latency_s", pa.float64()),
        ("class", pa.string()),
        ("gap", pa.float64()),
        ("approx_error", pa.float64()),
        ("backend", pa.string()),
        ("configuration", pa.string()),
    ]
)


def parse_budgets(text: str) -> np.ndarray:
    """'LO:HI:N' -> N budgets spaced geometrically from LO to HI."""
    parts = text.split(":")
    if len(parts) != 3:
        raise InputError(f"--budgets {text!r}: expected LO:HI:N, e.g. 100:100000:20")
    try:
        lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise InputError(f"--budgets {text!r}: LO and HI must be numbers and N an integer") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 or hi < lo or n < 1:
        raise InputError(f"--budgets {text!r}: need 0 < LO <= HI and N >= 1")
    return np.geomspace(lo, hi, n) if n > 1 else np.array([lo])


def _key(spec: str, budget: float, provider: str) -> tuple[str, float, str]:
    return (spec, round(float(budget), 6), provider)


def _solve_spec(spec_path: str, budgets: list[float], providers: list[str], backend_name: str) -> list[dict[str, Any]]:
    from cost_models.pricing import load_catalog
    from solver.backends import get_backend
    from solver.frontier import solve_frontier, to_json
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
    rows = []
    for p, pts in fr.points.items():
        for pt in pts:
            r = pt.result
            rows.append(
                {
                    "spec": spec.name,
                    "spec_path": spec_path,
                    "budget": pt.budget,
                    "provider": p,
                    "status": pt.status,
                    "monthly_cost": pt.cost if pt.chosen else None,
                    "throughput_ops": pt.throughput if pt.chosen else None,
                    "latency_s": 1 / pt.throughput if pt.chosen and pt.throughput > 0 else None,
                    "class": pt.dominant_class(),
                    "gap": None if r is None or not math.isfinite(r.gap) else r.gap,
                    "approx_error": None if math.isnan(pt.approx_error) else pt.approx_error,
                    "backend": fr.backend,
                    "configuration": to_json(pt.configuration(), indent=None),
                }
            )
    return rows


def _read(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    try:
        t = pq.ParquetFile(out).read()
    except Exception:
        raise InputError(f"{out}: exists but is not a readable parquet file; move it away to start afresh") from None
    missing = set(SCHEMA.names) - set(t.column_names)
    if missing:
        raise InputError(f"{out}: not a sweep file (lacks {', '.join(sorted(missing))})")
    return t.to_pylist()


def _write(out: Path, rows: list[dict[str, Any]]) -> None:
    tmp = out.with_suffix(out.suffix + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp)
    os.replace(tmp, out)


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

    specs = []
    for p in spec_paths:
        s = load_spec(p)  # validate everything before any work
        specs.append((str(p), s.name, list(providers or s.providers)))
    if out.suffix != ".parquet":
        raise InputError(f"--out {out}: the sweep file must end in .parquet")
    existing = _read(out)
    done = {_key(r["spec"], r["budget"], r["provider"]) for r in existing}
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
                new = [r for r in f.result() if _key(r["spec"], r["budget"], r["provider"]) not in done]
                rows += new
                _write(out, rows)
                finished += len(futs[f][1]) * len(futs[f][2])
                if progress:
                    progress(finished, total)
    else:
        for sp, b, pr in jobs:
            solved = _solve_spec(sp, b, pr, backend)
            new = [r for r in solved if _key(r["spec"], r["budget"], r["provider"]) not in done]
            rows += new
            _write(out, rows)
            finished += len(b) * len(pr)
            if progress:
                progress(finished, total)
    if not jobs and not out.exists():
        _write(out, rows)
    return {"rows": len(rows), "new": len(rows) - len(existing), "skipped": skipped}
