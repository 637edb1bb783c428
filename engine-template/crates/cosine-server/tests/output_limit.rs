//! The per-client output limit (Redis' `client-output-buffer-limit`), end to end on the
//! `cosine-server` binary: a client that pipelines GETs of a 4 MiB value and never reads
//! the replies is closed at the hard limit set in engine.toml's `[server]`; the server's
//! RSS stays under the limit plus a stated slack all along, another client is answered
//! throughout, `INFO stats` counts the disconnection, and RSS comes back down. A client
//! that stays over the soft limit (set on the command line) for its seconds is closed
//! too; contradictory limits are refused at start.
//!
//! Before the limit, the flood below (200 GETs of 4 MiB) made the server hold every
//! reply, 800 MiB, plus the writer's encoding copy of them (one connection pipelining
//! 135,000 GETs of 1 MB reached 12.8 GB).

mod common;

use common::{client, design, Spawned};
use cosine_config::presets::{to_toml, Preset};
use cosine_config::WalSync;
use cosine_server::client::{encode_request, Client};
use cosine_server::Reply;
use cosine_tests::TempDir;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// The value every flooding GET reads: larger than the server's 1 MiB pieces of a
/// batch, so each piece holds one reply and 16 queued pieces (64 MiB) reach the limit.
const VALUE: usize = 4 << 20;
/// Pipelined GETs of it: 800 MiB of replies if nothing stops the server producing them.
const FLOOD: usize = 200;
/// The hard limit the test configures (engine.toml `[server]`).
const HARD: u64 = 48 * MIB;
/// How far over `baseline + HARD` the server's RSS may go while the flooder is served:
/// * the reply that crossed the limit (4 MiB: it is counted once produced) and the
///   writer's copy of the reply it was encoding when it blocked (4 MiB + a 64 KiB chunk);
/// * replies already written into the loopback socket buffers (the server's send
///   buffer, up to `tcp_wmem` max 4 MiB, the client's receive buffer, up to `tcp_rmem`
///   max 6 MiB) are freed, but mimalloc returns freed pages to the system only about a
///   second later, so up to ~10 MiB of them may still count in RSS;
/// * allocator rounding and per-thread caches (a few MiB).
///
/// That is about 22 MiB; 32 MiB leaves room for a busy machine. The old server is past
/// `baseline + HARD + SLACK` (80 MiB) by its 20th reply.
const SLACK: u64 = 32 * MIB;
/// RSS over the baseline allowed once the flooder is gone. Its queued replies are freed
/// at the close; mimalloc returns freed pages to the system (`MADV_DONTNEED`) at least
/// its `purge_delay` (1 s) later, when a thread next takes fresh pages: here for the
/// GETs of the big value the test goes on making. What stays is one such reply and the
/// writer's copy of it (8 MiB) and allocator caches.
const SETTLED: u64 = 16 * MIB;

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib * 1024
}

/// A field of `INFO stats` (None if the server has no such section or field).
fn info_field(c: &mut Client, name: &str) -> Option<u64> {
    let Reply::Bulk(info) = c.call(&[b"INFO", b"stats"]).expect("INFO stats") else { return None };
    let info = String::from_utf8(info).expect("utf-8");
    info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).and_then(|v| v.trim().parse().ok())
}

fn disconnections(c: &mut Client) -> u64 {
    info_field(c, "client_output_buffer_limit_disconnections").unwrap_or(0)
}

/// A well-behaved client on its own thread: PING and GET of a small key in a loop,
/// every reply checked; returns (round trips, slowest round trip) once `stop` is set.
fn bystander(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, Duration)> {
    std::thread::spawn(move || {
        let mut c = client(addr);
        let (mut rounds, mut slowest) = (0u64, Duration::ZERO);
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            assert_eq!(c.call(&[b"PING"]).expect("PING during the flood"), Reply::Simple("PONG".into()));
            assert_eq!(c.call(&[b"GET", b"small"]).expect("GET during the flood"), Reply::Bulk(b"s".to_vec()));
            slowest = slowest.max(t.elapsed());
            rounds += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        (rounds, slowest)
    })
}

