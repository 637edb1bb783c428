#!/usr/bin/env bash
# Many-kill-point crash test of the Rust engine: a child applies writes with
# wal_sync = every_write and is SIGKILLed at random points (often mid flush or
# compaction); after each kill the database is reopened and every acknowledged
# write must be there with its latest value. Rounds are split over the four
# presets (rocksdb, wiredtiger, faster, hybrid).
#
#   bench/engine_crash.sh [ROUNDS]        (default 400)
#   COSINE_TEST_DIR=/path  to run on a real disk instead of /dev/shm
set -euo pipefail
cd "$(dirname "$0")/../engine-template"
ROUNDS="${1:-400}"
COSINE_CRASH_ROUNDS="$ROUNDS" cargo test --release -p cosine-tests --test crash_recovery \
    -- --ignored --nocapture many_kill_points 2>&1 | grep -E "kill points|test result|panicked|FAILED"
