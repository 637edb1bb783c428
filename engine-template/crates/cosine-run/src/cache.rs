//! LRU cache of decoded data and index blocks (`block_cache_bytes`).
//!
//! A hit costs no block I/O. Sharded by block id so concurrent readers rarely
//! contend on one mutex.

use crate::block::Block;
use cosine_fence::Fences;
use hashbrown::HashTable;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
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

/// A block id's hash: a multiply-xor mix of its two words. The ids are file numbers and byte
/// offsets, not chosen by clients, so the map needs no keyed hash: the cache's lookup is 14 % of a
/// served GET's CPU (mostly the misses of its probe), and hashing with this mix instead of the
/// standard library's SipHash took a GET at depth 16 from 1.83-2.09 to 1.71-1.86 us of server CPU
/// (stop 69, interleaved runs). Its high bits pick the shard, the map hashes by all of it.
fn id_hash(id: BlockId) -> u64 {
    let h = id.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ id.1.rotate_left(17).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 29)
}

/// A cached block, kept in its shard's map: a hit reads the block from the entry the probe found
/// (one dependent miss fewer than an index into a slot array: stop 69).
struct Entry {
    id: BlockId,
    block: Cached,
    charge: usize,
    referenced: bool,
    /// Its place on the clock ([`Shard::ring`]).
    pos: usize,
}

// CLOCK replacement: a hit only sets a bit (O(1) under the shard lock); the hand
// evicts the first unreferenced block, clearing bits as it passes.
#[derive(Default)]
struct Shard {
    /// Each cached block by [`id_hash`] of its id.
    map: HashTable<Entry>,
    /// The clock: the ids of the cached blocks (`None`: a free place, listed in `free`).
    ring: Vec<Option<BlockId>>,
    /// The offsets held of each file: a merge's inputs' blocks are found (and dropped) in time
    /// proportional to them, not to the cache's (crate::warm).
    by_file: HashMap<u64, HashSet<u64>>,
    free: Vec<usize>,
    hand: usize,
    used: usize,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("blocks", &self.map.len()).field("used", &self.used).finish()
    }
}

impl Shard {
    /// Block `id`'s entry, if cached.
    fn entry(&self, id: BlockId) -> Option<&Entry> {
        self.map.find(id_hash(id), |e| e.id == id)
    }

    fn evict_one(&mut self) -> bool {
        let n = self.ring.len();
        for _ in 0..2 * n + 1 {
            if n == 0 {
                return false;
            }
            let i = self.hand % n;
            self.hand = (i + 1) % n;
            let Some(id) = self.ring[i] else { continue };
            let Some(e) = self.map.find_mut(id_hash(id), |e| e.id == id) else { continue };
            if e.referenced {
                e.referenced = false;
            } else {
                self.drop_block(id);
                return true;
            }
        }
        false
    }

    /// Drops block `id` (it leaves the map, the clock, the file index and the budget).
    fn drop_block(&mut self, id: BlockId) {
        let Ok(found) = self.map.find_entry(id_hash(id), |e| e.id == id) else { return };
        let (e, _) = found.remove();
        self.ring[e.pos] = None;
        self.free.push(e.pos);
        if let Some(offsets) = self.by_file.get_mut(&id.0) {
            offsets.remove(&id.1);
            if offsets.is_empty() {
                self.by_file.remove(&id.0);
            }
        }
        self.used -= e.charge;
    }
}

/// A sharded block cache with a byte budget and CLOCK (second-chance) eviction.
#[derive(Debug)]
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

const SHARDS: usize = 16;
/// Fewest blocks a shard must have room for: a cache of a few large blocks split
/// 16 ways would have shards smaller than one block and cache nothing, where
/// one LRU of that many blocks (what the cost model assumes) caches them all.
const MIN_BLOCKS_PER_SHARD: u64 = 8;

impl BlockCache {
    /// A cache of `bytes` total for blocks of about `block_bytes`; `None` when
    /// `bytes == 0` (caching disabled). Up to 16 shards, fewer when the cache
    /// holds fewer than 8 blocks per shard.
    pub fn new(bytes: u64, block_bytes: u64) -> Option<Arc<BlockCache>> {
        (bytes > 0).then(|| {
            let shards = usize::try_from(bytes / (MIN_BLOCKS_PER_SHARD * block_bytes.max(1))).unwrap_or(SHARDS).clamp(1, SHARDS);
            Arc::new(BlockCache {
                shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
                per_shard: (bytes as usize / shards).max(1),
            })
        })
    }

    fn shard(&self, id: BlockId) -> &Mutex<Shard> {
        &self.shards[(id_hash(id) >> 40) as usize % self.shards.len()]
    }

    /// Looks up block `offset` of file `file`, marking it recently used.
    pub fn get(&self, file: u64, offset: u64) -> Option<Cached> {
        let id = (file, offset);
        let mut s = self.shard(id).lock();
        let e = s.map.find_mut(id_hash(id), |e| e.id == id)?;
        e.referenced = true;
        Some(e.block.clone())
    }

