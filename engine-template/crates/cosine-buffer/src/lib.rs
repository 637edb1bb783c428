//! The write buffer (level 0): a sorted memtable holding up to `E_B` entries.
//!
//! Writers insert concurrently: the memtable is split into [`SHARDS`] shards
//! by key hash, each behind its own lock, so writers of different keys
//! rarely meet, and an ordered view merges the shards on the fly for flushes
//! and scans. Sharded insertion was chosen over a concurrent skiplist
//! (`crossbeam-skiplist`, as RocksDB's InlineSkipList) after measuring both on
//! the benchmark's update stream on this 2-vCPU machine: the skiplist costs
//! 2.1-2.8x the B-tree per single-threaded insert (2.8-3.8 us vs 1.3-1.9 us,
//! pointer chasing over 15+ levels), a regression no 2-thread gain on two cores
//! could pay back; 16 B-tree shards cost the same as one B-tree and contend only
//! when two writers hash to one shard. A scan pays for the merge: up to 16 key
//! comparisons per entry it copies.
//!
//! Each key holds the newest value and the sequence number of the write that
//! put it there (its position in the write-ahead log). Two writes to one key
//! racing in a write group keep the higher sequence number, so the memtable
//! always equals a replay of the log. A full memtable is frozen (made
//! immutable) and flushed to level 1 by the background worker while a fresh one
//! takes writes.
//!
//! Point lookups go through a hash index. Each shard keeps its entries (key,
//! sequence number, value) in a [`hashbrown::HashTable`], found in one probe
//! (per `get`, and per overwrite), and a `BTreeMap` from key to the key's hash
//! keeps the key order for flushes and scans (touched only when a key is new; a
//! scan finds each entry by its stored hash, comparing key pointers, not bytes).
//! Both change under the shard's write lock, and "higher seq wins" is decided
//! on the one entry, so they always hold the same keys and values. The key is
//! stored once, as an `Arc<[u8]>` shared by the table and the ordered map, and
//! hashed once: the [`cosine_core::hash64`] that picks the shard, rotated so
//! that the bits that chose the shard do not also choose the bucket, is the
//! table's hash (kept in the entry, so growing the table rehashes no key).
//!
//! Why: `perf` on cosine-server under redis-benchmark GET at pipeline 16 (1 KB
//! values, 100,000 keys, all in the memtable) put a quarter of the server's CPU
//! in the B-tree descent (`MemTable::get` and `memcmp`, about 30 comparisons of
//! 128-byte padded keys per get). With the index that share fell to 17.5%, what
//! is left being the cache misses of one probe (control bytes, entry, key bytes),
//! and the server's CPU per GET from 2.9-3.1 us to 2.35-2.5 us (GET P16 324-344k
//! -> 402-426k requests/s, `python -m bench.redis_peer`, interleaved runs). A
//! first version kept the entries in an arena beside a table of positions: one
//! more dependent miss per get, and only 2.75-3.05 us. Single-threaded, 100,000
//! keys: get 1.0 -> 0.54 us, overwrite 1.05 -> 0.52 us, new key 1.17 us both, a
//! full scan 1.31 -> 1.40 us per entry (a probe per entry to find its slot).
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_core::{hash64, Capacity, KvIterator, Value, VecIterator};
use hashbrown::{hash_table, HashTable};
use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::{btree_map, BTreeMap};
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Shards of a memtable: enough that two (or a few) writers rarely share one.
pub const SHARDS: usize = 16;

#[derive(Debug)]
struct Slot {
    seq: u64,
    value: Value,
}

/// One buffered key: its newest write.
#[derive(Debug)]
struct Entry {
    /// [`table_hash`] of the key.
    hash: u64,
    key: Arc<[u8]>,
    slot: Slot,
}

/// One shard: its entries by hash, and their key order.
#[derive(Debug, Default)]
struct Shard {
    /// Every key of the shard once.
    index: HashTable<Entry>,
    /// Key -> its [`table_hash`], in key order (the same keys as `index`).
    order: BTreeMap<Arc<[u8]>, u64>,
}

/// The shard a key of hash `h` (its [`hash64`]) lives in.
fn shard_of(h: u64) -> usize {
    (h % SHARDS as u64) as usize
}

/// The hash index's hash of a key of hash `h`: the table picks the bucket from the
/// low bits and a tag from the top 7, and the low bits of `h` are the same for
/// every key of a shard, so they are moved to the middle.
fn table_hash(h: u64) -> u64 {
    h.rotate_left(32)
}

