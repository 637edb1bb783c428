//! Files (SSTs): the unit a run is made of and partial compaction moves.
//!
//! Layout: `[data blocks][filter section][range filter][index blocks][meta][footer]`.
//! The meta block holds the first key of each index block (the "top" of the
//! on-disk fence pointers), which is always in memory. For files in hot levels
//! the index blocks, the filter and the range filter are loaded into memory as well.
//! Data blocks are stored through the file's [`Codec`] (sealed after compression:
//! cosine-compress); index and filter blocks are not compressed. Version 1 files
//! (before compression and range filters) are still read.

use crate::block::{Block, BlockBuilder};
use crate::cache::{BlockCache, Cached};
use crate::hit::Hit;
use crate::warm::{WarmSpans, Warmed};
use cosine_compress::Codec;
use cosine_core::io::BlockKind;
use cosine_core::{Decoder, Encoder, Error, IoCounter, KvIterator, Result, Value};
use cosine_fence::{BlockHandle, Fences};
use cosine_filter::{key_prefix, Bloom, RangeFilter, RangeFilterBuilder};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: u64 = 0x434f_5349_4e45_5353; // "COSINESS"
const FOOTER: usize = 24;
/// Format written: 2 adds the data blocks' codec and the range filter to the meta block.
const VERSION: u32 = 2;
/// The format before compression and range filters (still read: no codec, no range filter).
const VERSION_1: u32 = 1;

/// Path of file `id` in `dir`.
pub fn table_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:08}.sst"))
}

/// Filter granularity stored inside a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// No filter in the file (cold level, bits = 0, or a run-level filter).
    None,
    /// One filter for the whole file.
    File,
    /// One filter per data block.
    Block,
}

/// How a file is written and held in memory.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Fixed key width.
    pub key_len: usize,
    /// B: entries per data block.
    pub block_entries: usize,
    /// Fence pointers per index block.
    pub index_fanout: usize,
    /// Nominal bytes of a block, the unit filter sections are counted in.
    pub block_bytes: usize,
    /// Filter written into the file.
    pub filter: FilterKind,
    /// Bloom bits per key for that filter.
    pub bits_per_key: f64,
    /// Hot: keep fence pointers and filters in memory.
    pub hot: bool,
    /// How data blocks are stored.
    pub codec: Codec,
    /// Range-filter bits per dyadic height (empty: no range filter).
    pub range_bits: Vec<f64>,
}

enum FilterParts {
    None,
    File(Bloom),
    Block(Vec<Bloom>),
}

struct Hot {
    fences: Arc<Fences>,
    filter: FilterParts,
    range: Option<RangeFilter>,
}

/// An open, immutable file.
pub struct Table {
    /// File id (unique for the life of the database).
    pub id: u64,
    path: PathBuf,
    file: Arc<File>,
    key_len: usize,
    /// Entries (including tombstones).
    pub entries: u64,
    /// Tombstones among the entries.
    pub tombstones: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
    /// Total file size in bytes.
    pub file_bytes: u64,
    /// Flush sequence of the oldest data in the file (file picking `oldest_flushed`).
    pub flushed_seq: u64,
    /// Sequence of the merge that wrote the file (file picking `oldest_merged`).
    pub merged_seq: u64,
    top: Arc<Fences>,
    filter_kind: FilterKind,
    filter_handle: BlockHandle,
    /// Codec of the data blocks.
    pub codec: Codec,
    range_handle: BlockHandle,
    hot: Option<Hot>,
    cache: Option<Arc<BlockCache>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("id", &self.id).field("entries", &self.entries).field("hot", &self.hot.is_some()).finish()
    }
}

fn filter_blocks(bytes: usize, block_bytes: usize) -> u64 {
    if bytes == 0 {
        0
    } else {
        bytes.div_ceil(block_bytes.max(1)) as u64
    }
}

/// Writes one file from entries in ascending key order.
pub struct TableBuilder<'a> {
    id: u64,
    path: PathBuf,
    w: BufWriter<File>,
    offset: u64,
    opts: TableOptions,
    block: BlockBuilder,
    block_first: Vec<u8>,
    fences: Fences,
    file_hashes: Vec<u64>,
    block_hashes: Vec<u64>,
    block_filters: Vec<Bloom>,
    range: Option<RangeFilterBuilder>,
    entries: u64,
    tombstones: u64,
    min_key: Vec<u8>,
    max_key: Vec<u8>,
    seqs: (u64, u64),
    io: &'a IoCounter,
    /// The spans whose blocks are decoded as they are written, and the most bytes of them
    /// ([`TableBuilder::warm_from`]).
    warm: Option<(Arc<WarmSpans>, usize)>,
    warmed: Warmed,
}

