//! `cosine-server --config engine.toml --dir DATA_DIR [--bind 127.0.0.1] [--port 6379]
//! [--cluster cluster.json --node-id N]
//! [--max-bulk-bytes N] [--max-clients N] [--client-output-buffer-hard-bytes N]
//! [--client-output-buffer-soft-bytes N] [--client-output-buffer-soft-seconds N]`
//!
//! With `--cluster`, the server is replica N of a replicated shard (cosine_server::cluster):
//! DATA_DIR holds its engine, Raft log and snapshots; it binds the RESP port and the bus
//! port the cluster file gives it (`--bind`/`--port` override the RESP side) and speaks the
//! Redis Cluster protocol. If its Raft node stops on a storage failure it exits 1.
//!
//! Opens the engine in DATA_DIR with the design of engine.toml and serves it over
//! RESP2. Prints `ready HOST:PORT` on stdout once it accepts connections (`--port 0`
//! picks a free port). SIGTERM or SIGINT: stop accepting, finish running batches,
//! flush the memtable, close the engine, exit 0. Exit 2 on bad arguments or a bad
//! design, 1 if the engine fails.
//!
//! The per-client output limit (`cosine_server::output`; defaults 256 MiB hard, 64 MiB
//! soft for 60 s) is read from engine.toml's `[server]` section
//! (`client_output_buffer_hard_bytes`, `client_output_buffer_soft_bytes`,
//! `client_output_buffer_soft_seconds`); the flags override it. 0 turns a limit off.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::Config;
use cosine_engine::Engine;
use cosine_raft::{Replica, ReplicaSpec};
use cosine_server::cluster::ClusterNode;
use cosine_server::server::DurabilityWaiter;
use cosine_server::stats::wal_sync_name;
use cosine_server::topology::Topology;
use cosine_server::{serve_backend, Backend, ServerConfig, ServerError, ServerStats};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: cosine-server --config engine.toml --dir DATA_DIR [--bind 127.0.0.1] [--port 6379] \
[--cluster cluster.json --node-id N] \
[--max-bulk-bytes N] [--max-clients N] [--client-output-buffer-hard-bytes N] [--client-output-buffer-soft-bytes N] \
[--client-output-buffer-soft-seconds N]";

struct Args {
    config: PathBuf,
    dir: PathBuf,
    bind: String,
    port: u16,
    /// `--bind` / `--port` were given (a cluster file's addresses apply otherwise).
    addr_given: (bool, bool),
    /// `--cluster FILE --node-id N`.
    cluster: Option<(PathBuf, u64)>,
    server: ServerConfig,
    /// `--client-output-buffer-*`: hard bytes, soft bytes, soft seconds (over engine.toml's `[server]`).
    output: [Option<u64>; 3],
}

fn parse_args() -> Result<Option<Args>, ServerError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut config, mut dir) = (None, None);
    let mut bind = "127.0.0.1".to_string();
    let mut port: u16 = 6379;
    let mut server = ServerConfig::default();
    let mut output = [None; 3];
    let mut addr_given = (false, false);
    let (mut cluster, mut node_id) = (None, None);
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-h" | "--help") {
            println!("{USAGE}");
            return Ok(None);
        }
        let val = args.get(i + 1).cloned().ok_or_else(|| ServerError::Usage(format!("{} needs a value", args[i])))?;
        let num = |lo: u64, hi: u64| -> Result<u64, ServerError> {
            val.parse::<u64>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| ServerError::Usage(format!("{}: expected an integer from {lo} to {hi}, got {val:?}", args[i])))
        };
        match args[i].as_str() {
            "--config" => config = Some(PathBuf::from(&val)),
            "--dir" => dir = Some(PathBuf::from(&val)),
            "--bind" => {
                bind = val.clone();
                addr_given.0 = true;
            }
            "--port" => {
                port = num(0, 65535)? as u16;
                addr_given.1 = true;
            }
            "--cluster" => cluster = Some(PathBuf::from(&val)),
            "--node-id" => node_id = Some(num(1, u64::MAX)?),
            "--max-bulk-bytes" => server.limits.max_bulk = num(1, 512 << 20)? as usize,
            "--max-clients" => server.max_clients = num(1, 1_000_000)?,
            "--client-output-buffer-hard-bytes" => output[0] = Some(num(0, 1 << 50)?),
            "--client-output-buffer-soft-bytes" => output[1] = Some(num(0, 1 << 50)?),
            "--client-output-buffer-soft-seconds" => output[2] = Some(num(0, 1_000_000)?),
            a => return Err(ServerError::Usage(format!("unknown argument {a}"))),
        }
        i += 2;
    }
    let config = config.ok_or_else(|| ServerError::Usage("--config is required".into()))?;
    let dir = dir.ok_or_else(|| ServerError::Usage("--dir is required".into()))?;
    let cluster = match (cluster, node_id) {
        (Some(c), Some(n)) => Some((c, n)),
        (None, None) => None,
        _ => return Err(ServerError::Usage("--cluster and --node-id go together".into())),
    };
    Ok(Some(Args { config, dir, bind, port, addr_given, cluster, server, output }))
}

