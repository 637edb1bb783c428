"""Issue 17 §2: the Rosetta range filter's false-positive rate, model against engine.

For each range-filter budget (bits per key) the model allocates the bits over the
dyadic heights for empty ranges of WIDTH key values (cost_models/range_filter.py),
the engine runs that filter on a small two-level store (cosine-bench, empty ranges
only), and the script prints the filter's measured positive rate (range_filter
counters) beside the model's FPR, and the blocks per empty range measured beside
predicted.

    flock /work/wt/measure.lock .venv/bin/python -m bench.range_filter [--records 20000] [--ops 8000]
"""

from __future__ import annotations

import argparse
import math
import tomllib

from cost_models import range_filter as rf
from cost_models.engine_model import predict
from measure.engine import TEMPLATE, build, run_scratch
from measure.grid import small_lsm, small_workload
from render.config import to_toml

WIDTH = 64
BITS = (4.0, 8.0, 12.0, 16.0, 22.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--ops", type=int, default=8_000)
    a = ap.parse_args()
    build(TEMPLATE)
    wl = small_workload("empty_range", a.records, a.ops, empty_range_width=WIDTH)
    print(f"empty ranges of {WIDTH} key values, {a.records:,} records, {a.ops:,} queries")
    print(
        "| bits/key | allocation (bits per height) | model FPR | engine FPR (queries) | ± 1 s.e. "
        "| blocks/op model | blocks/op engine |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for bits in (0.0, *BITS):
        alloc = list(rf.allocate(bits, WIDTH))
        text = to_toml(small_lsm("bench-range-filter", "empty_range", range_bits_per_height=alloc))
        rep = run_scratch(text, wl, f"bench-rf-{bits:g}")
        c = rep["range_filter"]
        model = rf.fpr(alloc, WIDTH)
        meas = c["positives"] / c["queries"] if c["queries"] else float("nan")
        se = math.sqrt(max(model * (1 - model), 0.0) / max(c["queries"], 1))
        per = rep["per_op"]["empty_range"]
        io = predict(tomllib.loads(text), wl, shape=rep["load"].get("shape"), end_shape=rep.get("stats"))
        print(
            f"| {bits:g} | {', '.join(f'{b:g}' for b in alloc) or '-'} | {model:.4f} | {meas:.4f} ({c['queries']:,}) "
            f"| {se:.4f} | {float(io.empty_range[0]):.3f} | {per['blocks_read'] / per['count']:.3f} |"
        )


if __name__ == "__main__":
    main()
