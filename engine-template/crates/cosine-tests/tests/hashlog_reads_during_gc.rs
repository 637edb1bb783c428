//! The hash log's striped index: while flushes and log GCs move keys from one segment to
//! another, a reader never misses a key that was written and never deleted, and never sees
//! its value go backwards (a commit publishes new segments first, moves the index stripe by
//! stripe, and drops a collected segment last).

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn readers_never_miss_a_live_key_while_the_log_is_collected() {
    let mut cfg = tiny(Preset::Faster);
    cfg.layout.buffer_bytes = 32 * cfg.entry_bytes() as u64;
    let dir = TempDir::new("hashlog-gc");
    let e = Engine::open(dir.path(), &cfg).expect("open");
    let keys = 400u64;
    for k in 0..keys {
        e.put(&key(k), &0u64.to_be_bytes()).expect("load");
    }
    let stop = AtomicBool::new(false);
    let rounds = 30u64;
    std::thread::scope(|s| {
        let e = &e;
        s.spawn(move || {
            // overwrite a hot fifth of the keys again and again: their old versions die, and
            // the GC moves the other keys' live entries to the head of the log
            for r in 1..=rounds {
                for k in (0..keys).step_by(5) {
                    e.put(&key(k), &r.to_be_bytes()).expect("put");
                }
            }
        });
        for t in 0..2u64 {
            let stop = &stop;
            s.spawn(move || {
                let mut seen = std::collections::HashMap::new();
                while !stop.load(Ordering::Relaxed) {
                    for k in (t..keys).step_by(3) {
                        let v = e.get(&key(k)).expect("get");
                        let Some(v) = v else { panic!("key {k} vanished during a flush or GC") };
                        let r = u64::from_be_bytes(v.try_into().expect("8 bytes"));
                        let prev = seen.insert(k, r).unwrap_or(0);
                        assert!(r >= prev, "key {k} went from {prev} to {r}");
                    }
                }
            });
        }
        while e.stats().op(cosine_engine::OpKind::Put).count < keys + rounds * keys.div_ceil(5) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        e.wait_idle().expect("idle");
        stop.store(true, Ordering::Relaxed);
    });
    let st = e.stats();
    assert!(st.flushes > 10, "flushes: {}", st.flushes);
    assert!(st.gcs > 0, "no log GC ran: the test moved no live entries");
    for k in 0..keys {
        let want = if k % 5 == 0 { rounds } else { 0 };
        assert_eq!(e.get(&key(k)).expect("get"), Some(want.to_be_bytes().to_vec()), "key {k}");
    }
}
