"""`cosine calibrate operation`: one operation's cached runs, fitted with the table's other terms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from cost_models.phi import LOOKUP_SLOPES, PhiTable, load_phi
from measure.calibrate import CalibrationError
from measure.calibrate.fit import drop_index_walks, fit_concurrent_cpu, fit_cpu, fit_phi
from measure.calibrate.plan import (
    BUFFER_GET,
    CACHED,
    CLASS_DESIGNS,
    DEFAULT_PLAN,
    QUICK_PLAN,
    Plan,
    Run,
    calibration_runs,
)
from measure.calibrate.samples import Sample, load_samples, measure
from measure.calibrate.table import merge_operation, table_terms
from specs.errors import InputError
from specs.io import write_rows
from specs.vocab import OPERATIONS, Operation

#: Operations `cosine calibrate operation` measures alone: their cached runs give the CPU per
#: operation and phi with the table's memtable and lookup terms. A range needs its two scan
#: lengths and the hash log's walk, a get and an empty get the lookup-growth fit over the same
#: runs: only the whole calibration measures those.
SINGLE_OPERATIONS = tuple(op for op in OPERATIONS if op != Operation.RANGE and op not in LOOKUP_SLOPES)


def check_single_operation(op: Operation) -> None:
    """--operation names an operation that can be measured alone (SINGLE_OPERATIONS)."""
    if op not in SINGLE_OPERATIONS:
        raise InputError(
            f"--operation {op}: only {', '.join(SINGLE_OPERATIONS)} can be measured alone "
            "(range and the lookups need the whole calibration)"
        )


def operation_runs(plan: Plan, op: Operation) -> list[Run]:
    """The cached runs of ``op`` in the calibration of ``plan`` (every class, size and thread count)."""
    return [r for r in calibration_runs(plan) if r[0] == CACHED and r[2] == op]


def fit_operation(samples: list[Sample], op: Operation, table: PhiTable, cores: int) -> dict[str, Any]:
    """CPU seconds and phi of ``op`` per class from its cached runs (fit_cpu, fit_phi), the memtable
    and lookup terms taken from ``table``; raises CalibrationError at a bound or for a missing class."""
    mine = [s for s in samples if s.kind == CACHED and s.workload == op]
    memtable, lookup = table_terms(table)
    walks: dict[tuple[str, str], float] = {}
    for cls, entry in table["classes"].items():  # what an rmw's buffered reads skipped (fit_cpu)
        walks[(cls, Operation.GET)] = float(entry["cpu_seconds"][Operation.GET])
        walks[(cls, BUFFER_GET)] = float(entry["buffer_get_seconds"])
    cpu = fit_cpu(mine, memtable, lookup, walks)
    phi = fit_phi(mine, cores)
    concurrent = fit_concurrent_cpu(mine, cores)
    missing = [c for c in CLASS_DESIGNS if (c, op) not in cpu or (c, op) not in phi or (c, op) not in concurrent]
    if missing:
        raise CalibrationError(f"{op}: no cached runs at 1 and 2 threads of {', '.join(missing)}")
    drop_index_walks(cpu)
    return {"operation": op, "cpu": cpu, "phi": phi, "concurrent_cpu": concurrent}


def calibrate_operation(
    op: Operation,
    quick: bool,
    samples_from: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    write: bool = False,
    out: Path | None = None,
) -> tuple[list[Sample], dict[str, Any]]:
    """Measure (or reload) the cached runs of one operation, fit, optionally merge into the table."""
    check_single_operation(op)
    plan = QUICK_PLAN if quick else DEFAULT_PLAN
    table = load_phi()
    if samples_from is not None:
        samples = [s for s in load_samples(samples_from) if s.kind == CACHED and s.workload == op]
    else:
        samples = measure(plan, progress, operation_runs(plan, op))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_rows(out / "calibration.parquet", samples, Sample)
    res = fit_operation(samples, op, table, cpu_count())
    if write:
        merge_operation(res, samples)
    return samples, res