impl<'a> TableBuilder<'a> {
    /// Starts file `id` in `dir`; blocks written are charged to `io`.
    pub fn create(dir: &Path, id: u64, opts: TableOptions, io: &'a IoCounter) -> Result<Self> {
        let path = table_path(dir, id);
        let f = OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(|e| Error::io(&path, e))?;
        let key_len = opts.key_len;
        let range = opts.range_bits.iter().any(|b| *b > 0.0).then(|| RangeFilterBuilder::new(&opts.range_bits));
        Ok(TableBuilder {
            id,
            path,
            w: BufWriter::with_capacity(256 << 10, f),
            offset: 0,
            opts,
            block: BlockBuilder::default(),
            block_first: Vec::new(),
            fences: Fences::new(key_len),
            file_hashes: Vec::new(),
            block_hashes: Vec::new(),
            block_filters: Vec::new(),
            range,
            entries: 0,
            tombstones: 0,
            min_key: Vec::new(),
            max_key: Vec::new(),
            seqs: (0, 0),
            io,
            warm: None,
            warmed: Warmed::default(),
        })
    }

    /// Decodes each data block written that holds a key of `spans`, for the cache, up to
    /// `max_bytes` of them ([`TableBuilder::finish_warm`], crate::warm).
    pub fn warm_from(&mut self, spans: Arc<WarmSpans>, max_bytes: usize) {
        self.warm = Some((spans, max_bytes));
    }

