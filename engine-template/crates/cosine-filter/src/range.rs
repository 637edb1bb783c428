//! A range filter after Rosetta (Luo et al., SIGMOD 2020): one Bloom filter per
//! dyadic level of the key space, probed top-down with "doubting".
//!
//! Keys are read as unsigned 64-bit integers (their first 8 bytes, big-endian,
//! zero padded: [`key_prefix`]). The filter of height `h` holds every distinct
//! prefix `key >> h` of the keys it was built over; height 0 holds the keys
//! themselves. A query `[lo, hi]` is cut into its maximal dyadic intervals
//! (at most two per height); an interval of height `h` is ruled out when the
//! height-`h` filter does not hold its prefix, and otherwise ("doubting") its
//! two halves are asked at height `h - 1`, down to height 0. The range may hold
//! a key only if some height-0 probe says so. A height without bits keeps no
//! filter and passes every prefix down. The false-positive rate of an empty range
//! of a given width is derived in `docs/model.md` ("Range filters") and computed
//! by `cost_models/range_filter.py`.
//!
//! No false negatives: every key in `[lo, hi]` lies in exactly one interval of the
//! decomposition, whose prefix and every descendant's prefix on the path to the key
//! were inserted.

use crate::Bloom;
use cosine_core::{Decoder, Encoder, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// Most heights a filter may have (a height-64 interval is the whole key space).
pub const MAX_HEIGHTS: usize = 64;
/// Most top-height intervals one query may expand to; a wider range is answered
/// "may intersect" without probing (the filter is sized for short ranges).
pub const MAX_TOP_INTERVALS: u128 = 64;

/// The first 8 bytes of `key` as a big-endian integer (zero padded): the order
/// of these integers is the order of the keys' prefixes, so `lo <= key <= hi`
/// implies `key_prefix(lo) <= key_prefix(key) <= key_prefix(hi)`.
pub fn key_prefix(key: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = key.len().min(8);
    w[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(w)
}

fn prefix_hash(height: usize, prefix: u64) -> u64 {
    let mut b = [0u8; 9];
    b[..8].copy_from_slice(&prefix.to_be_bytes());
    b[8] = height as u8;
    cosine_core::hash64(&b)
}

/// A built range filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeFilter {
    /// Filter per height (`None`: no bits at that height).
    levels: Vec<Option<Bloom>>,
}

/// Collects the prefixes of keys added in ascending order.
#[derive(Debug)]
pub struct RangeFilterBuilder {
    bits: Vec<f64>,
    hashes: Vec<Vec<u64>>,
    last: Option<u64>,
}

impl RangeFilterBuilder {
    /// A builder for `bits_per_height[h]` bits per distinct prefix at height `h`
    /// (at most [`MAX_HEIGHTS`] heights; 0 bits: no filter at that height).
    pub fn new(bits_per_height: &[f64]) -> RangeFilterBuilder {
        let bits: Vec<f64> = bits_per_height.iter().take(MAX_HEIGHTS).copied().collect();
        RangeFilterBuilder { hashes: vec![Vec::new(); bits.len()], bits, last: None }
    }

    /// Adds a key's [`key_prefix`]; keys arrive in ascending order (repeats allowed).
    pub fn add(&mut self, key: u64) {
        for (h, (hs, b)) in self.hashes.iter_mut().zip(&self.bits).enumerate() {
            if *b <= 0.0 {
                continue;
            }
            let p = key >> h;
            // ascending keys: a prefix repeats only right after itself
            if self.last.is_some_and(|l| l >> h == p) {
                continue;
            }
            hs.push(prefix_hash(h, p));
        }
        self.last = Some(key);
    }

    /// The filter over the keys added.
    pub fn finish(self) -> RangeFilter {
        let levels = self.hashes.iter().zip(&self.bits).map(|(hs, b)| (*b > 0.0).then(|| Bloom::from_hashes(hs, *b))).collect();
        RangeFilter { levels }
    }
}

/// Process-wide range-filter counters (one engine per process in `cosine-bench`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RangeFilterStats {
    /// Queries asked of a filter (one per file a range reaches in a hot level).
    pub queries: u64,
    /// Queries answered "may intersect" (the file is then read).
    pub positives: u64,
    /// Bloom probes those queries made.
    pub probes: u64,
}

static QUERIES: AtomicU64 = AtomicU64::new(0);
static POSITIVES: AtomicU64 = AtomicU64::new(0);
static PROBES: AtomicU64 = AtomicU64::new(0);

/// The process-wide counters.
pub fn stats() -> RangeFilterStats {
    RangeFilterStats {
        queries: QUERIES.load(Ordering::Relaxed),
        positives: POSITIVES.load(Ordering::Relaxed),
        probes: PROBES.load(Ordering::Relaxed),
    }
}

impl RangeFilter {
    /// Heights the filter covers (intervals of up to `2^(heights-1)` keys are probed directly).
    pub fn heights(&self) -> usize {
        self.levels.len()
    }

    /// Bytes of the bit arrays (memory and on-disk footprint).
    pub fn byte_len(&self) -> usize {
        self.levels.iter().flatten().map(Bloom::byte_len).sum()
    }

    /// False means no key in `[lo, hi]` (inclusive); true means the range may hold one.
    pub fn may_intersect(&self, lo: u64, hi: u64) -> bool {
        let (hit, probes) = self.query(lo, hi);
        QUERIES.fetch_add(1, Ordering::Relaxed);
        POSITIVES.fetch_add(u64::from(hit), Ordering::Relaxed);
        PROBES.fetch_add(probes, Ordering::Relaxed);
        hit
    }

