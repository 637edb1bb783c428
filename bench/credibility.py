"""Every figure of issue 12 ("what `cosine solve` promises, the engine delivers"), in one script.

    .venv/bin/python -m bench.credibility [--quick] [--calibrate] [--skip-grid] [--skip-tmpfs] [--skip-ranking]
                                          [--volumes IOPS ...] [--host-speed] [--out runs/credibility]

0. ``--host-speed``: probe this host's CPU against the calibration host's first
   (measure.host_speed.host_speed: the calibration's cached get and update runs) and scale the
   model's CPU seconds by the median ratio; the table's own predictions are kept beside.

1. ``--calibrate``: `cosine calibrate phi` first (rewrites cost_models/data/phi.yaml;
   regenerate the golden test afterwards, COMMON.md); without it the committed table is used.
2. Fig. 4B on tmpfs: the class presets on four mixed workloads (the paper's 25% mix,
   YCSB A, B, F) at 1 and 2 threads, median of 3 runs, at a size the calibration did not use.
3. Fig. 4B in the engine's device mode at two volumes (gp3's baseline 3,000 IOPS and its
   16,000-IOPS maximum, 125 MiB/s: /work/shared/reference/storage_prices.csv; a 250 us read
   latency, this benchmark's assumption of a sub-millisecond volume): the I/O-bound regime.
4. The ranking check (`cosine validate ranking`) on tmpfs and on both volumes.
5. I/O accuracy on the full `cosine validate` grid (--quick: the quick grid), with the
   --conservative margin and what it costs.

Prints markdown tables for BENCHMARKS.md, with the machine's load (the share of the driver
threads' time spent waiting for a CPU another program held) beside each throughput figure.
Writes every row as parquet under --out.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, DeviceModel
from measure.calibrate.calibration import calibrate
from measure.calibrate.calibration import write as write_calibration
from measure.calibrate.fig4b import fig4b
from measure.calibrate.plan import DEFAULT_PLAN, QUICK_PLAN, thread_counts
from measure.host_speed import host_speed
from measure.ranking import CONFIRM_REPEATS, MAX_REPEATS, TARGET_PICK, TARGET_RHO, ranking, summary
from measure.validate import DEFAULT_SIZE, QUICK_SIZE, validate
from specs.io import write_records

#: gp3: 3,000 IOPS baseline, 16,000 maximum, 125 MiB/s baseline (reference/storage_prices.csv).
VOLUMES = (("gp3 3k", 3000.0), ("gp3 16k", 16000.0))
VOLUME_MIB_S = 125.0
#: This benchmark's read latency of a sub-millisecond volume (an assumption, not a catalog figure).
VOLUME_READ_LATENCY_S = 250e-6
#: Fig. 4B and ranking targets of issue 12.
TARGET_FIG4B = 0.85


def volume(iops: float) -> DeviceModel:
    return DeviceModel(iops=iops, bytes_per_s=VOLUME_MIB_S * 2**20, read_latency_s=VOLUME_READ_LATENCY_S)


def header() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}; commit {commit}; load average at start {load:.1f}"
    )


def fig4b_table(rows: list[dict[str, Any]], title: str) -> str:
    """Predicted vs measured: wall-clock, and over the time the driver threads had a CPU ("free": what a
    quiet machine measures; the run-queue share is the time they waited for a CPU another program held).
    On a volume, also the model's blocks per operation beside the volume's I/Os per operation."""
    dev = any(r.get("device_ios", 0.0) > 0 for r in rows)
    out = [
        f"**{title}**",
        "",
        "| class | workload | threads | predicted ops/s | measured ops/s | accuracy | measured free ops/s "
        "| accuracy (free) | run-queue share |"
        + (" model blocks/op | volume I/Os/op (fg reads + bg reads + writes) |" if dev else ""),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if dev else ""),
    ]
    for r in rows:
        io = (
            f" {r['predicted_blocks']:.3f} | {r['device_ios']:.3f} ({r['device_foreground_reads']:.3f} + "
            f"{r['device_background_reads']:.3f} + {r['device_writes']:.3f}) |"
            if dev
            else ""
        )
        out.append(
            f"| {r['class']} | {r['workload']} | {r['threads']} | {r['predicted_ops']:,.0f} | "
            f"{r['measured_ops']:,.0f} | {r['accuracy']:.1%} | {r['measured_free_ops']:,.0f} | "
            f"{r['accuracy_free']:.1%} | {r['runqueue_share']:.0%} |" + io
        )
    out.append("")
    scaled = any(r.get("cpu_scale", 1.0) != 1.0 for r in rows)
    if scaled:
        out.append(
            f"(predictions with the model's CPU seconds x{rows[0]['cpu_scale']:.3f}, the host-speed probe; "
            "the last line: the table's own, unscaled)"
        )
        out.append("")
    labels = (("accuracy", "wall clock"), ("accuracy_free", "free"))
    for key, label in labels + ((("accuracy_table", "wall clock, unscaled table"),) if scaled else ()):
        by: dict[tuple[str, int], list[float]] = {}
        for r in rows:
            by.setdefault((r["class"], r["threads"]), []).append(r[key])
        out.append(
            f"per class and threads, {label} (mean / min): "
            + "; ".join(f"{c} {t}t {statistics.mean(v):.1%} / {min(v):.1%}" for (c, t), v in by.items())
            + f" — target >= {TARGET_FIG4B:.0%} for every class"
        )
        out.append("")
    return "\n".join(out)


def host_speed_table(rows: list[dict[str, Any]], factor: float) -> str:
    """The host-speed probe's runs: this host's CPU per operation against the phi table's."""
    out = [
        "**Host-speed probe: cached runs, driver CPU per operation, this host vs the phi table**",
        "",
        "| class | operation | records | measured us/op | table us/op | ratio | run-queue share |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['class']} | {r['operation']} | {r['records']:,} | {r['measured_us']:.3f} | {r['tabled_us']:.3f} "
            f"| {r['ratio']:.2f} | {r['runqueue_share']:.0%} |"
        )
    ratios = [r["ratio"] for r in rows]
    out += ["", f"factor (median ratio): {factor:.3f}; range {min(ratios):.2f}-{max(ratios):.2f}", ""]
    return "\n".join(out)


