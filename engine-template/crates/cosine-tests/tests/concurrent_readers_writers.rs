//! Reads run concurrently with writes, flushes and compactions: readers never
//! see a value go backwards, and after the writers stop every key holds its
//! last value.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn readers_see_monotonic_values_while_writers_run() {
    for p in Preset::ALL {
        let mut cfg = tiny(p);
        cfg.layout.buffer_bytes = 16 * cfg.entry_bytes() as u64;
        let dir = TempDir::new("concurrent");
        let e = Engine::open(dir.path(), &cfg).expect("open");
        let stop = AtomicBool::new(false);
        let writers = 3u64;
        let keys_per = 50u64;
        let rounds = 40u64;
        std::thread::scope(|s| {
            for w in 0..writers {
                let e = &e;
                s.spawn(move || {
                    for r in 1..=rounds {
                        for k in 0..keys_per {
                            e.put(&key(w * 1000 + k), &r.to_be_bytes()).expect("put");
                        }
                    }
                });
            }
            for _ in 0..2 {
                let (e, stop) = (&e, &stop);
                s.spawn(move || {
                    let mut seen = std::collections::HashMap::new();
                    while !stop.load(Ordering::Relaxed) {
                        for w in 0..writers {
                            for k in (0..keys_per).step_by(7) {
                                let kk = w * 1000 + k;
                                if let Some(v) = e.get(&key(kk)).expect("get") {
                                    let r = u64::from_be_bytes(v.try_into().expect("8 bytes"));
                                    let prev = seen.insert(kk, r).unwrap_or(0);
                                    assert!(r >= prev, "{p:?} key {kk} went from {prev} to {r}");
                                }
                            }
                        }
                        let all = e.range(&key(0), 30).expect("range");
                        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                    }
                });
            }
            // Writers end first (scoped threads), then readers are told to stop.
            std::thread::sleep(std::time::Duration::from_millis(10));
            while e.stats().op(cosine_engine::OpKind::Put).count < writers * keys_per * rounds {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        });
        e.wait_idle().expect("idle");
        for w in 0..writers {
            for k in 0..keys_per {
                assert_eq!(e.get(&key(w * 1000 + k)).expect("get"), Some(rounds.to_be_bytes().to_vec()));
            }
        }
        assert!(e.stats().flushes > 10);
    }
}
