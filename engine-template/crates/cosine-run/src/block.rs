//! Data blocks: up to `B` fixed-width keys with their values, sealed by a checksum.
//!
//! Layout: entries `key[key_len] kind:u8 [vlen:u32 value]`, then `count:u32`, `crc32:u32`.

use cosine_core::{crc32, Error, Result};

const PUT: u8 = 1;
const DEL: u8 = 2;

/// Accumulates the entries of one data block.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    count: u32,
}

impl BlockBuilder {
    /// Appends an entry (keys must arrive in ascending order).
    pub fn add(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.buf.extend_from_slice(key);
        match value {
            Some(v) => {
                self.buf.push(PUT);
                self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                self.buf.extend_from_slice(v);
            }
            None => self.buf.push(DEL),
        }
        self.count += 1;
    }
    /// Entries added so far.
    pub fn count(&self) -> u32 {
        self.count
    }
    /// Seals the block and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        out.extend_from_slice(&self.count.to_le_bytes());
        let c = crc32(&out);
        out.extend_from_slice(&c.to_le_bytes());
        self.count = 0;
        out
    }
}

/// A verified, decoded data block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    offsets: Vec<u32>,
    key_len: usize,
}

impl Block {
    /// Verifies the checksum and indexes the entries.
    pub fn decode(mut data: Vec<u8>, key_len: usize, what: &str) -> Result<Block> {
        let bad = |m: &str| Error::corruption(format!("{what}: {m}"));
        if data.len() < 8 {
            return Err(bad("block too short"));
        }
        let n = data.len();
        let stored = u32::from_le_bytes([data[n - 4], data[n - 3], data[n - 2], data[n - 1]]);
        if crc32(&data[..n - 4]) != stored {
            return Err(bad("data block checksum mismatch"));
        }
        let count = u32::from_le_bytes([data[n - 8], data[n - 7], data[n - 6], data[n - 5]]) as usize;
        data.truncate(n - 8);
        let mut offsets = Vec::with_capacity(count);
        let mut pos = 0usize;
        for _ in 0..count {
            offsets.push(pos as u32);
            pos += key_len;
            let kind = *data.get(pos).ok_or_else(|| bad("entry runs past block end"))?;
            pos += 1;
            match kind {
                PUT => {
                    let l = data.get(pos..pos + 4).ok_or_else(|| bad("entry runs past block end"))?;
                    let vlen = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
                    pos += 4 + vlen;
                }
                DEL => {}
                _ => return Err(bad("unknown entry kind")),
            }
            if pos > data.len() {
                return Err(bad("entry runs past block end"));
            }
        }
        if pos != data.len() {
            return Err(bad("trailing bytes in block"));
        }
        Ok(Block { data, offsets, key_len })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// True for a block with no entries.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Key of entry `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        let o = self.offsets[i] as usize;
        &self.data[o..o + self.key_len]
    }

    /// Value of entry `i` (`None` = tombstone).
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        let o = self.offsets[i] as usize + self.key_len;
        if self.data[o] == DEL {
            return None;
        }
        let l = &self.data[o + 1..o + 5];
        let vlen = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
        Some(&self.data[o + 5..o + 5 + vlen])
    }

    /// Index of the first entry with key `>= key` (may be `len()`).
    pub fn seek(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Exact lookup: the index of `key`'s entry when the block holds it.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        let i = self.seek(key);
        (i < self.len() && self.key(i) == key).then_some(i)
    }

    /// Exact lookup: `Some(value)` when the block holds `key` (a copy of [`Block::find`]'s entry).
    pub fn get(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        self.find(key).map(|i| self.value(i).map(|v| v.to_vec()))
    }

    /// Decoded size in bytes (block-cache charge).
    pub fn charge(&self) -> usize {
        self.data.len() + self.offsets.len() * 4 + 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_decode_lookup() {
        let mut b = BlockBuilder::default();
        b.add(b"aa", Some(b"1"));
        b.add(b"bb", None);
        b.add(b"cc", Some(b""));
        let bytes = b.finish();
        let blk = Block::decode(bytes.clone(), 2, "t").expect("decode");
        assert_eq!(blk.len(), 3);
        assert_eq!(blk.get(b"aa"), Some(Some(b"1".to_vec())));
        assert_eq!(blk.get(b"bb"), Some(None));
        assert_eq!(blk.get(b"cc"), Some(Some(vec![])));
        assert_eq!(blk.get(b"ab"), None);
        assert_eq!((blk.find(b"aa"), blk.find(b"cc"), blk.find(b"ab")), (Some(0), Some(2), None));
        assert_eq!(blk.seek(b"ab"), 1);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(Block::decode(bad, 2, "t").is_err(), "flip at {i} undetected");
        }
    }

    /// The block cache charges a block of n stored entries n x (key + value + 9) + 64 bytes: the
    /// cost model's `cache_entry_overhead_bytes` (9) and `cache_block_overhead_bytes` (64) in
    /// cost_models/data/model_constants.yaml, which tests/test_block_charge.py checks against this.
    #[test]
    fn charge_is_the_cost_models() {
        for (n, key, value) in [(1usize, 16usize, 100usize), (2, 16, 100), (70, 16, 100), (8, 8, 1000)] {
            let mut b = BlockBuilder::default();
            for i in 0..n {
                let k = format!("{i:0key$}");
                b.add(k.as_bytes(), Some(&vec![7u8; value]));
            }
            let blk = Block::decode(b.finish(), key, "t").expect("a sealed block decodes");
            assert_eq!(blk.charge(), n * (key + value + 9) + 64, "{n} entries of {key} + {value} bytes");
        }
    }
}
