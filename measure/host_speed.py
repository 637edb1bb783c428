"""This host's CPU against the calibration host's: the probe that says whether the table is due
and the scale that puts a validation on another host on its footing."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cost_models import cpu_count
from measure.calibrate import CalibrationError
from measure.calibrate.checks import predicted
from measure.calibrate.plan import CACHED, CLASS_DESIGNS, Plan
from measure.calibrate.samples import measure
from measure.grid import mix_spec
from specs.vocab import Operation

#: The probe of :func:`host_speed`: cached single-operation runs of the calibration's, the read
#: and the blind write every Fig. 4B and ranking mix is made of.
HOST_SPEED_OPERATIONS = (Operation.GET, Operation.UPDATE)


#: How far this host's CPU may be from the calibration host's before the table is stale: issue 12's
#: throughput accuracy target (85 %), which a factor beyond it alone breaks on every CPU-bound run.
HOST_SPEED_TOLERANCE = 0.85


@dataclass(frozen=True)
class HostSpeed:
    """This host's CPU against the calibration host's (:func:`host_speed`)."""

    #: median over the probe's runs of measured / tabled CPU seconds per operation
    factor: float
    #: one row per probe run: class, operation, measured and tabled microseconds per operation
    rows: list[dict[str, Any]]

    @property
    def stale(self) -> bool:
        """True when the table no longer describes this host (:data:`HOST_SPEED_TOLERANCE`)."""
        return not HOST_SPEED_TOLERANCE <= self.factor <= 1.0 / HOST_SPEED_TOLERANCE


def host_speed(plan: Plan, repeats: int = 2, progress: Callable[[int, int, str], None] | None = None) -> HostSpeed:
    """How many times the calibration host's CPU seconds an operation takes on this host now.

    The phi table is one machine's: the same engine binary ran its cached gets 1.5-2.0x slower on
    this sandbox's host of another day (docs/journal/s22-s30.md §22.1). The probe re-runs the calibration's
    own cached runs of :data:`HOST_SPEED_OPERATIONS` (every class, the plan's smallest size, one
    thread, ``repeats`` each) and compares each run's driver CPU per operation with what the table
    says for it (the inverse of :func:`predicted` on one thread); the factor is their median. A full
    `cosine calibrate` is the remedy; this is the check that says whether it is due, and the scale
    that puts a validation on another host on the table's footing (:meth:`Demands.scaled`)."""
    if repeats < 1:
        raise CalibrationError(f"host-speed probe: repeats must be >= 1, got {repeats}")
    n = plan.sizes[0]
    runs = [
        (CACHED, cls, str(op), mix_spec({op: 1.0}, name=str(op)), n, 1, 1.0)
        for _ in range(repeats)
        for op in HOST_SPEED_OPERATIONS
        for cls in CLASS_DESIGNS
    ]
    samples = measure(plan, progress, runs)
    rows: list[dict[str, Any]] = []
    for s in samples:
        tabled = 1.0 / predicted(s, cpu_count())
        rows.append(
            {
                "class": s.cls,
                "operation": s.workload,
                "records": s.records,
                "measured_us": s.fg_cpu * 1e6,
                "tabled_us": tabled * 1e6,
                "ratio": s.fg_cpu / tabled,
                "runqueue_share": s.runqueue_share,
            }
        )
    factor = float(statistics.median(float(r["ratio"]) for r in rows))
    if not (math.isfinite(factor) and factor > 0):
        raise CalibrationError(f"host-speed probe: measured/tabled CPU ratio {factor} is not a positive number")
    return HostSpeed(factor, rows)
