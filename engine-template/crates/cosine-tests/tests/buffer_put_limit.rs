//! A buffer that holds every key of an update-only workload is still flushed: the memtable is
//! frozen at `buffer_put_limit * E_B` puts (overwrites included) if it is not full before, so its
//! write-ahead log stays bounded (before, one segment grew without end: 400,000 SETs of 50,000
//! keys left a 416 MB log and no flush). A buffer that fills first flushes at E_B distinct keys,
//! as before, and no write is lost across the flushes.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{files_with_ext, key, TempDir};

const KEYS: u64 = 40;

fn wal_bytes(dir: &std::path::Path) -> u64 {
    files_with_ext(dir, "wal").iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum()
}

#[test]
fn overwrites_of_a_buffered_key_set_flush_at_the_put_limit() {
    for p in Preset::ALL {
        let mut cfg = tiny(p);
        cfg.layout.buffer_bytes = 64 * cfg.entry_bytes() as u64; // E_B = 64 > KEYS: never full
        cfg.layout.buffer_put_limit = 2.0;
        let limit = cfg.buffer_put_limit();
        assert_eq!(limit, 128, "{p:?}");
        let dir = TempDir::new("buffer-put-limit");
        let e = Engine::open(dir.path(), &cfg).expect("open");
        let rounds = 40u64; // 1,600 puts: 12 limits
        let mut most_log = 0;
        for r in 1..=rounds {
            for k in 0..KEYS {
                e.put(&key(k), &r.to_be_bytes()).expect("put");
            }
            most_log = most_log.max(wal_bytes(dir.path()));
        }
        e.wait_idle().expect("idle");
        let flushes = e.stats().flushes;
        let puts = rounds * KEYS;
        // a flush each `limit` puts (the group that reaches it rotates before the next one)
        assert!(flushes >= puts / limit - 1 && flushes <= puts / limit + 1, "{p:?}: {flushes} flushes of {puts} puts");
        // the log: at most the active memtable's and the frozen ones' records
        let record = cosine_wal::encoded_len(&key(0), Some(&1u64.to_be_bytes())) as u64;
        assert!(most_log <= 4 * limit * record, "{p:?}: the log reached {most_log} bytes");
        for k in 0..KEYS {
            assert_eq!(e.get(&key(k)).expect("get"), Some(rounds.to_be_bytes().to_vec()), "{p:?}: key {k}");
        }
    }
}

#[test]
fn a_buffer_that_fills_first_flushes_at_its_distinct_keys() {
    for p in Preset::ALL {
        let flushes = |limit: f64| {
            let mut cfg = tiny(p);
            cfg.layout.buffer_bytes = 32 * cfg.entry_bytes() as u64; // E_B = 32
            cfg.layout.buffer_put_limit = limit;
            let dir = TempDir::new("buffer-put-limit-fills");
            let e = Engine::open(dir.path(), &cfg).expect("open");
            for k in 0..320 {
                e.put(&key(k), b"v").expect("put"); // new keys: full at 32 puts, before 2 x 32
            }
            e.wait_idle().expect("idle");
            e.stats().flushes
        };
        let (limited, unlimited) = (flushes(2.0), flushes(1e6));
        assert_eq!(limited, unlimited, "{p:?}: the put limit changed a filling buffer's flushes");
        assert!(limited >= 9, "{p:?}: {limited} flushes of 320 new keys at E_B = 32");
    }
}