impl Shard {
    /// The entry of `key`, whose table hash is `th`.
    ///
    /// The key's bytes live in their own allocation, and so does the value: a hit missed the
    /// cache on both, one after the other (the key compare, then the caller's copy of the value;
    /// perf of cosine-server's GET at pipeline depth 16: the compare's `memcmp` 9.5 % of the
    /// server's CPU, issue 48). A candidate entry's value is touched before its key is compared,
    /// so that the two misses overlap: in the same profile after `Engine::get_with`, the probe,
    /// the compare and the copy of the value out went from 28.6 % to 24.9 % of the server's CPU.
    fn find(&self, th: u64, key: &[u8]) -> Option<&Entry> {
        self.index.find(th, |e| {
            e.hash == th && {
                std::hint::black_box(e.slot.value.as_ref().and_then(|v| v.first().copied()));
                *e.key == *key
            }
        })
    }

    /// The slot of `key`, a key of `order` (so the very `Arc` in the entry) of table hash `th`.
    fn slot_of(&self, key: &Arc<[u8]>, th: u64) -> Option<&Slot> {
        self.index.find(th, |e| Arc::ptr_eq(&e.key, key)).map(|e| &e.slot)
    }

    /// The `order` range `lo..=hi` with each key's slot.
    fn range<'a>(&'a self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> impl Iterator<Item = (&'a Arc<[u8]>, &'a Slot)> + 'a {
        self.order.range::<[u8], _>(bounds(lo, hi)).filter_map(move |(k, &th)| Some((k, self.slot_of(k, th)?)))
    }
}

/// A sorted in-memory buffer of the newest writes (tombstones included).
#[derive(Debug)]
pub struct MemTable {
    shards: Vec<RwLock<Shard>>,
    capacity: u64,
    len: AtomicU64,
    bytes: AtomicU64,
    /// Writes of write groups appended to the WAL and not inserted yet.
    writers: AtomicUsize,
    /// WAL segments whose records live in this memtable (deleted once it is flushed).
    wal_ids: Vec<u64>,
}

type Range<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

fn bounds<'a>(lo: Option<&'a [u8]>, hi: Option<&'a [u8]>) -> Range<'a> {
    (lo.map_or(Bound::Unbounded, Bound::Included), hi.map_or(Bound::Unbounded, Bound::Included))
}

/// One shard's part of a merged scan: its ordered keys and the shard.
struct Part<'a> {
    keys: Peekable<btree_map::Range<'a, Arc<[u8]>, u64>>,
    shard: &'a Shard,
}

/// The shards' ranges merged into one ascending stream (a key lives in one shard only).
struct Merged<'a> {
    parts: Vec<Part<'a>>,
}

impl<'a> Iterator for Merged<'a> {
    type Item = (&'a [u8], &'a Slot);
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut best: Option<(usize, &'a [u8])> = None;
            for (i, part) in self.parts.iter_mut().enumerate() {
                let Some(&(k, _)) = part.keys.peek() else { continue };
                if best.is_none_or(|(_, bk)| **k < *bk) {
                    best = Some((i, k));
                }
            }
            let part = &mut self.parts[best?.0];
            let (k, &th) = part.keys.next()?;
            // Every key of `order` is in `index` (both change under one write lock).
            let slot = part.shard.slot_of(k, th);
            debug_assert!(slot.is_some(), "an ordered key missing from the hash index");
            if let Some(slot) = slot {
                return Some((k, slot));
            }
        }
    }
}

impl MemTable {
    /// An empty memtable that reports full at `capacity` entries, backed by `wal_ids`.
    pub fn new(capacity: u64, wal_ids: Vec<u64>) -> Self {
        MemTable {
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
            capacity: capacity.max(1),
            len: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            writers: AtomicUsize::new(0),
            wal_ids,
        }
    }