/// The largest VmRSS of `pid`, sampled every millisecond until `stop` is set.
fn rss_sampler(pid: u32, peak: Arc<AtomicU64>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            peak.fetch_max(rss(pid), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}

/// A small design (`wal_sync = none`, two runtime workers) and `server_section`.
fn design_text(server_section: &str) -> String {
    let mut cfg = design(Preset::RocksDb, WalSync::None);
    cfg.algorithms.threads = 2;
    format!("{}\n{server_section}", to_toml(&cfg))
}

#[test]
fn a_client_that_does_not_read_is_closed_at_the_hard_limit_and_memory_stays_bounded() {
    let dir = TempDir::new("server-obuf-hard");
    let toml = design_text(&format!("[server]\nclient_output_buffer_hard_bytes = {HARD}\nclient_output_buffer_soft_bytes = 0\n"));
    let srv = Spawned::start_with(&dir.path().join("db"), &toml, &[]);
    let pid = srv.child.id();
    let mut c = client(srv.addr);
    let big = vec![b'v'; VALUE];
    assert_eq!(c.call(&[b"SET", b"big", &big]).expect("SET big"), Reply::ok());
    assert_eq!(c.call(&[b"SET", b"small", b"s"]).expect("SET small"), Reply::ok());
    assert!(c.call(&[b"GET", b"big"]).expect("GET big") == Reply::Bulk(big.clone()), "warm-up read");
    assert_eq!(disconnections(&mut c), 0);
    let baseline = rss(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let other = bystander(srv.addr, stop.clone());
    let (peak, sampled) = (Arc::new(AtomicU64::new(baseline)), Arc::new(AtomicBool::new(false)));
    let sampler = rss_sampler(pid, peak.clone(), sampled.clone());
    let mut flooder = client(srv.addr);
    let wire: Vec<u8> = (0..FLOOD).flat_map(|_| encode_request(&[b"GET", b"big"])).collect();
    flooder.send_raw(&wire).expect("send the pipeline");
    // Not reading, until INFO counts the disconnection; RSS stays bounded all along.
    let start = Instant::now();
    let over = |peak: u64| {
        format!(
            "RSS {} MiB over a baseline of {} MiB: more than the {} MiB limit plus {} MiB slack",
            (peak - baseline) / MIB,
            baseline / MIB,
            HARD / MIB,
            SLACK / MIB
        )
    };
    while disconnections(&mut c) == 0 {
        let p = peak.load(Ordering::Relaxed);
        assert!(p <= baseline + HARD + SLACK, "{}", over(p));
        assert!(start.elapsed() < Duration::from_secs(20), "the flooding client was not disconnected within 20 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let closed_after = start.elapsed();
    std::thread::sleep(Duration::from_millis(20)); // the last samples
    sampled.store(true, Ordering::Relaxed);
    sampler.join().expect("RSS sampler");
    let peak = peak.load(Ordering::Relaxed);
    assert!(peak <= baseline + HARD + SLACK, "{}", over(peak));
    assert_eq!(disconnections(&mut c), 1, "INFO stats counts one output-buffer disconnection");
    // The flooder finds the connection closed: the replies written before, then EOF or a reset.
    let mut got = 0;
    let end = loop {
        match flooder.recv() {
            Ok(r) => {
                assert!(r == Reply::Bulk(big.clone()), "reply {got} is not the value");
                got += 1;
            }
            Err(e) => break e,
        }
    };
    assert!(got < FLOOD, "the flooding client got all {FLOOD} replies: it was not disconnected");
    assert!(
        matches!(end.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset),
        "expected the server to close the connection, got {end:?} after {got} replies"
    );
    // Memory comes back down while the server goes on serving the big value.
    let settle = Instant::now();
    let mut now = rss(pid);
    while now > baseline + SETTLED && settle.elapsed() < Duration::from_secs(10) {
        assert!(c.call(&[b"GET", b"big"]).expect("GET big after") == Reply::Bulk(big.clone()));
        std::thread::sleep(Duration::from_millis(100));
        now = rss(pid);
    }
    stop.store(true, Ordering::Relaxed);
    let (rounds, slowest) = other.join().expect("the other client was answered all along");
    assert!(
        now <= baseline + SETTLED,
        "RSS stayed {} MiB over the baseline ({} MiB) 10 s after the disconnection",
        (now - baseline) / MIB,
        baseline / MIB
    );
    assert!(rounds >= 5, "the other client made only {rounds} round trips");
    assert!(slowest < Duration::from_secs(2), "a PING + GET of the other client took {slowest:?} during the flood");
    eprintln!(
        "closed after {closed_after:?}; RSS baseline {} MiB, peak +{} MiB, +{} MiB {:?} after the close; \
         {got} replies before the close; the other client: {rounds} round trips (slowest {slowest:?})",
        baseline / MIB,
        (peak - baseline) / MIB,
        now.saturating_sub(baseline) / MIB,
        settle.elapsed()
    );
}

#[test]
fn a_client_over_the_soft_limit_for_its_seconds_is_closed() {
    let dir = TempDir::new("server-obuf-soft");
    // The flags override engine.toml: a hard limit far above the queue, a 4 MiB soft limit for 1 s.
    let toml = design_text("[server]\nclient_output_buffer_soft_bytes = 1\nclient_output_buffer_soft_seconds = 600\n");
    let flags = [
        "--client-output-buffer-hard-bytes",
        "268435456",
        "--client-output-buffer-soft-bytes",
        "4194304",
        "--client-output-buffer-soft-seconds",
        "1",
    ];
    let srv = Spawned::start_with(&dir.path().join("db"), &toml, &flags);
    let mut c = client(srv.addr);
    let big = vec![b'v'; 1 << 20];
    assert_eq!(c.call(&[b"SET", b"big", &big]).expect("SET big"), Reply::ok());
    // 40 MiB of replies: about 10 fit in the socket buffers, up to 16 more wait for the
    // writer (over 4 MiB, under 256), and then the server stops producing.
    let mut slow = client(srv.addr);
    let wire: Vec<u8> = (0..40).flat_map(|_| encode_request(&[b"GET", b"big"])).collect();
    let sent = Instant::now();
    slow.send_raw(&wire).expect("send");
    while disconnections(&mut c) == 0 {
        assert!(sent.elapsed() < Duration::from_secs(15), "the client over the soft limit was not closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = sent.elapsed();
    assert!(after >= Duration::from_millis(900), "closed after {after:?}: before its soft seconds ran out");
    let mut got = 0;
    while slow.recv().is_ok() {
        got += 1;
    }
    assert!(got < 40, "all 40 replies arrived: the connection was not closed");
    assert_eq!(c.call(&[b"PING"]).expect("ping"), Reply::Simple("PONG".into()));
    let (status, err) = srv.signal("TERM");
    assert!(status.success(), "{err}");
    assert!(err.contains("soft output-buffer limit of 4194304 bytes for 1 s"), "{err}");
    assert!(err.contains("client output buffer limit 268435456 4194304 1"), "the flags override engine.toml: {err}");
}

#[test]
fn a_soft_limit_not_below_the_hard_limit_is_refused_at_start() {
    let dir = TempDir::new("server-obuf-bad");
    let toml_path = dir.path().join("engine.toml");
    std::fs::write(&toml_path, design_text("[server]\nclient_output_buffer_hard_bytes = 1000\n")).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cosine-server"))
        .args(["--config", toml_path.to_str().expect("utf-8"), "--dir", dir.path().join("db").to_str().expect("utf-8")])
        .args(["--port", "0", "--client-output-buffer-soft-bytes", "1000"])
        .output()
        .expect("run cosine-server");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("soft output-buffer limit (1000 bytes) is not below the hard limit (1000 bytes)"), "{err}");
}