    /// Inserts a block, evicting others (second chance) beyond the budget.
    pub fn insert(&self, file: u64, offset: u64, c: Cached) {
        let id = (file, offset);
        let charge = c.charge();
        let mut s = self.shard(id).lock();
        if s.entry(id).is_some() {
            return;
        }
        while s.used + charge > self.per_shard && s.evict_one() {}
        if s.used + charge > self.per_shard {
            return; // larger than the whole shard: not cached
        }
        let pos = match s.free.pop() {
            Some(i) => {
                s.ring[i] = Some(id);
                i
            }
            None => {
                s.ring.push(Some(id));
                s.ring.len() - 1
            }
        };
        s.map.insert_unique(id_hash(id), Entry { id, block: c, charge, referenced: false, pos }, |e| id_hash(e.id));
        s.by_file.entry(file).or_default().insert(offset);
        s.used += charge;
    }

    /// The offsets of the data blocks of each of `files` the cache holds (through each shard's
    /// file index: time in the blocks listed): what a merge of those files carries over to its
    /// output ([`crate::warm`]).
    pub fn data_blocks_of(&self, files: &HashSet<u64>) -> HashMap<u64, Vec<u64>> {
        let mut out: HashMap<u64, Vec<u64>> = HashMap::new();
        for shard in &self.shards {
            let s = shard.lock();
            for f in files {
                for off in s.by_file.get(f).into_iter().flatten() {
                    let data = s.entry((*f, *off)).is_some_and(|e| matches!(e.block, Cached::Data(_)));
                    if data {
                        out.entry(*f).or_default().push(*off);
                    }
                }
            }
        }
        out
    }

    /// Drops every cached block of `files` (a merge's inputs, once its output replaced them):
    /// their room goes to live blocks instead of waiting for the clock hand.
    pub fn forget(&self, files: &HashSet<u64>) {
        for shard in &self.shards {
            let mut s = shard.lock();
            for f in files {
                let Some(offsets) = s.by_file.remove(f) else { continue };
                for off in offsets {
                    s.drop_block((*f, off));
                }
            }
        }
    }

    /// Bytes held (tests and stats).
    pub fn used_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().used).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{Block, BlockBuilder};

    /// A block holding one entry with a value of `value_len` bytes.
    fn block(value_len: usize) -> Arc<Block> {
        let mut b = BlockBuilder::default();
        b.add(b"k", Some(&vec![0u8; value_len]));
        Arc::new(Block::decode(b.finish(), 1, "t").expect("block"))
    }

    #[test]
    fn respects_budget_and_keeps_hot_blocks() {
        let blk = block(100);
        let per = blk.charge();
        let cache = BlockCache::new((per * 4 * SHARDS) as u64, 1).expect("cache");
        cache.insert(1, 0, Cached::Data(blk.clone()));
        for i in 1..1000u64 {
            assert!(cache.get(1, 0).is_some(), "hot block evicted at {i}");
            cache.insert(2, i, Cached::Data(blk.clone()));
        }
        let total: usize = cache.shards.iter().map(|s| s.lock().used).sum();
        assert!(total <= per * 4 * SHARDS);
        // the file index holds exactly the blocks the map does, through every eviction
        for s in &cache.shards {
            let s = s.lock();
            let indexed: HashSet<BlockId> = s.by_file.iter().flat_map(|(f, offs)| offs.iter().map(move |o| (*f, *o))).collect();
            assert_eq!(indexed, s.map.iter().map(|e| e.id).collect::<HashSet<_>>());
            // and the clock holds them too, each at its entry's place
            for e in s.map.iter() {
                assert_eq!(s.ring[e.pos], Some(e.id));
            }
            assert_eq!(s.ring.iter().flatten().count(), s.map.len());
        }
    }

    #[test]
    fn lists_and_forgets_the_blocks_of_files() {
        let blk = block(100);
        let cache = BlockCache::new(1 << 20, 1).expect("cache");
        for (f, o) in [(1u64, 0u64), (1, 40), (2, 0), (3, 7)] {
            cache.insert(f, o, Cached::Data(blk.clone()));
        }
        let want: HashSet<u64> = [1, 3].into_iter().collect();
        let mut of = cache.data_blocks_of(&want);
        of.values_mut().for_each(|v| v.sort_unstable());
        assert_eq!(of, HashMap::from([(1, vec![0, 40]), (3, vec![7])]));
        cache.forget(&want);
        assert!(cache.get(1, 0).is_none() && cache.get(1, 40).is_none() && cache.get(3, 7).is_none());
        assert!(cache.get(2, 0).is_some());
        assert_eq!(cache.used_bytes(), blk.charge());
        cache.insert(4, 0, Cached::Data(blk.clone())); // a freed slot is reused
        assert!(cache.get(4, 0).is_some());
    }

    #[test]
    fn a_cache_of_a_few_large_blocks_caches_them() {
        let blk = block(100_000);
        let per = blk.charge();
        // room for 3 blocks: 16 shards would each be smaller than one block
        let cache = BlockCache::new((per * 3) as u64, per as u64).expect("cache");
        assert_eq!(cache.shards.len(), 1);
        for i in 0..3u64 {
            cache.insert(1, i, Cached::Data(blk.clone()));
        }
        assert!((0..3u64).all(|i| cache.get(1, i).is_some()));
    }
}
