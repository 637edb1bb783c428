//! A benchmark warm-up with `warmup_buffered` ends with the buffer holding the asked-for
//! entries: past the next flush when it holds more, filled up to the target when it holds fewer.

use cosine_bench::workload::{Dist, Distributions, Mix, Workload};
use cosine_bench::{run, CosineKv};
use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::TempDir;

fn inserts(warmup: u64, target: Option<u64>) -> Workload {
    Workload {
        records: 200,
        operations: 10,
        key_bytes: 16,
        value_bytes: 8,
        mix: Mix { get: 0.5, insert: 0.5, ..Mix::default() },
        distribution: Distributions { get: Dist::Latest { theta: 0.99 }, put: Dist::Uniform },
        warmup_operations: warmup,
        warmup_buffered: target,
        ..Workload::default()
    }
}

/// (entries the measured phase started with, as the report says, or the buffer after the run
/// without a target; flushes of the load, the warm-up and the run)
fn warm(buffer_entries: u64, w: &Workload) -> (u64, u64) {
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = buffer_entries * cfg.entry_bytes() as u64;
    let dir = TempDir::new("warmup-buffer");
    let kv = CosineKv(Engine::open(dir.path(), &cfg).expect("open"));
    let report = run(&kv, w).expect("bench");
    let start = match w.warmup_buffered {
        Some(_) => report["warmup"]["buffered"].as_u64().expect("the report says what the buffer held"),
        None => kv.0.stats().buffered,
    };
    (start, kv.0.stats().flushes)
}

#[test]
fn a_buffer_below_the_target_is_filled_to_it() {
    // the load's 200 records and ~50 of 100 warm-up operations' inserts: ~250 entries of 400
    let (start, _) = warm(400, &inserts(100, Some(300)));
    assert!((300..300 + 16).contains(&start), "started with {start} entries, target 300");
}

#[test]
fn a_buffer_above_the_target_is_flushed_first() {
    let (plain, flushes) = warm(400, &inserts(100, None));
    assert!(plain > 150 && flushes == 0, "the plain warm-up leaves {plain} entries, {flushes} flushes");
    let (start, flushes) = warm(400, &inserts(100, Some(100)));
    assert!((100..100 + 16).contains(&start), "started with {start} entries, target 100");
    assert!(flushes >= 1, "the buffer went through a flush");
}

#[test]
fn without_a_target_the_report_has_none() {
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = 400 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("warmup-buffer-none");
    let kv = CosineKv(Engine::open(dir.path(), &cfg).expect("open"));
    let report = run(&kv, &inserts(50, None)).expect("bench");
    assert!(report["warmup"]["buffered"].is_null(), "{}", report["warmup"]);
}

#[test]
fn a_target_of_nothing_starts_just_after_a_flush() {
    let (start, flushes) = warm(400, &inserts(100, Some(0)));
    assert!(start < 16 && flushes >= 1, "started with {start} entries after {flushes} flushes");
}
