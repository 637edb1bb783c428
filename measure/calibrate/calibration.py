"""`cosine calibrate`: measure (or reload) the samples, fit, write the table, then Fig. 4B."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from cost_models.phi import load_phi
from measure.calibrate.checks import checks
from measure.calibrate.fig4b import fig4b
from measure.calibrate.fit import fit
from measure.calibrate.plan import DEFAULT_PLAN, QUICK_PLAN
from measure.calibrate.samples import Sample, load_samples, measure
from measure.calibrate.table import write_table
from specs.io import write_records, write_rows


@dataclass
class Calibration:
    """What one `cosine calibrate` measured and learned."""

    samples: list[Sample]
    result: dict[str, Any]
    checks: list[dict[str, Any]]
    fig4b: list[dict[str, Any]]

    def shared_core_runs(self) -> tuple[int, int]:
        """(runs measured again because the host gave their two threads one core, runs kept that had
        one all the same) over the samples and Fig. 4B (measure.cores)."""
        again = sum(x.runs_dropped_shared_core for x in self.samples) + sum(
            int(r["runs_dropped_shared_core"]) for r in self.fig4b
        )
        kept = sum(x.on_shared_core for x in self.samples) + sum(int(r["runs_on_shared_core"]) for r in self.fig4b)
        return again, kept


def calibrate(
    quick: bool,
    samples_from: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    write: bool = False,
    out: Path | None = None,
) -> Calibration:
    """Measure (or reload) the samples, fit, optionally write the table, then run Fig. 4B with it.

    The samples are written to ``out``/calibration.parquet before the fit, so a fit that stops
    at a bound can be redone from them (``--samples``) without measuring again."""
    plan = QUICK_PLAN if quick else DEFAULT_PLAN
    cores = cpu_count()
    samples = load_samples(samples_from) if samples_from is not None else measure(plan, progress)
    if out is not None and samples_from is None:
        out.mkdir(parents=True, exist_ok=True)
        write_rows(out / "calibration.parquet", samples, Sample)
    res = fit(samples, cores)
    if write:
        write_table(res, samples)
        return Calibration(samples, res, checks(samples, cores), fig4b(plan, cores, progress))
    with tempfile.TemporaryDirectory(prefix="cosine-phi-") as tmp:
        table = load_phi(write_table(res, samples, Path(tmp) / "phi.yaml"))
        return Calibration(samples, res, checks(samples, cores, table), fig4b(plan, cores, progress, phi=table))


def write(cal: Calibration, out: Path) -> list[Path]:
    """calibration.parquet (the samples), calibration_checks.parquet and fig4b.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        write_rows(out / "calibration.parquet", cal.samples, Sample),
        write_records(out / "calibration_checks.parquet", cal.checks),
        write_records(out / "fig4b.parquet", cal.fig4b),
    ]
