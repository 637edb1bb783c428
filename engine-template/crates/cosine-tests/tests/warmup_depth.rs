//! A benchmark warm-up with `warmup_depth` overwrites keys until the tree is that deep (then
//! every key once more) before its `warmup_operations`: a tiered last level under overwrites
//! deepens only after some flushes, and a warm-up counted from the load can otherwise end just
//! after the deepening, or never reach it.

use cosine_bench::workload::{Dist, Distributions, Mix, Workload};
use cosine_bench::{run, CosineKv};
use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::TempDir;

fn updates(depth: Option<usize>) -> Workload {
    Workload {
        records: 400,
        operations: 10,
        key_bytes: 16,
        value_bytes: 8,
        mix: Mix { get: 0.5, update: 0.5, ..Mix::default() },
        distribution: Distributions { get: Dist::Uniform, put: Dist::Uniform },
        warmup_operations: 100,
        warmup_depth: depth,
        ..Workload::default()
    }
}

/// What a warm-up did: its `depth` (target, reached, puts; None when not asked for) and
/// operations, and the deepest level holding data after the run.
struct Warm {
    depth: Option<(u64, u64, u64)>,
    operations: u64,
    deepest: usize,
}

/// A tree whose one level is the last, tiered (Z = 4 runs) and exactly the load's size: the
/// loaded runs keep their keys under overwrites until the level passes its capacity.
fn report(w: &Workload) -> Warm {
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = 100 * cfg.entry_bytes() as u64;
    cfg.layout.size_ratio = 4.0;
    cfg.layout.runs_per_hot_level = 1;
    cfg.layout.runs_per_cold_level = 4;
    let dir = TempDir::new("warmup-depth");
    let kv = CosineKv(Engine::open(dir.path(), &cfg).expect("open"));
    let rep = run(&kv, w).expect("bench");
    let d = &rep["warmup"]["depth"];
    let field = |k: &str| d[k].as_u64().expect("a number");
    Warm {
        depth: if d.is_null() { None } else { Some((field("target"), field("reached"), field("puts"))) },
        operations: rep["warmup"]["operations"].as_u64().expect("operations"),
        deepest: kv.0.stats().levels.iter().filter(|l| l.entries > 0).map(|l| l.level).max().unwrap_or(0),
    }
}

#[test]
fn the_warm_up_goes_on_until_the_tree_is_as_deep_as_asked() {
    let plain = report(&updates(None));
    assert_eq!(plain.depth, None);
    let asked = plain.deepest + 1;
    let w = report(&updates(Some(asked)));
    let (target, reached, puts) = w.depth.expect("the report says what the depth step did");
    assert_eq!((target, reached), (asked as u64, w.deepest as u64));
    assert!(w.deepest > plain.deepest, "one level deeper than the plain warm-up's {}: {}", plain.deepest, w.deepest);
    // steps of an eighth of the 400 records, then every key once more
    assert!(puts > 400 && (puts - 400) % 50 == 0, "{puts} puts to deepen");
    assert_eq!(w.operations, plain.operations, "the mix's own warm-up is the same");
}

#[test]
fn a_depth_already_reached_costs_nothing() {
    let w = report(&updates(Some(1)));
    assert_eq!(w.depth, Some((1, w.deepest as u64, 0)));
}

#[test]
fn a_depth_of_zero_is_refused() {
    let w = updates(Some(0));
    assert!(w.validate().is_err_and(|e| e.contains("warmup_depth")));
}
