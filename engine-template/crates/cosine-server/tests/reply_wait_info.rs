//! `INFO server` counts every batch's reply by how it waited (durable, pipelined, single) with
//! the microseconds it waited, and the durability syncs by who made them: what
//! `cosine bench --served` reads beside the served latency model's simulation.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::client::{encode_request, Client};
use cosine_server::{Reply, ServerConfig};
use cosine_tests::TempDir;
use std::collections::HashMap;

/// `INFO server`'s reply-wait and sync lines: (`reply_wait_<kind>` batches, usec) per kind,
/// and `durable_syncs_idle` + `durable_syncs_tick`.
fn waits(c: &mut Client) -> (HashMap<String, (u64, u64)>, u64) {
    let Reply::Bulk(info) = c.call(&[b"INFO", b"server"]).expect("info") else { panic!("INFO") };
    let text = String::from_utf8(info).expect("utf-8");
    let mut kinds = HashMap::new();
    let mut syncs = 0;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let Some(kind) = k.strip_prefix("reply_wait_") {
                let field = |name: &str| -> u64 {
                    v.split(',')
                        .find_map(|f| f.strip_prefix(name).and_then(|n| n.parse().ok()))
                        .unwrap_or_else(|| panic!("{line}: no {name}"))
                };
                kinds.insert(kind.to_string(), (field("batches="), field("usec=")));
            } else if k.starts_with("durable_syncs_") {
                syncs += v.trim().parse::<u64>().expect("a count");
            }
        }
    }
    (kinds, syncs)
}

#[test]
fn info_counts_each_replys_wait_and_the_syncs() {
    let dir = TempDir::new("server-reply-wait");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::GroupCommit), ServerConfig::default());
    let mut c = client(srv.addr);
    let (before, syncs_before) = waits(&mut c);
    for kind in ["durable", "pipelined", "single"] {
        assert!(before.contains_key(kind), "INFO server has no reply_wait_{kind}");
    }
    // one SET (its reply waits for a sync), two GETs in one write (one pipelined batch), one GET
    assert_eq!(c.call(&[b"SET", b"k", b"v"]).expect("set"), Reply::ok());
    let mut two = encode_request(&[b"GET", b"k"]);
    two.extend(encode_request(&[b"GET", b"k"]));
    c.send_raw(&two).expect("send");
    for _ in 0..2 {
        assert_eq!(c.recv().expect("get"), Reply::Bulk(b"v".to_vec()));
    }
    assert_eq!(c.call(&[b"GET", b"k"]).expect("get"), Reply::Bulk(b"v".to_vec()));
    let (after, syncs_after) = waits(&mut c);
    let batches = |kind: &str| after[kind].0 - before[kind].0;
    assert_eq!(batches("durable"), 1);
    assert_eq!(batches("pipelined"), 1);
    // the GET, and the first INFO's own reply (counted once written)
    assert_eq!(batches("single"), 2);
    assert!(syncs_after > syncs_before, "the SET's sync was not counted");
    for (kind, (_, usec)) in &after {
        assert!(*usec >= before[kind].1, "{kind}: its waits went down");
    }
}