/// The server's settings: the defaults, then engine.toml's `[server]`, then the flags.
fn settings(args: &Args, cfg: &Config) -> Result<ServerConfig, ServerError> {
    let mut server = args.server;
    let s = &cfg.server;
    let o = &mut server.output;
    let [hard, soft, seconds] = args.output;
    o.hard_bytes = hard.or(s.client_output_buffer_hard_bytes).unwrap_or(o.hard_bytes);
    o.soft_bytes = soft.or(s.client_output_buffer_soft_bytes).unwrap_or(o.soft_bytes);
    o.soft_seconds = seconds.or(s.client_output_buffer_soft_seconds).unwrap_or(o.soft_seconds);
    o.validate()?;
    Ok(server)
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
    let code = match parse_args() {
        Ok(Some(args)) => match start(args) {
            Ok(()) => return,
            Err(e) => report(&e),
        },
        Ok(None) => return,
        Err(e) => report(&e),
    };
    std::process::exit(code);
}

/// Prints `e` on stderr (with the usage line after a bad argument) and returns the exit status.
fn report(e: &ServerError) -> i32 {
    eprintln!("cosine-server: {e}");
    if matches!(e, ServerError::Usage(_)) {
        eprintln!("{USAGE}");
    }
    e.exit_code()
}

fn start(args: Args) -> Result<(), ServerError> {
    let cfg = Config::from_toml_file(&args.config).map_err(|source| ServerError::Config { path: args.config.clone(), source })?;
    let server = settings(&args, &cfg)?;
    match args.cluster.clone() {
        Some((file, id)) => run_cluster(args, cfg, server, &file, id),
        None => run(args, cfg, server),
    }
}

