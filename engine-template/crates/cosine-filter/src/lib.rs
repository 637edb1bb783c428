//! Bloom filters: a lookup probes a run (file, block) only if its filter says "maybe".
//!
//! Bits per key come from `layout.bloom_bits_per_key` for the level; the number of
//! hash probes is the optimum `k = ln 2 * bits_per_key`. Probes use double hashing
//! over the stable [`cosine_core::hash64`], so filters stay valid across restarts.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod range;

use cosine_core::{Decoder, Encoder, Result};
pub use range::{key_prefix, RangeFilter, RangeFilterBuilder};

/// A Bloom filter over 64-bit key hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bloom {
    bits: Vec<u8>,
    nbits: u64,
    k: u32,
}

impl Bloom {
    /// A filter sized for `keys` keys at `bits_per_key` (at least 64 bits).
    pub fn new(keys: u64, bits_per_key: f64) -> Bloom {
        let nbits = ((keys.max(1) as f64 * bits_per_key).ceil() as u64).max(64);
        let k = ((bits_per_key * std::f64::consts::LN_2).round() as u32).clamp(1, 30);
        Bloom { bits: vec![0; nbits.div_ceil(8) as usize], nbits, k }
    }

    /// Builds a filter holding `hashes`.
    pub fn from_hashes(hashes: &[u64], bits_per_key: f64) -> Bloom {
        let mut b = Bloom::new(hashes.len() as u64, bits_per_key);
        for h in hashes {
            b.insert(*h);
        }
        b
    }

    fn probes(&self, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let h1 = hash;
        let h2 = hash.rotate_right(32) | 1;
        (0..self.k as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % self.nbits)
    }

    /// Adds a key hash.
    pub fn insert(&mut self, hash: u64) {
        let pos: Vec<u64> = self.probes(hash).collect();
        for p in pos {
            self.bits[(p / 8) as usize] |= 1 << (p % 8);
        }
    }

    /// False means the key is certainly absent; true means it may be present.
    pub fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash).all(|p| self.bits[(p / 8) as usize] & (1 << (p % 8)) != 0)
    }

    /// Size of the bit array in bytes (memory and on-disk footprint).
    pub fn byte_len(&self) -> usize {
        self.bits.len()
    }

    /// Serializes with a trailing checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::with_capacity(self.bits.len() + 20);
        e.u64(self.nbits);
        e.u32(self.k);
        e.bytes(&self.bits);
        e.seal();
        e.finish()
    }

    /// Decodes and verifies a filter written by [`Bloom::encode`].
    pub fn decode(buf: &[u8]) -> Result<Bloom> {
        let mut d = Decoder::checked(buf, "bloom filter")?;
        let nbits = d.u64()?;
        let k = d.u32()?;
        if nbits == 0 || k == 0 || k > 64 || nbits.div_ceil(8) as usize != d.remaining() {
            return Err(d.error("bad geometry"));
        }
        let bits = d.bytes(d.remaining())?.to_vec();
        Ok(Bloom { bits, nbits, k })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosine_core::hash64;

    #[test]
    fn no_false_negatives_and_low_fpr() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| hash64(&i.to_be_bytes())).collect();
        let b = Bloom::from_hashes(&keys, 10.0);
        assert!(keys.iter().all(|h| b.may_contain(*h)));
        let fp = (10_000..110_000u64).filter(|i| b.may_contain(hash64(&i.to_be_bytes()))).count();
        let fpr = fp as f64 / 100_000.0;
        assert!(fpr < 0.02, "fpr {fpr}");
        let d = Bloom::decode(&b.encode()).expect("decode");
        assert_eq!(d, b);
        let mut enc = b.encode();
        enc[13] ^= 0xff;
        assert!(Bloom::decode(&enc).is_err());
    }
}
