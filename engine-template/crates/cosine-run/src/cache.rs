//! LRU cache of decoded data and index blocks (`block_cache_bytes`).
//!
//! A hit costs no block I/O. Sharded by block id so concurrent readers rarely
//! contend on one mutex.

use crate::block::Block;
use cosine_fence::Fences;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A cached block.
#[derive(Debug, Clone)]
pub enum Cached {
    /// A data block.
    Data(Arc<Block>),
    /// An index block (on-disk fence pointers of a cold file).
    Index(Arc<Fences>),
}

impl Cached {
    fn charge(&self) -> usize {
        match self {
            Cached::Data(b) => b.charge(),
            Cached::Index(f) => f.memory_bytes() + 64,
        }
    }
}

type BlockId = (u64, u64);

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<BlockId, (Cached, u64)>,
    order: BTreeMap<u64, BlockId>,
    used: usize,
    tick: u64,
}

/// A sharded LRU block cache with a byte budget.
#[derive(Debug)]
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

const SHARDS: usize = 16;

impl BlockCache {
    /// A cache of `bytes` total; `None` when `bytes == 0` (caching disabled).
    pub fn new(bytes: u64) -> Option<Arc<BlockCache>> {
        (bytes > 0).then(|| {
            Arc::new(BlockCache {
                shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
                per_shard: (bytes as usize / SHARDS).max(1),
            })
        })
    }

    fn shard(&self, id: BlockId) -> &Mutex<Shard> {
        let h = id.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ id.1.rotate_left(17);
        &self.shards[(h >> 32) as usize % SHARDS]
    }

    /// Looks up block `offset` of file `file`, refreshing its recency.
    pub fn get(&self, file: u64, offset: u64) -> Option<Cached> {
        let mut s = self.shard((file, offset)).lock();
        s.tick += 1;
        let tick = s.tick;
        let (c, old) = {
            let e = s.map.get_mut(&(file, offset))?;
            let old = e.1;
            e.1 = tick;
            (e.0.clone(), old)
        };
        s.order.remove(&old);
        s.order.insert(tick, (file, offset));
        Some(c)
    }

    /// Inserts a block, evicting least recently used ones beyond the budget.
    pub fn insert(&self, file: u64, offset: u64, c: Cached) {
        let charge = c.charge();
        let mut s = self.shard((file, offset)).lock();
        s.tick += 1;
        let tick = s.tick;
        if let Some((old, t)) = s.map.insert((file, offset), (c, tick)) {
            s.order.remove(&t);
            s.used -= old.charge();
        }
        s.order.insert(tick, (file, offset));
        s.used += charge;
        while s.used > self.per_shard {
            let Some((&t, &id)) = s.order.iter().next() else { break };
            s.order.remove(&t);
            if let Some((old, _)) = s.map.remove(&id) {
                s.used -= old.charge();
            }
        }
    }
}
