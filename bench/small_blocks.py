"""The block-read CPU over the block sizes it is calibrated on (docs/journal/s31-s42.md §35.7, §36).

    flock /work/wt/measure.lock .venv/bin/python -u -m bench.small_blocks [--repeats 2]

The calibration's loaded LSM get runs (one thread, each of its data sizes, the class's preset) at
its own and every other block size it runs (1/16 to 8 times the preset's: 232 B to 32 KiB),
``--repeats`` rounds, each printed as the calibration's own check prints a loaded run: the model's
throughput given the blocks the run read (:func:`measure.calibrate.checks.predicted`, the table's
block-read CPU at the run's block size) over the engine's. Says whether the table's curve of a
block read over its bytes holds, down to the local search's floor
(``measure.local.LOCAL_BLOCK_BYTES``). Not a test.
"""

from __future__ import annotations

import argparse

from cost_models import cpu_count
from measure.calibrate.checks import predicted
from measure.calibrate.plan import BLOCK_SIZE_STEPS, DEFAULT_PLAN, LOADED
from measure.calibrate.samples import measure
from measure.grid import mix_spec
from specs.vocab import DesignClass, Operation

#: Block sizes of the runs, as multiples of the LSM preset's: the calibration's.
FACTORS = tuple(sorted((1.0, *BLOCK_SIZE_STEPS)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="rounds of every run (1-9)")
    a = ap.parse_args()
    if not 1 <= a.repeats <= 9:
        ap.exit(2, f"{ap.prog}: --repeats must be 1..9\n")
    spec = mix_spec({Operation.GET: 1.0})
    runs = [
        (LOADED, str(DesignClass.LSM), str(Operation.GET), spec, n, 1, f)
        for _ in range(a.repeats)
        for n in DEFAULT_PLAN.sizes
        for f in FACTORS
    ]
    for s in measure(DEFAULT_PLAN, None, runs):
        p = predicted(s, cpu_count())
        print(
            f"{s.records:>9,} records  block {s.block_bytes:>6,.0f} B  blocks/op {s.fg_blocks:.3f}"
            f"  engine {s.throughput:>10,.0f}  model {p:>10,.0f}  model/engine {p / s.throughput:.3f}"
        )


if __name__ == "__main__":
    main()
