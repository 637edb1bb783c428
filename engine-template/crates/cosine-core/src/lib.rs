//! Shared vocabulary of the Cosine storage engine.
//!
//! Every other crate speaks in these terms: a typed [`Error`], checksums over
//! persisted bytes, a stable 64-bit key hash for filters and hash indexes, the
//! one iterator trait ([`KvIterator`]) all sorted sources compose through, and
//! the block-I/O counters ([`IoCounter`]) the cost model is compared against.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod codec;
pub mod error;
pub mod hash;
pub mod io;
pub mod iter;

pub use codec::{crc32, Decoder, Encoder};
pub use error::{Error, Result};
pub use hash::hash64;
pub use io::{IoCounter, IoSnapshot};
pub use iter::{KvIterator, MergingIterator, VecIterator};

/// A stored value: `Some(bytes)` for a put, `None` for a tombstone (delete).
pub type Value = Option<Vec<u8>>;
