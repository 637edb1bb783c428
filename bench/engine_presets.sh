#!/usr/bin/env bash
# Runs cosine-bench for the four preset designs on one workload and prints one
# JSON report per design (contract section 3), plus a summary line each.
#
#   bench/engine_presets.sh [WORKLOAD.json] [DATA_DIR]
#   default workload: engine-template/workloads/get_uniform_1m.json
#   (1M records x (16 B key, 100 B value) loaded = puts/s, then 1M uniform gets)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORKLOAD="${1:-$ROOT/engine-template/workloads/get_uniform_1m.json}"
DATA="${2:-$ROOT/bench/out/engine-data}"
mkdir -p "$ROOT/bench/out"
cd "$ROOT/engine-template"
cargo build --release -q --bin cosine-bench
for p in rocksdb wiredtiger faster hybrid; do
    out="$ROOT/bench/out/engine_${p}.json"
    ./target/release/cosine-bench --config "presets/$p.toml" --workload "$WORKLOAD" --dir "$DATA/$p" --json > "$out"
    python3 - "$out" "$p" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["per_op"].get("get", {})
print(f'{sys.argv[2]:>10}: load {r["load"]["throughput_ops"]:>10.0f} puts/s   run {r["run"]["throughput_ops"]:>10.0f} ops/s   '
      f'blocks/get {g.get("blocks_read", 0) / max(1, g.get("count", 1)):.3f}   p99 {r["run"]["latency_us"]["p99"]:.1f} us')
PY
done
