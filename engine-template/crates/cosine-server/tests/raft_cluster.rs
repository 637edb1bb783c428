//! A replicated shard under faults (issue 51): three `cosine-server` replicas of one shard
//! on loopback, a Raft group (cosine-raft, openraft).
//!
//! * `leader_killed_every_acknowledged_write_reads_back`: writers SET keys through the
//!   shard (mostly new keys, some overwrites) while its leader is SIGKILLed; a new leader takes over, the old one restarts
//!   and catches up; then every acknowledged key reads back (from the leader) with its
//!   last acknowledged value or a value written after it, and every replica has applied
//!   as far as the leader.
//! * `histories_through_failovers_are_linearizable`: concurrent clients SET and GET three
//!   keys, each request sent first to a replica drawn at random (so every replica gets
//!   requests), while the leader is paused (SIGSTOP) until another is elected and then
//!   resumed (for a moment it still believes it leads), then the new leader is killed and
//!   restarted, then the next leader is paused and resumed. The recorded history of each key must be linearizable
//!   (`common::linearizability`). The test checks the checker refuses stale reads, and that
//!   each key's history holds operations before, between and after the faults.
//! * `snapshots_bring_back_a_replica_and_survive_a_full_restart`: with a snapshot every
//!   100 entries, a follower killed while 800 keys are written comes back behind the
//!   purged log and catches up from a snapshot (the engine's files); it then holds every
//!   key (read on it with `READONLY`, eventual consistency); then every replica is
//!   SIGKILLed at once and restarted, and every key is still there, on every replica.
//! * `a_paused_follower_does_not_depose_the_leader`: a follower SIGSTOPped for three election
//!   timeouts and resumed does not stand for election (cosine-raft's pre-vote): the leader and
//!   its term stay, and no SET waits (fails with openraft's own election timer: the resumed
//!   follower stands with a higher term and the leader steps down).
//!
//! Bounded: each test runs a few seconds (300-600 ms election timeouts).

mod common;

use common::design;
use common::linearizability::{check, Kind, Op};
use common::raft::{Cluster, Outcome, ShardClient, StopOnDrop, FAST_RAFT};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::Reply;
use cosine_tests::TempDir;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn shard_design() -> cosine_config::Config {
    let mut cfg = design(Preset::RocksDb, WalSync::EveryWrite);
    cfg.layout.key_bytes = 24;
    // a memtable of 500 entries: flushes and merges happen under the test's writes
    cfg.layout.buffer_bytes = 500 * cfg.entry_bytes() as u64;
    cfg
}

#[derive(Default)]
struct Ledger {
    acked: HashMap<String, String>,
    unknown: HashMap<String, Vec<String>>,
}

