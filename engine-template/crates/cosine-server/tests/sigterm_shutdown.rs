//! SIGTERM is a graceful shutdown: the server finishes, flushes the memtable and
//! closes the engine, exits 0, and a restart finds every write, even under
//! `wal_sync = none` (whose WAL alone would lose the process-buffered tail).

mod common;

use common::{client, design, Spawned};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::Reply;
use cosine_tests::TempDir;

#[test]
fn sigterm_flushes_and_closes() {
    let dir = TempDir::new("server-term");
    let data = dir.path().join("db");
    let cfg = design(Preset::RocksDb, WalSync::None);
    let srv = Spawned::start(&data, &cfg);
    let mut c = client(srv.addr);
    for i in 0..1000u32 {
        c.send(&[b"SET", format!("k{i}").as_bytes(), format!("v{i}").as_bytes()]).expect("send");
    }
    for _ in 0..1000 {
        assert_eq!(c.recv().expect("reply"), Reply::ok());
    }
    let (status, err) = srv.signal("TERM");
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(err.contains("flushed and closed"), "{err}");
    assert!(c.call(&[b"PING"]).is_err(), "the connection outlived the shutdown");
    let srv = Spawned::start(&data, &cfg);
    let mut c = client(srv.addr);
    for i in 0..1000u32 {
        assert_eq!(c.call(&[b"GET", format!("k{i}").as_bytes()]).expect("get"), Reply::Bulk(format!("v{i}").into_bytes()));
    }
    // the memtable was flushed at shutdown: nothing is left to replay but the engine's own buffer
    let Reply::Bulk(info) = c.call(&[b"INFO", b"keyspace"]).expect("info") else { panic!("INFO") };
    let info = String::from_utf8(info).expect("utf-8");
    assert!(info.contains("buffered_entries:0"), "{info}");
    // and the disk levels hold the 1,000 keys, which INFO reports level by level too (a flush made
    // while the writes ran may have put some in another level than the shutdown's)
    let per_level: u64 = info
        .lines()
        .filter(|l| l.starts_with("level") && l.as_bytes().get(5).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| l.split_once(":entries=").and_then(|(_, rest)| rest.split(',').next()))
        .map(|n| n.parse::<u64>().expect("entries"))
        .sum();
    assert_eq!(per_level, 1000, "{info}");
}
