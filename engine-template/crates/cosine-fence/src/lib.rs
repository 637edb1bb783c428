//! Fence pointers: the first key of every block, pointing at where the block lives.
//!
//! Hot levels keep every file's fence pointers in memory, so a probe touches
//! exactly one data block. Cold levels keep them on disk in *index blocks*
//! (each about one data block in size); only the first key of each index block
//! stays in memory, so a probe reads one index block and then one data block.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_core::{Decoder, Encoder, Result};

/// Where a block lives inside its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHandle {
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes (including the block checksum).
    pub len: u32,
}

/// A sorted list of `(first key, handle)` pairs over fixed-width keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fences {
    key_len: usize,
    keys: Vec<u8>,
    handles: Vec<BlockHandle>,
}

impl Fences {
    /// Empty fences over keys of `key_len` bytes.
    pub fn new(key_len: usize) -> Self {
        Fences { key_len, keys: Vec::new(), handles: Vec::new() }
    }

    /// Appends a block whose first key is `first_key` (must be ascending).
    pub fn push(&mut self, first_key: &[u8], h: BlockHandle) {
        debug_assert_eq!(first_key.len(), self.key_len);
        self.keys.extend_from_slice(first_key);
        self.handles.push(h);
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// True when there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// First key of block `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        &self.keys[i * self.key_len..(i + 1) * self.key_len]
    }

    /// Handle of block `i`.
    pub fn handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    /// The block stored at byte `offset` of its file, if one starts there (blocks lie in the file
    /// in key order, so their offsets ascend).
    pub fn position_of(&self, offset: u64) -> Option<usize> {
        let i = self.handles.partition_point(|h| h.offset < offset);
        (i < self.handles.len() && self.handles[i].offset == offset).then_some(i)
    }

    /// The block that may hold `key`: the last one whose first key is `<= key`.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        // partition_point gives the first block whose first key is > key.
        let n = self.len();
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }

    /// Memory held by the fences in bytes (the M_FP footprint).
    pub fn memory_bytes(&self) -> usize {
        self.keys.len() + self.handles.len() * std::mem::size_of::<BlockHandle>()
    }

    /// Encodes as an index block (with checksum).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::with_capacity(self.keys.len() + self.len() * 12 + 12);
        e.u32(self.key_len as u32);
        e.u32(self.len() as u32);
        for i in 0..self.len() {
            e.bytes(self.key(i));
            e.u64(self.handles[i].offset);
            e.u32(self.handles[i].len);
        }
        e.seal();
        e.finish()
    }

    /// Decodes and verifies an index block.
    pub fn decode(buf: &[u8]) -> Result<Fences> {
        let mut d = Decoder::checked(buf, "index block")?;
        let key_len = d.u32()? as usize;
        let n = d.u32()? as usize;
        if key_len == 0 || n.saturating_mul(key_len + 12) != d.remaining() {
            return Err(d.error("bad entry count"));
        }
        let mut f = Fences::new(key_len);
        f.keys.reserve(n * key_len);
        for _ in 0..n {
            let k = d.bytes(key_len)?;
            let offset = d.u64()?;
            let len = d.u32()?;
            f.keys.extend_from_slice(k);
            f.handles.push(BlockHandle { offset, len });
        }
        for i in 1..n {
            if f.key(i - 1) > f.key(i) {
                return Err(Decoder::new(&[], "index block").error("keys out of order"));
            }
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_and_roundtrip() {
        let mut f = Fences::new(2);
        f.push(b"bb", BlockHandle { offset: 0, len: 10 });
        f.push(b"dd", BlockHandle { offset: 10, len: 10 });
        f.push(b"ff", BlockHandle { offset: 20, len: 10 });
        assert_eq!(f.find(b"aa"), None);
        assert_eq!(f.find(b"bb"), Some(0));
        assert_eq!(f.find(b"de"), Some(1));
        assert_eq!(f.find(b"zz"), Some(2));
        let g = Fences::decode(&f.encode()).expect("decode");
        assert_eq!(f, g);
        let mut bad = f.encode();
        bad[9] ^= 1;
        assert!(Fences::decode(&bad).is_err());
    }
}
