//! Crash consistency: a child applies writes and is SIGKILLed at random points,
//! often in the middle of a flush or compaction, for every preset, every
//! `wal_sync` policy, and one or two writer threads. After every kill the
//! database reopens; each thread's keys hold the state after a prefix of its
//! writes, and with `every_write` and `group_commit` that prefix covers every
//! acknowledged write (with `none`, writes still buffered in the process may be
//! lost, but never out of order). Rounds accumulate on one directory, so
//! recovery of a recovered database is exercised too. The long soak of the same
//! harness is the `crash-soak` binary (bench/engine_crash.sh).

use cosine_config::presets::Preset;
use cosine_tests::crash::{crash_rounds, MODES};

#[test]
fn acknowledged_writes_survive_sigkill() {
    let mut kills = 0;
    for (i, p) in Preset::ALL.into_iter().enumerate() {
        for (j, m) in MODES.into_iter().enumerate() {
            for threads in [1, 2] {
                kills += crash_rounds(env!("CARGO_BIN_EXE_crash-child"), p, m, threads, 2, 17 + (i * 10 + j) as u64 + 100 * threads).kills;
            }
        }
    }
    eprintln!("crash test: {kills} kill points tried");
    assert!(kills >= 40, "{kills} kill points");
}
