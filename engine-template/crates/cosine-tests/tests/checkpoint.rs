//! `Engine::checkpoint`: a copy of an open database made of its own files while a writer
//! goes on (the snapshot of a replicated shard, cosine-raft).
//!
//! One thread writes keys 0, 1, 2, ... in order (every fourth write deletes the key put
//! three writes before), on tiny designs (300-entry memtables: they rotate, flush and
//! compact while it writes); checkpoints are taken while it writes. Each checkpoint, opened as a
//! database of its own, must hold exactly the writes of a prefix of that sequence: keys
//! 0..n with their values and deletions, nothing from after n. And the writes after the
//! checkpoint must not reach it (the original keeps going, the copy does not change).

use cosine_config::presets::{tiny, Preset};
use cosine_config::{Config, WalSync};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Write `t` of the sequence: a put of key `t`, except every fourth, which deletes the key
/// put three writes before.
fn write(e: &Engine, t: u64) {
    if t % 4 == 3 {
        e.delete(&key(t - 3)).expect("delete");
    } else {
        e.put(&key(t), format!("v{t}").as_bytes()).expect("put");
    }
}

/// The value of key `i` after the first `n` writes.
fn expected(i: u64, n: u64) -> Option<Vec<u8>> {
    let put = i < n && i % 4 != 3;
    let deleted = i.is_multiple_of(4) && i + 3 < n;
    (put && !deleted).then(|| format!("v{i}").into_bytes())
}

/// The number of writes a database holds: the `n` whose state it equals (panics if none:
/// it does not hold a prefix of the writes).
fn prefix_len(db: &Engine, upto: u64) -> u64 {
    let got: Vec<Option<Vec<u8>>> = (0..upto + 8).map(|i| db.get(&key(i)).expect("get")).collect();
    let last_put = got.iter().rposition(Option::is_some).map_or(0, |i| i as u64 + 1);
    (last_put..last_put + 4)
        .find(|&n| got.iter().enumerate().all(|(i, v)| *v == expected(i as u64, n)))
        .unwrap_or_else(|| panic!("not a prefix of the writes (last put {last_put})"))
}

fn run(preset: Preset, wal_sync: WalSync) {
    let mut cfg: Config = tiny(preset);
    cfg.durability.wal_sync = wal_sync;
    // a memtable of 300 entries: the open WAL segment holds writes when a checkpoint is taken
    cfg.layout.buffer_bytes = 300 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("checkpoint");
    let db = dir.path().join("db");
    let e = Engine::open(&db, &cfg).expect("open");
    let written = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut taken = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && i < 4_000 {
                write(&e, i);
                i += 1;
                written.store(i, Ordering::Release);
            }
        });
        for c in 0..6 {
            while written.load(Ordering::Acquire) < 500 * (c + 1) {
                std::thread::yield_now();
            }
            let before = written.load(Ordering::Acquire);
            let dest = dir.path().join(format!("cp{c}"));
            e.checkpoint(&dest).expect("checkpoint");
            let after = written.load(Ordering::Acquire);
            taken.push((dest, before, after));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let total = written.load(Ordering::Acquire);
    let mut last = 0;
    for (dest, before, after) in &taken {
        assert!(!dest.join("LOCK").exists(), "a checkpoint takes no lock file");
        let cp = Engine::open(dest, &cfg).expect("open the checkpoint");
        // writes acknowledged before the call are in it; (a write finishing during the call may be)
        let n = prefix_len(&cp, total);
        assert!(n >= *before && n <= *after + 1, "checkpoint of {n} writes, taken between {before} and {after}");
        assert!(n >= last);
        last = n;
        cp.close().expect("close");
    }
    // the original is untouched by the copies: every write is there
    assert_eq!(prefix_len(&e, total), total);
    e.close().expect("close");
}

#[test]
fn checkpoints_of_a_tree_hold_a_prefix_of_the_writes() {
    run(Preset::RocksDb, WalSync::None);
    run(Preset::Hybrid, WalSync::GroupCommit);
}

#[test]
fn checkpoints_of_a_hash_log_hold_a_prefix_of_the_writes() {
    run(Preset::Faster, WalSync::None);
}

#[test]
fn a_checkpoint_into_an_existing_directory_is_refused() {
    let cfg = tiny(Preset::RocksDb);
    let dir = TempDir::new("checkpoint-exists");
    let e = Engine::open(dir.path().join("db"), &cfg).expect("open");
    e.put(&key(1), b"x").expect("put");
    std::fs::create_dir(dir.path().join("cp")).expect("mkdir");
    assert!(e.checkpoint(&dir.path().join("cp")).is_err());
    e.close().expect("close");
}
