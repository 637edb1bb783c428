"""A ranking run's measurements under two CPU tables: what a table change does, host drift left out
(docs/journal/s31-s42.md §33.2).

    .venv/bin/python -m bench.ranking_tables RUN_DIR OLD_PHI_YAML [--run-table PHI_YAML] [--iops N] [--ops N]

RUN_DIR holds a `cosine validate ranking` run's ranking.parquet, made with ``--run-table`` (default:
the committed cost_models/data/phi.yaml); OLD_PHI_YAML is another table (e.g. the previous commit's,
``git show HEAD~1:cost_models/data/phi.yaml > old.yaml``). Each row's design is rebuilt as the
ranking built it (measure.ranking.design_sets under the run's table, the run's records and volume)
and its run as it ran (its measured operations and warm-up), checked to give the row's own
prediction under the run's table, then predicted under the committed table ("new") and the old.
Printed per workload: Spearman's rho of each table's predictions against the same
measurements, the measured throughput of each table's top-predicted design over the best, and
the mean |log(predicted / measured)|. On this VM the same design measures up to 2x apart between
sessions (docs/journal/s31-s42.md §33.2); on the same runs the comparison is the model's alone. Not a test.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, DeviceModel
from cost_models.engine_model import engine_throughput
from cost_models.phi import PHI_TABLE, PhiTable, load_phi
from measure.grid import KEY, MEMORY_SHARE, VALUE, shipped_spec
from measure.ranking import RunPlan, design_sets, spearman
from specs.errors import InputError

#: The columns of a ranking.parquet this reads (measure.ranking.ranking's rows).
RANKING_COLUMNS = ("workload", "design", "records", "operations", "warmup_operations", "predicted_ops", "measured_ops")
#: The read latency of the ranking's device mode (`cosine validate ranking --read-latency-us` default here).
READ_LATENCY_S = 250e-6


def _top(pred: list[float], meas: list[float]) -> float:
    """Measured throughput of the top-predicted design over the best measured."""
    return meas[max(range(len(pred)), key=pred.__getitem__)] / max(meas)


def _log_error(pred: list[float], meas: list[float]) -> float:
    return sum(abs(math.log(p / m)) for p, m in zip(pred, meas, strict=True)) / len(meas)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a ranking run's directory (ranking.parquet)")
    ap.add_argument("old", type=Path, help="the other phi table (YAML)")
    ap.add_argument("--run-table", type=Path, default=PHI_TABLE, help="the table the run was made with")
    ap.add_argument("--iops", type=float, default=0.0, help="the run's volume (default: tmpfs)")
    ap.add_argument(
        "--ops", type=int, default=None, help="the run's --ops (default: 50,000 on tmpfs, 5,000 with --iops)"
    )
    a = ap.parse_args()
    for path in (a.run / "ranking.parquet", a.old, a.run_table):
        if not path.is_file():
            ap.exit(2, f"{ap.prog}: {path}: no such file\n")
    if not (math.isfinite(a.iops) and a.iops >= 0) or (a.ops is not None and a.ops < 1):
        ap.exit(2, f"{ap.prog}: --iops must be a finite number >= 0 and --ops at least 1\n")
    tables: list[PhiTable] = []
    for table in (a.old, a.run_table):
        try:
            tables.append(load_phi(table))
        except InputError as e:
            ap.exit(2, f"{ap.prog}: {e}\n")
    old_table, run_table = tables
    try:
        rows = pd.read_parquet(a.run / "ranking.parquet")
    except (OSError, ValueError) as e:
        ap.exit(2, f"{ap.prog}: {a.run / 'ranking.parquet'}: not a readable parquet file ({e})\n")
    missing = sorted(set(RANKING_COLUMNS) - set(rows.columns))
    if missing or rows.empty:
        ap.exit(
            2, f"{ap.prog}: {a.run / 'ranking.parquet'}: not a ranking (no rows, or missing {', '.join(missing)})\n"
        )
    records = int(rows["records"].iloc[0])
    dev = LOCAL_DEVICE if a.iops <= 0 else DeviceModel(iops=a.iops, read_latency_s=READ_LATENCY_S)
    cores = cpu_count()
    ops = a.ops if a.ops is not None else (50_000 if a.iops <= 0 else 5_000)
    plan = RunPlan(records, ops, cores, cores, dev, True, 1.0, run_table)
    sets = design_sets(records, MEMORY_SHARE * records * (KEY + VALUE), cores, dev, plan, run_table)
    print(f"{'workload':<8} {'rho old':>8} {'rho new':>8} {'top old':>8} {'top new':>8} {'log err old':>12} {'new':>6}")
    for w, g in rows.groupby("workload", sort=True):
        spec = shipped_spec(str(w))
        old, new, meas = [], [], []
        for r in g.itertuples():
            if r.design not in sets[str(w)]:
                ap.exit(2, f"{ap.prog}: {w} {r.design}: not in the design set (was the run made with another table?)\n")
            secs, wl = plan.workload(spec, sets[str(w)][r.design])
            wl = {
                **wl,
                "operations": int(r.operations),
                "warmup_operations": int(r.warmup_operations),
                "warmup_phase_aligned": False,
            }
            ran = engine_throughput(secs, wl, cores, dev, phi=run_table)[0]
            if abs(ran / float(r.predicted_ops) - 1.0) > 1e-6:
                ap.exit(
                    2,
                    f"{ap.prog}: {w} {r.design}: predicted {ran:,.0f}, the run {r.predicted_ops:,.0f}: not its table\n",
                )
            new.append(engine_throughput(secs, wl, cores, dev, phi=load_phi())[0])
            old.append(engine_throughput(secs, wl, cores, dev, phi=old_table)[0])
            meas.append(float(r.measured_ops))
        print(
            f"{w!s:<8} {spearman(old, meas):>8.2f} {spearman(new, meas):>8.2f} {_top(old, meas):>7.2f}x "
            f"{_top(new, meas):>7.2f}x {_log_error(old, meas):>12.3f} {_log_error(new, meas):>6.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
