//! Many concurrent connections, each sending deep pipelines of interleaved SETs and
//! GETs: every reply arrives, in request order, with read-your-writes values.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::{Reply, ServerConfig};
use cosine_tests::TempDir;

const CONNECTIONS: usize = 48;
const ROUNDS: usize = 20;
const DEPTH: usize = 64;

#[test]
fn pipelines_on_many_connections_answer_in_order() {
    let dir = TempDir::new("server-pipe");
    // a small batch bound, so that one pipeline spans several batches
    let cfg = ServerConfig { max_batch: 16, ..ServerConfig::default() };
    let srv = InProcess::start(dir.path(), &design(Preset::Hybrid, WalSync::GroupCommit), cfg);
    std::thread::scope(|s| {
        for t in 0..CONNECTIONS {
            let addr = srv.addr;
            s.spawn(move || {
                let mut c = client(addr);
                for r in 0..ROUNDS {
                    let mut want = Vec::with_capacity(DEPTH);
                    for i in 0..DEPTH {
                        let k = format!("c{t}-k{}", (i / 2) % 8);
                        if i % 2 == 0 {
                            let v = format!("{t}.{r}.{i}");
                            c.send(&[b"SET", k.as_bytes(), v.as_bytes()]).expect("send");
                            want.push((Reply::ok(), v));
                        } else {
                            c.send(&[b"GET", k.as_bytes()]).expect("send");
                            // the GET follows the SET of the same key at i - 1 in this pipeline
                            let v = want[i - 1].1.clone();
                            want.push((Reply::Bulk(v.clone().into_bytes()), v));
                        }
                    }
                    for (i, (w, _)) in want.into_iter().enumerate() {
                        assert_eq!(c.recv().expect("reply"), w, "connection {t} round {r} request {i}");
                    }
                }
            });
        }
    });
    let mut c = client(srv.addr);
    let Reply::Bulk(info) = c.call(&[b"INFO", b"server"]).expect("info") else { panic!("INFO") };
    let info = String::from_utf8(info).expect("utf-8");
    let total: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_commands_processed");
    assert!(total >= (CONNECTIONS * ROUNDS * DEPTH) as u64, "{info}");
}

/// Runs of pipelined SETs are written as one write group each (`Engine::write_batch`): every
/// one is acknowledged, the last SET of a key wins within the run, and a GET after the run
/// reads it, under both syncing policies.
#[test]
fn runs_of_sets_write_as_one_group_in_order() {
    for wal in [WalSync::GroupCommit, WalSync::EveryWrite] {
        let dir = TempDir::new("server-setrun");
        let srv = InProcess::start(dir.path(), &design(Preset::Hybrid, wal), ServerConfig::default());
        let mut c = client(srv.addr);
        for round in 0..3 {
            let mut want = Vec::new();
            for i in 0..40 {
                let (k, v) = (format!("k{}", i % 7), format!("{round}.{i}"));
                c.send(&[b"SET", k.as_bytes(), v.as_bytes()]).expect("send");
                want.push(Reply::ok());
            }
            for j in 0..7 {
                c.send(&[b"GET", format!("k{j}").as_bytes()]).expect("send");
                // the last of the 40 SETs of key j: the largest i < 40 with i % 7 == j
                let last = (0..40).filter(|i| i % 7 == j).max().expect("a SET of every key");
                want.push(Reply::Bulk(format!("{round}.{last}").into_bytes()));
            }
            for (i, w) in want.into_iter().enumerate() {
                assert_eq!(c.recv().expect("reply"), w, "{wal:?} round {round} request {i}");
            }
        }
    }
}
