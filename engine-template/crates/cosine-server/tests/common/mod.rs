//! Helpers shared by the server's integration tests: a design, an in-process
//! server on a free loopback port, and the `cosine-server` binary as a child.
#![allow(dead_code)]

pub mod linearizability;
pub mod raft;

use cosine_config::presets::{tiny, to_toml, Preset};
use cosine_config::{Config, WalSync};
use cosine_engine::Engine;
use cosine_server::client::Client;
use cosine_server::server::DurabilityWaiter;
use cosine_server::{serve_backend, Backend, ServerConfig, ServerStats};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A small LSM design (64-entry buffer) so that flushes and merges happen while a
/// test runs, with the given WAL policy.
pub fn design(preset: Preset, wal: WalSync) -> Config {
    let mut c = tiny(preset);
    c.layout.buffer_bytes = 64 * c.entry_bytes() as u64;
    c.durability.wal_sync = wal;
    c.durability.group_commit_interval_us = 500;
    c
}

/// A client with a 10 s timeout.
pub fn client(addr: SocketAddr) -> Client {
    Client::connect(addr, Duration::from_secs(10)).expect("connect")
}

/// A server running in this process on its own runtime; stopped on drop.
pub struct InProcess {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcess {
    /// Opens `cfg` in `dir` and serves it on 127.0.0.1 with `server` settings.
    pub fn start(dir: &Path, cfg: &Config, server: ServerConfig) -> InProcess {
        let engine = Arc::new(Engine::open(dir, cfg).expect("open engine"));
        // as cosine-server's main: a worker about to park syncs the writes waiting
        let durable = DurabilityWaiter::for_engine(&engine);
        let idle = durable.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_park(move || idle.on_idle())
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let stats = Arc::new(ServerStats::new(addr.port()));
            rt.block_on(serve_backend(listener, Backend::Engine(engine, durable), stats, server, async move {
                let _ = rx.await;
            }));
        });
        InProcess { addr, stop: Some(tx), thread: Some(thread) }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `cosine-server` binary serving `dir` with `cfg` (written next to it) on a free port.
pub struct Spawned {
    /// The child process.
    pub child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Spawned {
    /// Starts the binary and waits for its `ready` line.
    pub fn start(dir: &Path, cfg: &Config) -> Spawned {
        Spawned::start_with(dir, &to_toml(cfg), &[])
    }

    /// Starts the binary on an engine.toml of `toml_text`, with more command-line `args`.
    pub fn start_with(dir: &Path, toml_text: &str, args: &[&str]) -> Spawned {
        let toml = dir.with_extension("toml");
        std::fs::write(&toml, toml_text).expect("write engine.toml");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cosine-server"))
            .args(["--config", toml.to_str().expect("utf-8"), "--dir", dir.to_str().expect("utf-8"), "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cosine-server");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("ready line");
        let addr = line
            .trim()
            .strip_prefix("ready ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("cosine-server did not start: {line:?}"));
        Spawned { child, addr }
    }

    /// Sends `sig` (`TERM`, `KILL`) with kill(1) and waits for the exit status.
    pub fn signal(mut self, sig: &str) -> (std::process::ExitStatus, String) {
        let st = Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).status().expect("kill");
        assert!(st.success(), "kill -{sig} failed");
        let status = self.child.wait().expect("wait");
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        (status, err)
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
