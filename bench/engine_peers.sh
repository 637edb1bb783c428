#!/usr/bin/env bash
# Cosine presets vs RocksDB vs fjall on one workload (default: load 1M records of
# 16 B keys / 100 B values = puts/s, then 1M uniform gets = gets/s, one thread).
# Every engine gets the buffer size of the rocksdb preset (4 MiB) and the same
# block cache (CACHE bytes, default 8 MiB; fjall needs one to be usable).
#
#   bench/engine_peers_setup.sh            # once
#   bench/engine_peers.sh [WORKLOAD.json] [CACHE]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${1:-$ROOT/engine-template/workloads/get_uniform_1m.json}"
CACHE="${2:-8388608}"
P="$ROOT/bench/peers/target/release/cosine-peers"
[ -x "$P" ] || "$ROOT/bench/engine_peers_setup.sh"
OUT="$ROOT/bench/out"; mkdir -p "$OUT"
cd "$ROOT/engine-template"
run() { # name engine preset cache
    "$P" --engine "$2" --config "presets/$3.toml" --workload "$W" --dir "$OUT/peers-data/$1" --cache-bytes "$4" --json > "$OUT/peers_$1.json"
}
for p in rocksdb wiredtiger faster hybrid; do run "cosine-$p" cosine "$p" "$CACHE"; done
run cosine-rocksdb-nocache cosine rocksdb 0
run rocksdb rocksdb rocksdb "$CACHE"
run fjall fjall rocksdb "$CACHE"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
names = ["cosine-rocksdb", "cosine-rocksdb-nocache", "cosine-wiredtiger", "cosine-faster", "cosine-hybrid", "rocksdb", "fjall"]
rows = {n: json.load(open(os.path.join(out, f"peers_{n}.json"))) for n in names}
base = rows["rocksdb"]
print(f'{"engine":>24} {"puts/s":>10} {"x rocksdb":>9} {"gets/s":>10} {"x rocksdb":>9} {"get p99 us":>10}')
for n, r in rows.items():
    lp, rg = r["load"]["throughput_ops"], r["run"]["throughput_ops"]
    print(f'{n:>24} {lp:>10.0f} {lp / base["load"]["throughput_ops"]:>9.2f} {rg:>10.0f} {rg / base["run"]["throughput_ops"]:>9.2f} {r["run"]["latency_us"]["p99"]:>10.1f}')
PY
