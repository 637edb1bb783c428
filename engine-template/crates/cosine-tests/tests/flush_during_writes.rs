//! Exclusive callers amid write groups: a thread flushing over and over while
//! writers run is neither starved nor deadlocked (the write baton is released,
//! not handed to a waiter, so arriving writers could otherwise take it forever),
//! and no write is lost or reordered across the flushes.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const WRITERS: u64 = 4;
const KEYS: u64 = 64;
const ROUNDS: u64 = 30;

#[test]
fn flushes_interleave_with_writers_and_lose_nothing() {
    for p in Preset::ALL {
        let mut cfg = tiny(p);
        cfg.layout.buffer_bytes = 32 * cfg.entry_bytes() as u64;
        let dir = TempDir::new("flush-during-writes");
        let e = Arc::new(Engine::open(dir.path(), &cfg).expect("open"));
        let done = Arc::new(AtomicBool::new(false));
        let flushes = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel();
        let mut hs = Vec::new();
        for w in 0..WRITERS {
            let (e, tx) = (e.clone(), tx.clone());
            hs.push(std::thread::spawn(move || {
                for r in 1..=ROUNDS {
                    for k in 0..KEYS {
                        e.put(&key(w * 1000 + k), &r.to_be_bytes()).expect("put");
                    }
                }
                let _ = tx.send(());
            }));
        }
        let flusher = {
            let (e, done, flushes) = (e.clone(), done.clone(), flushes.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    e.flush().expect("flush");
                    flushes.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        for _ in 0..WRITERS {
            // a starved or deadlocked baton shows up as writers that never finish
            rx.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|_| panic!("{p:?}: writers did not finish"));
        }
        done.store(true, Ordering::Release);
        for h in hs {
            h.join().expect("writer");
        }
        flusher.join().expect("flusher");
        assert!(flushes.load(Ordering::Relaxed) > 0, "{p:?}: the flusher never got the baton");
        for w in 0..WRITERS {
            for k in 0..KEYS {
                let got = e.get(&key(w * 1000 + k)).expect("get");
                assert_eq!(got, Some(ROUNDS.to_be_bytes().to_vec()), "{p:?}: key {w}/{k}");
            }
        }
        match Arc::try_unwrap(e) {
            Ok(e) => e.close().expect("close"),
            Err(_) => panic!("{p:?}: a thread still holds the engine"),
        }
    }
}
