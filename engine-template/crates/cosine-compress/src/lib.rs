//! Block compression: `none`, `lz4` or `zstd` at a level, per level class (hot / cold).
//!
//! A data block is built uncompressed (entries, count, its own checksum), then
//! [`seal`]ed for the disk: compressed with the file's [`Codec`], followed by
//! the uncompressed length and a CRC-32 of the *compressed* bytes, so a damaged
//! block is detected before it reaches the decompressor. `none` stores the block
//! as built (its own checksum covers it), so uncompressed files keep the format
//! they always had.
//!
//! The codecs are real crates: `lz4_flex` (LZ4 block format, pure Rust) and
//! `zstd` (bindings to the reference libzstd). Every seal and open is counted in
//! process-wide [`CodecStats`] (blocks, bytes before and after, nanoseconds), which
//! `cosine-bench` reports and `cosine calibrate` fits the model's size and CPU
//! factors to.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_core::{crc32, Error, Result};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// zstd's own default level (`ZSTD_CLEVEL_DEFAULT`), used when a design says `zstd` without one.
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;
/// Highest zstd level (`ZSTD_maxCLevel()` of libzstd 1.5).
pub const ZSTD_MAX_LEVEL: i32 = 22;
/// Bytes the envelope adds after the compressed payload: uncompressed length and CRC-32.
pub const ENVELOPE_BYTES: usize = 8;

/// How a file's data blocks are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    /// Stored as built.
    #[default]
    None,
    /// LZ4 block format (`lz4_flex`).
    Lz4,
    /// Zstandard at a level in `1..=22`.
    Zstd(i32),
}

