//! `range(lo, n)` returns the first `n` live entries when tombstones in the active
//! memtable hide entries of a frozen one that is still waiting for its flush (a
//! scan first copies only `n` live entries of each memtable).

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};

#[test]
fn range_counts_only_live_entries_of_a_truncated_memtable() {
    for p in [Preset::RocksDb, Preset::Faster] {
        let mut cfg = tiny(p);
        cfg.layout.buffer_bytes = 4 * cfg.entry_bytes() as u64;
        // The flush races the read; repeat so the frozen memtable is usually still there.
        for round in 0..20 {
            let dir = TempDir::new("range-tombstones");
            let e = Engine::open(dir.path(), &cfg).expect("open");
            for k in [45, 55, 58, 53] {
                e.put(&key(k), b"v").expect("put");
            }
            e.delete(&key(45)).expect("delete"); // lands in a fresh memtable
            let got: Vec<Vec<u8>> = e.range(&key(31), 3).expect("range").into_iter().map(|(k, _)| k).collect();
            assert_eq!(got, vec![key(53), key(55), key(58)], "{p:?}, round {round}");
            e.close().expect("close");
        }
    }
}
