"""The measured headline (issue 4 section 5, issue 5 section 3; the paper's Fig. 5 on real runs).

    .venv/bin/python -m bench.bench_engines [--records 1000000] [--ops 500000] [--threads 2] [--peers]

For each of YCSB A-F, at one memory budget that fits this machine (a quarter of
the data, for buffer + filters + fences + block cache), run side by side in
one session:
  * the design Cosine picks for that memory and that workload (the model with
    the calibrated phi table, measure/local.py),
  * the RocksDB / WiredTiger / FASTER presets rendered from the template (the
    paper's 1%-of-data buffer, the rest of the budget as block cache),
  * with --peers: real RocksDB (Debian's librocksdb via the rocksdb crate,
    T=10, 10 bits/key, compression off, the preset's buffer and the same
    cache) and fjall, through the same driver and workload.json.
Prints throughput, ratio to real RocksDB (or to the RocksDB preset without
--peers), and p99 latency. Setup for peers: bench/engine_peers_setup.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import replace
from pathlib import Path

from measure.engine import PEERS_BINARY, TEMPLATE, build, run, scan_capped_ops, workload_json
from measure.grid import KEY, MEMORY_SHARE, PRESET_BUFFER_SHARE, VALUE
from measure.local import local_engine_toml
from render.config import engine_sections, preset_design_entry, to_toml
from specs.schema import load_spec
from specs.vocab import WalSync

ROOT = Path(__file__).resolve().parent.parent


def preset_config(name: str, records: int, memory: float, threads: int) -> str:
    data = records * (KEY + VALUE)
    d = replace(preset_design_entry(name, records, KEY, VALUE, memory), buffer_bytes=PRESET_BUFFER_SHARE * data)
    secs = engine_sections(d, KEY, VALUE, {"get": 1.0}, name, wal_sync=WalSync.NONE)
    used = d.buffer_bytes + d.fence_bytes + sum(b / 8 * records for b in (d.bloom_bits_per_level or [0.0])[:1])
    secs["layout"]["block_cache_bytes"] = int(max(0.0, memory - used))
    secs["algorithms"]["threads"] = threads
    return to_toml(secs)


def peer(engine: str, config: str, wl: dict, cache: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"cosine-peer-{engine}-") as tmp:
        t = Path(tmp)
        (t / "engine.toml").write_text(config)
        (t / "w.json").write_text(json.dumps(wl))
        res = subprocess.run(
            [
                str(PEERS_BINARY),
                "--engine",
                engine,
                "--config",
                str(t / "engine.toml"),
                "--workload",
                str(t / "w.json"),
                "--dir",
                str(t / "db"),
                "--cache-bytes",
                str(cache),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if res.returncode != 0:
        raise RuntimeError(f"{engine}: {res.stderr.strip().splitlines()[-1] if res.stderr else 'failed'}")
    return json.loads(res.stdout)


# YCSB workload -> db_bench's nearest built-in benchmark. db_bench 7.x has no
# zipfian or "latest" key chooser and no mixed read/RMW run: D uses B's mix,
# E runs scans only, F runs read-modify-writes only.
DB_BENCH = {
    "a": ["--benchmarks=readrandomwriterandom", "--readwritepercent=50"],
    "b": ["--benchmarks=readrandomwriterandom", "--readwritepercent=95"],
    "c": ["--benchmarks=readrandom"],
    "d": ["--benchmarks=readrandomwriterandom", "--readwritepercent=95"],
    "e": ["--benchmarks=seekrandom", "--seek_nexts=50"],
    "f": ["--benchmarks=updaterandom"],
}


def db_bench(c: str, records: int, ops: int, threads: int, buffer: int, cache: int, root: Path) -> dict | None:
    """Load `records` keys with db_bench fillrandom, then run YCSB-`c`'s nearest benchmark; None if absent."""
    exe = shutil.which("db_bench")
    if exe is None:
        return None
    db = root / f"cosine-dbbench-{os.getpid()}"
    common = [
        f"--db={db}",
        f"--num={records}",
        f"--key_size={KEY}",
        f"--value_size={VALUE}",
        f"--write_buffer_size={buffer}",
        f"--cache_size={cache}",
        "--bloom_bits=10",
        "--compression_type=none",
        "--max_bytes_for_level_multiplier=10",
        "--disable_wal=true",
        "--histogram=true",
    ]
    try:
        subprocess.run(
            [exe, *common, "--benchmarks=fillrandom", "--threads=1"], check=True, capture_output=True, text=True
        )
        res = subprocess.run(
            [
                exe,
                *common,
                *DB_BENCH[c],
                "--use_existing_db=true",
                f"--threads={threads}",
                f"--reads={ops // threads}",
                f"--writes={ops // threads}",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(db, ignore_errors=True)
    return parse_db_bench(res.stdout)


def parse_db_bench(out: str) -> dict:
    """Throughput (ops/s, the benchmark line) and p99 (µs, worst histogram) from db_bench's report."""
    ops = p99 = float("nan")
    for line in out.splitlines():
        parts = line.split()
        if "micros/op" in line and "ops/sec" in parts:
            ops = float(parts[parts.index("ops/sec") - 1])
        if line.startswith("Percentiles:") and "P99:" in parts:  # mixed runs print one per op type: keep the worst
            p = float(parts[parts.index("P99:") + 1])
            p99 = p if p99 != p99 else max(p99, p)
    return {"run": {"throughput_ops": ops, "latency_us": {"p99": p99}}}


def write_share(mix: dict[str, float]) -> float:
    """Share of operations that write (and so fill the buffer)."""
    return sum(mix.get(op, 0.0) for op in ("insert", "update", "rmw"))


def steady_ops(ops: int, cycles: float, buffer_entries: float, mix: dict[str, float], max_ops: int) -> int:
    """Operations a run needs to see `cycles` buffer flushes (the model's costs are cycle averages).

    A short run of a design with a large buffer measures where the load left
    its flush/merge cycle (one whole-level merge, or none), not its steady
    state; every engine in a workload runs the same count.
    """
    writes = write_share(mix)
    if writes <= 0:
        return ops
    return int(min(max_ops, max(ops, cycles * buffer_entries / writes)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--ops", type=int, default=500_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--workloads", default="abcdef")
    ap.add_argument(
        "--cycles",
        type=float,
        default=2.0,
        help="run at least this many buffer flush cycles of the Cosine design (steady state)",
    )
    ap.add_argument("--max-ops", type=int, default=3_000_000)
    a = ap.parse_args()
    build(TEMPLATE)
    if a.peers and not PEERS_BINARY.is_file():
        subprocess.run([str(ROOT / "bench" / "engine_peers_setup.sh")], check=True)
    n = a.records
    data = n * (KEY + VALUE)
    memory = MEMORY_SHARE * data
    root = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; {n:,} records of "
        f"{KEY}+{VALUE} B, memory budget {memory / 2**20:.0f} MiB, {a.threads} threads, {a.ops:,} ops per run; "
        f"data on {root}"
    )
    head = f"{'workload':>8} {'engine':>22} {'class':>7} {'ops/s':>10} {'x base':>7} {'p99 us':>8}"
    print(head)
    summary = []
    for c in a.workloads:
        spec = load_spec(ROOT / "specs" / f"ycsb_{c}.yaml")
        spec = replace(spec, workload=replace(spec.workload, key_bytes=KEY, value_bytes=VALUE))
        secs, entry = local_engine_toml(spec, n, memory, a.threads, name=f"cosine-ycsb_{c}", wal_sync=WalSync.NONE)
        buffer_entries = entry.buffer_bytes / (KEY + VALUE)
        n_ops = steady_ops(a.ops, a.cycles, buffer_entries, spec.workload.operations, a.max_ops)
        if n_ops > a.ops:
            cyc = n_ops * write_share(spec.workload.operations) / buffer_entries
            print(f"  ycsb_{c}: {n_ops:,} ops ({cyc:.1f} buffer cycles of the Cosine design)")
        wl = workload_json(spec, n, n_ops, a.threads)
        configs = {"cosine": to_toml(secs)}
        for p in ("rocksdb", "wiredtiger", "faster"):
            configs[f"preset-{p}"] = preset_config(p, n, memory, a.threads)
        results = {}
        for name, text in configs.items():
            db = root / f"cosine-bench-{os.getpid()}-{name}"
            w = wl
            if tomllib.loads(text)["design"]["class"] == "lsh":  # O(N) scans: fewer ops, same mix
                lsh_ops = scan_capped_ops(n_ops, n, spec.workload.operations.get("range", 0.0))
                if lsh_ops < n_ops:
                    print(f"  {name}: {lsh_ops:,} ops (hash-log scans visit every key)")
                    w = workload_json(spec, n, lsh_ops, a.threads)
            try:
                results[name] = run(TEMPLATE, text, w, data_dir=db)
            finally:
                shutil.rmtree(db, ignore_errors=True)
        if a.peers:
            rocks_cfg = configs["preset-rocksdb"]
            cache = int(tomllib.loads(rocks_cfg)["layout"]["block_cache_bytes"])
            for eng in ("rocksdb", "fjall"):
                try:
                    results[f"real-{eng}"] = peer(eng, rocks_cfg, wl, cache)
                except RuntimeError as exc:
                    print(f"  {eng}: {exc}")
            buffer = int(tomllib.loads(rocks_cfg)["layout"]["buffer_bytes"])
            dbb = db_bench(c, n, a.ops, a.threads, buffer, cache, root)
            if dbb is not None:
                results["db_bench"] = dbb
        base_key = "real-rocksdb" if "real-rocksdb" in results else "preset-rocksdb"
        base = results[base_key]["run"]["throughput_ops"]
        for name, r in results.items():
            x = r["run"]["throughput_ops"]
            cls = r.get("class", "-")
            print(f"ycsb_{c:>3} {name:>22} {cls:>7} {x:>10,.0f} {x / base:>7.2f} {r['run']['latency_us']['p99']:>8.1f}")
            summary.append(
                {
                    "workload": f"ycsb_{c}",
                    "engine": name,
                    "class": cls,
                    "ops": x,
                    "ratio": x / base,
                    "p99_us": r["run"]["latency_us"]["p99"],
                    "base": base_key,
                }
            )
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "engines.json").write_text(json.dumps(summary, indent=1))
    print(f"(ratios against {'real RocksDB' if a.peers else 'the RocksDB preset'}; raw rows in bench/out/engines.json)")


if __name__ == "__main__":
    main()
