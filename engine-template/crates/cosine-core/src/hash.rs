//! A stable 64-bit key hash (persisted inside filters, so it must never change).

/// Hashes `key` to 64 bits (a murmur-style mix over 8-byte words; stable across versions).
pub fn hash64(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w);
        k = k.wrapping_mul(M);
        k ^= k >> 47;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h ^= u64::from_le_bytes(w);
        h = h.wrapping_mul(M);
    }
    // Final avalanche (splitmix64 finalizer) so every output bit depends on every input bit.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn stable_and_spread() {
        assert_eq!(hash64(b"abc"), hash64(b"abc"));
        assert_ne!(hash64(b"abc"), hash64(b"abd"));
        assert_ne!(hash64(&[0u8; 16]), hash64(&[0u8; 15]));
    }
}