#[test]
fn leader_killed_every_acknowledged_write_reads_back() {
    let dir = TempDir::new("raft-leader-kill");
    let mut cluster = Cluster::start(dir.path(), &shard_design(), 1, 3, FAST_RAFT);
    let leader = cluster.wait_leader(0, Duration::from_secs(10));
    let addrs: Vec<_> = cluster.nodes.iter().map(|n| n.addr).collect();
    let stop = AtomicBool::new(false);
    let ledgers: Vec<Mutex<Ledger>> = (0..4).map(|_| Mutex::new(Ledger::default())).collect();
    let mut killed_at = 0;
    std::thread::scope(|s| {
        let guard = StopOnDrop::new(&stop);
        for (w, ledger) in ledgers.iter().enumerate() {
            let (addrs, stop, since) = (addrs.clone(), &stop, guard.since());
            s.spawn(move || {
                let mut c = ShardClient::new(addrs, w);
                let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
                let mut seq = 0u64;
                while !StopOnDrop::stopped(stop, since) {
                    seq += 1;
                    // mostly new keys (a write lost with its leader is not hidden by a later one), some overwrites
                    let k = if rng.gen_bool(0.8) { format!("w{w}k{seq}") } else { format!("w{w}k{}", rng.gen_range(1..=seq)) };
                    let v = format!("{w}-{seq}");
                    let out = c.call(&[b"SET", k.as_bytes(), v.as_bytes()], Duration::from_secs(5));
                    let mut l = ledger.lock().expect("ledger");
                    match out {
                        Outcome::Done(Reply::Simple(ok)) if ok == "OK" => {
                            l.acked.insert(k.clone(), v);
                            l.unknown.remove(&k);
                        }
                        Outcome::Done(other) => panic!("SET answered {other:?}"),
                        Outcome::Unknown(_) => l.unknown.entry(k).or_default().push(v),
                        Outcome::Failed(_) => {}
                    }
                }
            });
        }
        let acked = || ledgers.iter().map(|l| l.lock().expect("ledger").acked.len()).sum::<usize>();
        let t = Instant::now();
        while acked() < 300 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        killed_at = acked();
        cluster.kill(leader);
        let new = cluster.wait_leader(0, Duration::from_secs(10));
        assert_ne!(new, leader);
        // writes go on under the new leader
        let t = Instant::now();
        while acked() < killed_at + 300 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        cluster.spawn(leader);
        std::thread::sleep(Duration::from_millis(300));
        drop(guard);
    });
    let total: usize = ledgers.iter().map(|l| l.lock().expect("ledger").acked.len()).sum();
    assert!(killed_at >= 300 && total >= killed_at + 300, "too few writes acknowledged: {killed_at} before the kill, {total} in all");
    // every replica catches up with the leader
    let leader = cluster.wait_leader(0, Duration::from_secs(10));
    let t = Instant::now();
    let target = cluster.applied(leader).expect("leader's applied index");
    while (0..3).any(|i| cluster.applied(i).is_none_or(|a| a < target)) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "a replica did not catch up to {target}: {:?}",
            (0..3).map(|i| cluster.applied(i)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // every acknowledged key reads back
    let mut c = ShardClient::new(addrs, 0);
    let mut lost = Vec::new();
    for l in &ledgers {
        let l = l.lock().expect("ledger");
        for (k, v) in &l.acked {
            let got = match c.call(&[b"GET", k.as_bytes()], Duration::from_secs(5)) {
                Outcome::Done(Reply::Bulk(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                Outcome::Done(Reply::Nil) => None,
                other => panic!("GET {k}: {other:?}"),
            };
            let later = l.unknown.get(k).is_some_and(|vs| got.as_ref().is_some_and(|g| vs.contains(g)));
            if got.as_ref() != Some(v) && !later {
                lost.push(format!("{k}: acknowledged {v}, read {got:?}"));
            }
        }
    }
    assert!(lost.is_empty(), "{} of {total} acknowledged writes lost: {:?}", lost.len(), &lost[..lost.len().min(10)]);
}

#[test]
fn the_checker_accepts_linearizable_histories_and_refuses_a_stale_read() {
    let w = |call, ret, v| Op { call, ret: Some(ret), kind: Kind::Write(v) };
    let r = |call, ret, v| Op { call, ret: Some(ret), kind: Kind::Read(v) };
    // sequential
    assert!(check(&[w(0, 1, 1), r(2, 3, Some(1)), w(4, 5, 2), r(6, 7, Some(2))], None).is_ok());
    // a read overlapping a write may see either value
    assert!(check(&[w(0, 10, 1), r(1, 2, None), r(3, 4, Some(1)), r(11, 12, Some(1))], None).is_ok());
    // a stale read: after w2 returned, a read sees 1
    let stale = [w(0, 1, 1), w(2, 3, 2), r(4, 5, Some(1))];
    assert!(check(&stale, None).is_err());
    // once a read saw the new value, a later read may not see the old one
    let flip = [w(0, 100, 2), r(1, 2, Some(2)), r(3, 4, None)];
    assert!(check(&flip, None).is_err());
    // a write of unknown outcome: it may have happened (seen later) or not (never seen)
    let maybe = |call, v| Op { call, ret: None, kind: Kind::Write(v) };
    assert!(check(&[w(0, 1, 1), maybe(2, 2), r(3, 4, Some(2))], None).is_ok());
    assert!(check(&[w(0, 1, 1), maybe(2, 2), r(3, 4, Some(1))], None).is_ok());
    // ... but not before it was called
    assert!(check(&[w(0, 1, 1), r(2, 3, Some(2)), maybe(4, 2)], None).is_err());
    // a value nobody wrote
    assert!(check(&[w(0, 1, 1), r(2, 3, Some(7))], None).is_err());
    // forty writes of unknown outcome nobody saw, overlapping later reads: decided at once
    // (each would double the sets the search tries), and a stale read among them still found
    let mut many: Vec<Op> = (0..40).map(|i| maybe(2 + i, 100 + i)).collect();
    many.extend([w(0, 1, 1), r(50, 51, Some(1)), w(52, 53, 2), r(54, 55, Some(1))]);
    let e = check(&many, None).expect_err("the last read is stale");
    // (the search backtracks to the first return, w(0, 1, 1): op 40 of `many`, not of the
    // history without the unseen writes)
    assert!(e.contains("op 40 "), "the error numbers operations as the history does: {e}");
    many.pop();
    assert!(check(&many, None).is_ok());
}

#[test]
fn histories_through_failovers_are_linearizable() {
    const KEYS: usize = 3;
    const CLIENTS: usize = 6;
    let dir = TempDir::new("raft-linearizable");
    let mut cluster = Cluster::start(dir.path(), &shard_design(), 1, 3, FAST_RAFT);
    let first = cluster.wait_leader(0, Duration::from_secs(10));
    let addrs: Vec<_> = cluster.nodes.iter().map(|n| n.addr).collect();
    let start = Instant::now();
    let now = move || start.elapsed().as_micros() as u64;
    let stop = AtomicBool::new(false);
    let history: Mutex<Vec<Vec<Op>>> = Mutex::new(vec![Vec::new(); KEYS]);
    let mut faults = Vec::new();
    std::thread::scope(|s| {
        let guard = StopOnDrop::new(&stop);
        for client in 0..CLIENTS {
            let (addrs, stop, history, since) = (addrs.clone(), &stop, &history, guard.since());
            s.spawn(move || {
                let mut c = ShardClient::new(addrs, client).with_timeout(Duration::from_millis(800));
                let mut rng = rand::rngs::StdRng::seed_from_u64(100 + client as u64);
                let mut seq = 0u64;
                while !StopOnDrop::stopped(stop, since) {
                    c.retarget(rng.gen_range(0..3));
                    let k = rng.gen_range(0..KEYS);
                    let key = format!("reg{k}");
                    let call = now();
                    let op = if rng.gen_bool(0.5) {
                        seq += 1;
                        let v = (client as u64) << 32 | seq;
                        match c.call(&[b"SET", key.as_bytes(), v.to_string().as_bytes()], Duration::from_secs(3)) {
                            Outcome::Done(Reply::Simple(ok)) if ok == "OK" => Some(Op { call, ret: Some(now()), kind: Kind::Write(v) }),
                            Outcome::Done(other) => panic!("SET answered {other:?}"),
                            Outcome::Unknown(_) => Some(Op { call, ret: None, kind: Kind::Write(v) }),
                            Outcome::Failed(_) => None,
                        }
                    } else {
                        match c.call(&[b"GET", key.as_bytes()], Duration::from_secs(3)) {
                            Outcome::Done(Reply::Bulk(b)) => {
                                let v = String::from_utf8_lossy(&b).parse::<u64>().expect("a value the test wrote");
                                Some(Op { call, ret: Some(now()), kind: Kind::Read(Some(v)) })
                            }
                            Outcome::Done(Reply::Nil) => Some(Op { call, ret: Some(now()), kind: Kind::Read(None) }),
                            Outcome::Done(other) => panic!("GET answered {other:?}"),
                            Outcome::Unknown(_) | Outcome::Failed(_) => None, // a failed read did nothing
                        }
                    };
                    if let Some(op) = op {
                        history.lock().expect("history")[k].push(op);
                    }
                }
            });
        }
        // pauses replica `l` (the leader) until another is elected, then resumes it; the new leader
        // (and right after the resume, reads sent straight to it: the moment it may still answer as a leader)
        let pause = |cluster: &mut Cluster, l: usize| {
            cluster.signal(l, "STOP");
            let t = Instant::now();
            let next = loop {
                let found = (0..3).filter(|&i| i != l).find(|&i| {
                    cluster.running(i) && cluster.replication(i).is_some_and(|r| r.iter().any(|(k, v)| k == "raft_state" && v == "leader"))
                });
                if let Some(n) = found {
                    break n;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    panic!("no leader while node {l} is stopped:\n{}", cluster.describe());
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            std::thread::sleep(Duration::from_millis(300));
            // (the kernel accepts the connection of a stopped process)
            let mut probe = cosine_server::client::Client::connect(addrs[l], Duration::from_secs(1)).ok();
            cluster.signal(l, "CONT");
            for i in 0..30 * KEYS {
                let Some(c) = probe.as_mut() else { break };
                let key = format!("reg{}", i % KEYS);
                let call = now();
                let kind = match c.call(&[b"GET", key.as_bytes()]) {
                    Ok(Reply::Bulk(b)) => Kind::Read(Some(String::from_utf8_lossy(&b).parse::<u64>().expect("a value the test wrote"))),
                    Ok(Reply::Nil) => Kind::Read(None),
                    Ok(_) => continue, // redirected: it knows it does not lead
                    Err(_) => break,
                };
                history.lock().expect("history")[i % KEYS].push(Op { call, ret: Some(now()), kind });
            }
            next
        };
        std::thread::sleep(Duration::from_millis(600));
        faults.push(now());
        let second = pause(&mut cluster, first);
        std::thread::sleep(Duration::from_millis(500));
        // kill the new leader, restart it
        faults.push(now());
        cluster.kill(second);
        let third = cluster.wait_leader(0, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(300));
        cluster.spawn(second);
        std::thread::sleep(Duration::from_millis(500));
        faults.push(now());
        let _ = pause(&mut cluster, third);
        std::thread::sleep(Duration::from_millis(500));
        faults.push(now());
        drop(guard);
    });
    let history = history.into_inner().expect("history");
    for (k, ops) in history.iter().enumerate() {
        // completed operations in each phase: before the first pause, between the faults, after the last
        let phases: Vec<usize> = [(0, faults[0]), (faults[0], faults[1]), (faults[1], faults[2]), (faults[2], faults[3])]
            .iter()
            .map(|&(a, b)| ops.iter().filter(|o| o.call >= a && o.ret.is_some_and(|r| r <= b)).count())
            .collect();
        let reads = ops.iter().filter(|o| matches!(o.kind, Kind::Read(Some(_)))).count();
        assert!(
            phases.iter().all(|n| *n >= 5) && reads >= 10,
            "key {k}: too few operations to check: {phases:?} per phase, {reads} reads of a value"
        );
        if let Err(e) = check(ops, None) {
            panic!("key reg{k}: the history of {} operations is not linearizable: {e}", ops.len());
        }
    }
}

/// The keys of the snapshot test.
fn snap_key(i: usize) -> String {
    format!("snap{i:05}")
}

/// Reads every key of `0..n` on replica `i` itself (READONLY); the keys it lacks.
fn missing_on(cluster: &Cluster, i: usize, n: usize) -> Vec<usize> {
    let mut c = cosine_server::client::Client::connect(cluster.nodes[i].addr, Duration::from_secs(5)).expect("connect");
    assert_eq!(c.call(&[b"READONLY"]).expect("READONLY"), Reply::ok());
    (0..n)
        .filter(|k| match c.call(&[b"GET", snap_key(*k).as_bytes()]).expect("GET") {
            Reply::Bulk(v) => v != format!("v{k}").into_bytes(),
            _ => true,
        })
        .collect()
}

#[test]
fn snapshots_bring_back_a_replica_and_survive_a_full_restart() {
    const N: usize = 800;
    let raft = r#"{"heartbeat_ms": 50, "election_min_ms": 300, "election_max_ms": 600, "snapshot_entries": 100, "keep_entries": 20}"#;
    let dir = TempDir::new("raft-snapshots");
    let mut cluster = Cluster::start_with(dir.path(), &shard_design(), 1, 3, raft, "eventual");
    let leader = cluster.wait_leader(0, Duration::from_secs(10));
    let behind = (leader + 1) % 3;
    cluster.kill(behind);
    let addrs: Vec<_> = cluster.nodes.iter().map(|n| n.addr).collect();
    let mut c = ShardClient::new(addrs.clone(), leader);
    for k in 0..N {
        let out = c.call(&[b"SET", snap_key(k).as_bytes(), format!("v{k}").as_bytes()], Duration::from_secs(5));
        assert_eq!(out, Outcome::Done(Reply::ok()), "SET {k}");
    }
    let field = |c: &Cluster, i: usize, f: &str| c.field(i, f).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    assert!(field(&cluster, leader, "raft_snapshots_built") >= 1, "the leader built no snapshot");
    let purged = field(&cluster, leader, "raft_purged_index");
    assert!(purged >= 100, "the leader's log was not purged (purged index {purged})");
    cluster.spawn(behind);
    let target = cluster.applied(leader).expect("leader's applied index");
    let t = Instant::now();
    while cluster.applied(behind).is_none_or(|a| a < target) {
        assert!(t.elapsed() < Duration::from_secs(15), "the restarted replica did not catch up: {:?} of {target}", cluster.applied(behind));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(field(&cluster, behind, "raft_snapshots_installed") >= 1, "it caught up without a snapshot: {:?}", cluster.replication(behind));
    let missing = missing_on(&cluster, behind, N);
    assert!(
        missing.is_empty(),
        "{} keys missing on the replica restored from a snapshot: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    // every replica at once
    for i in 0..3 {
        cluster.kill(i);
    }
    for i in 0..3 {
        cluster.spawn(i);
    }
    let leader = cluster.wait_leader(0, Duration::from_secs(10));
    let mut c = ShardClient::new(addrs, leader);
    assert_eq!(c.call(&[b"SET", b"after", b"restart"], Duration::from_secs(5)), Outcome::Done(Reply::ok()));
    let target = cluster.applied(leader).expect("leader's applied index");
    for i in 0..3 {
        let t = Instant::now();
        while cluster.applied(i).is_none_or(|a| a < target) {
            assert!(t.elapsed() < Duration::from_secs(10), "replica {i} did not catch up after the restart");
            std::thread::sleep(Duration::from_millis(50));
        }
        let missing = missing_on(&cluster, i, N);
        assert!(
            missing.is_empty(),
            "{} keys missing on replica {i} after the restart: {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
    }
}

#[test]
fn a_paused_follower_does_not_depose_the_leader() {
    let dir = TempDir::new("raft-prevote");
    let mut cluster = Cluster::start(dir.path(), &shard_design(), 1, 3, FAST_RAFT);
    let leader = cluster.wait_leader(0, Duration::from_secs(10));
    let term = cluster.field(leader, "raft_term").expect("leader's term");
    let follower = (leader + 1) % 3;
    let addrs: Vec<_> = cluster.nodes.iter().map(|n| n.addr).collect();
    let mut c = ShardClient::new(addrs, leader);
    // paused for three election timeouts: it hears from no leader, and when it resumes it would stand
    cluster.signal(follower, "STOP");
    let t = Instant::now();
    let mut k = 0;
    while t.elapsed() < Duration::from_millis(1800) {
        k += 1;
        assert_eq!(c.call(&[b"SET", format!("p{k}").as_bytes(), b"v"], Duration::from_secs(5)), Outcome::Done(Reply::ok()));
    }
    cluster.signal(follower, "CONT");
    // writes go on without a pause (each answered well within an election timeout), and the leader stays
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(2000) {
        k += 1;
        let s = Instant::now();
        assert_eq!(c.call(&[b"SET", format!("p{k}").as_bytes(), b"v"], Duration::from_secs(5)), Outcome::Done(Reply::ok()));
        assert!(s.elapsed() < Duration::from_millis(300), "a SET took {:?} after the follower resumed", s.elapsed());
    }
    assert_eq!(cluster.wait_leader(0, Duration::from_secs(5)), leader, "the leader changed");
    assert_eq!(cluster.field(leader, "raft_term").as_deref(), Some(term.as_str()), "the term moved: an election was held");
    let behind = cluster.applied(follower).expect("the follower answers");
    assert!(behind > 0, "the resumed follower applied nothing");
}