    /// Records the flush sequence of the oldest input and the sequence of this merge.
    pub fn set_seqs(&mut self, flushed_seq: u64, merged_seq: u64) {
        self.seqs = (flushed_seq, merged_seq);
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    fn write(&mut self, bytes: &[u8]) -> Result<BlockHandle> {
        self.w.write_all(bytes).map_err(|e| Error::io(&self.path, e))?;
        let h = BlockHandle { offset: self.offset, len: bytes.len() as u32 };
        self.offset += bytes.len() as u64;
        Ok(h)
    }

    /// Adds an entry; keys must be strictly ascending and `key_len` wide.
    pub fn add(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() != self.opts.key_len {
            return Err(Error::InvalidArgument(format!("key of {} bytes, expected {}", key.len(), self.opts.key_len)));
        }
        if self.entries == 0 {
            self.min_key = key.to_vec();
        }
        self.max_key.clear();
        self.max_key.extend_from_slice(key);
        if self.block.count() == 0 {
            self.block_first.clear();
            self.block_first.extend_from_slice(key);
        }
        self.block.add(key, value);
        if let Some(r) = &mut self.range {
            r.add(key_prefix(key));
        }
        if self.opts.filter != FilterKind::None {
            let h = cosine_core::hash64(key);
            match self.opts.filter {
                FilterKind::File => self.file_hashes.push(h),
                _ => self.block_hashes.push(h),
            }
        }
        self.entries += 1;
        if value.is_none() {
            self.tombstones += 1;
        }
        if self.block.count() as usize >= self.opts.block_entries {
            self.finish_block()?;
        }
        Ok(())
    }

    fn finish_block(&mut self) -> Result<()> {
        if self.block.count() == 0 {
            return Ok(());
        }
        let raw = self.block.finish();
        let bytes = cosine_compress::seal(self.opts.codec, &raw)?;
        let h = self.write(&bytes)?;
        self.io.wrote(BlockKind::Data, 1, bytes.len() as u64);
        // (max_key is the block's last key here: keys arrive ascending)
        if let Some((spans, max_bytes)) = &self.warm {
            if self.warmed.bytes() < *max_bytes && spans.covers(&self.block_first, &self.max_key) {
                let what = format!("file {} block at {} (written)", self.path.display(), h.offset);
                let block = Block::decode(raw, self.opts.key_len, &what)?;
                if self.warmed.bytes() + block.charge() <= *max_bytes {
                    self.warmed.push(self.id, h.offset, Arc::new(block));
                } else {
                    self.warm = None; // full: this file warms no more
                }
            }
        }
        let first = std::mem::take(&mut self.block_first);
        self.fences.push(&first, h);
        self.block_first = first;
        if self.opts.filter == FilterKind::Block {
            self.block_filters.push(Bloom::from_hashes(&self.block_hashes, self.opts.bits_per_key));
            self.block_hashes.clear();
        }
        Ok(())
    }

    /// Completes the file (filter, index, meta, footer), fsyncs it and opens it.
    pub fn finish(self, cache: Option<Arc<BlockCache>>) -> Result<Arc<Table>> {
        self.finish_warm(cache).map(|(t, _)| t)
    }

    /// [`TableBuilder::finish`], with the blocks [`TableBuilder::warm_from`]'s spans covered,
    /// decoded (not yet cached: crate::warm).
    pub fn finish_warm(mut self, cache: Option<Arc<BlockCache>>) -> Result<(Arc<Table>, Warmed)> {
        self.finish_block()?;
        if self.entries == 0 {
            return Err(Error::InvalidArgument("empty file".into()));
        }
        // Filter section.
        let (filter_parts, filter_bytes) = match self.opts.filter {
            FilterKind::None => (FilterParts::None, Vec::new()),
            FilterKind::File => {
                let b = Bloom::from_hashes(&self.file_hashes, self.opts.bits_per_key);
                let enc = b.encode();
                (FilterParts::File(b), enc)
            }
            FilterKind::Block => {
                let mut e = Encoder::default();
                e.u32(self.block_filters.len() as u32);
                for b in &self.block_filters {
                    e.len_bytes(&b.encode());
                }
                e.seal();
                (FilterParts::Block(std::mem::take(&mut self.block_filters)), e.finish())
            }
        };
        let filter_handle = self.write(&filter_bytes)?;
        self.io.wrote(BlockKind::Filter, filter_blocks(filter_bytes.len(), self.opts.block_bytes), filter_bytes.len() as u64);
        // Range filter.
        let range = self.range.take().map(RangeFilterBuilder::finish);
        let range_bytes = range.as_ref().map(RangeFilter::encode).unwrap_or_default();
        let range_handle = self.write(&range_bytes)?;
        self.io.wrote(BlockKind::Filter, filter_blocks(range_bytes.len(), self.opts.block_bytes), range_bytes.len() as u64);
        // Index blocks: the on-disk fence pointers, `index_fanout` per block.
        let mut top = Fences::new(self.opts.key_len);
        let fanout = self.opts.index_fanout.max(2);
        let mut i = 0;
        while i < self.fences.len() {
            let end = (i + fanout).min(self.fences.len());
            let mut part = Fences::new(self.opts.key_len);
            for j in i..end {
                part.push(self.fences.key(j), self.fences.handle(j));
            }
            let enc = part.encode();
            let h = self.write(&enc)?;
            self.io.wrote(BlockKind::Index, 1, enc.len() as u64);
            top.push(self.fences.key(i), h);
            i = end;
        }
        // Meta block and footer.
        let mut m = Encoder::default();
        m.u32(VERSION);
        m.u32(self.opts.key_len as u32);
        m.u64(self.entries);
        m.u64(self.tombstones);
        m.u64(self.fences.len() as u64);
        m.len_bytes(&self.min_key);
        m.len_bytes(&self.max_key);
        m.u8(match self.opts.filter {
            FilterKind::None => 0,
            FilterKind::File => 1,
            FilterKind::Block => 2,
        });
        m.u64(filter_handle.offset);
        m.u32(filter_handle.len);
        m.len_bytes(&top.encode());
        m.u64(self.seqs.0);
        m.u64(self.seqs.1);
        let (code, level) = self.opts.codec.to_meta();
        m.u8(code);
        m.u32(level as u32);
        m.u64(range_handle.offset);
        m.u32(range_handle.len);
        m.seal();
        let meta = m.finish();
        let meta_h = self.write(&meta)?;
        let mut f = Encoder::default();
        f.u64(meta_h.offset);
        f.u32(meta_h.len);
        f.u64(MAGIC);
        f.seal();
        self.write(&f.finish())?;
        let file = self.w.into_inner().map_err(|e| Error::io(&self.path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&self.path, e))?;
        let data_blocks = self.fences.len() as u64;
        let hot = self.opts.hot.then(|| Hot { fences: Arc::new(self.fences), filter: filter_parts, range });
        let table = Arc::new(Table {
            id: self.id,
            path: self.path,
            file: Arc::new(file),
            key_len: self.opts.key_len,
            entries: self.entries,
            tombstones: self.tombstones,
            data_blocks,
            min_key: self.min_key,
            max_key: self.max_key,
            file_bytes: self.offset,
            flushed_seq: self.seqs.0,
            merged_seq: self.seqs.1,
            top: Arc::new(top),
            filter_kind: self.opts.filter,
            filter_handle,
            codec: self.opts.codec,
            range_handle,
            hot,
            cache,
        });
        Ok((table, self.warmed))
    }
}

fn read_at(file: &File, path: &Path, h: BlockHandle) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; h.len as usize];
    file.read_exact_at(&mut buf, h.offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(format!("{}: block at {} runs past end of file", path.display(), h.offset))
        } else {
            Error::io(path, e)
        }
    })?;
    Ok(buf)
}

