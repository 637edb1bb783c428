"""The measured headline (issue 4 section 5, issue 5 section 3; the paper's Fig. 5 on real runs).

    .venv/bin/python bench/bench_engines.py [--records 1000000] [--ops 500000] [--threads 2] [--peers]

For each of YCSB A-F, at one memory budget that fits this machine (a quarter of
the data, for buffer + filters + fences + block cache), run side by side in
one session:
  * the design Cosine picks for that memory and that workload (the model with
    the calibrated phi table, solver/local.py),
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
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine import TEMPLATE, build, run, workload_json  # noqa: E402
from bench.validate import KEY, MEMORY_SHARE, PRESET_BUFFER_SHARE, VALUE  # noqa: E402
from cost_models.cpu import phi_table  # noqa: E402
from solver.local import local_engine_toml  # noqa: E402
from solver.render import engine_sections, preset_design_entry, to_toml  # noqa: E402
from specs.schema import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / "peers" / "target" / "release" / "cosine-peers"


def preset_config(name: str, records: int, memory: float, threads: int) -> str:
    data = records * (KEY + VALUE)
    d = preset_design_entry(name, records, KEY, VALUE, memory)
    d["buffer_bytes"] = PRESET_BUFFER_SHARE * data
    secs = engine_sections(d, KEY, VALUE, {"get": 1.0}, name, wal_sync="none")
    used = d["buffer_bytes"] + d.get("fence_bytes", 0.0) + sum(
        b / 8 * records for b in (d.get("bloom_bits_per_level") or [0.0])[:1])
    secs["layout"]["block_cache_bytes"] = int(max(0.0, memory - used))
    secs["algorithms"]["threads"] = threads
    return to_toml(secs)


def peer(engine: str, config: str, wl: dict, cache: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"cosine-peer-{engine}-") as tmp:
        t = Path(tmp)
        (t / "engine.toml").write_text(config)
        (t / "w.json").write_text(json.dumps(wl))
        res = subprocess.run([str(PEERS), "--engine", engine, "--config", str(t / "engine.toml"), "--workload",
                              str(t / "w.json"), "--dir", str(t / "db"), "--cache-bytes", str(cache), "--json"],
                             capture_output=True, text=True, check=False)
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
    common = [f"--db={db}", f"--num={records}", f"--key_size={KEY}", f"--value_size={VALUE}",
              f"--write_buffer_size={buffer}", f"--cache_size={cache}", "--bloom_bits=10",
              "--compression_type=none", "--max_bytes_for_level_multiplier=10", "--disable_wal=true",
              "--histogram=true"]
    try:
        subprocess.run([exe, *common, "--benchmarks=fillrandom", "--threads=1"], check=True,
                       capture_output=True, text=True)
        res = subprocess.run([exe, *common, *DB_BENCH[c], "--use_existing_db=true", f"--threads={threads}",
                              f"--reads={ops // threads}", f"--writes={ops // threads}"],
                             check=True, capture_output=True, text=True)
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--ops", type=int, default=500_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--workloads", default="abcdef")
    a = ap.parse_args()
    build(TEMPLATE)
    if a.peers and not PEERS.is_file():
        subprocess.run([str(ROOT / "bench" / "engine_peers_setup.sh")], check=True)
    n = a.records
    data = n * (KEY + VALUE)
    memory = MEMORY_SHARE * data
    t_block = float(phi_table().get("local_block_seconds", 1e-6))
    root = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; {n:,} records of "
          f"{KEY}+{VALUE} B, memory budget {memory / 2**20:.0f} MiB, {a.threads} threads, {a.ops:,} ops per run; "
          f"data on {root}")
    head = f"{'workload':>8} {'engine':>22} {'class':>7} {'ops/s':>10} {'x base':>7} {'p99 us':>8}"
    print(head)
    summary = []
    for c in a.workloads:
        spec = load_spec(ROOT / "specs" / f"ycsb_{c}.yaml")
        spec = replace(spec, workload=replace(spec.workload, key_bytes=KEY, value_bytes=VALUE))
        wl = workload_json(spec, n, a.ops, a.threads)
        secs, entry = local_engine_toml(spec, n, memory, a.threads, iops=a.threads / t_block,
                                        name=f"cosine-ycsb_{c}", wal_sync="none")
        configs = {"cosine": to_toml(secs)}
        for p in ("rocksdb", "wiredtiger", "faster"):
            configs[f"preset-{p}"] = preset_config(p, n, memory, a.threads)
        results = {}
        for name, text in configs.items():
            db = root / f"cosine-bench-{os.getpid()}-{name}"
            try:
                results[name] = run(TEMPLATE, text, wl, data_dir=db)
            finally:
                shutil.rmtree(db, ignore_errors=True)
        if a.peers:
            rocks_cfg = configs["preset-rocksdb"]
            import tomllib

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
            summary.append({"workload": f"ycsb_{c}", "engine": name, "class": cls, "ops": x, "ratio": x / base,
                            "p99_us": r["run"]["latency_us"]["p99"], "base": base_key})
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "engines.json").write_text(json.dumps(summary, indent=1))
    print(f"(ratios against {'real RocksDB' if a.peers else 'the RocksDB preset'}; raw rows in bench/out/engines.json)")


if __name__ == "__main__":
    main()
