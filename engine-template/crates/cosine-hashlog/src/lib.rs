//! Log-structured hash table (FASTER-like, `class = "lsh"`).
//!
//! Flushed buffers are appended to log segments (`NNNNNNNN.log`) as checksummed
//! data blocks of `B` entries, each prefixed by its length. An in-memory hash
//! index maps every live key to the block holding its newest version, so a get
//! costs one block read if the key is on disk and none if it is absent.
//! Overwritten and deleted entries become dead; when the dead fraction passes
//! `1 - merge_threshold` the oldest segment is garbage collected: its live
//! entries are re-appended at the head and the segment is dropped.
//!
//! Every change is two-phase: `prepare_*` writes and fsyncs log bytes and returns
//! the segment list for the manifest; `commit_*` applies the index changes after
//! the manifest is durable. Bytes beyond a segment's committed length are an
//! interrupted append and are cut off at open.
//!
//! The index is striped ([`INDEX_STRIPES`] maps, each behind its own lock): a commit
//! updates one stripe at a time, so a get waits at most for one stripe's share of a
//! flush, not for the whole flush. (With one lock, every flush of a few thousand
//! entries held it for ~2 ms of hash-map inserts, and gets stalled behind it: 12% of
//! a 1-thread YCSB A run's wall time, docs/journal/s17-s21.md §19.) Every key a commit moves is
//! still in the frozen buffer being flushed, or keeps its value (a GC's move), so a
//! reader that sees some stripes updated and others not reads the same values.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_buffer::MemTable;
use cosine_config::Config;
use cosine_core::io::BlockKind;
use cosine_core::{Error, IoCounter, KvIterator, Result};
use cosine_manifest::SegmentRecord;
use cosine_run::cache::Cached;
use cosine_run::{Block, BlockBuilder, BlockCache, Hit};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Path of log segment `id`.
pub fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:08}.log"))
}

/// Position of a data block in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    /// Segment id.
    pub seg: u64,
    /// Byte offset of the block (after its length prefix).
    pub offset: u64,
    /// Block length in bytes.
    pub len: u32,
}

#[derive(Debug)]
struct Segment {
    id: u64,
    path: PathBuf,
    file: File,
}

#[derive(Debug, Default, Clone, Copy)]
struct SegStats {
    len: u64,
    total: u64,
    dead: u64,
}

/// Stripes of the in-memory hash index.
pub const INDEX_STRIPES: usize = 64;

/// One index update: its position in the batch, the key, its new location (None: removed).
type StripedUpdate = (usize, Vec<u8>, Option<Loc>);

/// The key -> newest block map, striped by a hash of the key.
#[derive(Debug)]
struct Index {
    stripes: Vec<RwLock<HashMap<Vec<u8>, Loc>>>,
}

impl Index {
    fn new() -> Self {
        Index { stripes: (0..INDEX_STRIPES).map(|_| RwLock::new(HashMap::new())).collect() }
    }

    /// The stripe of `key` (FNV-1a: cheap, and independent of the maps' own hashing).
    fn stripe(key: &[u8]) -> usize {
        let h = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
        (h % INDEX_STRIPES as u64) as usize
    }

    fn get(&self, key: &[u8]) -> Option<Loc> {
        self.stripes[Self::stripe(key)].read().get(key).copied()
    }

    fn len(&self) -> usize {
        self.stripes.iter().map(|s| s.read().len()).sum()
    }

    /// Applies `updates` (key, new location or removal) one stripe at a time; returns
    /// each update's (new, previous) location, in the order given.
    fn apply(&self, updates: Vec<(Vec<u8>, Option<Loc>)>) -> Vec<(Option<Loc>, Option<Loc>)> {
        let mut by_stripe: Vec<Vec<StripedUpdate>> = (0..INDEX_STRIPES).map(|_| Vec::new()).collect();
        let n = updates.len();
        for (i, (k, loc)) in updates.into_iter().enumerate() {
            by_stripe[Self::stripe(&k)].push((i, k, loc));
        }
        let mut old = vec![(None, None); n];
        for (s, group) in by_stripe.into_iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            let mut m = self.stripes[s].write();
            for (i, k, loc) in group {
                let prev = match loc {
                    Some(l) => m.insert(k, l),
                    None => m.remove(&k),
                };
                old[i] = (loc, prev);
            }
        }
        old
    }
}

#[derive(Debug, Default)]
struct State {
    segments: BTreeMap<u64, Arc<Segment>>,
    stats: BTreeMap<u64, SegStats>,
    active: Option<u64>,
}

