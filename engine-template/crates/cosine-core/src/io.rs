//! Block-I/O counters: the numbers the cost model is validated against.
//!
//! A *block* is one logical data block of `B` entries, one index block, or one
//! filter block moved between storage and memory. Hits in the buffer or the
//! block cache never reach these counters.

use std::sync::atomic::{AtomicU64, Ordering};

/// Thread-safe block counters for one charge target (an operation, a flush, a compaction).
#[derive(Debug, Default)]
pub struct IoCounter {
    data_read: AtomicU64,
    index_read: AtomicU64,
    filter_read: AtomicU64,
    data_written: AtomicU64,
    index_written: AtomicU64,
    filter_written: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// Which kind of block moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A data block of up to `B` entries.
    Data,
    /// An index block holding on-disk fence pointers.
    Index,
    /// A filter block (Bloom filter bits).
    Filter,
}

impl IoCounter {
    /// A zeroed counter.
    pub fn new() -> Self {
        Self::default()
    }
    /// Records `n` blocks of `kind` read from storage (`bytes` long in total).
    pub fn read(&self, kind: BlockKind, n: u64, bytes: u64) {
        let c = match kind {
            BlockKind::Data => &self.data_read,
            BlockKind::Index => &self.index_read,
            BlockKind::Filter => &self.filter_read,
        };
        c.fetch_add(n, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }
    /// Records `n` blocks of `kind` written to storage (`bytes` long in total).
    pub fn wrote(&self, kind: BlockKind, n: u64, bytes: u64) {
        let c = match kind {
            BlockKind::Data => &self.data_written,
            BlockKind::Index => &self.index_written,
            BlockKind::Filter => &self.filter_written,
        };
        c.fetch_add(n, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }
    /// Adds a snapshot taken elsewhere.
    pub fn add(&self, s: &IoSnapshot) {
        self.data_read.fetch_add(s.data_read, Ordering::Relaxed);
        self.index_read.fetch_add(s.index_read, Ordering::Relaxed);
        self.filter_read.fetch_add(s.filter_read, Ordering::Relaxed);
        self.data_written.fetch_add(s.data_written, Ordering::Relaxed);
        self.index_written.fetch_add(s.index_written, Ordering::Relaxed);
        self.filter_written.fetch_add(s.filter_written, Ordering::Relaxed);
        self.bytes_read.fetch_add(s.bytes_read, Ordering::Relaxed);
        self.bytes_written.fetch_add(s.bytes_written, Ordering::Relaxed);
    }
    /// A point-in-time copy.
    pub fn snapshot(&self) -> IoSnapshot {
        IoSnapshot {
            data_read: self.data_read.load(Ordering::Relaxed),
            index_read: self.index_read.load(Ordering::Relaxed),
            filter_read: self.filter_read.load(Ordering::Relaxed),
            data_written: self.data_written.load(Ordering::Relaxed),
            index_written: self.index_written.load(Ordering::Relaxed),
            filter_written: self.filter_written.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}

/// Plain copy of an [`IoCounter`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoSnapshot {
    /// Data blocks read.
    pub data_read: u64,
    /// Index blocks read.
    pub index_read: u64,
    /// Filter blocks read.
    pub filter_read: u64,
    /// Data blocks written.
    pub data_written: u64,
    /// Index blocks written.
    pub index_written: u64,
    /// Filter blocks written.
    pub filter_written: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

impl IoSnapshot {
    /// All blocks read (data + index + filter).
    pub fn blocks_read(&self) -> u64 {
        self.data_read + self.index_read + self.filter_read
    }
    /// All blocks written (data + index + filter).
    pub fn blocks_written(&self) -> u64 {
        self.data_written + self.index_written + self.filter_written
    }
    /// Field-wise sum.
    pub fn plus(&self, o: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            data_read: self.data_read + o.data_read,
            index_read: self.index_read + o.index_read,
            filter_read: self.filter_read + o.filter_read,
            data_written: self.data_written + o.data_written,
            index_written: self.index_written + o.index_written,
            filter_written: self.filter_written + o.filter_written,
            bytes_read: self.bytes_read + o.bytes_read,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }
    /// Field-wise difference (saturating), for before/after deltas.
    pub fn minus(&self, o: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            data_read: self.data_read.saturating_sub(o.data_read),
            index_read: self.index_read.saturating_sub(o.index_read),
            filter_read: self.filter_read.saturating_sub(o.filter_read),
            data_written: self.data_written.saturating_sub(o.data_written),
            index_written: self.index_written.saturating_sub(o.index_written),
            filter_written: self.filter_written.saturating_sub(o.filter_written),
            bytes_read: self.bytes_read.saturating_sub(o.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(o.bytes_written),
        }
    }
}
