//! A write is acknowledged only once the WAL policy says it is durable: under
//! `group_commit` (a slow 300 ms group here) the `+OK` comes after the group's
//! fdatasync (the WAL sync counter has moved), requests pipelined behind it are
//! answered after it, and other connections' reads are not held up meanwhile.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::{Reply, ServerConfig};
use cosine_tests::TempDir;
use std::time::{Duration, Instant};

fn wal_syncs(c: &mut cosine_server::client::Client) -> u64 {
    let Reply::Bulk(info) = c.call(&[b"INFO", b"engine"]).expect("info") else { panic!("INFO") };
    String::from_utf8(info)
        .expect("utf-8")
        .lines()
        .find_map(|l| l.strip_prefix("wal_syncs:").and_then(|v| v.trim().parse().ok()))
        .expect("wal_syncs")
}

#[test]
fn set_is_acknowledged_after_the_group_commit() {
    let dir = TempDir::new("server-durable");
    let mut cfg = design(Preset::RocksDb, WalSync::GroupCommit);
    cfg.durability.group_commit_interval_us = 300_000;
    let srv = InProcess::start(dir.path(), &cfg, ServerConfig::default());
    let mut w = client(srv.addr);
    let mut r = client(srv.addr);
    assert_eq!(w.call(&[b"SET", b"seed", b"0"]).expect("set"), Reply::ok());
    for round in 0..3 {
        let before = wal_syncs(&mut r);
        let v = format!("v{round}");
        w.send(&[b"SET", b"k", v.as_bytes()]).expect("send");
        w.send(&[b"GET", b"k"]).expect("send");
        // while the SET waits for its group, another connection reads at once
        let t = Instant::now();
        assert_eq!(r.call(&[b"GET", b"seed"]).expect("get"), Reply::Bulk(b"0".to_vec()));
        assert!(t.elapsed() < Duration::from_millis(250), "a reader waited for another connection's group commit");
        assert_eq!(w.recv().expect("set reply"), Reply::ok());
        assert!(wal_syncs(&mut r) > before, "round {round}: +OK before the WAL was synced");
        assert_eq!(w.recv().expect("get reply"), Reply::Bulk(v.into_bytes()));
    }
}
