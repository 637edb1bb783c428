//! `Engine::get_with` (the value handed to a closure where it lies, cosine-server's GET path)
//! answers what `Engine::get` answers, for every design: a key in the memtable, in a frozen or
//! flushed run (or the hash log), deleted in the memtable or on disk, never written; and it
//! counts the lookup as `get` does.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::{Engine, OpKind};
use cosine_tests::{key, TempDir};

/// `get_with`'s view of `k`, copied out, after checking it equals `get`'s.
fn both(e: &Engine, k: &[u8]) -> Option<Vec<u8>> {
    let got = e.get(k).expect("get");
    let with = e.get_with(k, |v| v.map(<[u8]>::to_vec)).expect("get_with");
    assert_eq!(with, got, "key {k:?}");
    with
}

#[test]
fn get_with_answers_what_get_answers_in_every_design() {
    for preset in Preset::ALL {
        let mut cfg = tiny(preset);
        cfg.layout.buffer_bytes = 16 * cfg.entry_bytes() as u64;
        let dir = TempDir::new(&format!("get-with-{}", preset.name()));
        let e = Engine::open(dir.path(), &cfg).expect("open");
        let value = |i: u64| format!("value {i}").into_bytes();
        // on disk: written, some deleted, then flushed (a tombstone on disk shadows the key)
        for i in 0..500u64 {
            e.put(&key(i), &value(i)).expect("put");
        }
        for i in (0..500u64).step_by(7) {
            e.delete(&key(i)).expect("delete");
        }
        e.wait_idle().expect("idle");
        // in the memtable: new versions, new keys, tombstones over keys on disk
        for i in (0..500u64).step_by(5) {
            e.put(&key(i), &value(i + 1000)).expect("put");
        }
        for i in (3..500u64).step_by(11) {
            e.delete(&key(i)).expect("delete");
        }
        e.put(&key(10_000), b"").expect("an empty value");
        for i in 0..500u64 {
            let want = if i % 11 == 3 {
                None
            } else if i % 5 == 0 {
                Some(value(i + 1000))
            } else if i % 7 == 0 {
                None
            } else {
                Some(value(i))
            };
            assert_eq!(both(&e, &key(i)), want, "{} key {i}", preset.name());
        }
        assert!(e.stats().levels.iter().any(|l| l.lookup_hits > 0), "{}: no lookup reached the disk", preset.name());
        assert_eq!(both(&e, &key(10_000)), Some(Vec::new()), "{}", preset.name());
        assert_eq!(both(&e, &key(20_000)), None, "{}: never written", preset.name());
        // a key given shorter than key_bytes is padded as `get` pads it; one ending in NULs is the same key
        let mut padded = key(1);
        padded.truncate(8);
        assert_eq!(both(&e, &padded), Some(value(1)), "{}", preset.name());
        // get_with counts as get: a found and an empty lookup each
        let ops = |e: &Engine, k: OpKind| e.stats().ops.iter().find(|(o, _)| *o == k).map_or(0, |(_, s)| s.count);
        let (found, empty) = (ops(&e, OpKind::GetFound), ops(&e, OpKind::GetEmpty));
        e.get_with(&key(1), |_| ()).expect("get_with");
        e.get_with(&key(20_000), |_| ()).expect("get_with");
        assert_eq!((ops(&e, OpKind::GetFound), ops(&e, OpKind::GetEmpty)), (found + 1, empty + 1), "{}", preset.name());
    }
}
