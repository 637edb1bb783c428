//! Every command answers as documented, checked against a model (a `BTreeMap`)
//! over a random sequence of commands on one connection.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::{Reply, ServerConfig};
use cosine_tests::TempDir;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn bulk(v: &[u8]) -> Reply {
    Reply::Bulk(v.to_vec())
}

#[test]
fn commands_match_a_model() {
    let dir = TempDir::new("server-commands");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::GroupCommit), ServerConfig::default());
    let mut c = client(srv.addr);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(16);
    let key = |i: u32| format!("k{i:04}").into_bytes();
    for step in 0..3000 {
        let k = key(rng.gen_range(0..400));
        match rng.gen_range(0..8) {
            0 | 1 => {
                let v = format!("v{step}").into_bytes();
                assert_eq!(c.call(&[b"SET", &k, &v]).expect("set"), Reply::ok());
                model.insert(k, v);
            }
            2 => {
                let got = c.call(&[b"GET", &k]).expect("get");
                assert_eq!(got, model.get(&k).map_or(Reply::Nil, |v| bulk(v)), "GET {:?}", String::from_utf8_lossy(&k));
            }
            3 => {
                let k2 = key(rng.gen_range(0..400));
                let want = i64::from(model.remove(&k).is_some()) + i64::from(k2 != k && model.remove(&k2).is_some());
                let got = if k2 == k { c.call(&[b"DEL", &k]) } else { c.call(&[b"DEL", &k, &k2]) };
                assert_eq!(got.expect("del"), Reply::Int(want));
            }
            4 => {
                let ks: Vec<Vec<u8>> = (0..3).map(|_| key(rng.gen_range(0..400))).collect();
                let want = ks.iter().filter(|k| model.contains_key(*k)).count() as i64;
                let mut args: Vec<&[u8]> = vec![b"EXISTS"];
                args.extend(ks.iter().map(|k| k.as_slice()));
                assert_eq!(c.call(&args).expect("exists"), Reply::Int(want));
                args[0] = b"MGET";
                let want = Reply::Array(ks.iter().map(|k| model.get(k).map_or(Reply::Nil, |v| bulk(v))).collect());
                assert_eq!(c.call(&args).expect("mget"), want);
            }
            5 => {
                let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                    (0..3).map(|j| (key(rng.gen_range(0..400)), format!("m{step}.{j}").into_bytes())).collect();
                let mut args: Vec<&[u8]> = vec![b"MSET"];
                for (k, v) in &pairs {
                    args.push(k);
                    args.push(v);
                }
                assert_eq!(c.call(&args).expect("mset"), Reply::ok());
                for (k, v) in pairs {
                    model.insert(k, v);
                }
            }
            6 => {
                let n = rng.gen_range(1..20usize);
                let want: Vec<Reply> = model.range(k.clone()..).take(n).flat_map(|(k, v)| [bulk(k), bulk(v)]).collect();
                let got = c.call(&[b"RANGE", &k, n.to_string().as_bytes()]).expect("range");
                assert_eq!(got, Reply::Array(want), "RANGE {:?} {n}", String::from_utf8_lossy(&k));
            }
            _ => {
                assert_eq!(c.call(&[b"PING"]).expect("ping"), Reply::Simple("PONG".into()));
                assert_eq!(c.call(&[b"ping", b"hi"]).expect("ping"), bulk(b"hi"));
            }
        }
    }
    // INFO carries the engine's counters, and they moved.
    let Reply::Bulk(info) = c.call(&[b"INFO"]).expect("info") else { panic!("INFO is not a bulk string") };
    let info = String::from_utf8(info).expect("utf-8");
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("INFO lacks {name}:\n{info}"))
            .trim()
            .parse()
            .expect("number")
    };
    for f in ["block_reads", "merges", "log_gcs", "wal_bytes", "durable_waits"] {
        field(f);
    }
    assert!(field("flushes") > 0, "64-entry buffers must have flushed:\n{info}");
    assert!(field("block_writes") > 0);
    assert!(field("wal_syncs") > 0, "group commit must have synced:\n{info}");
    assert!(info.contains("wal_sync:group_commit"));
    assert!(matches!(c.call(&[b"INFO", b"nosuch"]).expect("info"), Reply::Error(_)));
    // QUIT: +OK, then the server closes the connection.
    assert_eq!(c.call(&[b"QUIT"]).expect("quit"), Reply::ok());
    assert!(c.recv().is_err(), "the connection stays open after QUIT");
}