/// The log-structured hash table.
#[derive(Debug)]
pub struct HashLog {
    dir: PathBuf,
    key_len: usize,
    block_entries: usize,
    segment_entries: u64,
    gc_dead_fraction: f64,
    cache: Option<Arc<BlockCache>>,
    index: Index,
    state: RwLock<State>,
}

/// What an append produced: index updates (key, new location or tombstone, segment),
/// bytes per segment, segments created, and the active segment afterwards.
type Appended = (Vec<(Vec<u8>, Option<Loc>, u64)>, Vec<(u64, SegStats)>, Vec<Arc<Segment>>, Option<u64>);

/// Log bytes written and fsynced, waiting for the manifest commit.
#[derive(Debug)]
pub struct Prepared {
    /// Segment list to record in the manifest.
    pub segments: Vec<SegmentRecord>,
    updates: Vec<(Vec<u8>, Option<Loc>, u64)>,
    appended: Vec<(u64, SegStats)>,
    new_segments: Vec<Arc<Segment>>,
    active: Option<u64>,
    dropped: Option<u64>,
}

impl Prepared {
    /// Paths of segments this change creates (removed again if the commit fails).
    pub fn created(&self, dir: &Path) -> Vec<PathBuf> {
        self.new_segments.iter().map(|s| segment_path(dir, s.id)).collect()
    }
}

fn open_segment(dir: &Path, id: u64, create: bool) -> Result<Arc<Segment>> {
    let path = segment_path(dir, id);
    let file = OpenOptions::new().read(true).write(true).create(create).truncate(false).open(&path).map_err(|e| Error::io(&path, e))?;
    Ok(Arc::new(Segment { id, path, file }))
}

fn read_exact(seg: &Segment, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    seg.file.read_exact_at(&mut buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(format!("{}: block at {offset} runs past end of file", seg.path.display()))
        } else {
            Error::io(&seg.path, e)
        }
    })?;
    Ok(buf)
}

impl HashLog {
    /// Opens the segments a manifest names, cutting uncommitted tails and rebuilding
    /// the index by reading every block once (charged to `io`).
    pub fn open(dir: &Path, cfg: &Config, segments: &[SegmentRecord], cache: Option<Arc<BlockCache>>, io: &IoCounter) -> Result<HashLog> {
        let log = HashLog {
            dir: dir.to_path_buf(),
            key_len: cfg.layout.key_bytes,
            block_entries: cfg.layout.block_entries,
            segment_entries: cfg.algorithms.file_entries as u64,
            gc_dead_fraction: 1.0 - cfg.algorithms.merge_threshold,
            cache,
            index: Index::new(),
            state: RwLock::new(State::default()),
        };
        {
            let mut st = log.state.write();
            for rec in segments {
                let seg = open_segment(dir, rec.id, false)?;
                let actual = seg.file.metadata().map_err(|e| Error::io(&seg.path, e))?.len();
                if actual < rec.len {
                    return Err(Error::corruption(format!("{}: {actual} bytes, the manifest committed {}", seg.path.display(), rec.len)));
                }
                if actual > rec.len {
                    seg.file.set_len(rec.len).map_err(|e| Error::io(&seg.path, e))?;
                }
                st.stats.insert(rec.id, SegStats { len: rec.len, ..SegStats::default() });
                let mut pos = 0u64;
                while pos < rec.len {
                    let lb = read_exact(&seg, pos, 4)?;
                    let len = u32::from_le_bytes([lb[0], lb[1], lb[2], lb[3]]);
                    let loc = Loc { seg: rec.id, offset: pos + 4, len };
                    if loc.offset + len as u64 > rec.len {
                        return Err(Error::corruption(format!("{}: block at {pos} crosses the committed end", seg.path.display())));
                    }
                    let raw = read_exact(&seg, loc.offset, len as usize)?;
                    io.read(BlockKind::Data, 1, raw.len() as u64);
                    let what = format!("{} block at {}", seg.path.display(), loc.offset);
                    let b = Block::decode(raw, log.key_len, &what)?;
                    let updates: Vec<(Vec<u8>, Option<Loc>)> =
                        (0..b.len()).map(|i| (b.key(i).to_vec(), b.value(i).is_some().then_some(loc))).collect();
                    for (new, old) in log.index.apply(updates) {
                        Self::account(&mut st, loc.seg, new, old);
                    }
                    pos = loc.offset + len as u64;
                }
                st.segments.insert(rec.id, seg);
            }
            st.active = segments.last().map(|s| s.id);
        }
        Ok(log)
    }