def ranking_table(rows: list[dict[str, Any]], title: str) -> str:
    out = [
        f"**{title}**",
        "",
        "| workload | designs | Spearman rho | rho given the start state | rho (free) | pick / best measured "
        "| pick / best (free) | best measured | pick / best, confirmation runs | rounds below, sign p | pick's class |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summary(rows):
        out.append(
            f"| {s['workload']} | {s['designs']} | {s['spearman_rho']:.2f} | {s['spearman_rho_given_state']:.2f} | "
            f"{s['spearman_rho_free']:.2f} | {s['pick_vs_best']:.2f} | {s['pick_vs_best_free']:.2f} | "
            f"{s['best_design']} | {s['pick_vs_best_confirmed']:.2f} | {s['confirm_rounds_pick_below']} of "
            f"{s['confirm_rounds']}, {s['confirm_sign_p']:.2f} | {s['pick_class']} |"
        )
    out.append("")
    out.append(f"targets: rho >= {TARGET_RHO}, pick >= {TARGET_PICK}x the best measured")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes and the quick grid (about half an hour)")
    ap.add_argument("--calibrate", action="store_true", help="recalibrate and rewrite phi.yaml first")
    ap.add_argument("--skip-grid", action="store_true", help="leave out the I/O validation grid")
    ap.add_argument("--skip-ranking", action="store_true", help="leave out the ranking checks")
    ap.add_argument(
        "--volumes", type=float, nargs="*", help="the emulated volumes' IOPS (default: gp3's 3,000 and 16,000)"
    )
    ap.add_argument(
        "--skip-tmpfs", action="store_true", help="leave out Fig. 4B on tmpfs (e.g. `cosine calibrate` just ran it)"
    )
    ap.add_argument("--repeats", type=int, default=3, help="ranking: runs per design, median reported [3]")
    ap.add_argument(
        "--confirm",
        type=int,
        default=CONFIRM_REPEATS,
        help=f"ranking: runs of the pick and its measured rivals again, each [{CONFIRM_REPEATS}]",
    )
    ap.add_argument(
        "--skip-volume-fig4b", action="store_true", help="leave out Fig. 4B on the volumes (their rankings still run)"
    )
    ap.add_argument(
        "--ranking-volumes",
        type=float,
        nargs="*",
        help="the volumes the ranking runs on (default: those of --volumes)",
    )
    ap.add_argument(
        "--tmpfs-warmup",
        action="store_true",
        help="Fig. 4B on tmpfs after the steady-state warm-up the volumes get (measure.cycle.steady_warmup)",
    )
    ap.add_argument(
        "--host-speed",
        action="store_true",
        help="probe this host's CPU against the calibration's first (measure.host_speed.host_speed) and scale "
        "the model's CPU seconds by it (the table's own predictions are kept beside)",
    )
    ap.add_argument("--out", type=Path, default=Path("runs/credibility"))
    a = ap.parse_args()
    if not 0 <= a.confirm <= MAX_REPEATS:
        ap.error(f"--confirm must be in 0..{MAX_REPEATS}, got {a.confirm}")
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    plan = QUICK_PLAN if a.quick else DEFAULT_PLAN
    cores = cpu_count()
    print(header())
    t0 = time.time()
    scale = 1.0
    if a.host_speed:
        hs = host_speed(plan)
        write_records(out / "host_speed.parquet", hs.rows)
        scale = hs.factor
        print(host_speed_table(hs.rows, scale))
    if a.calibrate:
        cal = calibrate(a.quick, write=True)
        write_calibration(cal, out)
        print(fig4b_table(cal.fig4b, "Fig. 4B on tmpfs (from the calibration run)"))
    elif not a.skip_tmpfs:
        rows = fig4b(plan, cores, warmup=a.tmpfs_warmup, cpu_scale=scale)
        write_records(out / "fig4b_tmpfs.parquet", rows)
        print(fig4b_table(rows, "Fig. 4B on tmpfs" + (", after the steady-state warm-up" if a.tmpfs_warmup else "")))
    print(f"\n({time.time() - t0:,.0f} s)\n")
    # The device mode: fewer operations (a few thousand per second at these IOPS).
    dev_plan = replace(plan, fig4b_ops=max(5000, plan.fig4b_ops // 10))
    volumes = VOLUMES if a.volumes is None else tuple((f"{v:,.0f}-IOPS", v) for v in a.volumes)
    for name, iops in () if a.skip_volume_fig4b else volumes:
        t = time.time()
        rows = fig4b(dev_plan, cores, device=volume(iops), warmup=True, cpu_scale=scale)
        write_records(out / f"fig4b_{int(iops)}iops.parquet", rows)
        print(
            fig4b_table(
                rows,
                f"Fig. 4B on an emulated {name} volume ({iops:,.0f} IOPS, {VOLUME_MIB_S:g} MiB/s, "
                f"{VOLUME_READ_LATENCY_S * 1e6:.0f} us reads)",
            )
        )
        print(f"\n({time.time() - t:,.0f} s)\n")
    records = 50_000 if a.quick else 200_000
    ops = 50_000 if a.quick else 200_000
    rankings = [] if a.skip_ranking else [("tmpfs", LOCAL_DEVICE, ops)]
    ranked = volumes if a.ranking_volumes is None else tuple((f"{v:,.0f}-IOPS", v) for v in a.ranking_volumes)
    rankings += [] if a.skip_ranking else [(v, volume(i), max(5000, ops // 10)) for v, i in ranked]
    for name, dev, n_ops in rankings:
        t = time.time()
        rows = ranking(records, n_ops, dev, repeats=a.repeats, cpu_scale=scale, confirm=a.confirm)
        write_records(out / f"ranking_{name.replace(' ', '_')}.parquet", rows)
        print(
            ranking_table(
                rows,
                f"Ranking on {name} ({records:,} records, {n_ops:,} operations, {thread_counts()[-1]} threads, "
                f"median of {a.repeats} runs per design)",
            )
        )
        print(f"\n({time.time() - t:,.0f} s)\n")
    if not a.skip_grid:
        t = time.time()
        n, m = QUICK_SIZE if a.quick else DEFAULT_SIZE
        v = validate(n, m, a.quick)
        write_records(out / "validation.parquet", v.rows)
        s, c = v.summary(), v.conservative_summary()
        print(f"**I/O accuracy, {'quick' if a.quick else 'full'} grid ({s['cases']} cases, {n:,} records)**\n")
        print("| group | mean accuracy | with the --conservative margin |")
        print("| --- | --- | --- |")
        print(f"| all | {s['mean_accuracy']:.1%} | {c['mean_accuracy']:.1%} |")
        for k, val in s["by_class"].items():
            print(f"| class {k} | {val:.1%} | {c['by_class'][k]:.1%} |")
        print(f"| conservative share | {s['conservative_share']:.0%} | {c['conservative_share']:.0%} |")
        cost = c["accuracy_cost"]
        print(f"\nmargin x{c['margin']:.3f}; it costs {cost:.1%} of mean accuracy ({time.time() - t:,.0f} s)")
    print(f"\ntotal {time.time() - t0:,.0f} s")


if __name__ == "__main__":
    main()