/// Serves as replica `id` of the cluster in `file` until SIGTERM/SIGINT (exit 0 after the
/// engine is flushed and closed) or until the Raft node stops on a failure (exit 1).
fn run_cluster(args: Args, cfg: Config, server: ServerConfig, file: &std::path::Path, id: u64) -> Result<(), ServerError> {
    let topo = Topology::load(file)?;
    let (shard, me) = topo.replica(id).ok_or_else(|| ServerError::Cluster(format!("{}: no replica {id}", file.display())))?;
    let me = me.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.algorithms.threads.max(2))
        .enable_all()
        .build()
        .map_err(|source| ServerError::Io { what: "cannot start the runtime", source })?;
    let res = rt.block_on(async {
        let bind = if args.addr_given.0 { args.bind.clone() } else { me.host.clone() };
        let port = if args.addr_given.1 { args.port } else { me.port };
        let addr = format!("{bind}:{port}");
        let listener = tokio::net::TcpListener::bind((bind.as_str(), port))
            .await
            .map_err(|source| ServerError::Listen { addr: addr.clone(), source })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Listen { addr, source })?;
        let bus_addr = format!("{bind}:{}", me.bus_port);
        let bus = tokio::net::TcpListener::bind((bind.as_str(), me.bus_port))
            .await
            .map_err(|source| ServerError::Listen { addr: bus_addr, source })?;
        let signal_handler = |source| ServerError::Io { what: "cannot install the SIGTERM/SIGINT handler", source };
        let mut term = signal(SignalKind::terminate()).map_err(signal_handler)?;
        let mut int = signal(SignalKind::interrupt()).map_err(signal_handler)?;
        let spec = ReplicaSpec { id, members: topo.members(shard), dir: args.dir.clone(), timing: topo.timing };
        let replica = Replica::start(spec, &cfg, bus).await.map_err(|e| ServerError::Replica(e.to_string()))?;
        let consistency = topo.consistency;
        let node = Arc::new(ClusterNode::new(topo, id, replica, cfg.layout.key_bytes)?);
        node.spawn_poller();
        eprintln!(
            "cosine-server: replica {id} of shard {shard}, {} ({}, raft log wal_sync = {}, {consistency:?} reads) on {addr}, bus {}",
            args.dir.display(),
            cfg.design.name,
            wal_sync_name(cfg.durability.wal_sync),
            me.bus_port
        );
        println!("ready {addr}");
        let _ = std::io::stdout().flush();
        let stats = Arc::new(ServerStats::new(addr.port()));
        let fatal = Arc::new(std::sync::Mutex::new(None::<String>));
        let (n, f) = (node.clone(), fatal.clone());
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                m = n.replica().stopped() => {
                    if let Ok(mut g) = f.lock() {
                        *g = Some(m);
                    }
                }
            }
        };
        serve_backend(listener, Backend::Cluster(node.clone()), stats, server, stop).await;
        let stopped = fatal.lock().ok().and_then(|mut g| g.take());
        if let Some(m) = stopped {
            return Err(ServerError::ReplicaStopped(m));
        }
        node.replica().shutdown().await.map_err(|source| ServerError::Io { what: "closing the replica", source })?;
        Ok::<(), ServerError>(())
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    res?;
    eprintln!("cosine-server: flushed and closed");
    Ok(())
}

fn run(args: Args, cfg: Config, server: ServerConfig) -> Result<(), ServerError> {
    let engine = Arc::new(Engine::open(&args.dir, &cfg).map_err(|source| ServerError::Open { dir: args.dir.clone(), source })?);
    // a worker about to park syncs the writes waiting (cosine_server::server::DurabilityWaiter)
    let durable = DurabilityWaiter::for_engine(&engine);
    let idle = durable.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.algorithms.threads.max(1))
        .on_thread_park(move || idle.on_idle())
        .enable_all()
        .build()
        .map_err(|source| ServerError::Io { what: "cannot start the runtime", source })?;
    rt.block_on(async {
        let addr = format!("{}:{}", args.bind, args.port);
        let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
            .await
            .map_err(|source| ServerError::Listen { addr: addr.clone(), source })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Listen { addr, source })?;
        let signal_handler = |source| ServerError::Io { what: "cannot install the SIGTERM/SIGINT handler", source };
        let mut term = signal(SignalKind::terminate()).map_err(signal_handler)?;
        let mut int = signal(SignalKind::interrupt()).map_err(signal_handler)?;
        let o = server.output;
        eprintln!(
            "cosine-server: {} ({}, wal_sync = {}) on {addr}; client output buffer limit {} {} {}",
            args.dir.display(),
            cfg.design.name,
            wal_sync_name(cfg.durability.wal_sync),
            o.hard_bytes,
            o.soft_bytes,
            o.soft_seconds
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
        serve_backend(listener, Backend::Engine(engine.clone(), durable), stats, server, stop).await;
        Ok::<(), ServerError>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    engine.flush().map_err(|source| ServerError::Shutdown { step: "flush", source })?;
    match Arc::try_unwrap(engine) {
        Ok(e) => e.close().map_err(|source| ServerError::Shutdown { step: "close", source })?,
        Err(_) => return Err(ServerError::OutlivedShutdown),
    }
    eprintln!("cosine-server: flushed and closed");
    Ok(())
}
