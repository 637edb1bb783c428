//! The Cosine key-value engine: the wrapper crate whose calls link the buffer,
//! the write-ahead log and the main structure (levels of runs, or the hash log).
//!
//! * Writes go to the WAL, then the memtable. A full memtable is frozen and a
//!   background worker flushes it; the worker also runs the compaction strategy
//!   (or the hash log's GC) until it answers "idle".
//! * Reads take an `Arc` snapshot ([`SuperVersion`]) of memtables + tree and
//!   never block on writers or on the worker.
//! * Every structural change is committed through the manifest before it is
//!   made visible, and obsolete files are deleted only afterwards.
//! * Foreground block I/O is charged to the operation that caused it, flush and
//!   compaction I/O to background counters ([`StatsSnapshot`]).
#![deny(unsafe_code, clippy::unwrap_used)]

mod stats;
mod worker;

pub use cosine_config::Config;
pub use cosine_core::{Error, IoSnapshot, Result};
pub use stats::{LevelStats, OpKind, OpStats, StatsSnapshot};

use cosine_buffer::MemTable;
use cosine_compaction::TemplateStrategy;
use cosine_core::{hash64, IoCounter, KvIterator, MergingIterator, VecIterator};
use cosine_hashlog::HashLog;
use cosine_level::Tree;
use cosine_manifest::Manifest;
use cosine_run::BlockCache;
use cosine_wal::Wal;
use parking_lot::{Condvar, Mutex, RwLock};
use stats::Stats;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A key and its value, as scans return them.
pub type KvPair = (Vec<u8>, Vec<u8>);

/// Frozen memtables allowed to wait for a flush before writers stall.
const MAX_IMMUTABLE: usize = 2;
const RMW_STRIPES: usize = 64;

/// What readers see: the memtables and the tree, as one consistent version.
#[derive(Debug)]
pub struct SuperVersion {
    /// The memtable taking writes.
    pub mem: Arc<MemTable>,
    /// Frozen memtables waiting for a flush, newest first.
    pub imms: Vec<Arc<MemTable>>,
    /// The on-disk levels (empty for the hash log).
    pub tree: Arc<Tree>,
}

pub(crate) enum Store {
    Tree,
    Log(HashLog),
}

#[derive(Debug, Default)]
pub(crate) struct Bg {
    pub shutdown: bool,
    pub idle: bool,
    pub error: Option<Error>,
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub cfg: Config,
    pub cache: Option<Arc<BlockCache>>,
    pub strategy: TemplateStrategy,
    pub store: Store,
    pub sv: RwLock<Arc<SuperVersion>>,
    pub writer: Mutex<Wal>,
    pub next_id: Arc<AtomicU64>,
    pub seq: AtomicU64,
    pub bg: Mutex<Bg>,
    pub bg_cv: Condvar,
    pub stats: Stats,
    pub wal_bytes_closed: AtomicU64,
    rmw_locks: Vec<Mutex<()>>,
}

/// An open engine. Cheap to share across threads (`&Engine` is `Sync`).
pub struct Engine {
    inner: Arc<Inner>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.inner.dir).field("design", &self.inner.cfg.design.name).finish()
    }
}

fn class_name(cfg: &Config) -> &'static str {
    if cfg.is_hashlog() {
        "lsh"
    } else {
        "tree"
    }
}

fn file_id(name: &str) -> Option<(u64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    Some((stem.parse().ok()?, ext))
}

