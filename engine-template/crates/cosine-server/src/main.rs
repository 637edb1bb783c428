//! `cosine-server --config engine.toml --dir DATA_DIR [--bind 127.0.0.1] [--port 6379]
//! [--max-bulk-bytes N] [--max-clients N]`
//!
//! Opens the engine in DATA_DIR with the design of engine.toml and serves it over
//! RESP2. Prints `ready HOST:PORT` on stdout once it accepts connections (`--port 0`
//! picks a free port). SIGTERM or SIGINT: stop accepting, finish running batches,
//! flush the memtable, close the engine, exit 0. Exit 2 on bad arguments or a bad
//! design, 1 if the engine fails.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::Config;
use cosine_engine::Engine;
use cosine_server::stats::wal_sync_name;
use cosine_server::{serve, ServerConfig, ServerStats};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str =
    "usage: cosine-server --config engine.toml --dir DATA_DIR [--bind 127.0.0.1] [--port 6379] [--max-bulk-bytes N] [--max-clients N]";

struct Args {
    config: PathBuf,
    dir: PathBuf,
    bind: String,
    port: u16,
    server: ServerConfig,
}

fn parse_args() -> Result<Option<Args>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut config, mut dir) = (None, None);
    let mut bind = "127.0.0.1".to_string();
    let mut port: u16 = 6379;
    let mut server = ServerConfig::default();
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-h" | "--help") {
            println!("{USAGE}");
            return Ok(None);
        }
        let val = args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value\n{USAGE}", args[i]))?;
        let num = |lo: u64, hi: u64| -> Result<u64, String> {
            val.parse::<u64>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| format!("{}: expected an integer from {lo} to {hi}, got {val:?}", args[i]))
        };
        match args[i].as_str() {
            "--config" => config = Some(PathBuf::from(&val)),
            "--dir" => dir = Some(PathBuf::from(&val)),
            "--bind" => bind = val.clone(),
            "--port" => port = num(0, 65535)? as u16,
            "--max-bulk-bytes" => server.limits.max_bulk = num(1, 512 << 20)? as usize,
            "--max-clients" => server.max_clients = num(1, 1_000_000)?,
            a => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
        i += 2;
    }
    let config = config.ok_or_else(|| format!("--config is required\n{USAGE}"))?;
    let dir = dir.ok_or_else(|| format!("--dir is required\n{USAGE}"))?;
    Ok(Some(Args { config, dir, bind, port, server }))
}

/// The process's allocator. With glibc malloc a writer stalled on the arena lock while the
/// background thread freed a flushed memtable (~100,000 entries allocated by another
/// thread): a single-thread cached update run spent 11-23 % of its time off the CPU, the
/// background thread's CPU in the run matched the writer's lost time, and `LD_PRELOAD` of
/// another allocator removed it (docs/journal/s22-s30.md §23.1). RocksDB is built with jemalloc for
/// the same reason; mimalloc builds from the registry with only a C compiler.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => return,
        Err(e) => {
            eprintln!("cosine-server: {e}");
            std::process::exit(2);
        }
    };
    let cfg = match Config::from_toml_file(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cosine-server: {}: {e}", args.config.display());
            std::process::exit(2);
        }
    };
    if let Err(e) = run(args, cfg) {
        eprintln!("cosine-server: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args, cfg: Config) -> Result<(), String> {
    let engine = Arc::new(Engine::open(&args.dir, &cfg).map_err(|e| format!("{}: {e}", args.dir.display()))?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.algorithms.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
            .await
            .map_err(|e| format!("cannot listen on {}:{}: {e}", args.bind, args.port))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        eprintln!(
            "cosine-server: {} ({}, wal_sync = {}) on {addr}",
            args.dir.display(),
            cfg.design.name,
            wal_sync_name(cfg.durability.wal_sync)
        );
        println!("ready {addr}");
        let _ = std::io::stdout().flush();
        let stats = Arc::new(ServerStats::new(addr.port()));
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        };
        serve(listener, engine.clone(), stats, args.server, stop).await;
        Ok::<(), String>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    engine.flush().map_err(|e| format!("flush at shutdown: {e}"))?;
    match Arc::try_unwrap(engine) {
        Ok(e) => e.close().map_err(|e| format!("close: {e}"))?,
        Err(_) => return Err("a request outlived the shutdown; the WAL holds its writes".into()),
    }
    eprintln!("cosine-server: flushed and closed");
    Ok(())
}
