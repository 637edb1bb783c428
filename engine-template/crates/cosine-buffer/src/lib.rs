//! The write buffer (level 0): a sorted memtable holding up to `E_B` entries.
//!
//! Writers insert under a short write lock; readers take a read lock, so gets
//! run concurrently with each other. A full memtable is frozen (made immutable)
//! and flushed to level 1 by the background worker while a fresh one takes writes.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_core::{Capacity, Value, VecIterator};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

/// A sorted in-memory buffer of the newest writes (tombstones included).
#[derive(Debug)]
pub struct MemTable {
    map: RwLock<BTreeMap<Vec<u8>, Value>>,
    capacity: u64,
    bytes: AtomicU64,
    /// WAL segments whose records live in this memtable (deleted once it is flushed).
    wal_ids: Vec<u64>,
}

impl MemTable {
    /// An empty memtable that reports full at `capacity` entries, backed by `wal_ids`.
    pub fn new(capacity: u64, wal_ids: Vec<u64>) -> Self {
        MemTable { map: RwLock::new(BTreeMap::new()), capacity: capacity.max(1), bytes: AtomicU64::new(0), wal_ids }
    }

    /// Inserts or overwrites `key` (`None` = tombstone).
    pub fn insert(&self, key: Vec<u8>, value: Value) {
        let add = (key.len() + value.as_ref().map_or(0, |v| v.len())) as u64;
        self.bytes.fetch_add(add, Ordering::Relaxed);
        self.map.write().insert(key, value);
    }

    /// `Some(value)` if the buffer holds `key` (`Some(None)` for a tombstone).
    pub fn get(&self, key: &[u8]) -> Option<Value> {
        self.map.read().get(key).cloned()
    }

    /// Distinct keys buffered.
    pub fn len(&self) -> u64 {
        self.map.read().len() as u64
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    /// Capacity in entries (`E_B`).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Capacity check: the buffer must be frozen and flushed.
    pub fn is_full(&self) -> bool {
        self.len() >= self.capacity
    }

    /// Approximate payload bytes inserted (including overwritten versions).
    pub fn approx_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// WAL segments backing this memtable.
    pub fn wal_ids(&self) -> &[u64] {
        &self.wal_ids
    }

    /// Copies entries with `lo <= key <= hi` (either bound optional) into an iterator.
    /// Tombstones with `lo <= key <= hi` (deletes that can hide older entries below).
    pub fn tombstones_in(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> usize {
        let lo_b = lo.map_or(Bound::Unbounded, Bound::Included);
        let hi_b = hi.map_or(Bound::Unbounded, Bound::Included);
        self.map.read().range::<[u8], _>((lo_b, hi_b)).filter(|(_, v)| v.is_none()).count()
    }

    /// Like [`MemTable::range`], but stops after `live` live entries (tombstones
    /// in between are kept). Returns the copy and, when it stopped early, the
    /// last key copied: the copy is complete only up to that key. A scan that
    /// wants `live` results copies O(live) entries instead of the rest of the buffer.
    pub fn range_live(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, live: usize) -> (VecIterator, Option<Vec<u8>>) {
        let lo_b = lo.map_or(Bound::Unbounded, Bound::Included);
        let hi_b = hi.map_or(Bound::Unbounded, Bound::Included);
        let map = self.map.read();
        let live = live.max(1);
        let mut items = Vec::new();
        let mut seen = 0usize;
        let mut rest = map.range::<[u8], _>((lo_b, hi_b));
        for (k, v) in rest.by_ref() {
            seen += usize::from(v.is_some());
            items.push((k.clone(), v.clone()));
            if seen == live {
                break;
            }
        }
        let truncated = seen == live && rest.next().is_some();
        let bound = if truncated { items.last().map(|(k, _)| k.clone()) } else { None };
        (VecIterator::new(items), bound)
    }

    /// Entries with `lo <= key <= hi`, as a sorted iterator over a copy.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> VecIterator {
        let lo_b = lo.map_or(Bound::Unbounded, Bound::Included);
        let hi_b = hi.map_or(Bound::Unbounded, Bound::Included);
        let items = self.map.read().range::<[u8], _>((lo_b, hi_b)).map(|(k, v)| (k.clone(), v.clone())).collect();
        VecIterator::new(items)
    }

    /// Smallest and largest buffered keys.
    pub fn key_range(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let m = self.map.read();
        match (m.keys().next(), m.keys().next_back()) {
            (Some(a), Some(b)) => Some((a.clone(), b.clone())),
            _ => None,
        }
    }
}

impl Capacity for MemTable {
    fn entries(&self) -> u64 {
        self.len()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosine_core::KvIterator;

    #[test]
    fn insert_get_range() {
        let m = MemTable::new(3, vec![1]);
        m.insert(b"b".to_vec(), Some(b"2".to_vec()));
        m.insert(b"a".to_vec(), Some(b"1".to_vec()));
        m.insert(b"c".to_vec(), None);
        assert!(m.is_full());
        assert_eq!(m.get(b"a"), Some(Some(b"1".to_vec())));
        assert_eq!(m.get(b"c"), Some(None));
        assert_eq!(m.get(b"z"), None);
        let mut it = m.range(Some(b"b"), None);
        assert!(it.valid());
        assert_eq!(it.key(), b"b");
        it.next().expect("next");
        assert_eq!(it.value(), None);
        assert_eq!(m.key_range(), Some((b"a".to_vec(), b"c".to_vec())));
    }

    #[test]
    fn range_live_stops_after_enough_live_entries() {
        let m = MemTable::new(100, vec![1]);
        for (k, v) in [(b"a", true), (b"b", false), (b"c", true), (b"d", true), (b"e", true)] {
            m.insert(k.to_vec(), v.then(|| k.to_vec()));
        }
        // two live entries: a, (b is a tombstone, kept), c; complete up to c
        let (mut it, bound) = m.range_live(None, None, 2);
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next().expect("next");
        }
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(bound, Some(b"c".to_vec()));
        // asking for as many as there are, or more, copies everything and reports no bound
        let (_, bound) = m.range_live(Some(b"c"), None, 3);
        assert_eq!(bound, None);
        let (_, bound) = m.range_live(Some(b"c"), None, 10);
        assert_eq!(bound, None);
    }
}