    /// `may_intersect` without touching the counters: (answer, Bloom probes made).
    pub fn query(&self, lo: u64, hi: u64) -> (bool, u64) {
        if lo > hi || self.levels.is_empty() {
            return (lo <= hi, 0);
        }
        let top = self.levels.len() - 1;
        let mut probes = 0u64;
        let (mut x, end) = (u128::from(lo), u128::from(hi) + 1);
        // maximal dyadic intervals, left to right
        let mut parts: Vec<(usize, u64)> = Vec::new();
        while x < end {
            let mut h = if x == 0 { 64 } else { x.trailing_zeros().min(64) as usize };
            while x + (1u128 << h) > end {
                h -= 1;
            }
            if h > top {
                let n = 1u128 << (h - top);
                if parts.len() as u128 + n > MAX_TOP_INTERVALS {
                    return (true, probes);
                }
                for j in 0..n {
                    parts.push((top, ((x >> top) + j) as u64));
                }
            } else {
                parts.push((h, (x >> h) as u64));
            }
            x += 1u128 << h;
        }
        let hit = parts.into_iter().any(|(h, p)| self.doubt(h, p, &mut probes));
        (hit, probes)
    }

    /// Whether the interval of height `h` and prefix `p` may hold a key.
    fn doubt(&self, h: usize, p: u64, probes: &mut u64) -> bool {
        if let Some(b) = &self.levels[h] {
            *probes += 1;
            if !b.may_contain(prefix_hash(h, p)) {
                return false;
            }
        }
        if h == 0 {
            return true;
        }
        self.doubt(h - 1, p << 1, probes) || self.doubt(h - 1, (p << 1) | 1, probes)
    }

    /// Serializes with a trailing checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::with_capacity(self.byte_len() + 16 * self.levels.len() + 8);
        e.u32(self.levels.len() as u32);
        for l in &self.levels {
            match l {
                None => e.u8(0),
                Some(b) => {
                    e.u8(1);
                    e.len_bytes(&b.encode());
                }
            }
        }
        e.seal();
        e.finish()
    }

    /// Decodes and verifies a filter written by [`RangeFilter::encode`].
    pub fn decode(buf: &[u8]) -> Result<RangeFilter> {
        let mut d = Decoder::checked(buf, "range filter")?;
        let n = d.u32()? as usize;
        if n == 0 || n > MAX_HEIGHTS {
            return Err(d.error("bad height count"));
        }
        let mut levels = Vec::with_capacity(n);
        for _ in 0..n {
            levels.push(match d.u8()? {
                0 => None,
                1 => Some(Bloom::decode(d.len_bytes()?)?),
                _ => return Err(d.error("bad level tag")),
            });
        }
        if d.remaining() != 0 {
            return Err(d.error("trailing bytes"));
        }
        Ok(RangeFilter { levels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        let mut v: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        v.sort_unstable();
        v
    }

    fn build(ks: &[u64], bits: &[f64]) -> RangeFilter {
        let mut b = RangeFilterBuilder::new(bits);
        for k in ks {
            b.add(*k);
        }
        b.finish()
    }

    #[test]
    fn no_false_negatives() {
        let ks = keys(5000, 7);
        let f = build(&ks, &[10.0, 2.0, 2.0, 0.0, 2.0, 2.0]);
        for (i, k) in ks.iter().enumerate() {
            for w in [0u64, 1, 5, 31, 63, 200] {
                let lo = k.saturating_sub(w / 2 + (i as u64 % 3));
                assert!(f.query(lo, lo.saturating_add(w).max(*k)).0, "key {k} width {w}");
            }
        }
        assert!(f.query(0, u64::MAX).0, "the whole key space holds keys");
    }

    #[test]
    fn empty_ranges_are_mostly_ruled_out_and_round_trip() {
        let ks = keys(20_000, 11);
        let f = build(&ks, &[14.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]);
        let qs = keys(20_000, 99);
        let mut fp = 0;
        for q in &qs {
            let (lo, hi) = (*q, q.saturating_add(63));
            let i = ks.partition_point(|k| *k < lo);
            if i < ks.len() && ks[i] <= hi {
                continue; // not empty
            }
            fp += usize::from(f.query(lo, hi).0);
        }
        assert!(fp < 400, "{fp} false positives in 20,000 empty ranges of width 64");
        let d = RangeFilter::decode(&f.encode()).expect("decode");
        assert_eq!(d, f);
        let mut enc = f.encode();
        enc[9] ^= 0x40;
        assert!(RangeFilter::decode(&enc).is_err());
    }

    #[test]
    fn decomposition_covers_exactly_the_range() {
        // an empty filter with bits at height 0 only: every interval is doubted down to its
        // keys, each of which is probed once and ruled out, so probes = keys in the range
        let f = build(&[], &[4.0, 0.0, 0.0, 0.0]);
        for (lo, hi) in [(0u64, 0u64), (5, 12), (7, 7), (1, 64), (3, 70), (u64::MAX - 9, u64::MAX)] {
            let (hit, probes) = f.query(lo, hi);
            assert!(!hit);
            assert_eq!(probes, hi - lo + 1, "[{lo}, {hi}]");
        }
        // wider than MAX_TOP_INTERVALS intervals of the top height: not probed
        assert_eq!(f.query(0, 16 * MAX_TOP_INTERVALS as u64 - 1), (true, 0));
        assert_eq!(key_prefix(&[1, 2]), 0x0102_0000_0000_0000);
        assert_eq!(key_prefix(&[0xff; 16]), u64::MAX);
    }
}