    // An entry arrived at the head of the log (segment `seg`; `new` its location, None for a
    // tombstone) and replaced `old`: dead accounting.
    fn account(st: &mut State, seg: u64, new: Option<Loc>, old: Option<Loc>) {
        if let Some(s) = st.stats.get_mut(&seg) {
            s.total += 1;
            if new.is_none() {
                s.dead += 1; // a tombstone is never read; it only shadows older entries
            }
        }
        if let Some(s) = old.and_then(|o| st.stats.get_mut(&o.seg)) {
            s.dead += 1;
        }
    }

    /// `Some(value)` if `key` is live on disk (one data block read unless cached).
    pub fn get(&self, key: &[u8], io: &IoCounter) -> Result<Option<Vec<u8>>> {
        Ok(self.find(key, io)?.and_then(|h| h.to_value()))
    }

    /// [`HashLog::get`] without copying the value: the block entry of `key`'s newest version.
    pub fn find(&self, key: &[u8], io: &IoCounter) -> Result<Option<Hit>> {
        for _ in 0..3 {
            let Some(loc) = self.index.get(key) else { return Ok(None) };
            let seg = self.state.read().segments.get(&loc.seg).cloned();
            // A GC may retire the segment between the two lookups: look again.
            let Some(seg) = seg else { continue };
            let b = self.read_block(&seg, loc, io)?;
            return match b.find(key) {
                Some(i) => Ok(Some(Hit::new(b, i))),
                None => Err(Error::corruption(format!("{}: index points at a block without the key", seg.path.display()))),
            };
        }
        Err(Error::Closed("hash log segment vanished during lookup".into()))
    }

    fn read_block(&self, seg: &Segment, loc: Loc, io: &IoCounter) -> Result<Arc<Block>> {
        if let Some(c) = &self.cache {
            if let Some(Cached::Data(b)) = c.get(loc.seg, loc.offset) {
                return Ok(b);
            }
        }
        let raw = read_exact(seg, loc.offset, loc.len as usize)?;
        io.read(BlockKind::Data, 1, raw.len() as u64);
        let what = format!("{} block at {}", seg.path.display(), loc.offset);
        let b = Arc::new(Block::decode(raw, self.key_len, &what)?);
        if let Some(c) = &self.cache {
            c.insert(loc.seg, loc.offset, Cached::Data(b.clone()));
        }
        Ok(b)
    }

