//! The server variant of the crash test: clients write (single SETs and pipelines)
//! while the `cosine-server` process is SIGKILLed at a random moment; after a
//! restart on the same directory every acknowledged SET is there with its latest
//! acknowledged value (or with the one write that was in flight on its key).
//! Runs under `every_write` and `group_commit`, on a tree and a hash-log design,
//! several rounds on one directory (recovery of a recovered database).

mod common;

use common::{design, Spawned};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::client::Client;
use cosine_server::Reply;
use cosine_tests::TempDir;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 150;

/// What one writer knows about its keys: the last acknowledged value and the values
/// sent but not acknowledged when the server died.
#[derive(Default)]
struct Ledger {
    acked: HashMap<u64, u64>,
    inflight: HashMap<u64, Vec<u64>>,
}

fn key(k: u64) -> Vec<u8> {
    format!("key{k:06}").into_bytes()
}

/// Writes until the server dies; `pipeline` requests at a time.
fn writer(addr: SocketAddr, w: u64, round: u64, pipeline: usize, ledger: &mut Ledger) {
    let Ok(mut c) = Client::connect(addr, Duration::from_secs(10)) else { return };
    let mut rng = rand::rngs::StdRng::seed_from_u64(w * 7919 + round);
    let mut seq = round << 32;
    loop {
        let batch: Vec<(u64, u64)> = (0..pipeline)
            .map(|_| {
                seq += 1;
                (w * KEYS_PER_WRITER + rng.gen_range(0..KEYS_PER_WRITER), seq)
            })
            .collect();
        for (k, v) in &batch {
            ledger.inflight.entry(*k).or_default().push(*v);
        }
        for (k, v) in &batch {
            if c.send(&[b"SET", &key(*k), v.to_string().as_bytes()]).is_err() {
                return;
            }
        }
        for (k, v) in &batch {
            match c.recv() {
                Ok(Reply::Simple(s)) if s == "OK" => {
                    ledger.acked.insert(*k, *v);
                    if let Some(f) = ledger.inflight.get_mut(k) {
                        f.retain(|x| x > v);
                    }
                }
                Ok(other) => panic!("SET answered {other:?}"),
                Err(_) => return, // the server died: this and later writes are unacknowledged
            }
        }
    }
}

fn crash_rounds(preset: Preset, wal: WalSync, rounds: u64) {
    let dir = TempDir::new("server-crash");
    let data = dir.path().join("db");
    let cfg = design(preset, wal);
    let mut ledgers: Vec<Ledger> = (0..WRITERS).map(|_| Ledger::default()).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(preset as u64 * 100 + wal as u64);
    let mut acked_total = 0usize;
    for round in 0..rounds {
        let srv = Spawned::start(&data, &cfg);
        let addr = srv.addr;
        let kill_after = Duration::from_millis(rng.gen_range(150..500));
        std::thread::scope(|s| {
            for (w, ledger) in ledgers.iter_mut().enumerate() {
                let pipeline = if w % 2 == 0 { 1 } else { 16 };
                s.spawn(move || writer(addr, w as u64, round, pipeline, ledger));
            }
            std::thread::sleep(kill_after);
            let (status, _) = srv.signal("KILL");
            assert!(!status.success());
        });
        // restart and check every key every writer ever had acknowledged
        let srv = Spawned::start(&data, &cfg);
        let mut c = Client::connect(srv.addr, Duration::from_secs(10)).expect("connect");
        for ledger in &mut ledgers {
            for (k, v) in &ledger.acked {
                let got = match c.call(&[b"GET", &key(*k)]).expect("get") {
                    Reply::Bulk(b) => String::from_utf8(b).expect("utf-8").parse::<u64>().expect("number"),
                    other => panic!("{preset:?}/{wal:?} round {round}: acknowledged key {k} lost ({other:?})"),
                };
                let newer_inflight = ledger.inflight.get(k).is_some_and(|f| f.contains(&got));
                assert!(got == *v || newer_inflight, "{preset:?}/{wal:?} round {round}: key {k} holds {got}, last acknowledged {v}");
                // whatever survived is now the value to expect
                ledger.inflight.remove(k);
                acked_total += 1;
            }
            for (k, v) in ledger.acked.iter_mut() {
                let Reply::Bulk(b) = c.call(&[b"GET", &key(*k)]).expect("get") else { unreachable!() };
                *v = String::from_utf8(b).expect("utf-8").parse().expect("number");
            }
            ledger.inflight.clear();
        }
        drop(c);
        let (status, err) = srv.signal("TERM");
        assert!(status.success(), "clean shutdown failed: {err}");
    }
    assert!(acked_total > 100, "too few acknowledged writes to mean anything: {acked_total}");
}

#[test]
fn acknowledged_sets_survive_sigkill_group_commit() {
    crash_rounds(Preset::RocksDb, WalSync::GroupCommit, 3);
    crash_rounds(Preset::Faster, WalSync::GroupCommit, 2);
}

#[test]
fn acknowledged_sets_survive_sigkill_every_write() {
    crash_rounds(Preset::WiredTiger, WalSync::EveryWrite, 3);
}
