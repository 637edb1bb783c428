//! Range scans: a merge of the memtables' copies with the tree's runs (or the hash
//! log's sorted scan), newest version of a key first, tombstones dropped.
//!
//! A scan with a limit first tries a cheap pass that copies only a bounded part of
//! each memtable ([`Engine::scan_counted`]); when newer tombstones leave that pass
//! short, it scans again with whole copies. Both passes charge one I/O counter.

use crate::{Engine, OpKind, Store, SuperVersion};
use cosine_core::{IoCounter, IoSnapshot, KvIterator, MergingIterator, Result, VecIterator};
use std::sync::Arc;

/// A key and its value, as scans return them.
pub type KvPair = (Vec<u8>, Vec<u8>);

impl Engine {
    /// Live entries with `lo <= key <= hi`, in key order.
    pub fn scan(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<KvPair>> {
        let lo = self.inner.cfg.normalize_key(lo);
        let hi = self.inner.cfg.normalize_key(hi);
        Ok(self.scan_counted(Some(&lo), Some(&hi), usize::MAX)?.0)
    }

    /// Up to `limit` live entries with key `>= lo`, in key order.
    pub fn range(&self, lo: &[u8], limit: usize) -> Result<Vec<KvPair>> {
        let lo = self.inner.cfg.normalize_key(lo);
        Ok(self.scan_counted(Some(&lo), None, limit)?.0)
    }

    /// Range scan over normalized bounds, returning the blocks it read.
    pub fn scan_counted(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, limit: usize) -> Result<(Vec<KvPair>, IoSnapshot)> {
        // Both passes charge the same counter: blocks a given-up pass read were read.
        let io = Arc::new(self.op_counter());
        let out = match self.scan_pass(lo, hi, limit, true, &io)? {
            Some(r) => r,
            // A truncated memtable copy was not enough (newer tombstones hid its
            // live entries): scan again with whole copies.
            None => self.scan_pass(lo, hi, limit, false, &io)?.unwrap_or_default(),
        };
        let s = io.snapshot();
        self.inner.stats.record(OpKind::Scan, &s);
        Ok((out, s))
    }

    /// One scan. With `truncate`, each memtable contributes only up to `limit`
    /// live entries and the pass gives up (`None`) if the merge would need a
    /// key beyond the shortest such copy.
    fn scan_pass(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        limit: usize,
        truncate: bool,
        io: &Arc<IoCounter>,
    ) -> Result<Option<Vec<KvPair>>> {
        let sv = self.snapshot();
        if truncate && limit != usize::MAX && matches!(self.inner.store, Store::Tree) {
            return Self::scan_tree_bounded(&sv, lo, hi, limit, io);
        }
        let mut sources: Vec<Box<dyn KvIterator + Send>> = Vec::new();
        let mut mem_tombstones = 0usize;
        let mut complete_to: Option<Vec<u8>> = None;
        for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            let it = if truncate && limit != usize::MAX {
                let (it, bound) = m.range_live(lo, hi, limit);
                if let Some(b) = bound {
                    if complete_to.as_ref().is_none_or(|c| b < *c) {
                        complete_to = Some(b);
                    }
                }
                it
            } else {
                m.range(lo, hi)
            };
            if matches!(self.inner.store, Store::Log(_)) {
                mem_tombstones += m.tombstones_in(lo, hi);
            }
            sources.push(Box::new(it));
        }
        match &self.inner.store {
            Store::Tree => sources.extend(sv.tree.iters(lo, hi, io, true)?),
            Store::Log(log) => {
                // Each memtable tombstone in range can hide at most one logged key,
                // and a live memtable entry shadows a logged one only by
                // replacing it, so `limit + tombstones` logged keys suffice.
                let want = limit.saturating_add(mem_tombstones);
                sources.push(Box::new(VecIterator::new(log.scan(lo, hi, want, io)?.into_iter().map(|(k, v)| (k, Some(v))).collect())));
            }
        }
        let mut it = MergingIterator::new(sources);
        let mut out = Vec::new();
        while it.valid() && out.len() < limit {
            // Past the end of a truncated copy (which stops at or before `hi`):
            // entries it left out may come next.
            if complete_to.as_ref().is_some_and(|c| it.key() > c.as_slice()) {
                return Ok(None);
            }
            if hi.is_some_and(|h| it.key() > h) {
                break;
            }
            if let Some(v) = it.value() {
                out.push((it.key().to_vec(), v.to_vec()));
            }
            it.next()?;
        }
        // Every source ran out short of `limit`, but a truncated copy held more
        // (its entries were hidden by newer tombstones): they may be live.
        if out.len() < limit && complete_to.is_some() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// A tree store's scan that copies from the memtables only what can be in its result.
    ///
    /// The tree's first `limit` live entries from `lo` end at some key `b`: the result holds
    /// no key past `b` unless the memtables' tombstones hide some of them. So the memtables
    /// are copied up to `b` only — a memtable holding a few per cent of the keys contributes
    /// a few entries, where a copy of `limit` of its entries (each a merge of its shards and
    /// two allocations) cost half of a 50-entry scan's CPU (docs/journal/s17-s21.md §19.4). `None`
    /// when tombstones left the result short of `limit` before `b` (the caller scans again
    /// with whole copies).
    fn scan_tree_bounded(
        sv: &SuperVersion,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        limit: usize,
        io: &Arc<IoCounter>,
    ) -> Result<Option<Vec<KvPair>>> {
        let mut tree = MergingIterator::new(sv.tree.iters(lo, hi, io, true)?);
        let mut taken: Vec<KvPair> = Vec::with_capacity(limit);
        while tree.valid() && taken.len() < limit {
            if hi.is_some_and(|h| tree.key() > h) {
                break;
            }
            if let Some(v) = tree.value() {
                taken.push((tree.key().to_vec(), v.to_vec()));
            }
            tree.next()?;
        }
        // Past `bound` the tree may hold more; below it, everything is in `taken`.
        let bound: Option<Vec<u8>> = if taken.len() == limit { taken.last().map(|(k, _)| k.clone()) } else { None };
        let mem_hi = match (&bound, hi) {
            (Some(b), Some(h)) => Some(if b.as_slice() < h { b.as_slice() } else { h }),
            (Some(b), None) => Some(b.as_slice()),
            (None, h) => h,
        };
        let copies: Vec<Box<dyn KvIterator + Send>> =
            std::iter::once(&sv.mem).chain(sv.imms.iter()).map(|m| Box::new(m.range(lo, mem_hi)) as Box<dyn KvIterator + Send>).collect();
        let mut mem = MergingIterator::new(copies);
        let mut out: Vec<KvPair> = Vec::with_capacity(limit);
        let mut from_tree = taken.into_iter().peekable();
        while out.len() < limit {
            let tree_key = from_tree.peek().map(|(k, _)| k.as_slice());
            match (mem.valid(), tree_key) {
                (false, None) => break,
                (true, t) if t.is_none_or(|tk| mem.key() <= tk) => {
                    // the memtables' entry is newer: it replaces (or deletes) the tree's
                    if t.is_some_and(|tk| mem.key() == tk) {
                        from_tree.next();
                    }
                    if let Some(v) = mem.value() {
                        out.push((mem.key().to_vec(), v.to_vec()));
                    }
                    mem.next()?;
                }
                _ => {
                    if let Some(kv) = from_tree.next() {
                        out.push(kv);
                    }
                }
            }
        }
        if out.len() < limit && bound.is_some() {
            return Ok(None);
        }
        Ok(Some(out))
    }
}
