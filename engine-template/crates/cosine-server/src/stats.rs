//! The server's own counters and the `INFO` text (server + engine counters).

use cosine_config::WalSync;
use cosine_core::IoSnapshot;
use cosine_engine::Engine;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a batch's replies waited between the end of its execution and their write to the socket
/// (`INFO server`'s `reply_wait_*` lines): the runtime's schedule, which the served latency model
/// simulates (cost_models.latency.RuntimeLoop) and `cosine bench --served` reads beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyWait {
    /// A batch that wrote: its replies waited for the durability waiter's sync.
    Durable,
    /// Several replies and nothing to make durable: the writer yielded once before writing, so
    /// that one pass of the worker's replies leave together.
    Pipelined,
    /// One reply and nothing to make durable: written at once.
    Single,
}

impl ReplyWait {
    /// Every kind, in `INFO`'s order.
    pub const ALL: [ReplyWait; 3] = [ReplyWait::Durable, ReplyWait::Pipelined, ReplyWait::Single];

    /// Its name in `INFO` (`reply_wait_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            ReplyWait::Durable => "durable",
            ReplyWait::Pipelined => "pipelined",
            ReplyWait::Single => "single",
        }
    }
}

/// Who made a durability sync ([`crate::server::DurabilityWaiter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncBy {
    /// A runtime worker about to park (nothing left to run).
    Idle,
    /// The waiter's own thread, at its group-commit tick (or when the server stops).
    Tick,
}

/// Counters of one server process, updated lock-free by every connection.
#[derive(Debug)]
pub struct ServerStats {
    /// The port the server listens on (for `INFO`).
    pub port: u16,
    started: Instant,
    /// Connections open now.
    pub connected: AtomicU64,
    /// Connections accepted since start.
    pub connections: AtomicU64,
    /// Connections refused because `max_clients` were open.
    pub refused: AtomicU64,
    /// Commands executed (errors included).
    pub commands: AtomicU64,
    /// Requests answered with an error (unknown command, bad arguments, oversized bulk).
    pub rejected: AtomicU64,
    /// Connections closed for a protocol error.
    pub protocol_errors: AtomicU64,
    /// Batches of writes whose acknowledgement waited for the WAL policy's durability.
    pub durable_waits: AtomicU64,
    /// Connections closed for going over their output-buffer limit ([`crate::output`]).
    pub output_limit_disconnections: AtomicU64,
    /// Batches whose replies were written, per [`ReplyWait`] kind.
    reply_batches: [AtomicU64; 3],
    /// Their nanoseconds from the end of execution to the write, summed per kind.
    reply_wait_nanos: [AtomicU64; 3],
    /// Durability syncs that answered waiting writes, per [`SyncBy`] (idle, tick).
    syncs: [AtomicU64; 2],
}

impl ServerStats {
    /// Zeroed counters for a server on `port`.
    pub fn new(port: u16) -> ServerStats {
        ServerStats {
            port,
            started: Instant::now(),
            connected: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            durable_waits: AtomicU64::new(0),
            output_limit_disconnections: AtomicU64::new(0),
            reply_batches: Default::default(),
            reply_wait_nanos: Default::default(),
            syncs: Default::default(),
        }
    }

