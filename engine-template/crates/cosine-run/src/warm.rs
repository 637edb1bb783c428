//! A merge's cached blocks carried over to the files it writes.
//!
//! A merge replaces its input files by new ones holding the same keys (and the newer values):
//! every block of the inputs the cache held is dead once the merge commits, and the first read
//! of each of its keys afterwards misses. The cost model's block cache (Che's approximation,
//! cost_models/io_model.py `cache_alpha`) is a steady state in which merges invalidate nothing,
//! and an engine that starts cold after every merge serves its hot keys from disk until the
//! cache has filled again (stop 66's served GET at depth 16: the first pass after the SET phases
//! 1.51–1.69 µs a GET, later ones 1.26–1.42). So a merge writes its output's blocks into the
//! cache where they cover keys the inputs' cached blocks held ([`WarmSpans`]), and drops the
//! inputs' blocks: the cache keeps the same keys at about the same bytes, with no block read.
//! (RocksDB's `prepopulate_block_cache` warms a flush's output whole; this warms what was warm.)
//! Only files whose fence pointers are in memory (hot levels) say which keys their cached blocks
//! cover; a cold file's blocks are not carried over. The decoded blocks wait in memory until the
//! merge has its output (the inputs' stay cached for the readers until then), so a merge carries
//! at most [`WARM_MAX_BYTES`] of them: a cache of hundreds of GiB rewritten by one merge would
//! otherwise be held twice.

use crate::block::Block;
use crate::cache::BlockCache;
use crate::table::Table;
use std::collections::HashSet;
use std::sync::Arc;

/// Most bytes (cache charge) of decoded blocks one merge carries over: the transient memory it may
/// add beside the cache (a few per cent of the smallest node's memory the solver offers a cache on).
pub const WARM_MAX_BYTES: usize = 256 << 20;

/// The key spans the cached data blocks of a merge's inputs cover: sorted, disjoint, each
/// `[lo, hi)` (`hi` None: up to its file's largest key, inclusive).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WarmSpans {
    spans: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl WarmSpans {
    /// The spans of the blocks of `inputs` that `cache` holds; None when it holds none.
    pub fn of_inputs<'a>(cache: &BlockCache, inputs: impl IntoIterator<Item = &'a Arc<Table>>) -> Option<WarmSpans> {
        let tables: Vec<&Arc<Table>> = inputs.into_iter().collect();
        let ids: HashSet<u64> = tables.iter().map(|t| t.id).collect();
        let cached = cache.data_blocks_of(&ids);
        let mut spans = Vec::new();
        for t in tables {
            if let Some(offsets) = cached.get(&t.id) {
                spans.extend(t.block_spans(offsets));
            }
        }
        let w = WarmSpans::from_spans(spans);
        (!w.spans.is_empty()).then_some(w)
    }

    /// The union of `spans` (each `[lo, hi)`, `hi` None: unbounded above), sorted and disjoint.
    pub fn from_spans(mut spans: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> WarmSpans {
        spans.sort();
        let mut out: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::with_capacity(spans.len());
        for (lo, hi) in spans {
            if let Some((_, last_hi)) = out.last_mut() {
                let touches = match last_hi.as_ref() {
                    None => true,
                    Some(h) => lo <= *h,
                };
                if touches {
                    // (None, unbounded, is the largest end)
                    if last_hi.is_some() && hi.as_ref().is_none_or(|h| Some(h) > last_hi.as_ref()) {
                        *last_hi = hi;
                    }
                    continue;
                }
            }
            out.push((lo, hi));
        }
        WarmSpans { spans: out }
    }

    /// Whether a block holding keys `first..=last` holds a key of a span.
    pub fn covers(&self, first: &[u8], last: &[u8]) -> bool {
        // the first span ending after `first`: it covers the block iff it starts at or before `last`
        let i = self.spans.partition_point(|(_, hi)| hi.as_deref().is_some_and(|h| h <= first));
        self.spans.get(i).is_some_and(|(lo, _)| lo.as_slice() <= last)
    }
}

