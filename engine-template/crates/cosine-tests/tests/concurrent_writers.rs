//! Write groups under concurrency: many threads write at once (tiny designs, so
//! memtables rotate, flush and compact all the time under them).
//!
//! * Property: each thread owns a set of keys and also writes a few keys shared
//!   by all. When the threads are done, every owned key equals the sequential
//!   model of its thread's writes; every shared key holds the last write of one
//!   of the threads; and after a close and reopen the database is exactly what
//!   it was (the memtable orders same-key writes as the log does).
//! * Crash: four threads write; the process is SIGKILLed; after the reopen every
//!   acknowledged write of every thread is there, under every WAL policy.

use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::Engine;
use cosine_tests::crash::{check, read_state, Child, State};
use cosine_tests::{key, TempDir};
use proptest::prelude::*;
use std::collections::BTreeMap;

const OWNED: u64 = 40;
const SHARED: u64 = 6;

#[derive(Debug, Clone)]
enum Op {
    Put(u64, u16),
    Del(u64),
    PutShared(u64, u16),
}

fn owned_key(t: usize, k: u64) -> Vec<u8> {
    key(1000 * (t as u64 + 1) + k)
}

fn shared_key(k: u64) -> Vec<u8> {
    key(k)
}

// The value a thread writes: thread id, then a counter (unique per thread).
fn val(t: usize, i: usize, v: u16) -> Vec<u8> {
    [&[t as u8][..], &(i as u32).to_le_bytes(), &v.to_le_bytes()].concat()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..OWNED, any::<u16>()).prop_map(|(k, v)| Op::Put(k, v)),
        1 => (0..OWNED).prop_map(Op::Del),
        2 => (0..SHARED, any::<u16>()).prop_map(|(k, v)| Op::PutShared(k, v)),
    ]
}

fn run(preset: Preset, wal_sync: WalSync, threads: &[Vec<Op>]) -> Result<(), String> {
    let mut cfg = tiny(preset);
    cfg.durability.wal_sync = wal_sync;
    let dir = TempDir::new("concurrent-writers");
    let e = Engine::open(dir.path(), &cfg).map_err(|e| e.to_string())?;
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = threads
            .iter()
            .enumerate()
            .map(|(t, ops)| {
                let e = &e;
                s.spawn(move || -> Result<(), String> {
                    for (i, op) in ops.iter().enumerate() {
                        let r = match op {
                            Op::Put(k, v) => e.put(&owned_key(t, *k), &val(t, i, *v)),
                            Op::Del(k) => e.delete(&owned_key(t, *k)),
                            Op::PutShared(k, v) => e.put(&shared_key(*k), &val(t, i, *v)),
                        };
                        r.map_err(|err| format!("thread {t} op {i}: {err}"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("writer panicked".into()))).collect()
    });
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    // The sequential model: each thread's own keys in its order; for shared keys, the
    // candidates are each thread's last write.
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut shared: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    for (t, ops) in threads.iter().enumerate() {
        let mut last: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Put(k, v) => {
                    model.insert(owned_key(t, *k), val(t, i, *v));
                }
                Op::Del(k) => {
                    model.remove(&owned_key(t, *k));
                }
                Op::PutShared(k, v) => {
                    last.insert(*k, val(t, i, *v));
                }
            }
        }
        for (k, v) in last {
            shared.entry(k).or_default().push(v);
        }
    }
    let snapshot = |e: &Engine| e.scan(&key(0), &key(u64::MAX)).map_err(|err| err.to_string());
    let before = snapshot(&e)?;
    for (k, v) in &before {
        let id = u64::from_be_bytes(k[..8].try_into().map_err(|_| "key")?);
        if id < SHARED {
            let ok = shared.get(&id).is_some_and(|c| c.contains(v));
            if !ok {
                return Err(format!("shared key {id} holds {v:?}, not the last write of any thread"));
            }
        } else if model.get(k) != Some(v) {
            return Err(format!("key {id} holds {v:?}, model {:?}", model.get(k)));
        }
    }
    let owned_seen = before.iter().filter(|(k, _)| k[..8] >= SHARED.to_be_bytes()[..]).count();
    if owned_seen != model.len() || before.len() - owned_seen != shared.len() {
        return Err(format!("{} entries, model {} owned + {} shared", before.len(), model.len(), shared.len()));
    }
    e.close().map_err(|err| err.to_string())?;
    let e = Engine::open(dir.path(), &cfg).map_err(|err| err.to_string())?;
    let after = snapshot(&e)?;
    if after != before {
        return Err("the reopened database differs from the one closed (log and memtable disagree)".into());
    }
    e.close().map_err(|err| err.to_string())
}

const MODES: [WalSync; 3] = [WalSync::EveryWrite, WalSync::GroupCommit, WalSync::None];

proptest! {
    #![proptest_config(ProptestConfig { cases: cosine_tests::proptest_cases(24), max_shrink_iters: 50, ..ProptestConfig::default() })]
    #[test]
    fn concurrent_writes_equal_the_sequential_model(
        preset in 0..4usize,
        mode in 0..3usize,
        threads in proptest::collection::vec(proptest::collection::vec(op(), 50..250), 2..5),
    ) {
        if let Err(m) = run(Preset::ALL[preset], MODES[mode], &threads) {
            prop_assert!(false, "{:?} {:?}: {}", Preset::ALL[preset], MODES[mode], m);
        }
    }
}

#[test]
fn four_writer_threads_lose_no_acknowledged_write_at_a_sigkill() {
    for (i, mode) in MODES.into_iter().enumerate() {
        for p in [Preset::RocksDb, Preset::Faster] {
            let dir = TempDir::new("concurrent-crash");
            let child = Child {
                exe: env!("CARGO_BIN_EXE_crash-child"),
                dir: dir.path(),
                preset: p.name(),
                seed: 90 + i as u64,
                wal_sync: mode,
                threads: 4,
            };
            let mut cfg = tiny(p);
            cfg.durability.wal_sync = mode;
            let mut base = State::new();
            for round in 0..3u64 {
                let h = Child { seed: child.seed * 10 + round, ..child }.run(200 + 150 * round);
                assert!(h.killed, "{p:?} {mode:?}: killed");
                let e = Engine::open(dir.path(), &cfg).unwrap_or_else(|err| panic!("{p:?} {mode:?}: reopen: {err}"));
                let got = read_state(&e).unwrap_or_else(|err| panic!("{p:?} {mode:?}: {err}"));
                check(&base, &h, &got, mode != WalSync::None).unwrap_or_else(|err| panic!("{p:?} {mode:?} round {round}: {err}"));
                base = got;
                e.close().expect("close");
            }
        }
    }
}