impl Table {
    /// Opens an existing file. `hot` loads index blocks and filters into memory,
    /// charging those reads to `io` (recovery I/O, not an operation's).
    pub fn open(dir: &Path, id: u64, hot: bool, key_len: usize, cache: Option<Arc<BlockCache>>, io: &IoCounter) -> Result<Arc<Table>> {
        let path = table_path(dir, id);
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        let what = format!("file {}", path.display());
        if len < FOOTER as u64 {
            return Err(Error::corruption(format!("{what}: shorter than its footer")));
        }
        let footer = read_at(&file, &path, BlockHandle { offset: len - FOOTER as u64, len: FOOTER as u32 })?;
        let mut d = Decoder::checked(&footer, &what)?;
        let meta_off = d.u64()?;
        let meta_len = d.u32()?;
        if d.u64()? != MAGIC {
            return Err(Error::corruption(format!("{what}: bad magic")));
        }
        if meta_off + meta_len as u64 > len {
            return Err(Error::corruption(format!("{what}: meta block out of bounds")));
        }
        let meta = read_at(&file, &path, BlockHandle { offset: meta_off, len: meta_len })?;
        let mut m = Decoder::checked(&meta, &what)?;
        let version = m.u32()?;
        if version != VERSION && version != VERSION_1 {
            return Err(Error::corruption(format!("{what}: unknown version {version}")));
        }
        let kl = m.u32()? as usize;
        if kl != key_len {
            return Err(Error::corruption(format!("{what}: key width {kl}, configured {key_len}")));
        }
        let entries = m.u64()?;
        let tombstones = m.u64()?;
        let data_blocks = m.u64()?;
        let min_key = m.len_bytes()?.to_vec();
        let max_key = m.len_bytes()?.to_vec();
        let filter_kind = match m.u8()? {
            0 => FilterKind::None,
            1 => FilterKind::File,
            2 => FilterKind::Block,
            _ => return Err(Error::corruption(format!("{what}: unknown filter kind"))),
        };
        let filter_handle = BlockHandle { offset: m.u64()?, len: m.u32()? };
        let top = Fences::decode(m.len_bytes()?)?;
        let flushed_seq = m.u64()?;
        let merged_seq = m.u64()?;
        let (codec, range_handle) = if version == VERSION_1 {
            (Codec::None, BlockHandle { offset: 0, len: 0 })
        } else {
            let code = m.u8()?;
            let level = m.u32()? as i32;
            let codec = Codec::from_meta(code, level).map_err(|e| Error::corruption(format!("{what}: {e}")))?;
            (codec, BlockHandle { offset: m.u64()?, len: m.u32()? })
        };
        if range_handle.offset + u64::from(range_handle.len) > len {
            return Err(Error::corruption(format!("{what}: range filter out of bounds")));
        }
        let mut t = Table {
            id,
            path,
            file: Arc::new(file),
            key_len,
            entries,
            tombstones,
            data_blocks,
            min_key,
            max_key,
            file_bytes: len,
            flushed_seq,
            merged_seq,
            top: Arc::new(top),
            filter_kind,
            filter_handle,
            codec,
            range_handle,
            hot: None,
            cache,
        };
        if hot {
            t.load_hot(io)?;
        }
        Ok(Arc::new(t))
    }

    fn load_hot(&mut self, io: &IoCounter) -> Result<()> {
        let mut fences = Fences::new(self.key_len);
        for j in 0..self.top.len() {
            let raw = read_at(&self.file, &self.path, self.top.handle(j))?;
            io.read(BlockKind::Index, 1, raw.len() as u64);
            let part = Fences::decode(&raw)?;
            for i in 0..part.len() {
                fences.push(part.key(i), part.handle(i));
            }
        }
        let filter = match self.filter_kind {
            FilterKind::None => FilterParts::None,
            kind => {
                let raw = read_at(&self.file, &self.path, self.filter_handle)?;
                io.read(BlockKind::Filter, 1, raw.len() as u64);
                if kind == FilterKind::File {
                    FilterParts::File(Bloom::decode(&raw)?)
                } else {
                    let mut d = Decoder::checked(&raw, "block filters")?;
                    let n = d.u32()? as usize;
                    if n != fences.len() {
                        return Err(d.error("filter count differs from block count"));
                    }
                    let mut v = Vec::with_capacity(n);
                    for _ in 0..n {
                        v.push(Bloom::decode(d.len_bytes()?)?);
                    }
                    FilterParts::Block(v)
                }
            }
        };
        let range = if self.range_handle.len == 0 {
            None
        } else {
            let raw = read_at(&self.file, &self.path, self.range_handle)?;
            io.read(BlockKind::Filter, 1, raw.len() as u64);
            Some(RangeFilter::decode(&raw).map_err(|e| Error::corruption(format!("file {} range filter: {e}", self.path.display())))?)
        };
        self.hot = Some(Hot { fences: Arc::new(fences), filter, range });
        Ok(())
    }