    /// Up to `limit` live entries with `lo <= key <= hi`, sorted. The index holds every
    /// live key, so only blocks holding the selected keys are read (each once).
    pub fn scan(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, limit: usize, io: &IoCounter) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut hits: Vec<(Vec<u8>, Loc)> = Vec::new();
        for stripe in &self.index.stripes {
            let m = stripe.read();
            hits.extend(
                m.iter()
                    .filter(|(k, _)| lo.is_none_or(|l| k.as_slice() >= l) && hi.is_none_or(|h| k.as_slice() <= h))
                    .map(|(k, l)| (k.clone(), *l)),
            );
        }
        // The hash index has no order: pick the `limit` smallest keys in O(n), sort only those.
        if hits.len() > limit {
            if limit == 0 {
                hits.clear();
            } else {
                hits.select_nth_unstable_by(limit - 1, |a, b| a.0.cmp(&b.0));
                hits.truncate(limit);
            }
        }
        hits.sort_by(|a, b| a.0.cmp(&b.0));
        let mut blocks: HashMap<(u64, u64), Arc<Block>> = HashMap::new();
        let mut out = Vec::with_capacity(hits.len());
        for (k, loc) in hits {
            if let std::collections::hash_map::Entry::Vacant(e) = blocks.entry((loc.seg, loc.offset)) {
                let seg = self.state.read().segments.get(&loc.seg).cloned();
                let Some(seg) = seg else {
                    // Moved by a concurrent GC: fall back to a point lookup.
                    if let Some(v) = self.get(&k, io)? {
                        out.push((k, v));
                    }
                    continue;
                };
                e.insert(self.read_block(&seg, loc, io)?);
            }
            if let Some(b) = blocks.get(&(loc.seg, loc.offset)) {
                match b.get(&k) {
                    Some(Some(v)) => out.push((k, v)),
                    Some(None) => {}
                    None => return Err(Error::corruption("hash log index points at a block without the key")),
                }
            }
        }
        Ok(out)
    }

    fn records(&self, st: &State, extra: &[(u64, SegStats)], dropped: Option<u64>) -> Vec<SegmentRecord> {
        let mut lens: BTreeMap<u64, u64> = st.stats.iter().map(|(id, s)| (*id, s.len)).collect();
        for (id, s) in extra {
            *lens.entry(*id).or_default() += s.len;
        }
        if let Some(d) = dropped {
            lens.remove(&d);
        }
        lens.into_iter().map(|(id, len)| SegmentRecord { id, len }).collect()
    }

    /// Appends `entries` (key order irrelevant) to the head of the log and fsyncs.
    fn append(
        &self,
        entries: &mut dyn KvIterator,
        next_id: &mut dyn FnMut() -> u64,
        avoid: Option<u64>,
        io: &IoCounter,
    ) -> Result<Appended> {
        let (mut active, mut active_total) = {
            let st = self.state.read();
            match st.active {
                Some(a) if Some(a) != avoid => (Some(a), st.stats.get(&a).map_or(0, |s| s.total)),
                _ => (None, 0),
            }
        };
        let mut updates = Vec::new();
        let mut appended: Vec<(u64, SegStats)> = Vec::new();
        let mut new_segs: Vec<Arc<Segment>> = Vec::new();
        let mut seg: Option<(Arc<Segment>, u64)> = None; // (segment, write offset)
        let mut pending: Vec<(Vec<u8>, bool)> = Vec::new();
        let mut bb = BlockBuilder::default();
        let mut touched: Vec<Arc<Segment>> = Vec::new();
        loop {
            let done = !entries.valid();
            if !done {
                bb.add(entries.key(), entries.value());
                pending.push((entries.key().to_vec(), entries.value().is_some()));
                entries.next()?;
            }
            if pending.is_empty() || (!done && (bb.count() as usize) < self.block_entries) {
                if done {
                    break;
                }
                continue;
            }
            // Need a segment with room.
            if seg.is_none() || active_total >= self.segment_entries {
                let id = match active {
                    Some(a) if active_total < self.segment_entries => a,
                    _ => {
                        let id = next_id();
                        active_total = 0;
                        new_segs.push(open_segment(&self.dir, id, true)?);
                        id
                    }
                };
                active = Some(id);
                let s = match new_segs.iter().find(|s| s.id == id) {
                    Some(s) => s.clone(),
                    None => self
                        .state
                        .read()
                        .segments
                        .get(&id)
                        .cloned()
                        .ok_or_else(|| Error::corruption(format!("active log segment {id} missing")))?,
                };
                let base = self.state.read().stats.get(&id).map_or(0, |s| s.len)
                    + appended.iter().filter(|(i, _)| *i == id).map(|(_, s)| s.len).sum::<u64>();
                if !touched.iter().any(|t| t.id == id) {
                    touched.push(s.clone());
                }
                seg = Some((s, base));
            }
            let Some((s, off)) = seg.as_mut() else { break };
            let bytes = bb.finish();
            let mut framed = Vec::with_capacity(bytes.len() + 4);
            framed.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            framed.extend_from_slice(&bytes);
            s.file.write_all_at(&framed, *off).map_err(|e| Error::io(&s.path, e))?;
            io.wrote(BlockKind::Data, 1, framed.len() as u64);
            let loc = Loc { seg: s.id, offset: *off + 4, len: bytes.len() as u32 };
            *off += framed.len() as u64;
            let n = pending.len() as u64;
            match appended.iter_mut().find(|(i, _)| *i == s.id) {
                Some((_, st)) => {
                    st.len += framed.len() as u64;
                    st.total += n;
                }
                None => appended.push((s.id, SegStats { len: framed.len() as u64, total: n, dead: 0 })),
            }
            active_total += n;
            for (k, live) in pending.drain(..) {
                updates.push((k, live.then_some(loc), s.id));
            }
            if done {
                break;
            }
        }
        for s in &touched {
            s.file.sync_data().map_err(|e| Error::io(&s.path, e))?;
        }
        if !new_segs.is_empty() {
            File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| Error::io(&self.dir, e))?;
        }
        Ok((updates, appended, new_segs, active))
    }

    /// Writes a frozen buffer to the log (phase one of a flush).
    pub fn prepare_flush(&self, mem: &MemTable, next_id: &mut dyn FnMut() -> u64, io: &IoCounter) -> Result<Prepared> {
        // the frozen buffer read in place (MemTable::with_range), as the LSM's flush reads it
        let (updates, appended, new_segments, active) = mem.with_range(None, None, |mut it| self.append(&mut it, next_id, None, io))?;
        let st = self.state.read();
        let segments = self.records(&st, &appended, None);
        Ok(Prepared { segments, updates, appended, new_segments, active, dropped: None })
    }

    /// True when the dead fraction calls for garbage collection.
    pub fn needs_gc(&self) -> bool {
        let st = self.state.read();
        let (total, dead) = st.stats.values().fold((0u64, 0u64), |a, s| (a.0 + s.total, a.1 + s.dead));
        total > 0 && dead > 0 && dead as f64 / total as f64 > self.gc_dead_fraction
    }

    /// Copies the oldest segment's live entries to the head (phase one of a GC).
    pub fn prepare_gc(&self, next_id: &mut dyn FnMut() -> u64, io: &IoCounter) -> Result<Option<Prepared>> {
        let (victim, len) = {
            let st = self.state.read();
            let Some((id, s)) = st.stats.iter().next() else { return Ok(None) };
            (*id, s.len)
        };
        let seg = self.state.read().segments.get(&victim).cloned();
        let Some(seg) = seg else { return Ok(None) };
        let mut live: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        let mut pos = 0u64;
        while pos < len {
            let lb = read_exact(&seg, pos, 4)?;
            let blen = u32::from_le_bytes([lb[0], lb[1], lb[2], lb[3]]);
            let loc = Loc { seg: victim, offset: pos + 4, len: blen };
            if loc.offset + blen as u64 > len {
                return Err(Error::corruption(format!("{}: block at {pos} crosses the committed end", seg.path.display())));
            }
            let raw = read_exact(&seg, loc.offset, blen as usize)?;
            io.read(BlockKind::Data, 1, raw.len() as u64);
            let b = Block::decode(raw, self.key_len, &format!("{} block at {}", seg.path.display(), loc.offset))?;
            for i in 0..b.len() {
                // Live = the index still points here. Tombstones in the oldest segment
                // shadow nothing older and are dropped.
                if let Some(v) = b.value(i) {
                    if self.index.get(b.key(i)) == Some(loc) {
                        live.push((b.key(i).to_vec(), Some(v.to_vec())));
                    }
                }
            }
            pos = loc.offset + blen as u64;
        }
        live.sort_by(|a, b| a.0.cmp(&b.0));
        let mut it = cosine_core::VecIterator::new(live);
        let (updates, appended, new_segments, active) = self.append(&mut it, next_id, Some(victim), io)?;
        let st = self.state.read();
        let segments = self.records(&st, &appended, Some(victim));
        Ok(Some(Prepared { segments, updates, appended, new_segments, active, dropped: Some(victim) }))
    }

    /// Applies a prepared change once the manifest recording it is durable (phase two).
    /// Returns the path of a retired segment to delete.
    ///
    /// New segments become visible first, then the index moves to them stripe by stripe,
    /// and only then is a collected segment dropped: a reader finds every location it
    /// reads in the segment list, or (dropped meanwhile) looks again.
    pub fn commit(&self, p: Prepared) -> Option<PathBuf> {
        {
            let mut st = self.state.write();
            for s in p.new_segments {
                st.stats.entry(s.id).or_default();
                st.segments.insert(s.id, s);
            }
        }
        let mut segs: Vec<u64> = Vec::with_capacity(p.updates.len());
        let updates: Vec<(Vec<u8>, Option<Loc>)> = p
            .updates
            .into_iter()
            .map(|(k, loc, seg)| {
                segs.push(seg);
                (k, loc)
            })
            .collect();
        let changes = self.index.apply(updates);
        let mut st = self.state.write();
        for (id, a) in &p.appended {
            let s = st.stats.entry(*id).or_default();
            s.len += a.len;
        }
        for ((new, old), seg) in changes.into_iter().zip(segs) {
            Self::account(&mut st, seg, new, old);
        }
        if let Some(a) = p.active {
            st.active = Some(a);
        }
        let dropped = p.dropped?;
        st.stats.remove(&dropped);
        st.segments.remove(&dropped);
        if st.active == Some(dropped) {
            st.active = None;
        }
        Some(segment_path(&self.dir, dropped))
    }

    /// Live keys, log entries, dead entries, segments.
    pub fn shape(&self) -> (u64, u64, u64, usize) {
        let st = self.state.read();
        let (total, dead) = st.stats.values().fold((0u64, 0u64), |a, s| (a.0 + s.total, a.1 + s.dead));
        (self.index.len() as u64, total, dead, st.segments.len())
    }

    /// Bytes of memory held by the hash index (its M_FP), estimated.
    pub fn memory_bytes(&self) -> usize {
        self.index.len() * (self.key_len + std::mem::size_of::<Loc>() + 32)
    }
}