impl Engine {
    /// Opens (or creates) the database in `dir` with design `cfg`: reads the manifest,
    /// removes files no manifest names, opens runs or the hash log, replays the WAL,
    /// and starts the background worker.
    pub fn open(dir: impl AsRef<Path>, cfg: &Config) -> Result<Engine> {
        cfg.validate()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let manifest = match Manifest::read(&dir)? {
            Some(m) => {
                if m.class != class_name(cfg) {
                    return Err(Error::Config(format!(
                        "{} holds a '{}' layout; this design needs '{}'",
                        dir.display(),
                        m.class,
                        class_name(cfg)
                    )));
                }
                if m.key_bytes as usize != cfg.layout.key_bytes {
                    return Err(Error::Config(format!(
                        "{} was created with key_bytes = {}, config says {}",
                        dir.display(),
                        m.key_bytes,
                        cfg.layout.key_bytes
                    )));
                }
                m
            }
            None => {
                let m =
                    Manifest { class: class_name(cfg).into(), key_bytes: cfg.layout.key_bytes as u32, next_id: 1, ..Manifest::default() };
                m.write_atomic(&dir)?;
                m
            }
        };
        // Sweep leftovers of interrupted flushes/compactions and flushed WAL segments.
        let live: std::collections::HashSet<u64> = manifest.live_ids().into_iter().collect();
        let mut max_id = manifest.next_id;
        let mut wal_ids = Vec::new();
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        for e in entries {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            let name = e.file_name().to_string_lossy().to_string();
            if name == "MANIFEST.tmp" {
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            let Some((id, ext)) = file_id(&name) else { continue };
            max_id = max_id.max(id + 1);
            match ext {
                "wal" if id >= manifest.min_wal => wal_ids.push(id),
                "wal" => {
                    let _ = std::fs::remove_file(e.path());
                }
                "sst" | "rbf" | "log" if !live.contains(&id) => {
                    let _ = std::fs::remove_file(e.path());
                }
                _ => {}
            }
        }
        wal_ids.sort_unstable();
        let cache = BlockCache::new(cfg.layout.block_cache_bytes, cfg.block_bytes() as u64);
        let stats = Stats::default();
        let (store, tree) = if cfg.is_hashlog() {
            (Store::Log(HashLog::open(&dir, cfg, &manifest.segments, cache.clone(), &stats.open)?), Tree::default())
        } else {
            (Store::Tree, Tree::open(&dir, cfg, &manifest.levels, cache.clone(), &stats.open)?)
        };
        // Replay the WAL into one frozen memtable; the worker flushes it.
        let replayed = MemTable::new(cfg.buffer_entries(), wal_ids.clone());
        for id in &wal_ids {
            cosine_wal::replay(&cosine_wal::segment_path(&dir, *id), |k, v| replayed.insert(k, v))?;
        }
        let next_id = Arc::new(AtomicU64::new(max_id));
        let wal_id = next_id.fetch_add(1, Ordering::SeqCst);
        let wal = Wal::open(&dir, wal_id, cfg.durability.wal_sync, cfg.durability.group_commit_interval_us)?;
        let imms = if replayed.is_empty() { Vec::new() } else { vec![Arc::new(replayed)] };
        let sv = SuperVersion { mem: Arc::new(MemTable::new(cfg.buffer_entries(), vec![wal_id])), imms, tree: Arc::new(tree) };
        let inner = Arc::new(Inner {
            dir,
            cfg: cfg.clone(),
            cache,
            strategy: TemplateStrategy::new(cfg),
            store,
            sv: RwLock::new(Arc::new(sv)),
            writer: Mutex::new(wal),
            next_id,
            seq: AtomicU64::new(manifest.seq),
            bg: Mutex::new(Bg::default()),
            bg_cv: Condvar::new(),
            stats,
            wal_bytes_closed: AtomicU64::new(0),
            rmw_locks: (0..RMW_STRIPES).map(|_| Mutex::new(())).collect(),
        });
        let w = inner.clone();
        let handle =
            std::thread::Builder::new().name("cosine-worker".into()).spawn(move || worker::run(w)).map_err(|e| Error::io(&inner.dir, e))?;
        Ok(Engine { inner, worker: Mutex::new(Some(handle)) })
    }

    /// The design this engine runs.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    fn check_bg(&self) -> Result<()> {
        let bg = self.inner.bg.lock();
        if let Some(e) = &bg.error {
            return Err(Error::Closed(format!("background worker failed: {e}")));
        }
        if bg.shutdown {
            return Err(Error::Closed("engine is closed".into()));
        }
        Ok(())
    }

    fn snapshot(&self) -> Arc<SuperVersion> {
        self.inner.sv.read().clone()
    }