    fn read_all(&self) -> Vec<RwLockReadGuard<'_, Shard>> {
        self.shards.iter().map(|s| s.read()).collect()
    }

    fn merged<'a>(guards: &'a [RwLockReadGuard<'_, Shard>], lo: Option<&[u8]>, hi: Option<&[u8]>) -> Merged<'a> {
        let parts = guards.iter().map(|g| Part { keys: g.order.range::<[u8], _>(bounds(lo, hi)).peekable(), shard: g }).collect();
        Merged { parts }
    }

    /// Inserts or overwrites `key` (`None` = tombstone) with the write's sequence number
    /// `seq`; of concurrent writes to one key, the one with the higher `seq` wins.
    pub fn insert(&self, key: Vec<u8>, value: Value, seq: u64) {
        let add = (key.len() + value.as_ref().map_or(0, |v| v.len())) as u64;
        self.bytes.fetch_add(add, Ordering::Relaxed);
        let h = hash64(&key);
        let th = table_hash(h);
        let mut shard = self.shards[shard_of(h)].write();
        let Shard { index, order } = &mut *shard;
        match index.entry(th, |e| e.hash == th && *e.key == *key, |e| e.hash) {
            hash_table::Entry::Occupied(mut e) => {
                let slot = &mut e.get_mut().slot;
                if seq > slot.seq {
                    *slot = Slot { seq, value };
                }
            }
            hash_table::Entry::Vacant(e) => {
                let key: Arc<[u8]> = key.into();
                order.insert(Arc::clone(&key), th);
                e.insert(Entry { hash: th, key, slot: Slot { seq, value } });
                self.len.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts `n` writes whose WAL records are appended and which will be inserted here
    /// (a write group); each calls [`MemTable::end_write`] once inserted (or failed).
    pub fn begin_writes(&self, n: usize) {
        self.writers.fetch_add(n, Ordering::AcqRel);
    }

    /// One counted write is done.
    pub fn end_write(&self) {
        self.writers.fetch_sub(1, Ordering::AcqRel);
    }

    /// Waits until every counted write is inserted: called before the memtable is frozen,
    /// by the writer that holds the write baton (so no new writes are counted meanwhile).
    pub fn wait_writes(&self) {
        while self.writers.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }

    /// `Some(value)` if the buffer holds `key` (`Some(None)` for a tombstone): one
    /// probe of the shard's hash index.
    pub fn get(&self, key: &[u8]) -> Option<Value> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec)).ok()
    }

    /// [`MemTable::get`] without copying the value: `Ok(f(value))` if the buffer holds `key`
    /// (`f(None)` for a tombstone), `Err(f)` unused if it does not, for the caller to look
    /// further. `f` runs under the shard's read lock (writers of the shard wait for it): it
    /// should only copy the value out (cosine-server encodes a GET's reply with it), and must
    /// not insert into this memtable.
    pub fn get_with<R, F: FnOnce(Option<&[u8]>) -> R>(&self, key: &[u8], f: F) -> Result<R, F> {
        let h = hash64(key);
        let shard = self.shards[shard_of(h)].read();
        match shard.find(table_hash(h), key) {
            Some(e) => Ok(f(e.slot.value.as_deref())),
            None => Err(f),
        }
    }

    /// Distinct keys buffered.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    /// Tombstones with `lo <= key <= hi` (deletes that can hide older entries below).
    pub fn tombstones_in(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> usize {
        self.shards.iter().map(|s| s.read().range(lo, hi).filter(|(_, v)| v.value.is_none()).count()).sum()
    }

    /// Like [`MemTable::range`], but stops after `live` live entries (tombstones
    /// in between are kept). Returns the copy and, when it stopped early, the
    /// last key copied: the copy is complete only up to that key. A scan that
    /// wants `live` results copies O(live) entries instead of the rest of the buffer.
    pub fn range_live(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, live: usize) -> (VecIterator, Option<Vec<u8>>) {
        let guards = self.read_all();
        let live = live.max(1);
        let mut items = Vec::new();
        let mut seen = 0usize;
        let mut rest = Self::merged(&guards, lo, hi);
        for (k, v) in rest.by_ref() {
            seen += usize::from(v.value.is_some());
            items.push((k.to_vec(), v.value.clone()));
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
        let guards = self.read_all();
        let items = Self::merged(&guards, lo, hi).map(|(k, v)| (k.to_vec(), v.value.clone())).collect();
        VecIterator::new(items)
    }

    /// Entries with `lo <= key <= hi` in key order, read in place (no copy of a key or a value)
    /// by `f` while this memtable's shards are read-locked: how a flush reads a frozen memtable.
    /// [`MemTable::range`]'s copy cost a flush a new allocation and a copy per entry: 7.2 % of
    /// cosine-server's CPU under redis-benchmark SET at pipeline 1, most of it the kernel zeroing
    /// the fresh pages (`perf`, docs/journal §40.2).
    pub fn with_range<R>(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, f: impl FnOnce(InPlace<'_>) -> R) -> R {
        let guards = self.read_all();
        f(InPlace::new(Self::merged(&guards, lo, hi)))
    }

    /// Smallest and largest buffered keys.
    pub fn key_range(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let guards = self.read_all();
        let lo = guards.iter().filter_map(|g| g.order.keys().next()).min()?.to_vec();
        let hi = guards.iter().filter_map(|g| g.order.keys().next_back()).max()?.to_vec();
        Some((lo, hi))
    }
}

/// A memtable's entries read in place ([`MemTable::with_range`]).
pub struct InPlace<'a> {
    rest: Merged<'a>,
    current: Option<(&'a [u8], Option<&'a [u8]>)>,
}

impl<'a> InPlace<'a> {
    fn new(mut rest: Merged<'a>) -> InPlace<'a> {
        let current = rest.next().map(|(k, slot)| (k, slot.value.as_deref()));
        InPlace { rest, current }
    }
}

impl KvIterator for InPlace<'_> {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> Option<&[u8]> {
        self.current.and_then(|(_, v)| v)
    }
    fn next(&mut self) -> cosine_core::Result<()> {
        self.current = self.rest.next().map(|(k, slot)| (k, slot.value.as_deref()));
        Ok(())
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
        m.insert(b"b".to_vec(), Some(b"2".to_vec()), 1);
        m.insert(b"a".to_vec(), Some(b"1".to_vec()), 2);
        m.insert(b"c".to_vec(), None, 3);
        assert!(m.is_full());
        assert_eq!(m.get(b"a"), Some(Some(b"1".to_vec())));
        assert_eq!(m.get(b"c"), Some(None));
        assert_eq!(m.get(b"z"), None);
        assert_eq!(m.get_with(b"a", |v| v.map(<[u8]>::len)).ok(), Some(Some(1)));
        assert_eq!(m.get_with(b"c", |v| v.map(<[u8]>::len)).ok(), Some(None));
        assert!(m.get_with(b"z", |v| v.map(<[u8]>::len)).is_err());
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
        for (i, (k, v)) in [(b"a", true), (b"b", false), (b"c", true), (b"d", true), (b"e", true)].into_iter().enumerate() {
            m.insert(k.to_vec(), v.then(|| k.to_vec()), i as u64);
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

#[cfg(test)]
mod concurrency_tests {
    use super::*;
    use cosine_core::KvIterator;

    fn drain(mut it: impl KvIterator) -> Vec<(Vec<u8>, Value)> {
        let mut v = Vec::new();
        while it.valid() {
            v.push((it.key().to_vec(), it.value().map(|x| x.to_vec())));
            it.next().expect("next");
        }
        v
    }

    #[test]
    fn the_sharded_view_is_one_ordered_map() {
        let m = MemTable::new(10_000, vec![1]);
        let mut model = BTreeMap::new();
        let mut x = 7u64;
        for seq in 0..3000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = ((x >> 33) % 1000).to_be_bytes().to_vec();
            let v = (seq % 5 != 0).then(|| seq.to_le_bytes().to_vec());
            m.insert(k.clone(), v.clone(), seq);
            model.insert(k, v);
        }
        let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(drain(m.range(None, None)), all);
        assert_eq!(m.len(), model.len() as u64);
        let (lo, hi) = (100u64.to_be_bytes(), 400u64.to_be_bytes());
        let want: Vec<_> = model.range(lo.to_vec()..=hi.to_vec()).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(drain(m.range(Some(&lo), Some(&hi))), want);
        // read in place (a flush's way), the same entries
        assert_eq!(m.with_range(None, None, |it| drain(it)), all);
        assert_eq!(m.with_range(Some(&lo), Some(&hi), |it| drain(it)), want);
        let tombs = want.iter().filter(|(_, v)| v.is_none()).count();
        assert_eq!(m.tombstones_in(Some(&lo), Some(&hi)), tombs);
        // range_live: the first 10 live entries from `lo`, tombstones in between kept.
        let (it, bound) = m.range_live(Some(&lo), None, 10);
        let got = drain(it);
        assert_eq!(got.iter().filter(|(_, v)| v.is_some()).count(), 10);
        assert_eq!(got[..], all[all.iter().position(|(k, _)| k[..] >= lo[..]).expect("lo")..][..got.len()]);
        assert_eq!(bound, got.last().map(|(k, _)| k.clone()));
        let keys: Vec<_> = model.keys().collect();
        assert_eq!(m.key_range(), Some((keys[0].clone(), keys[keys.len() - 1].clone())));
        // the hash index agrees with the ordered map on every key, present or absent
        for k in 0..1100u64 {
            let k = k.to_be_bytes().to_vec();
            assert_eq!(m.get(&k), model.get(&k).cloned(), "key {k:?}");
        }
    }

    #[test]
    fn the_hash_index_and_the_order_agree_under_out_of_order_sequence_numbers() {
        // Writes arrive in a shuffled order of their sequence numbers (as a write group's
        // racing inserts may): the model keeps each key's highest-seq write.
        let m = MemTable::new(1 << 20, vec![1]);
        let mut model: BTreeMap<Vec<u8>, (u64, Value)> = BTreeMap::new();
        let n = 20_000u64;
        let mut seqs: Vec<u64> = (0..n).collect();
        let mut x = 11u64;
        for i in (1..seqs.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seqs.swap(i, (x >> 33) as usize % (i + 1));
        }
        for &seq in &seqs {
            // keys of various lengths (padded keys are 128 bytes), some sharing prefixes
            let id = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 3000;
            let mut k = format!("key:{id:012}").into_bytes();
            k.resize(if id % 3 == 0 { 128 } else { 16 + (id % 7) as usize }, b'_');
            let v = (seq % 4 != 0).then(|| seq.to_le_bytes().repeat(1 + (seq % 3) as usize));
            m.insert(k.clone(), v.clone(), seq);
            let e = model.entry(k).or_insert((seq, v.clone()));
            if seq >= e.0 {
                *e = (seq, v);
            }
        }
        assert_eq!(m.len(), model.len() as u64);
        let want: Vec<_> = model.iter().map(|(k, (_, v))| (k.clone(), v.clone())).collect();
        assert_eq!(drain(m.range(None, None)), want);
        for (k, (_, v)) in &model {
            assert_eq!(m.get(k), Some(v.clone()));
            let mut absent = k.clone();
            absent.push(0);
            assert_eq!(m.get(&absent), model.get(&absent).map(|(_, v)| v.clone()));
            assert_eq!(m.get(&k[..k.len() - 1]), model.get(&k[..k.len() - 1]).map(|(_, v)| v.clone()));
        }
        let tombs = model.values().filter(|(_, v)| v.is_none()).count();
        assert_eq!(m.tombstones_in(None, None), tombs);
        assert_eq!(m.get(b""), None);
    }

    #[test]
    fn the_higher_sequence_number_wins_whatever_the_insertion_order() {
        let m = MemTable::new(100, vec![1]);
        m.insert(b"k".to_vec(), Some(b"new".to_vec()), 7);
        m.insert(b"k".to_vec(), Some(b"old".to_vec()), 3); // arrives late: ignored
        assert_eq!(m.get(b"k"), Some(Some(b"new".to_vec())));
        m.insert(b"k".to_vec(), None, 9);
        assert_eq!(m.get(b"k"), Some(None));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn concurrent_inserts_keep_every_key_and_the_newest_value() {
        let m = MemTable::new(1 << 20, vec![1]);
        let threads = 4u64;
        std::thread::scope(|s| {
            for t in 0..threads {
                let m = &m;
                s.spawn(move || {
                    for i in 0..2000u64 {
                        // Shared keys 0..100 get sequence numbers interleaved across threads.
                        let k = (i % 100).to_be_bytes().to_vec();
                        m.insert(k, Some((i * threads + t).to_be_bytes().to_vec()), i * threads + t);
                        m.insert((1000 + t * 10_000 + i).to_be_bytes().to_vec(), Some(vec![t as u8]), u64::MAX / 2);
                    }
                });
            }
        });
        assert_eq!(m.len(), 100 + threads * 2000);
        for k in 0..100u64 {
            // The highest sequence number written to key k: i = 1900 + k, t = threads - 1.
            let want = (1900 + k) * threads + threads - 1;
            assert_eq!(m.get(&k.to_be_bytes()), Some(Some(want.to_be_bytes().to_vec())), "key {k}");
        }
    }
}
