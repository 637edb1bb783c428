//! A benchmark warm-up aligned to the merge cycle (`warmup_phase_aligned`) finds two merges
//! into the deepest level, measures their spacing and starts the measured phase where the run
//! lies farthest from the next ones; the engine counts a merge into the last level as a deep
//! merge and a merge between upper levels as none.

use cosine_bench::workload::{Dist, Distributions, Mix, Workload};
use cosine_bench::{aligned_phase, run, CosineKv};
use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use proptest::prelude::*;

fn updates(records: u64, operations: u64, warmup: u64, aligned: bool) -> Workload {
    Workload {
        records,
        operations,
        key_bytes: 16,
        value_bytes: 8,
        mix: Mix { update: 1.0, ..Mix::default() },
        distribution: Distributions { get: Dist::Uniform, put: Dist::Uniform },
        warmup_operations: warmup,
        warmup_phase_aligned: aligned,
        ..Workload::default()
    }
}

#[test]
fn the_warm_up_runs_to_the_phase_two_deep_merges_give() {
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = 16 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("warmup-deep");
    let kv = CosineKv(Engine::open(dir.path(), &cfg).expect("open"));
    let w = updates(300, 100, 1_000, true);
    let report = run(&kv, &w).expect("bench");
    let warm = &report["warmup"];
    let at: Vec<u64> = warm["deep_merges_at"].as_array().expect("two deep merges found").iter().filter_map(|v| v.as_u64()).collect();
    assert_eq!(at.len(), 2, "{warm}");
    assert!(w.warmup_operations < at[0] && at[0] < at[1], "the searches follow the fixed warm-up: {warm}");
    let phase = warm["phase"].as_u64().expect("phase");
    assert_eq!(phase, aligned_phase(w.operations, at[1] - at[0]));
    assert_eq!(warm["operations"].as_u64(), Some(at[1] + phase), "{warm}");
    assert!(kv.0.stats().deep_merges >= 2);
}

#[test]
fn without_deep_merges_the_search_ends_at_its_limit() {
    // a store of one level never merges into a deeper one: the search runs out
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = 4_096 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("warmup-none");
    let kv = CosineKv(Engine::open(dir.path(), &cfg).expect("open"));
    let report = run(&kv, &updates(100, 100, 50, true)).expect("bench");
    assert!(report["warmup"]["deep_merges_at"].is_null() && report["warmup"]["phase"].is_null(), "{}", report["warmup"]);
    assert_eq!(report["warmup"]["operations"].as_u64(), Some(50 + 50));
    assert_eq!(kv.0.stats().deep_merges, 0);
    // unaligned, or no warm-up: a fixed count
    for (warmup, aligned) in [(70, false), (0, true)] {
        let dir = TempDir::new("warmup-fixed");
        let kv = CosineKv(Engine::open(dir.path(), &cfg).expect("open"));
        let report = run(&kv, &updates(100, 100, warmup, aligned)).expect("bench");
        assert_eq!(report["warmup"]["operations"].as_u64(), Some(warmup));
    }
}

#[test]
fn merges_between_upper_levels_are_not_deep() {
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = 8 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("warmup-upper");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    for k in 0..3_000u64 {
        e.put(&key(k), b"v").expect("put");
    }
    e.wait_idle().expect("idle");
    let s = e.stats();
    let depth = s.levels.iter().filter(|l| l.entries > 0).count();
    assert!(depth >= 3, "a deep tree: {:?}", s.levels);
    let rewrites = s.compactions - s.trivial_moves;
    assert!(s.deep_merges >= 1 && s.deep_merges < rewrites, "{} deep of {rewrites} rewriting compactions", s.deep_merges);
}

proptest! {
    /// The run's start lies as far after a deep merge as its end lies before the next one, and
    /// both within one cycle.
    #[test]
    fn the_aligned_phase_centres_the_run_between_deep_merges(ops in 1u64..1_000_000, spacing in 1u64..100_000) {
        let p = aligned_phase(ops, spacing);
        prop_assert!(p < spacing);
        let end = (p + ops) % spacing;
        let to_next = if end == 0 { 0 } else { spacing - end };
        prop_assert!(p.abs_diff(to_next) <= 1, "start {p} after one, end {to_next} before the next");
    }
}
