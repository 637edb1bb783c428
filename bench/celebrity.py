"""The technical report's Sec. 3 "celebrity tweets" example, end to end.

    .venv/bin/python -m bench.celebrity [--records 10000000] [--ops 1000000] [--no-report-designs]

Each cost model (distribution-aware, worst-case) picks its design for
specs/celebrity.yaml on one 16 GB AWS VM; each pick (and the report's own two
designs) is evaluated under both models at the spec's size (10^10 entries,
5 x 10^10 operations) and run on the Rust engine at ``--records`` with the
design's memory scaled by records / 10^10. Engine I/O is the measured blocks
per operation (cosine-bench's counters, merges and WAL charged to the writes)
times 5 x 10^10; "model @ engine" is each model handed the engine's exact
configuration and state at the scaled size.
"""

from __future__ import annotations

import argparse
import time

from specs.vocab import CostModel
from studies.celebrity import DEFAULT_OPERATIONS, DEFAULT_RECORDS, run


def _e9(x: float | None) -> str:
    return f"{x / 1e9:7.2f}" if x is not None else "      -"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    ap.add_argument("--ops", type=int, default=DEFAULT_OPERATIONS)
    ap.add_argument("--no-report-designs", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = run(a.records, a.ops, with_report_designs=not a.no_report_designs)
    da, wc = CostModel.DISTRIBUTION_AWARE, CostModel.WORST_CASE
    print(f"engine runs: {a.records:,} records, {a.ops:,} operations each ({time.perf_counter() - t0:.0f} s)")
    print("I/Os per month (x 1e9); the report's figures where it gives them")
    print(
        f"{'design':34} {'T':>3} {'K':>3} {'Z':>2} {'L':>2} {'Y':>2} {'M_B GB':>7} {'bits':>5} {'cache GB':>8} "
        f"{'worst':>7} {'dist.':>7} {'engine':>7} {'wc@eng':>7} {'da@eng':>7} {'rep wc':>7} {'rep da':>7}"
    )
    for r in rows:
        d = r.design
        print(
            f"{r.label:34} {d['T']:>3} {d['K']:>3} {d['Z']:>2} {d['L']:>2} {d['Y']:>2} "
            f"{d['buffer_bytes'] / 1e9:>7.3f} {d['bloom_bits_per_key']:>5.2f} {d['cache_bytes'] / 1e9:>8.2f} "
            f"{_e9(r.model_io[wc])} {_e9(r.model_io[da])} {_e9(r.engine_io)} "
            f"{_e9(r.engine_model_io[wc])} {_e9(r.engine_model_io[da])} "
            f"{_e9(r.report_io.get(wc))} {_e9(r.report_io.get(da))}"
        )
    print("engine blocks per operation:")
    for r in rows:
        print(f"  {r.label:34} " + ", ".join(f"{op} {v:.4f}" for op, v in r.engine_io_per_op.items()))


if __name__ == "__main__":
    main()