    /// The same file as seen from a cold level: in-memory fences and filters dropped.
    pub fn to_cold(&self) -> Arc<Table> {
        Arc::new(Table {
            id: self.id,
            path: self.path.clone(),
            file: self.file.clone(),
            key_len: self.key_len,
            entries: self.entries,
            tombstones: self.tombstones,
            data_blocks: self.data_blocks,
            min_key: self.min_key.clone(),
            max_key: self.max_key.clone(),
            file_bytes: self.file_bytes,
            flushed_seq: self.flushed_seq,
            merged_seq: self.merged_seq,
            top: self.top.clone(),
            filter_kind: self.filter_kind,
            filter_handle: self.filter_handle,
            codec: self.codec,
            range_handle: self.range_handle,
            hot: None,
            cache: self.cache.clone(),
        })
    }

    /// The key spans of this file's data blocks at `offsets` (crate::warm): block i holds keys
    /// from its first key up to block i + 1's (exclusive), the last block up to the file's
    /// largest key (inclusive). Only a hot file knows them without reading its index blocks: a cold one
    /// gives none.
    pub fn block_spans(&self, offsets: &[u64]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let Some(h) = &self.hot else { return Vec::new() };
        let f = &h.fences;
        let n = f.len();
        let mut out = Vec::with_capacity(offsets.len());
        for i in offsets.iter().filter_map(|off| f.position_of(*off)) {
            let end = if i + 1 < n { Some(f.key(i + 1).to_vec()) } else { crate::warm::key_after(&self.max_key) };
            out.push((f.key(i).to_vec(), end));
        }
        out
    }

    /// True if fence pointers (and filters) are held in memory.
    pub fn is_hot(&self) -> bool {
        self.hot.is_some()
    }

    /// Bytes of memory held for the range filter (0 in a cold level or without one).
    pub fn range_filter_bytes(&self) -> usize {
        self.hot.as_ref().and_then(|h| h.range.as_ref()).map_or(0, RangeFilter::byte_len)
    }

    /// Whether keys `lo..=hi` may be in this file: false only when its key span
    /// misses the range or its in-memory range filter rules the range out.
    pub fn may_hold_range(&self, lo: &[u8], hi: &[u8]) -> bool {
        if hi < self.min_key.as_slice() || lo > self.max_key.as_slice() {
            return false;
        }
        match self.hot.as_ref().and_then(|h| h.range.as_ref()) {
            Some(r) => r.may_intersect(key_prefix(lo), key_prefix(hi)),
            None => true,
        }
    }

    /// Bytes of memory held for fence pointers and filters (M_FP + M_BF of this file).
    pub fn memory_bytes(&self) -> (usize, usize) {
        let top = self.top.memory_bytes();
        match &self.hot {
            None => (top, 0),
            Some(h) => {
                let f = match &h.filter {
                    FilterParts::None => 0,
                    FilterParts::File(b) => b.byte_len(),
                    FilterParts::Block(v) => v.iter().map(|b| b.byte_len()).sum(),
                };
                (top + h.fences.memory_bytes(), f)
            }
        }
    }

    fn read_data(&self, h: BlockHandle, io: &IoCounter, use_cache: bool) -> Result<Arc<Block>> {
        if use_cache {
            if let Some(c) = &self.cache {
                if let Some(Cached::Data(b)) = c.get(self.id, h.offset) {
                    return Ok(b);
                }
            }
        }
        let stored = read_at(&self.file, &self.path, h)?;
        io.read(BlockKind::Data, 1, stored.len() as u64);
        let what = format!("file {} block at {}", self.path.display(), h.offset);
        let raw = cosine_compress::open(self.codec, stored, &what)?;
        let b = Arc::new(Block::decode(raw, self.key_len, &what)?);
        if use_cache {
            if let Some(c) = &self.cache {
                c.insert(self.id, h.offset, Cached::Data(b.clone()));
            }
        }
        Ok(b)
    }

    fn read_index(&self, j: usize, io: &IoCounter, use_cache: bool) -> Result<Arc<Fences>> {
        let h = self.top.handle(j);
        if use_cache {
            if let Some(c) = &self.cache {
                if let Some(Cached::Index(f)) = c.get(self.id, h.offset) {
                    return Ok(f);
                }
            }
        }
        let raw = read_at(&self.file, &self.path, h)?;
        io.read(BlockKind::Index, 1, raw.len() as u64);
        let f =
            Arc::new(Fences::decode(&raw).map_err(|e| Error::corruption(format!("file {} index block {j}: {e}", self.path.display())))?);
        if use_cache {
            if let Some(c) = &self.cache {
                c.insert(self.id, h.offset, Cached::Index(f.clone()));
            }
        }
        Ok(f)
    }

