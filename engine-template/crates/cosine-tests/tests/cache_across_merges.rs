//! A merge carries its inputs' cached blocks over to its output (cosine_run::warm): keys that
//! were cached before a merge rewrote their run are read afterwards with no block I/O and
//! with the merge's values; keys that were not cached are not cached by it.

use cosine_config::Config;
use cosine_engine::Engine;
use cosine_tests::{key, one_hot_level, TempDir};

// One hot level holding one run (1000 keys never leave level 1), a block cache holding all of it.
fn cached_level() -> Config {
    let mut c = one_hot_level(0.0);
    c.layout.block_cache_bytes = 4 << 20;
    c
}

fn value(i: u64, round: u64) -> Vec<u8> {
    format!("value-{i}-round-{round}").into_bytes()
}

/// Puts every `step`-th key of `0..n` with round `round`'s value, then flushes and waits.
fn write_round(e: &Engine, n: u64, step: usize, round: u64) {
    for i in (0..n).step_by(step) {
        e.put(&key(i), &value(i, round)).expect("put");
    }
    e.flush().expect("flush");
    e.wait_idle().expect("idle");
}

fn blocks_to_read(e: &Engine, keys: impl Iterator<Item = u64>, round: impl Fn(u64) -> u64) -> u64 {
    let mut blocks = 0;
    for i in keys {
        let (v, io) = e.get_counted(&key(i)).expect("get");
        assert_eq!(v.as_deref(), Some(value(i, round(i)).as_slice()), "key {i}");
        blocks += io.blocks_read();
    }
    blocks
}

#[test]
fn the_cached_keys_stay_cached_through_a_merge_with_the_new_values() {
    let dir = TempDir::new("warm-merge");
    let e = Engine::open(dir.path(), &cached_level()).expect("open");
    write_round(&e, 1000, 1, 0);
    assert!(blocks_to_read(&e, 0..400, |_| 0) > 0, "the first reads miss");
    assert_eq!(blocks_to_read(&e, 0..400, |_| 0), 0, "then the blocks are cached");
    // overwrite every third key and flush: leveling rewrites the whole run into new files
    write_round(&e, 1000, 3, 1);
    let round = |i: u64| u64::from(i.is_multiple_of(3));
    assert_eq!(blocks_to_read(&e, 0..400, round), 0, "the keys cached before the merge are cached after it");
    // the keys no read cached before the merge are read from the new files, once
    let cold = blocks_to_read(&e, 400..1000, round);
    assert_eq!(cold, (1000 - 400) / 4, "one block read for every 4 keys never read before");
    assert_eq!(blocks_to_read(&e, 0..1000, round), 0);
}

#[test]
fn without_a_block_cache_a_merge_caches_nothing() {
    let mut cfg = cached_level();
    cfg.layout.block_cache_bytes = 0;
    let dir = TempDir::new("warm-nocache");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    write_round(&e, 400, 1, 0);
    write_round(&e, 400, 2, 1);
    let round = |i: u64| u64::from(i.is_multiple_of(2));
    assert_eq!(blocks_to_read(&e, 0..400, round), 400, "every get reads its block");
}
