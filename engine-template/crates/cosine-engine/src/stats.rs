//! Per-operation and background block-I/O statistics (the contract's accounting).

use cosine_core::{IoCounter, IoSnapshot};
use std::sync::atomic::{AtomicU64, Ordering};

/// Operation classes the engine charges foreground I/O to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A get that found a value.
    GetFound,
    /// A get that found nothing (absent or deleted).
    GetEmpty,
    /// A put (insert or update; blind write).
    Put,
    /// A delete.
    Delete,
    /// A read-modify-write.
    Rmw,
    /// A range scan.
    Scan,
}

impl OpKind {
    /// Every kind, in report order.
    pub const ALL: [OpKind; 6] = [OpKind::GetFound, OpKind::GetEmpty, OpKind::Put, OpKind::Delete, OpKind::Rmw, OpKind::Scan];
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::GetFound => "get_found",
            OpKind::GetEmpty => "get_empty",
            OpKind::Put => "put",
            OpKind::Delete => "delete",
            OpKind::Rmw => "rmw",
            OpKind::Scan => "scan",
        }
    }
    fn idx(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Default)]
pub(crate) struct OpCounter {
    pub count: AtomicU64,
    pub io: IoCounter,
}

/// Live counters, updated lock-free.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub ops: [OpCounter; 6],
    pub flush: std::sync::Arc<IoCounter>,
    pub compaction: std::sync::Arc<IoCounter>,
    pub open: IoCounter,
    pub flushes: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub deep_merges: AtomicU64,
    pub gcs: AtomicU64,
    pub stall_micros: AtomicU64,
    pub buffer_hits: AtomicU64,
    /// Lookups a level's run answered (a value or a tombstone), per level (the last slot: that
    /// level and deeper).
    pub level_hits: [AtomicU64; COUNTED_LEVELS],
}

/// Levels whose lookup hits are counted one by one ([`Stats::level_hits`]).
pub(crate) const COUNTED_LEVELS: usize = 16;

impl Stats {
    /// Zeroed counters whose background blocks (flush, compaction, open) pay `device`.
    pub fn paying(device: Option<&std::sync::Arc<cosine_core::Device>>) -> Self {
        Stats {
            flush: std::sync::Arc::new(IoCounter::paying(device, false)),
            compaction: std::sync::Arc::new(IoCounter::paying(device, false)),
            open: IoCounter::paying(device, false),
            ..Stats::default()
        }
    }

    pub fn record(&self, op: OpKind, io: &IoSnapshot) {
        let c = &self.ops[op.idx()];
        c.count.fetch_add(1, Ordering::Relaxed);
        if io.blocks_read() + io.blocks_written() > 0 {
            c.io.add(io);
        }
    }
}

/// Counters of one operation class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Operations.
    pub count: u64,
    /// Blocks moved on their behalf.
    pub io: IoSnapshot,
}

/// Shape of one level (or, for the hash log, of the log as "level 1").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelStats {
    /// Disk level (1-based).
    pub level: usize,
    /// Runs (log segments for the hash log).
    pub runs: usize,
    /// Files.
    pub files: usize,
    /// Entries (tombstones and, for the log, dead entries included).
    pub entries: u64,
    /// Hot (in-memory filters/fences) or cold.
    pub hot: bool,
    /// Capacity `E_B * T^i` entries.
    pub capacity: u64,
    /// Lookups (gets, rmw reads) since open that this level answered: the key's newest
    /// version (or tombstone) was in one of its runs.
    pub lookup_hits: u64,
}

/// A point-in-time copy of every counter, returned by `Engine::stats()`.
#[derive(Debug, Clone, Default)]
pub struct StatsSnapshot {
    /// Foreground counters per operation class.
    pub ops: Vec<(OpKind, OpStats)>,
    /// Blocks moved by flushes (reads are of target runs merged with the buffer).
    pub flush: IoSnapshot,
    /// Blocks moved by compactions and log garbage collection.
    pub compaction: IoSnapshot,
    /// Blocks read while opening (loading fences/filters, rebuilding the hash index).
    pub open: IoSnapshot,
    /// Flushes completed.
    pub flushes: u64,
    /// Compactions completed (trivial moves included).
    pub compactions: u64,
    /// Compactions done by relinking files.
    pub trivial_moves: u64,
    /// Compactions that rewrote data into the deepest level (trivial moves excluded): one per
    /// merge into the last level, the event a merge cycle counts (docs/model.md).
    pub deep_merges: u64,
    /// Hash-log garbage collections.
    pub gcs: u64,
    /// WAL bytes appended since open.
    pub wal_bytes: u64,
    /// WAL fdatasync calls since open.
    pub wal_syncs: u64,
    /// Microseconds writers waited for the flush to catch up.
    pub stall_micros: u64,
    /// Lookups (gets, rmw reads) a memtable answered: they walked no level.
    pub buffer_hits: u64,
    /// Level shapes.
    pub levels: Vec<LevelStats>,
    /// Entries in memtables.
    pub buffered: u64,
    /// Memory for fence pointers / hash index (M_FP), bytes.
    pub fence_memory: usize,
    /// Memory for filters (M_BF), bytes.
    pub filter_memory: usize,
    /// Memory for range filters, bytes.
    pub range_filter_memory: usize,
}

impl StatsSnapshot {
    /// Counters of one operation class.
    pub fn op(&self, k: OpKind) -> OpStats {
        self.ops.iter().find(|(o, _)| *o == k).map(|(_, s)| *s).unwrap_or_default()
    }
}

impl Stats {
    pub fn snapshot_ops(&self) -> Vec<(OpKind, OpStats)> {
        OpKind::ALL
            .iter()
            .map(|k| {
                let c = &self.ops[k.idx()];
                (*k, OpStats { count: c.count.load(Ordering::Relaxed), io: c.io.snapshot() })
            })
            .collect()
    }
}