    /// Point lookup. `Some(value)` if this file holds `key` (`Some(None)` = tombstone): a copy
    /// of [`Table::find`]'s entry.
    pub fn get(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<Value>> {
        Ok(self.find(key, hash, io)?.map(|h| h.to_value()))
    }

    /// Point lookup without copying the value: the block entry holding `key`, if this file
    /// holds it (a tombstone too).
    ///
    /// Hot: filter check (file or block granularity) then exactly one data block.
    /// Cold: one index block then one data block.
    pub fn find(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<Hit>> {
        if key < self.min_key.as_slice() || key > self.max_key.as_slice() {
            return Ok(None);
        }
        let (fences, bi) = match &self.hot {
            Some(h) => {
                if let FilterParts::File(b) = &h.filter {
                    if !b.may_contain(hash) {
                        return Ok(None);
                    }
                }
                let Some(bi) = h.fences.find(key) else { return Ok(None) };
                if let FilterParts::Block(v) = &h.filter {
                    if !v[bi].may_contain(hash) {
                        return Ok(None);
                    }
                }
                (h.fences.clone(), bi)
            }
            None => {
                let Some(j) = self.top.find(key) else { return Ok(None) };
                let f = self.read_index(j, io, true)?;
                let Some(bi) = f.find(key) else { return Ok(None) };
                (f, bi)
            }
        };
        let blk = self.read_data(fences.handle(bi), io, true)?;
        Ok(blk.find(key).map(|i| Hit::new(blk, i)))
    }

    /// A cursor positioned at the first key `>= lo` (or the first key).
    /// `use_cache = false` for compaction reads, which should not evict hot blocks.
    pub fn iter(self: &Arc<Self>, lo: Option<&[u8]>, io: Arc<IoCounter>, use_cache: bool) -> Result<TableIter> {
        let parts = if self.hot.is_some() { 1 } else { self.top.len() };
        let part = match (lo, &self.hot) {
            (Some(k), None) => self.top.find(k).unwrap_or(0),
            _ => 0,
        };
        let mut it = TableIter { table: self.clone(), io, use_cache, parts, part, fences: None, bi: 0, block: None, pos: 0 };
        it.load_part()?;
        if let (Some(k), Some(f)) = (lo, &it.fences) {
            it.bi = f.find(k).unwrap_or(0);
        }
        it.load_block()?;
        if let (Some(k), Some(b)) = (lo, &it.block) {
            it.pos = b.seek(k);
        }
        it.settle()?;
        Ok(it)
    }
}

/// Cursor over one file, reading (and charging) blocks lazily as it advances.
pub struct TableIter {
    table: Arc<Table>,
    io: Arc<IoCounter>,
    use_cache: bool,
    parts: usize,
    part: usize,
    fences: Option<Arc<Fences>>,
    bi: usize,
    block: Option<Arc<Block>>,
    pos: usize,
}

impl TableIter {
    fn load_part(&mut self) -> Result<()> {
        self.fences = if self.part >= self.parts {
            None
        } else {
            match &self.table.hot {
                Some(h) => Some(h.fences.clone()),
                None => Some(self.table.read_index(self.part, &self.io, self.use_cache)?),
            }
        };
        self.bi = 0;
        Ok(())
    }

    fn load_block(&mut self) -> Result<()> {
        self.block = match &self.fences {
            Some(f) if self.bi < f.len() => Some(self.table.read_data(f.handle(self.bi), &self.io, self.use_cache)?),
            _ => None,
        };
        self.pos = 0;
        Ok(())
    }

    // Moves past exhausted blocks and index parts.
    fn settle(&mut self) -> Result<()> {
        loop {
            match &self.block {
                Some(b) if self.pos < b.len() => return Ok(()),
                Some(_) => {
                    self.bi += 1;
                    let in_part = self.fences.as_ref().is_some_and(|f| self.bi < f.len());
                    if !in_part {
                        self.part += 1;
                        self.load_part()?;
                    }
                    self.load_block()?;
                }
                None => return Ok(()),
            }
        }
    }
}

impl KvIterator for TableIter {
    fn valid(&self) -> bool {
        self.block.as_ref().is_some_and(|b| self.pos < b.len())
    }
    fn key(&self) -> &[u8] {
        match &self.block {
            Some(b) => b.key(self.pos),
            None => &[],
        }
    }
    fn value(&self) -> Option<&[u8]> {
        self.block.as_ref().and_then(|b| b.value(self.pos))
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        self.settle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh scratch directory (in `$TMPDIR`), removed when dropped, also on a panic.
    fn dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("cosine-table-{name}-")).tempdir().expect("scratch directory")
    }

    fn key(i: u64) -> Vec<u8> {
        let mut k = i.to_be_bytes().to_vec();
        k.resize(16, 0);
        k
    }

    fn opts(filter: FilterKind, hot: bool) -> TableOptions {
        TableOptions {
            key_len: 16,
            block_entries: 4,
            index_fanout: 3,
            block_bytes: 4 * 116,
            filter,
            bits_per_key: 10.0,
            hot,
            codec: Codec::None,
            range_bits: Vec::new(),
        }
    }

    #[test]
    fn a_builder_warms_the_covered_blocks_within_its_budget_and_its_spans_are_the_fences() {
        let tmp = dir("warm");
        let io = IoCounter::new();
        // blocks of 4 entries (keys 0, 2, ..., 98: 13 blocks); spans over keys 8..=23 and from 90 on
        let spans = crate::warm::WarmSpans::from_spans(vec![(key(8), Some(key(24))), (key(90), None)]);
        let mut b = TableBuilder::create(tmp.path(), 1, opts(FilterKind::None, true), &io).expect("create");
        b.warm_from(Arc::new(spans.clone()), usize::MAX);
        for i in 0..50u64 {
            b.add(&key(i * 2), Some(b"v")).expect("add");
        }
        let (t, warmed) = b.finish_warm(None).expect("finish");
        // keys 8..=23 lie in blocks 1 (8..14) and 2 (16..22); 90..=98 in blocks 11 (88..94) and 12 (96, 98)
        assert_eq!(warmed.len(), 4);
        let charge = warmed.bytes();
        let fences = t.hot.as_ref().map(|h| h.fences.clone()).expect("hot");
        let offsets: Vec<u64> = [1, 2, 11, 12].iter().map(|i| fences.handle(*i).offset).collect();
        assert_eq!(
            t.block_spans(&offsets),
            vec![(key(8), Some(key(16))), (key(16), Some(key(24))), (key(88), Some(key(96))), (key(96), crate::warm::key_after(&key(98)))]
        );
        assert!(t.block_spans(&[fences.handle(3).offset + 1]).is_empty(), "not a block's offset");
        // a budget a byte short of all four carries the first three
        let tmp2 = dir("warm-budget");
        let mut b = TableBuilder::create(tmp2.path(), 2, opts(FilterKind::None, true), &io).expect("create");
        b.warm_from(Arc::new(spans), charge - 1);
        for i in 0..50u64 {
            b.add(&key(i * 2), Some(b"v")).expect("add");
        }
        assert_eq!(b.finish_warm(None).expect("finish").1.len(), 3);
    }

    #[test]
    fn write_open_get_iterate_all_shapes() {
        for (n, (filter, hot)) in [(FilterKind::File, true), (FilterKind::Block, true), (FilterKind::None, false), (FilterKind::None, true)]
            .into_iter()
            .enumerate()
        {
            let tmp = dir(&format!("shape{n}"));
            let d = tmp.path();
            let io = IoCounter::new();
            let mut b = TableBuilder::create(d, 1, opts(filter, hot), &io).expect("create");
            for i in 0..50u64 {
                let v = if i % 10 == 3 { None } else { Some(format!("v{i}").into_bytes()) };
                b.add(&key(i * 2), v.as_deref()).expect("add");
            }
            let t = b.finish(None).expect("finish");
            let w = io.snapshot();
            assert_eq!(w.data_written, 13);
            assert_eq!(w.index_written, 5);
            let reopened = Table::open(d, 1, hot, 16, None, &IoCounter::new()).expect("open");
            for t in [t, reopened] {
                let io = IoCounter::new();
                assert_eq!(t.get(&key(20), cosine_core::hash64(&key(20)), &io).expect("get"), Some(Some(b"v10".to_vec())));
                assert_eq!(t.get(&key(26), cosine_core::hash64(&key(26)), &io).expect("get"), Some(None));
                let s = io.snapshot();
                if hot {
                    assert_eq!((s.data_read, s.index_read), (2, 0));
                } else {
                    assert_eq!((s.data_read, s.index_read), (2, 2));
                }
                let mut it = t.iter(Some(&key(31)), Arc::new(IoCounter::new()), false).expect("iter");
                let mut got = Vec::new();
                while it.valid() {
                    got.push(it.key().to_vec());
                    it.next().expect("next");
                }
                assert_eq!(got.len(), 34);
                assert_eq!(got[0], key(32));
            }
        }
    }

    #[test]
    fn corrupted_bytes_are_errors() {
        let tmp = dir("corrupt");
        let d = tmp.path();
        let io = IoCounter::new();
        let mut b = TableBuilder::create(d, 7, opts(FilterKind::File, true), &io).expect("create");
        for i in 0..40u64 {
            b.add(&key(i), Some(b"x")).expect("add");
        }
        drop(b.finish(None).expect("finish"));
        let p = table_path(d, 7);
        let good = std::fs::read(&p).expect("read");
        for at in [5usize, good.len() / 2, good.len() - 30, good.len() - 3] {
            let mut bad = good.clone();
            bad[at] ^= 0x20;
            std::fs::write(&p, &bad).expect("write");
            let r = Table::open(d, 7, true, 16, None, &IoCounter::new()).and_then(|t| {
                for i in 0..40u64 {
                    t.get(&key(i), cosine_core::hash64(&key(i)), &IoCounter::new())?;
                }
                Ok(())
            });
            assert!(r.expect_err("corruption must be detected").is_corruption(), "flip at {at}");
        }
    }

    #[test]
    fn compressed_files_read_back_and_detect_corruption() {
        let mut sizes = Vec::new();
        for (n, codec) in [Codec::None, Codec::Lz4, Codec::Zstd(3)].into_iter().enumerate() {
            let tmp = dir(&format!("codec{n}"));
            let d = tmp.path();
            let io = IoCounter::new();
            let o = TableOptions { codec, ..opts(FilterKind::File, true) };
            let mut b = TableBuilder::create(d, 3, o, &io).expect("create");
            for i in 0..40u64 {
                b.add(&key(i), Some(&[b'a'; 90])).expect("add");
            }
            sizes.push(b.finish(None).expect("finish").file_bytes);
            assert!(sizes[n] <= sizes[0], "{codec}: {} bytes, uncompressed {}", sizes[n], sizes[0]);
            if codec == Codec::None {
                continue;
            }
            assert!(sizes[n] < sizes[0] * 3 / 4, "{codec}: {} bytes, uncompressed {}", sizes[n], sizes[0]);
            let t = Table::open(d, 3, true, 16, None, &IoCounter::new()).expect("open");
            assert_eq!(t.codec, codec);
            for i in 0..40u64 {
                assert_eq!(t.get(&key(i), cosine_core::hash64(&key(i)), &IoCounter::new()).expect("get"), Some(Some(vec![b'a'; 90])));
            }
            let p = table_path(d, 3);
            let good = std::fs::read(&p).expect("read");
            for at in [3usize, 20, 41] {
                let mut bad = good.clone();
                bad[at] ^= 0x10;
                std::fs::write(&p, &bad).expect("write");
                let t = Table::open(d, 3, true, 16, None, &IoCounter::new()).expect("meta intact");
                let e = (0..40u64)
                    .try_for_each(|i| t.get(&key(i), cosine_core::hash64(&key(i)), &IoCounter::new()).map(drop))
                    .expect_err("a flipped data byte must be detected");
                assert!(e.is_corruption(), "{codec} flip at {at}: {e}");
            }
        }
    }

    #[test]
    fn range_filter_rules_out_empty_ranges_of_hot_files_only() {
        let tmp = dir("range");
        let d = tmp.path();
        let io = IoCounter::new();
        let o = TableOptions { range_bits: vec![12.0, 3.0, 3.0, 3.0], ..opts(FilterKind::None, true) };
        let mut b = TableBuilder::create(d, 5, o, &io).expect("create");
        // keys 0, 2^20, 2*2^20, ... in the first 8 bytes
        for i in 0..200u64 {
            b.add(&key(i << 20), Some(b"v")).expect("add");
        }
        let t = b.finish(None).expect("finish");
        assert!(t.range_filter_bytes() > 0);
        let bound = |x: u64, fill: u8| {
            let mut k = x.to_be_bytes().to_vec();
            k.resize(16, fill);
            k
        };
        let mut passed = 0;
        for i in 0..199u64 {
            let lo = (i << 20) + 1000;
            assert!(t.may_hold_range(&bound(i << 20, 0), &bound((i << 20) + 5, 0xff)), "a key in range");
            passed += usize::from(t.may_hold_range(&bound(lo, 0), &bound(lo + 7, 0xff)));
        }
        assert!(passed < 20, "{passed} of 199 empty ranges passed");
        assert!(!t.may_hold_range(&bound(200 << 20, 0), &bound((200 << 20) + 9, 0xff)), "beyond the file's keys");
        let reopened = Table::open(d, 5, true, 16, None, &IoCounter::new()).expect("open");
        assert_eq!(reopened.range_filter_bytes(), t.range_filter_bytes());
        let cold = Table::open(d, 5, false, 16, None, &IoCounter::new()).expect("open cold");
        assert_eq!(cold.range_filter_bytes(), 0);
        let lo = 1000u64;
        assert!(cold.may_hold_range(&bound(lo, 0), &bound(lo + 7, 0xff)), "a cold file holds no filter in memory");
    }
}