/// The data blocks a file's builder decoded because a [`WarmSpans`] covered them: the file's
/// id and each block's offset, put into the cache once the merge has its output
/// ([`Warmed::install`]).
#[derive(Debug, Default)]
pub struct Warmed {
    blocks: Vec<(u64, u64, Arc<Block>)>,
    bytes: usize,
}

impl Warmed {
    /// Adds block `offset` of file `file`.
    pub fn push(&mut self, file: u64, offset: u64, block: Arc<Block>) {
        self.bytes += block.charge();
        self.blocks.push((file, offset, block));
    }

    /// Moves `other`'s blocks in.
    pub fn extend(&mut self, other: Warmed) {
        self.bytes += other.bytes;
        self.blocks.extend(other.blocks);
    }

    /// The blocks' cache charge, bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True when no block is held.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Drops the cached blocks of the files the merge removed, then caches the warmed ones.
    pub fn install(self, cache: &BlockCache, removed: &HashSet<u64>) {
        cache.forget(removed);
        for (file, offset, block) in self.blocks {
            cache.insert(file, offset, crate::cache::Cached::Data(block));
        }
    }
}

/// The least key of `key`'s width above it (big-endian increment), None when it is the largest
/// (all 0xff): the exclusive end of a span that holds `key` last.
pub fn key_after(key: &[u8]) -> Option<Vec<u8>> {
    let mut k = key.to_vec();
    for b in k.iter_mut().rev() {
        if *b == u8::MAX {
            *b = 0;
        } else {
            *b += 1;
            return Some(k);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_after() {
        assert_eq!(key_after(&[0, 1]), Some(vec![0, 2]));
        assert_eq!(key_after(&[0, 255]), Some(vec![1, 0]));
        assert_eq!(key_after(&[255, 255]), None);
    }

    fn span(lo: u8, hi: Option<u8>) -> (Vec<u8>, Option<Vec<u8>>) {
        (vec![lo], hi.map(|h| vec![h]))
    }

    #[test]
    fn spans_merge_and_cover_exactly() {
        let w = WarmSpans::from_spans(vec![span(50, Some(60)), span(10, Some(20)), span(15, Some(30)), span(30, Some(40))]);
        assert_eq!(w.spans, vec![span(10, Some(40)), span(50, Some(60))]);
        // a block covers a span iff it holds a key in [lo, hi)
        assert!(w.covers(&[5], &[10]));
        assert!(!w.covers(&[5], &[9]));
        assert!(w.covers(&[39], &[45]));
        assert!(!w.covers(&[40], &[49]), "hi is exclusive");
        assert!(w.covers(&[45], &[50]));
        assert!(!w.covers(&[60], &[99]));
        let open = WarmSpans::from_spans(vec![span(70, None), span(10, Some(20)), span(75, Some(80))]);
        assert_eq!(open.spans, vec![span(10, Some(20)), span(70, None)]);
        assert!(open.covers(&[200], &[255]));
        assert!(!open.covers(&[20], &[69]));
    }

    #[test]
    fn covers_matches_a_scan_of_every_span() {
        // every pair of blocks against every set of spans on a small key space
        let mut seed = 0x9e37_79b9_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 32) as u8
        };
        for _ in 0..500 {
            let spans: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..(next() % 5))
                .map(|_| {
                    let (a, b) = (next(), next());
                    let (lo, hi) = (a.min(b), a.max(b) + 1);
                    (vec![lo], (next() % 7 != 0).then(|| vec![hi]))
                })
                .collect();
            let w = WarmSpans::from_spans(spans.clone());
            for first in 0..32u8 {
                for last in first..32u8 {
                    let want = spans.iter().any(|(lo, hi)| lo[0] <= last && hi.as_ref().is_none_or(|h| first < h[0]));
                    assert_eq!(w.covers(&[first], &[last]), want, "{spans:?} block {first}..={last}");
                }
            }
        }
    }
}
