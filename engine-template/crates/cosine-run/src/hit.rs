//! A point lookup's answer where it lies: the decoded block holding the key and the entry's
//! index in it, so a reader can use the value without copying it out of the block
//! (cosine-server encodes a GET's reply straight from it: issue 48).

use crate::block::Block;
use std::sync::Arc;

/// The entry of a key found in a data block (`value()` is `None` for a tombstone).
#[derive(Debug, Clone)]
pub struct Hit {
    block: Arc<Block>,
    index: usize,
}

impl Hit {
    /// The entry `index` of `block`.
    pub fn new(block: Arc<Block>, index: usize) -> Hit {
        Hit { block, index }
    }

    /// The entry's value (`None` = tombstone), borrowed from the block.
    pub fn value(&self) -> Option<&[u8]> {
        self.block.value(self.index)
    }

    /// A copy of the value.
    pub fn to_value(&self) -> Option<Vec<u8>> {
        self.value().map(<[u8]>::to_vec)
    }
}
