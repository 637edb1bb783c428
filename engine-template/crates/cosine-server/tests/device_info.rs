//! `INFO engine` reports the provisioned volume's counters — its I/Os, and how often and how long
//! the engine's threads slept for it — and none on a local device: what `cosine bench --served`
//! reads to tell the CPU of a thread that blocks on the volume from the model's.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::{DeviceKind, WalSync};
use cosine_server::client::Client;
use cosine_server::{Reply, ServerConfig};
use cosine_tests::TempDir;
use std::collections::HashMap;

/// `INFO engine`'s `device_*` lines.
fn device(c: &mut Client) -> HashMap<String, u64> {
    let Reply::Bulk(info) = c.call(&[b"INFO", b"engine"]).expect("info") else { panic!("INFO") };
    let text = String::from_utf8(info).expect("utf-8");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.starts_with("device_"))
        .map(|(k, v)| (k.to_string(), v.trim().parse().expect("a count")))
        .collect()
}

#[test]
fn info_counts_the_volumes_ios_and_the_threads_sleeps_for_it() {
    let dir = TempDir::new("server-device-info");
    let mut cfg = design(Preset::RocksDb, WalSync::None);
    cfg.device.kind = DeviceKind::Volume;
    cfg.device.iops = 1_000_000.0;
    cfg.device.throughput_mib_s = 1000.0;
    cfg.device.read_latency_us = 300.0; // every foreground read sleeps
    cfg.device.burst_ios = 1000.0;
    let srv = InProcess::start(dir.path(), &cfg, ServerConfig::default());
    let mut c = client(srv.addr);
    let keys: Vec<String> = (0..2000).map(|i| format!("key{i:08}")).collect();
    for k in &keys {
        assert_eq!(c.call(&[b"SET", k.as_bytes(), b"a value of some bytes"]).expect("set"), Reply::ok());
    }
    let before = device(&mut c);
    for name in ["device_ios", "device_read_ios", "device_foreground_read_ios", "device_sleeps", "device_waited_usec"] {
        assert!(before.contains_key(name), "INFO engine has no {name}: {before:?}");
    }
    // the first keys were flushed long ago (the buffer holds 64 entries): their reads go to the volume
    for k in keys.iter().take(200) {
        assert!(matches!(c.call(&[b"GET", k.as_bytes()]).expect("get"), Reply::Bulk(_)));
    }
    let after = device(&mut c);
    let grew = |name: &str| after[name] - before[name];
    assert!(grew("device_foreground_read_ios") > 0, "{before:?} -> {after:?}");
    assert!(grew("device_read_ios") >= grew("device_foreground_read_ios"));
    assert!(grew("device_sleeps") >= grew("device_foreground_read_ios") / 2, "{before:?} -> {after:?}");
    // each sleep asked for about the read latency (less the timer's measured overshoot)
    assert!(grew("device_waited_usec") >= grew("device_sleeps") * 100, "{before:?} -> {after:?}");
}

#[test]
fn a_local_device_has_no_volume_counters() {
    let dir = TempDir::new("server-device-info-local");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::None), ServerConfig::default());
    let mut c = client(srv.addr);
    assert_eq!(device(&mut c), HashMap::new());
}
