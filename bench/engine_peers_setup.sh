#!/usr/bin/env bash
# Installs what the benchmark peers need and builds them: Debian's RocksDB
# (librocksdb-dev, linked by the `rocksdb` crate; never compiled from source),
# libclang for the crate's bindgen step, and fjall from crates.io.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if ! dpkg -s librocksdb-dev libclang-dev >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q librocksdb-dev rocksdb-tools libclang-dev
fi
export ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu
cd "$ROOT/bench/peers"
cargo build --release
echo "built $ROOT/bench/peers/target/release/cosine-peers"