    fn write(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.check_bg()?;
        let k = self.inner.cfg.normalize_key(key);
        let ticket = {
            let mut wal = self.inner.writer.lock();
            let mut mem = self.inner.sv.read().mem.clone();
            if mem.is_full() {
                self.rotate(&mut wal)?;
                mem = self.inner.sv.read().mem.clone();
            }
            let t = wal.append(&k, value)?;
            mem.insert(k, value.map(|v| v.to_vec()));
            t
        };
        ticket.wait()
    }

    // Freezes the memtable and starts a new WAL segment; stalls while too many wait.
    fn rotate(&self, wal: &mut Wal) -> Result<()> {
        let start = Instant::now();
        {
            let mut bg = self.inner.bg.lock();
            while self.inner.sv.read().imms.len() >= MAX_IMMUTABLE && bg.error.is_none() && !bg.shutdown {
                self.inner.bg_cv.wait_for(&mut bg, Duration::from_millis(50));
            }
            if let Some(e) = &bg.error {
                return Err(Error::Closed(format!("background worker failed: {e}")));
            }
        }
        let waited = start.elapsed().as_micros() as u64;
        if waited > 0 {
            self.inner.stats.stall_micros.fetch_add(waited, Ordering::Relaxed);
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::SeqCst);
        wal.rotate(id)?;
        {
            let mut g = self.inner.sv.write();
            let cur = g.clone();
            let mut imms = vec![cur.mem.clone()];
            imms.extend(cur.imms.iter().cloned());
            *g = Arc::new(SuperVersion {
                mem: Arc::new(MemTable::new(self.inner.cfg.buffer_entries(), vec![id])),
                imms,
                tree: cur.tree.clone(),
            });
        }
        self.kick();
        Ok(())
    }

    fn kick(&self) {
        let mut bg = self.inner.bg.lock();
        bg.idle = false;
        self.inner.bg_cv.notify_all();
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(key, Some(value))?;
        self.inner.stats.record(OpKind::Put, &IoSnapshot::default());
        Ok(())
    }

    /// Returns once every write this engine has acknowledged so far is durable as the
    /// design's WAL policy defines it. `every_write`: at once (each write already waited
    /// for its fdatasync). `group_commit`: after the group-commit thread's next fdatasync
    /// covering them, shared by every waiter (at most about `group_commit_interval_us`).
    /// `none`: at once; that policy promises no durability before a flush.
    ///
    /// A server acknowledges a batch of writes after this returns.
    pub fn wait_durable(&self) -> Result<()> {
        let mark = self.inner.writer.lock().durable_mark();
        match mark {
            Some(m) => m.wait(),
            None => Ok(()),
        }
    }