impl Codec {
    /// Parses `none`, `lz4`, `zstd` (level 3) or `zstd:N` with `N` in `1..=22`.
    pub fn parse(text: &str) -> Result<Codec> {
        let bad = || Error::Config(format!("compression {text:?}: expected none, lz4, zstd or zstd:LEVEL (1..={ZSTD_MAX_LEVEL})"));
        match text.trim() {
            "none" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd(ZSTD_DEFAULT_LEVEL)),
            t => {
                let level = t.strip_prefix("zstd:").ok_or_else(bad)?.parse::<i32>().map_err(|_| bad())?;
                if (1..=ZSTD_MAX_LEVEL).contains(&level) {
                    Ok(Codec::Zstd(level))
                } else {
                    Err(bad())
                }
            }
        }
    }

    /// The codec's code in a file's meta block (0 none, 1 lz4, 2 zstd) and its level.
    pub fn to_meta(self) -> (u8, i32) {
        match self {
            Codec::None => (0, 0),
            Codec::Lz4 => (1, 0),
            Codec::Zstd(l) => (2, l),
        }
    }

    /// The codec a file's meta block names.
    pub fn from_meta(code: u8, level: i32) -> Result<Codec> {
        match (code, level) {
            (0, _) => Ok(Codec::None),
            (1, _) => Ok(Codec::Lz4),
            (2, l) if (1..=ZSTD_MAX_LEVEL).contains(&l) => Ok(Codec::Zstd(l)),
            _ => Err(Error::corruption(format!("unknown compression code {code} (level {level})"))),
        }
    }

    /// Compresses `raw` (no envelope).
    fn compress(self, raw: &[u8]) -> Result<Vec<u8>> {
        match self {
            Codec::None => Ok(raw.to_vec()),
            Codec::Lz4 => Ok(lz4_flex::block::compress(raw)),
            Codec::Zstd(l) => zstd::bulk::compress(raw, l).map_err(|e| Error::InvalidArgument(format!("zstd compress: {e}"))),
        }
    }

    /// Decompresses `stored` into exactly `raw_len` bytes (no envelope).
    fn decompress(self, stored: &[u8], raw_len: usize, what: &str) -> Result<Vec<u8>> {
        let bad = |m: String| Error::corruption(format!("{what}: {m}"));
        let out = match self {
            Codec::None => stored.to_vec(),
            Codec::Lz4 => lz4_flex::block::decompress(stored, raw_len).map_err(|e| bad(format!("lz4: {e}")))?,
            Codec::Zstd(_) => zstd::bulk::decompress(stored, raw_len).map_err(|e| bad(format!("zstd: {e}")))?,
        };
        if out.len() != raw_len {
            return Err(bad(format!("decompressed {} bytes, the block says {raw_len}", out.len())));
        }
        Ok(out)
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Codec::None => write!(f, "none"),
            Codec::Lz4 => write!(f, "lz4"),
            Codec::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

/// Most bytes a block may decompress to (the engine's blocks are at most 65,536
/// entries of at most 4 KiB keys and 1 GiB values; a length beyond this is damage).
const MAX_RAW_BLOCK: u64 = 1 << 40;

/// The bytes written to disk for a block built as `raw`: `raw` itself for
/// [`Codec::None`], else the compressed bytes, the raw length (u32) and a CRC-32
/// of both.
pub fn seal(codec: Codec, raw: &[u8]) -> Result<Vec<u8>> {
    if codec == Codec::None {
        return Ok(raw.to_vec());
    }
    let t = Instant::now();
    let mut out = codec.compress(raw)?;
    let len =
        u32::try_from(raw.len()).map_err(|_| Error::InvalidArgument(format!("block of {} bytes is too large to compress", raw.len())))?;
    out.extend_from_slice(&len.to_le_bytes());
    let c = crc32(&out);
    out.extend_from_slice(&c.to_le_bytes());
    STATS.record_seal(raw.len(), out.len(), t.elapsed().as_nanos() as u64);
    Ok(out)
}

/// The block built as `raw` from the bytes [`seal`] wrote; the checksum is verified
/// before decompressing. `what` names the block in errors.
pub fn open(codec: Codec, stored: Vec<u8>, what: &str) -> Result<Vec<u8>> {
    if codec == Codec::None {
        return Ok(stored);
    }
    let t = Instant::now();
    let n = stored.len();
    if n < ENVELOPE_BYTES {
        return Err(Error::corruption(format!("{what}: compressed block too short")));
    }
    let word = |at: usize| u32::from_le_bytes([stored[at], stored[at + 1], stored[at + 2], stored[at + 3]]);
    if crc32(&stored[..n - 4]) != word(n - 4) {
        return Err(Error::corruption(format!("{what}: compressed block checksum mismatch")));
    }
    let raw_len = u64::from(word(n - 8));
    if raw_len > MAX_RAW_BLOCK {
        return Err(Error::corruption(format!("{what}: block claims {raw_len} bytes")));
    }
    let raw = codec.decompress(&stored[..n - ENVELOPE_BYTES], raw_len as usize, what)?;
    STATS.record_open(raw.len(), n, t.elapsed().as_nanos() as u64);
    Ok(raw)
}

/// Process-wide compression counters (one engine per process in `cosine-bench`).
#[derive(Debug, Default)]
pub struct CodecStats {
    sealed: AtomicU64,
    sealed_raw: AtomicU64,
    sealed_stored: AtomicU64,
    seal_ns: AtomicU64,
    opened: AtomicU64,
    opened_raw: AtomicU64,
    opened_stored: AtomicU64,
    open_ns: AtomicU64,
}

/// A copy of [`CodecStats`] at one moment (compressed blocks only: `none` is not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodecSnapshot {
    /// Blocks compressed.
    pub blocks_compressed: u64,
    /// Their bytes before compression.
    pub compressed_raw_bytes: u64,
    /// Their bytes on disk (envelope included).
    pub compressed_stored_bytes: u64,
    /// Nanoseconds spent compressing (and checksumming) them.
    pub compress_ns: u64,
    /// Blocks decompressed.
    pub blocks_decompressed: u64,
    /// Their bytes after decompression.
    pub decompressed_raw_bytes: u64,
    /// Their bytes on disk (envelope included).
    pub decompressed_stored_bytes: u64,
    /// Nanoseconds spent verifying and decompressing them.
    pub decompress_ns: u64,
}

impl CodecSnapshot {
    /// The counters accumulated since `earlier`.
    pub fn since(&self, earlier: &CodecSnapshot) -> CodecSnapshot {
        CodecSnapshot {
            blocks_compressed: self.blocks_compressed - earlier.blocks_compressed,
            compressed_raw_bytes: self.compressed_raw_bytes - earlier.compressed_raw_bytes,
            compressed_stored_bytes: self.compressed_stored_bytes - earlier.compressed_stored_bytes,
            compress_ns: self.compress_ns - earlier.compress_ns,
            blocks_decompressed: self.blocks_decompressed - earlier.blocks_decompressed,
            decompressed_raw_bytes: self.decompressed_raw_bytes - earlier.decompressed_raw_bytes,
            decompressed_stored_bytes: self.decompressed_stored_bytes - earlier.decompressed_stored_bytes,
            decompress_ns: self.decompress_ns - earlier.decompress_ns,
        }
    }
}

