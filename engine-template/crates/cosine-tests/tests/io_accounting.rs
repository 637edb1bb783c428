//! Differential check of block-I/O accounting on tiny deterministic cases:
//! the counters equal what the contract says each probe costs.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::{Engine, OpKind};
use cosine_tests::{key, one_hot_level, TempDir};

// The designs below are one hot level holding one run (cosine_tests::one_hot_level): E_B = 100,
// T = 100, so 1000 keys never leave level 1.

fn load(e: &Engine, n: u64) {
    // Even record indexes only, so odd ones are absent keys inside the key range.
    for i in 0..n {
        e.put(&key(2 * i), b"value").expect("put");
    }
    e.wait_idle().expect("idle");
}

#[test]
fn hot_level_lookup_costs_one_block_per_probed_run() {
    let dir = TempDir::new("io-hot");
    let e = Engine::open(dir.path(), &one_hot_level(0.0)).expect("open");
    load(&e, 1000);
    let lv = e.stats().levels;
    assert_eq!(lv.iter().filter(|l| l.entries > 0).count(), 1, "{lv:?}");
    assert_eq!(lv[0].runs, 1);
    for i in 0..1000 {
        let (v, io) = e.get_counted(&key(2 * i)).expect("get");
        assert!(v.is_some());
        assert_eq!((io.data_read, io.index_read, io.filter_read), (1, 0, 0), "found key {i}");
        // Without a filter an absent key inside the range still costs its one block;
        // past the largest key the in-memory fence pointers rule the run out.
        let (v, io) = e.get_counted(&key(2 * i + 1)).expect("get");
        assert!(v.is_none());
        assert_eq!(io.blocks_read(), u64::from(i < 999), "absent key {i}");
    }
    let s = e.stats();
    assert_eq!(s.op(OpKind::GetFound).count, 1000);
    assert_eq!(s.op(OpKind::GetFound).io.blocks_read(), 1000);
    assert_eq!(s.op(OpKind::GetEmpty).io.blocks_read(), 999);
}

#[test]
fn bloom_filters_skip_absent_keys() {
    let dir = TempDir::new("io-bloom");
    let e = Engine::open(dir.path(), &one_hot_level(10.0)).expect("open");
    load(&e, 1000);
    let mut reads = 0;
    for i in 0..1000 {
        reads += e.get_counted(&key(2 * i + 1)).expect("get").1.blocks_read();
    }
    // 10 bits/key: false-positive rate about 1 %.
    assert!(reads < 40, "{reads} blocks for 1000 absent keys");
}

#[test]
fn cold_level_lookup_reads_an_index_block_then_a_data_block() {
    let mut cfg = one_hot_level(10.0);
    cfg.layout.hot_levels = 0; // every level cold: fence pointers on disk, no filters
    let dir = TempDir::new("io-cold");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    load(&e, 1000);
    for i in 0..200 {
        let (v, io) = e.get_counted(&key(2 * i)).expect("get");
        assert!(v.is_some());
        assert_eq!((io.index_read, io.data_read), (1, 1));
    }
}

#[test]
fn buffer_and_block_cache_hits_are_free() {
    let mut cfg = one_hot_level(0.0);
    cfg.layout.block_cache_bytes = 1 << 20;
    let dir = TempDir::new("io-cache");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    load(&e, 1000);
    e.put(&key(1), b"buffered").expect("put");
    assert_eq!(e.get_counted(&key(1)).expect("get").1.blocks_read(), 0);
    assert_eq!(e.get_counted(&key(10)).expect("get").1.blocks_read(), 1);
    assert_eq!(e.get_counted(&key(10)).expect("get").1.blocks_read(), 0);
}

#[test]
fn flush_writes_ceil_entries_over_b_data_blocks() {
    let cfg = one_hot_level(0.0); // E_B = 100, B = 4
    let dir = TempDir::new("io-flush");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    for i in 0..101 {
        e.put(&key(i), b"v").expect("put");
    }
    e.flush().expect("flush");
    let s = e.stats();
    assert_eq!(s.flushes, 2);
    // First flush: 100 entries = 25 blocks. Second: 1 entry merged into the run of
    // 100 (leveling rewrites it): 101 entries = 26 blocks; it reads the 25 back.
    assert_eq!(s.flush.data_written, 25 + 26);
    assert_eq!(s.flush.data_read, 25);
    assert_eq!(s.flush.filter_written, 0);
}

#[test]
fn hashlog_get_costs_one_block_if_present_zero_if_absent() {
    let mut cfg = tiny(Preset::Faster);
    cfg.layout.buffer_bytes = 50 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("io-lsh");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    load(&e, 500);
    for i in 0..500 {
        assert_eq!(e.get_counted(&key(2 * i)).expect("get").1.blocks_read(), 1);
        assert_eq!(e.get_counted(&key(2 * i + 1)).expect("get").1.blocks_read(), 0);
    }
}