    /// Overwrites `key` without reading it (a blind update; same path as `put`).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(key, value)
    }

    /// Deletes `key` (writes a tombstone).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.write(key, None)?;
        self.inner.stats.record(OpKind::Delete, &IoSnapshot::default());
        Ok(())
    }

    fn lookup(&self, k: &[u8], io: &IoCounter) -> Result<Option<Vec<u8>>> {
        let sv = self.snapshot();
        if let Some(v) = sv.mem.get(k) {
            return Ok(v);
        }
        for m in &sv.imms {
            if let Some(v) = m.get(k) {
                return Ok(v);
            }
        }
        match &self.inner.store {
            Store::Tree => Ok(sv.tree.get(k, hash64(k), io)?.flatten()),
            Store::Log(log) => log.get(k, io),
        }
    }

    /// Point lookup.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_counted(key)?.0)
    }

    /// Point lookup that also returns the blocks it read.
    pub fn get_counted(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, IoSnapshot)> {
        let k = self.inner.cfg.normalize_key(key);
        let io = IoCounter::new();
        let v = self.lookup(&k, &io)?;
        let s = io.snapshot();
        self.inner.stats.record(if v.is_some() { OpKind::GetFound } else { OpKind::GetEmpty }, &s);
        Ok((v, s))
    }

    /// Read-modify-write: `f` maps the current value (if any) to the new one
    /// (`None` deletes). Atomic with respect to other `rmw` calls on the same key.
    pub fn rmw(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> Option<Vec<u8>>) -> Result<IoSnapshot> {
        let k = self.inner.cfg.normalize_key(key);
        let _g = self.inner.rmw_locks[(hash64(&k) % RMW_STRIPES as u64) as usize].lock();
        let io = IoCounter::new();
        let cur = self.lookup(&k, &io)?;
        let new = f(cur.as_deref());
        self.write(&k, new.as_deref())?;
        let s = io.snapshot();
        self.inner.stats.record(OpKind::Rmw, &s);
        Ok(s)
    }

    /// Live entries with `lo <= key <= hi`, in key order.
    pub fn scan(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<KvPair>> {
        let lo = self.inner.cfg.normalize_key(lo);
        let hi = self.inner.cfg.normalize_key(hi);
        Ok(self.scan_counted(Some(&lo), Some(&hi), usize::MAX)?.0)
    }

    /// Up to `limit` live entries with key `>= lo`, in key order.
    pub fn range(&self, lo: &[u8], limit: usize) -> Result<Vec<KvPair>> {
        let lo = self.inner.cfg.normalize_key(lo);
        Ok(self.scan_counted(Some(&lo), None, limit)?.0)
    }

    /// Range scan over normalized bounds, returning the blocks it read.
    pub fn scan_counted(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, limit: usize) -> Result<(Vec<KvPair>, IoSnapshot)> {
        // Both passes charge the same counter: blocks a given-up pass read were read.
        let io = Arc::new(IoCounter::new());
        let out = match self.scan_pass(lo, hi, limit, true, &io)? {
            Some(r) => r,
            // A truncated memtable copy was not enough (newer tombstones hid its
            // live entries): scan again with whole copies.
            None => self.scan_pass(lo, hi, limit, false, &io)?.unwrap_or_default(),
        };
        let s = io.snapshot();
        self.inner.stats.record(OpKind::Scan, &s);
        Ok((out, s))
    }

    /// One scan. With `truncate`, each memtable contributes only up to `limit`
    /// live entries and the pass gives up (`None`) if the merge would need a
    /// key beyond the shortest such copy.
    fn scan_pass(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        limit: usize,
        truncate: bool,
        io: &Arc<IoCounter>,
    ) -> Result<Option<Vec<KvPair>>> {
        let sv = self.snapshot();
        let mut sources: Vec<Box<dyn KvIterator + Send>> = Vec::new();
        let mut mem_tombstones = 0usize;
        let mut complete_to: Option<Vec<u8>> = None;
        for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            let it = if truncate && limit != usize::MAX {
                let (it, bound) = m.range_live(lo, hi, limit);
                if let Some(b) = bound {
                    if complete_to.as_ref().is_none_or(|c| b < *c) {
                        complete_to = Some(b);
                    }
                }
                it
            } else {
                m.range(lo, hi)
            };
            if matches!(self.inner.store, Store::Log(_)) {
                mem_tombstones += m.tombstones_in(lo, hi);
            }
            sources.push(Box::new(it));
        }
        match &self.inner.store {
            Store::Tree => sources.extend(sv.tree.iters(lo, io, true)?),
            Store::Log(log) => {
                // Each memtable tombstone in range can hide at most one logged key,
                // and a live memtable entry shadows a logged one only by
                // replacing it, so `limit + tombstones` logged keys suffice.
                let want = limit.saturating_add(mem_tombstones);
                sources.push(Box::new(VecIterator::new(log.scan(lo, hi, want, io)?.into_iter().map(|(k, v)| (k, Some(v))).collect())));
            }
        }
        let mut it = MergingIterator::new(sources);
        let mut out = Vec::new();
        while it.valid() && out.len() < limit {
            // Past the end of a truncated copy (which stops at or before `hi`):
            // entries it left out may come next.
            if complete_to.as_ref().is_some_and(|c| it.key() > c.as_slice()) {
                return Ok(None);
            }
            if hi.is_some_and(|h| it.key() > h) {
                break;
            }
            if let Some(v) = it.value() {
                out.push((it.key().to_vec(), v.to_vec()));
            }
            it.next()?;
        }
        // Every source ran out short of `limit`, but a truncated copy held more
        // (its entries were hidden by newer tombstones): they may be live.
        if out.len() < limit && complete_to.is_some() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// Freezes the memtable, syncs the WAL and waits until every frozen memtable is flushed.
    pub fn flush(&self) -> Result<()> {
        self.check_bg()?;
        {
            let mut wal = self.inner.writer.lock();
            if !self.inner.sv.read().mem.is_empty() {
                self.rotate(&mut wal)?;
            }
            wal.sync()?;
        }
        let mut bg = self.inner.bg.lock();
        while !self.inner.sv.read().imms.is_empty() && bg.error.is_none() {
            self.inner.bg_cv.wait_for(&mut bg, Duration::from_millis(20));
        }
        match &bg.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// [`Engine::flush`], then waits until the compaction strategy has nothing left to do.
    pub fn wait_idle(&self) -> Result<()> {
        self.flush()?;
        self.wait_background()
    }

    /// Waits until the background worker is idle and no frozen memtable is
    /// waiting, without flushing the active memtable (what a running store looks
    /// like between bursts; the benchmark's settle after loading).
    pub fn wait_background(&self) -> Result<()> {
        let mut bg = self.inner.bg.lock();
        while !(bg.idle && self.inner.sv.read().imms.is_empty()) && bg.error.is_none() {
            self.inner.bg_cv.wait_for(&mut bg, Duration::from_millis(20));
        }
        match &bg.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Counters and shape.
    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.inner.stats;
        let sv = self.snapshot();
        let (levels, fence_memory, filter_memory) = match &self.inner.store {
            Store::Tree => {
                let (fp, bf) = sv.tree.memory();
                let levels = sv
                    .tree
                    .shape(&self.inner.cfg)
                    .into_iter()
                    .map(|l| LevelStats {
                        level: l.level,
                        runs: l.runs,
                        files: l.files,
                        entries: l.entries,
                        hot: l.hot,
                        capacity: l.capacity,
                    })
                    .collect();
                (levels, fp, bf)
            }
            Store::Log(log) => {
                let (_live, total, _dead, segs) = log.shape();
                let levels = vec![LevelStats {
                    level: 1,
                    runs: segs,
                    files: segs,
                    entries: total,
                    hot: true,
                    capacity: self.inner.cfg.level_capacity(1),
                }];
                (levels, log.memory_bytes(), 0)
            }
        };
        let (wal_bytes, wal_syncs) = {
            let w = self.inner.writer.lock();
            (w.bytes_total() + self.inner.wal_bytes_closed.load(Ordering::Relaxed), w.syncs())
        };
        StatsSnapshot {
            ops: s.snapshot_ops(),
            flush: s.flush.snapshot(),
            compaction: s.compaction.snapshot(),
            open: s.open.snapshot(),
            flushes: s.flushes.load(Ordering::Relaxed),
            compactions: s.compactions.load(Ordering::Relaxed),
            trivial_moves: s.trivial_moves.load(Ordering::Relaxed),
            gcs: s.gcs.load(Ordering::Relaxed),
            wal_bytes,
            wal_syncs,
            stall_micros: s.stall_micros.load(Ordering::Relaxed),
            levels,
            buffered: sv.mem.len() + sv.imms.iter().map(|m| m.len()).sum::<u64>(),
            fence_memory,
            filter_memory,
        }
    }

    /// Syncs the WAL and stops the worker. Buffered writes stay in the WAL and are
    /// replayed at the next open. Returns the worker's error, if it failed.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        let sync = self.inner.writer.lock().close();
        {
            let mut bg = self.inner.bg.lock();
            bg.shutdown = true;
            self.inner.bg_cv.notify_all();
        }
        if let Some(h) = self.worker.lock().take() {
            let _ = h.join();
        }
        sync?;
        match &self.inner.bg.lock().error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