    /// Counts a batch's replies written after `waited` (from the end of its execution).
    pub fn reply_written(&self, kind: ReplyWait, waited: Duration) {
        let i = kind as usize;
        self.reply_batches[i].fetch_add(1, Ordering::Relaxed);
        self.reply_wait_nanos[i].fetch_add(u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Counts a durability sync that answered waiting writes.
    pub fn synced(&self, by: SyncBy) {
        self.syncs[by as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds one to a counter.
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// The name `engine.toml` uses for a WAL policy.
pub fn wal_sync_name(w: WalSync) -> &'static str {
    match w {
        WalSync::EveryWrite => "every_write",
        WalSync::GroupCommit => "group_commit",
        WalSync::None => "none",
    }
}

/// `INFO` text being built: `# Section` headers, `name:value` lines, CRLF, a blank
/// line between sections (Redis' format, which redis-cli and clients parse).
#[derive(Default)]
struct InfoText(String);

impl InfoText {
    fn section(&mut self, name: &str) {
        if !self.0.is_empty() {
            self.0.push_str("\r\n");
        }
        let _ = write!(self.0, "# {name}\r\n");
    }
    fn kv(&mut self, k: &str, v: impl std::fmt::Display) {
        let _ = write!(self.0, "{k}:{v}\r\n");
    }
}

/// `INFO [section]`: the server's counters (`server`), the clients it closed
/// (`stats`, with Redis' field names), the engine's counters (`engine`: block reads and
/// writes, flushes, merges, WAL syncs, operations) and its shape (`keyspace`). `None`
/// for an unknown section.
pub fn info_text(engine: &Engine, stats: &ServerStats, section: Option<&str>) -> Option<String> {
    let all = matches!(section, None | Some("all") | Some("default") | Some("everything"));
    let want = |s: &str| all || section == Some(s);
    if !["server", "stats", "engine", "keyspace"].iter().any(|s| want(s)) {
        return None;
    }
    let cfg = engine.config();
    let st = engine.stats();
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut t = InfoText::default();
    if want("server") {
        t.section("Server");
        t.kv("cosine_version", env!("CARGO_PKG_VERSION"));
        t.kv("design", cfg.design.name.replace(['\r', '\n'], " "));
        t.kv("class", format!("{:?}", cfg.design.class).to_ascii_lowercase());
        t.kv("key_bytes", cfg.layout.key_bytes);
        t.kv("wal_sync", wal_sync_name(cfg.durability.wal_sync));
        t.kv("group_commit_interval_us", cfg.durability.group_commit_interval_us);
        t.kv("process_id", std::process::id());
        t.kv("tcp_port", stats.port);
        t.kv("uptime_in_seconds", stats.started.elapsed().as_secs());
        t.kv("connected_clients", load(&stats.connected));
        t.kv("total_connections_received", load(&stats.connections));
        t.kv("rejected_connections", load(&stats.refused));
        t.kv("total_commands_processed", load(&stats.commands));
        t.kv("rejected_requests", load(&stats.rejected));
        t.kv("protocol_errors", load(&stats.protocol_errors));
        t.kv("durable_waits", load(&stats.durable_waits));
        // how long replies waited for the runtime and the waiter (totals: a reader takes differences)
        for k in ReplyWait::ALL {
            let i = k as usize;
            let usec = load(&stats.reply_wait_nanos[i]) / 1_000;
            t.kv(&format!("reply_wait_{}", k.name()), format!("batches={},usec={usec}", load(&stats.reply_batches[i])));
        }
        t.kv("durable_syncs_idle", load(&stats.syncs[SyncBy::Idle as usize]));
        t.kv("durable_syncs_tick", load(&stats.syncs[SyncBy::Tick as usize]));
    }
    if want("stats") {
        t.section("Stats");
        t.kv("client_output_buffer_limit_disconnections", load(&stats.output_limit_disconnections));
    }
    if want("engine") {
        let fg = st.ops.iter().fold(IoSnapshot::default(), |a, (_, o)| a.plus(&o.io));
        let total = fg.plus(&st.flush).plus(&st.compaction).plus(&st.open);
        t.section("Engine");
        t.kv("block_reads", total.blocks_read());
        t.kv("block_writes", total.blocks_written());
        t.kv("foreground_block_reads", fg.blocks_read());
        t.kv("flush_block_writes", st.flush.blocks_written());
        t.kv("compaction_block_reads", st.compaction.blocks_read());
        t.kv("compaction_block_writes", st.compaction.blocks_written());
        t.kv("open_block_reads", st.open.blocks_read());
        t.kv("flushes", st.flushes);
        t.kv("merges", st.compactions);
        t.kv("trivial_moves", st.trivial_moves);
        t.kv("log_gcs", st.gcs);
        t.kv("wal_syncs", st.wal_syncs);
        t.kv("wal_bytes", st.wal_bytes);
        t.kv("stall_micros", st.stall_micros);
        for (k, o) in &st.ops {
            t.kv(&format!("ops_{}", k.name()), o.count);
        }
        // the provisioned volume's counters (none on a local device): its I/Os, and how often and
        // how long the engine's threads slept for its tokens and its read latency
        if let Some(d) = engine.device() {
            t.kv("device_ios", d.ios);
            t.kv("device_read_ios", d.read_ios);
            t.kv("device_foreground_read_ios", d.foreground_read_ios);
            t.kv("device_sleeps", d.sleeps);
            t.kv("device_waited_usec", d.waited_ns / 1000);
        }
    }
    if want("keyspace") {
        t.section("Keyspace");
        t.kv("buffered_entries", st.buffered);
        t.kv("levels", st.levels.len());
        t.kv("level_entries", st.levels.iter().map(|l| l.entries).sum::<u64>());
        // one line per disk level, as Redis' `db0:keys=..,expires=..`: the engine's shape, which a
        // served prediction reads as the in-process bench reads its report's (measure/served.py)
        for l in &st.levels {
            t.kv(&format!("level{}", l.level), format!("entries={},runs={},files={}", l.entries, l.runs, l.files));
        }
        t.kv("fence_memory", st.fence_memory);
        t.kv("filter_memory", st.filter_memory);
    }
    Some(t.0)
}
