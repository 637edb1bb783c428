//! `stats().levels[i].lookup_hits` counts the lookups level i answered: a key found in the
//! memtable counts at no level, a key in a flushed run at the level holding it, a missing key
//! nowhere.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};

fn hits(e: &Engine) -> Vec<u64> {
    e.stats().levels.iter().map(|l| l.lookup_hits).collect()
}

#[test]
fn a_lookup_counts_at_the_level_that_answered_it() {
    let mut cfg = tiny(Preset::RocksDb);
    cfg.layout.buffer_bytes = 16 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("lookup-hits");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    for k in 0..2_000u64 {
        e.put(&key(k), b"v").expect("put");
    }
    e.wait_idle().expect("idle"); // every key on disk, the buffer empty
    let before = hits(&e);
    assert!(before.iter().all(|h| *h == 0), "no lookup yet: {before:?}");
    let levels = e.stats().levels.iter().filter(|l| l.entries > 0).count();
    assert!(levels >= 2, "a tree of several levels: {:?}", e.stats().levels);
    for k in 0..2_000u64 {
        assert!(e.get(&key(k)).expect("get").is_some());
    }
    let after = hits(&e);
    assert_eq!(after.iter().sum::<u64>(), 2_000, "each found key counts once: {after:?}");
    // missing keys and memtable hits count at no level
    e.get(&key(100_000)).expect("get");
    e.put(&key(1), b"w").expect("put");
    assert_eq!(e.get(&key(1)).expect("get").as_deref(), Some(&b"w"[..]));
    assert_eq!(hits(&e), after);
    // the counts follow the keys' levels: every level holding entries answered some lookups
    let s = e.stats();
    for l in s.levels.iter().filter(|l| l.entries > 0) {
        assert!(l.lookup_hits > 0, "level {} holds {} entries, answered none", l.level, l.entries);
    }
}
