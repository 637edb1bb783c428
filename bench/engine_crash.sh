#!/usr/bin/env bash
# Many-kill-point crash soak of the Rust engine: a child applies writes (one or
# two threads) and is SIGKILLed at random points (often mid flush or
# compaction); after each kill the database is reopened and checked: each
# thread's keys hold the state after a prefix of its writes, covering every
# acknowledged write under wal_sync = every_write and group_commit (under none,
# writes still buffered in the process may be lost, never reordered). Rounds are
# split evenly over the 4 presets x 3 WAL policies x {1, 2} threads.
#
#   bench/engine_crash.sh [ROUNDS]        (default 1200: >= 1,000 kill points)
#   COSINE_TEST_DIR=/path  to run on a real disk instead of /dev/shm
set -euo pipefail
cd "$(dirname "$0")/../engine-template"
ROUNDS="${1:-1200}"
cargo build --release -q -p cosine-tests --bins
target/release/crash-soak "$ROUNDS"