impl CodecStats {
    fn record_seal(&self, raw: usize, stored: usize, ns: u64) {
        self.sealed.fetch_add(1, Ordering::Relaxed);
        self.sealed_raw.fetch_add(raw as u64, Ordering::Relaxed);
        self.sealed_stored.fetch_add(stored as u64, Ordering::Relaxed);
        self.seal_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn record_open(&self, raw: usize, stored: usize, ns: u64) {
        self.opened.fetch_add(1, Ordering::Relaxed);
        self.opened_raw.fetch_add(raw as u64, Ordering::Relaxed);
        self.opened_stored.fetch_add(stored as u64, Ordering::Relaxed);
        self.open_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> CodecSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CodecSnapshot {
            blocks_compressed: g(&self.sealed),
            compressed_raw_bytes: g(&self.sealed_raw),
            compressed_stored_bytes: g(&self.sealed_stored),
            compress_ns: g(&self.seal_ns),
            blocks_decompressed: g(&self.opened),
            decompressed_raw_bytes: g(&self.opened_raw),
            decompressed_stored_bytes: g(&self.opened_stored),
            decompress_ns: g(&self.open_ns),
        }
    }
}

static STATS: CodecStats = CodecStats {
    sealed: AtomicU64::new(0),
    sealed_raw: AtomicU64::new(0),
    sealed_stored: AtomicU64::new(0),
    seal_ns: AtomicU64::new(0),
    opened: AtomicU64::new(0),
    opened_raw: AtomicU64::new(0),
    opened_stored: AtomicU64::new(0),
    open_ns: AtomicU64::new(0),
};

/// The process-wide counters.
pub fn stats() -> CodecSnapshot {
    STATS.snapshot()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Vec<u8> {
        // half repeated text, half pseudo-random bytes
        let mut v: Vec<u8> = b"cosine block ".iter().cycle().take(n / 2).copied().collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(x as u8);
        }
        v
    }

    #[test]
    fn parse_and_meta_round_trip() {
        for (text, codec) in [("none", Codec::None), ("lz4", Codec::Lz4), ("zstd", Codec::Zstd(3)), ("zstd:19", Codec::Zstd(19))] {
            let c = Codec::parse(text).expect("valid");
            assert_eq!(c, codec);
            let (code, level) = c.to_meta();
            assert_eq!(Codec::from_meta(code, level).expect("meta"), c);
            assert_eq!(Codec::parse(&c.to_string()).expect("display parses"), c);
        }
        for bad in ["", "gzip", "zstd:0", "zstd:23", "zstd:x", "lz4:1"] {
            assert!(Codec::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(Codec::from_meta(9, 0).is_err());
        assert!(Codec::from_meta(2, 99).is_err());
    }

    #[test]
    fn seal_open_round_trip_and_shrink() {
        let raw = sample(4096);
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd(1), Codec::Zstd(9)] {
            let stored = seal(codec, &raw).expect("seal");
            if codec != Codec::None {
                assert!(stored.len() < raw.len(), "{codec}: {} >= {}", stored.len(), raw.len());
            }
            assert_eq!(open(codec, stored, "t").expect("open"), raw);
        }
    }

    #[test]
    fn every_flipped_bit_is_detected_before_decompression() {
        let raw = sample(2048);
        for codec in [Codec::Lz4, Codec::Zstd(3)] {
            let stored = seal(codec, &raw).expect("seal");
            for i in 0..stored.len() {
                let mut bad = stored.clone();
                bad[i] ^= 0x01;
                let e = open(codec, bad, "t").expect_err("flip undetected");
                assert!(e.is_corruption(), "{codec} flip at {i}: {e}");
            }
            assert!(open(codec, stored[..5].to_vec(), "t").is_err());
        }
    }

    #[test]
    fn counters_move() {
        let before = stats();
        let stored = seal(Codec::Lz4, &sample(1000)).expect("seal");
        open(Codec::Lz4, stored, "t").expect("open");
        let d = stats().since(&before);
        assert!(d.blocks_compressed >= 1 && d.blocks_decompressed >= 1);
        assert!(d.compressed_raw_bytes >= 1000 && d.decompressed_raw_bytes >= 1000);
    }
}
