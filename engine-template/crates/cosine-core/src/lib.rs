//! Shared vocabulary of the Cosine storage engine.
//!
//! Every other crate speaks in these terms: a typed [`Error`], checksums over
//! persisted bytes, a stable 64-bit key hash for filters and hash indexes, the
//! one iterator trait ([`KvIterator`]) all sorted sources compose through, and
//! the block-I/O counters ([`IoCounter`]) the cost model is compared against.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod codec;
pub mod error;
pub mod fault;
pub mod hash;
pub mod io;
pub mod iter;

pub use codec::{crc32, Decoder, Encoder};
pub use error::{Error, Result};
pub use hash::hash64;
pub use io::{Device, DeviceSnapshot, DeviceSpec, IoCounter, IoSnapshot};
pub use iter::{KvIterator, MergingIterator, VecIterator};

/// A stored value: `Some(bytes)` for a put, `None` for a tombstone (delete).
pub type Value = Option<Vec<u8>>;

/// Capacity checks every storage component answers (paper Section 6: each crate
/// can tell how full it is, so the engine knows when to flush, merge or collect).
pub trait Capacity {
    /// Entries held now.
    fn entries(&self) -> u64;
    /// Entries the component is sized for.
    fn capacity(&self) -> u64;
    /// True when the component must be emptied (flushed, merged down, collected).
    fn is_full(&self) -> bool {
        self.entries() >= self.capacity()
    }
}
