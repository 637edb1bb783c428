//! The Cosine key-value engine: the wrapper crate whose calls link the buffer,
//! the write-ahead log and the main structure (levels of runs, or the hash log).
//!
//! * Writes go to the WAL, then the memtable, in write groups: a leader appends
//!   (and syncs) the records of every waiting writer at once, then each writer
//!   inserts its own entry into the concurrent memtable (`write_thread`). A full
//!   memtable is frozen and a background worker flushes it; the worker also runs
//!   the compaction strategy (or the hash log's GC) until it answers "idle".
//! * Reads take an `Arc` snapshot ([`SuperVersion`]) of memtables + tree and
//!   never block on writers or on the worker.
//! * Every structural change is committed through the manifest before it is
//!   made visible, and obsolete files are deleted only afterwards.
//! * Foreground block I/O is charged to the operation that caused it, flush and
//!   compaction I/O to background counters ([`StatsSnapshot`]).
#![deny(unsafe_code, clippy::unwrap_used)]

mod checkpoint;
mod recovery;
mod scan;
mod stats;
mod versions;
mod worker;
mod write_thread;

pub use cosine_manifest::MANIFEST;
pub use cosine_wal::{DurableMark, RecoveryReport};
pub use recovery::{is_engine_file, LOCK};
pub use scan::KvPair;

pub use cosine_config::Config;
pub use cosine_core::{Error, IoSnapshot, Result};
use stats::COUNTED_LEVELS;
pub use stats::{LevelStats, OpKind, OpStats, StatsSnapshot};

use cosine_buffer::MemTable;
use cosine_compaction::TemplateStrategy;
use cosine_core::{hash64, Device, DeviceSnapshot, IoCounter};
use cosine_hashlog::HashLog;
use cosine_level::Tree;
use cosine_manifest::WalRecord;
use cosine_run::BlockCache;
use cosine_wal::Wal;
use parking_lot::{Condvar, Mutex, RwLock};
use stats::Stats;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use versions::VersionSet;
use write_thread::{Appended, WriteOp, WriteThread};

/// Frozen memtables allowed to wait for a flush before writers stall.
const MAX_IMMUTABLE: usize = 2;
const RMW_STRIPES: usize = 64;
/// Longest `key_bytes` whose padded lookup key is built on the stack (a GET allocated it).
const STACK_KEY: usize = 256;

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
    write_thread: WriteThread,
    // Sequence number of the next write: orders same-key writes of one group in the memtable.
    write_seq: AtomicU64,
    // Puts appended into the active memtable (overwrites included; under the writer lock): it is
    // frozen at `Config::buffer_put_limit` of them if it is not full before (its log is bounded).
    mem_puts: AtomicU64,
    /// A memtable was frozen and the worker not yet woken for it (`kick_if_rotated`).
    rotated: AtomicBool,
    /// `bg.shutdown` or `bg.error` is set (read without the lock on every write).
    pub stopped: AtomicBool,
    pub wal_bytes: Arc<AtomicU64>,
    pub wal_syncs: Arc<AtomicU64>,
    pub versions: VersionSet,
    pub next_id: Arc<AtomicU64>,
    pub seq: AtomicU64,
    pub bg: Mutex<Bg>,
    pub bg_cv: Condvar,
    pub stats: Stats,
    /// The provisioned volume every counted block pays (None: the local device).
    pub device: Option<Arc<Device>>,
    rmw_locks: Vec<Mutex<()>>,
    recovery: RecoveryReport,
    // Held (flock) for the engine's lifetime; dropping it releases the directory.
    _lock: std::fs::File,
}

/// An open engine. Cheap to share across threads (`&Engine` is `Sync`).
pub struct Engine {
    inner: Arc<Inner>,
    worker: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.inner.dir).field("design", &self.inner.cfg.design.name).finish()
    }
}

impl Engine {
    /// Opens (or creates) the database in `dir` with design `cfg`: takes the
    /// directory's `LOCK`, reads the manifest (a directory holding data files but
    /// no manifest is an error), opens runs or the hash log, replays the WAL under
    /// `durability.wal_recovery`, deletes the files the manifest proves obsolete,
    /// and starts the background worker.
    pub fn open(dir: impl AsRef<Path>, cfg: &Config) -> Result<Engine> {
        cfg.validate()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let lock = recovery::lock(&dir)?;
        let manifest = recovery::manifest(&dir, cfg)?;
        let found = recovery::scan(&dir, &manifest)?;
        let cache = BlockCache::new(cfg.layout.block_cache_bytes, cfg.block_bytes() as u64);
        let device = cfg.device.spec().map(|s| Arc::new(Device::new(s)));
        let stats = Stats::paying(device.as_ref());
        let (store, tree) = if cfg.is_hashlog() {
            (Store::Log(HashLog::open(&dir, cfg, &manifest.segments, cache.clone(), &stats.open)?), Tree::default())
        } else {
            (Store::Tree, Tree::open(&dir, cfg, &manifest.levels, cache.clone(), &stats.open)?)
        };
        // Replay the WAL into one frozen memtable; the worker flushes it.
        // Segments that exist (a missing one is damage the replay reports or, salvaging, skips).
        let wal_ids: Vec<u64> = found.wal.iter().map(|s| s.id).filter(|id| cosine_wal::segment_path(&dir, *id).exists()).collect();
        let replayed = MemTable::new(cfg.buffer_entries(), wal_ids.clone());
        let mut replay_seq = 0u64;
        let report = cosine_wal::recover(&dir, &found.wal, cfg.durability.wal_recovery, |k, v| {
            replayed.insert(k, v, replay_seq);
            replay_seq += 1;
        })?;
        let next_id = Arc::new(AtomicU64::new(found.next_id));
        let wal_id = next_id.fetch_add(1, Ordering::SeqCst);
        let wal = Wal::open(&dir, wal_id, cfg.durability.wal_sync, cfg.durability.group_commit_interval_us)?;
        let (wal_bytes, wal_syncs) = (wal.bytes_total(), wal.sync_counter());
        let seq = manifest.seq;
        let versions = VersionSet::new(&dir, manifest);
        // Replayed segments are sealed at their length after recovery; the new one takes appends.
        let mut live_wals = Vec::new();
        if !replayed.is_empty() {
            for id in wal_ids {
                let p = cosine_wal::segment_path(&dir, id);
                let len = std::fs::metadata(&p).map_err(|e| Error::io(&p, e))?.len();
                live_wals.push(WalRecord { id, sealed: Some(len) });
            }
        }
        live_wals.push(WalRecord { id: wal_id, sealed: None });
        let mut committed = None;
        versions.log_and_apply(|m| {
            m.next_id = next_id.load(Ordering::SeqCst);
            m.min_wal = live_wals[0].id;
            m.wals = live_wals.clone();
            committed = Some(m.clone());
        })?;
        if let Some(m) = committed {
            for p in recovery::obsolete(&dir, &m)? {
                if let Err(e) = std::fs::remove_file(&p) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(Error::io(&p, e));
                    }
                }
            }
        }
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
            write_thread: WriteThread::default(),
            write_seq: AtomicU64::new(replay_seq),
            mem_puts: AtomicU64::new(0),
            rotated: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            wal_bytes,
            wal_syncs,
            versions,
            next_id,
            seq: AtomicU64::new(seq),
            bg: Mutex::new(Bg::default()),
            bg_cv: Condvar::new(),
            stats,
            device,
            rmw_locks: (0..RMW_STRIPES).map(|_| Mutex::new(())).collect(),
            recovery: report,
            _lock: lock,
        });
        let w = inner.clone();
        let handle =
            std::thread::Builder::new().name("cosine-worker".into()).spawn(move || worker::run(w)).map_err(|e| Error::io(&inner.dir, e))?;
        Ok(Engine { inner, worker: Mutex::new(Some(handle)), closed: AtomicBool::new(false) })
    }

    /// What WAL replay found and did when this engine opened (torn bytes cut, salvage actions).
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The design this engine runs.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    fn check_bg(&self) -> Result<()> {
        // Every write asks; the worker's lock is taken only once something went wrong.
        if !self.inner.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        let bg = self.inner.bg.lock();
        if let Some(e) = &bg.error {
            return Err(Error::Closed(format!("background worker failed: {e}")));
        }
        if bg.shutdown {
            return Err(Error::Closed("engine is closed".into()));
        }
        Ok(())
    }

    /// A counter for one foreground operation (paying the device, waiting its read latency).
    fn op_counter(&self) -> IoCounter {
        IoCounter::paying(self.inner.device.as_ref(), true)
    }

    /// Throttles block I/O to the provisioned volume (on by default), or only counts it.
    pub fn set_device_throttling(&self, on: bool) {
        if let Some(d) = &self.inner.device {
            d.set_throttling(on);
        }
    }

    /// What the provisioned volume was asked for so far (None on a local device).
    pub fn device(&self) -> Option<DeviceSnapshot> {
        self.inner.device.as_ref().map(|d| d.snapshot())
    }

    fn snapshot(&self) -> Arc<SuperVersion> {
        self.inner.sv.read().clone()
    }

    fn write(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.check_bg()?;
        let op = (self.inner.cfg.normalize_key(key), value.map(|v| v.to_vec()));
        let r = self.inner.write_thread.write(vec![op], |group| self.append_group(group));
        self.kick_if_rotated();
        r
    }

    /// Writes `ops` in order (`None` deletes) as one write group: one WAL append for all
    /// of them, the same outcome for all (each is a [`Engine::put`] or [`Engine::delete`]
    /// otherwise: not atomic, a crash may keep a prefix of them). A server's pipeline of
    /// writes pays one log write instead of one per write.
    pub fn write_batch(&self, ops: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        self.check_bg()?;
        let kinds: Vec<OpKind> = ops.iter().map(|(_, v)| if v.is_some() { OpKind::Put } else { OpKind::Delete }).collect();
        let owned = ops.into_iter().map(|(k, v)| (self.inner.cfg.normalize_key(&k), v)).collect();
        let r = self.inner.write_thread.write(owned, |group| self.append_group(group));
        self.kick_if_rotated();
        r?;
        for k in kinds {
            self.inner.stats.record(k, &IoSnapshot::default());
        }
        Ok(())
    }

    // The leader's part of a write group, holding the baton: rotate a full memtable,
    // append the group's records to the WAL in one write, and count the group's
    // inserts as pending in the memtable they go to.
    fn append_group(&self, group: &[&WriteOp]) -> Result<Appended> {
        let mut wal = self.inner.writer.lock();
        // A full memtable (E_B distinct keys) is frozen; so is one that took the put limit of
        // writes without filling (overwrites of keys it holds): else a buffer that holds every
        // key of an update-only workload never flushes and its log grows without bound.
        let puts = self.inner.mem_puts.load(Ordering::Relaxed);
        if self.inner.sv.read().mem.is_full() || puts >= self.inner.cfg.buffer_put_limit() {
            self.rotate(&mut wal)?;
        }
        self.inner.mem_puts.fetch_add(group.len() as u64, Ordering::Relaxed);
        let bytes: usize = group.iter().map(|(k, v)| cosine_wal::encoded_len(k, v.as_deref())).sum();
        let mut records = Vec::with_capacity(bytes);
        for (k, v) in group {
            cosine_wal::encode_into(&mut records, k, v.as_deref());
        }
        let before = self.inner.wal_bytes.load(Ordering::Relaxed);
        let ticket = wal.append_encoded(&records)?;
        if let Some(d) = &self.inner.device {
            // every log page this group completes is one write I/O of the volume (no latency:
            // the page cache writes it back; a sync waits in the log itself)
            let pages = (before + records.len() as u64) / cosine_wal::PAGE_BYTES - before / cosine_wal::PAGE_BYTES;
            d.pay(pages, pages * cosine_wal::PAGE_BYTES, false, false);
        }
        let seq = self.inner.write_seq.fetch_add(group.len() as u64, Ordering::Relaxed);
        let mem = self.inner.sv.read().mem.clone();
        mem.begin_writes(group.len());
        Ok((mem, seq, ticket))
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
        // Groups appended before this one may still be inserting into the memtable.
        self.inner.sv.read().mem.wait_writes();
        let id = self.inner.next_id.fetch_add(1, Ordering::SeqCst);
        let (old, old_len) = wal.rotate(id)?;
        self.inner.mem_puts.store(0, Ordering::Relaxed);
        // The manifest names the segment before any record goes in, so its loss is
        // detected, and records the final length of the one just sealed.
        let next = self.inner.next_id.load(Ordering::SeqCst);
        if let Err(e) = self.inner.versions.log_and_apply(|m| {
            versions::seal(m, old, old_len);
            m.wals.push(WalRecord { id, sealed: None });
            m.next_id = m.next_id.max(next);
        }) {
            wal.poison(format!("cannot record WAL segment {id} in the manifest: {e}"));
            return Err(e);
        }
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
        self.inner.rotated.store(true, Ordering::Release);
        Ok(())
    }

    // Wakes the worker for a memtable `rotate` froze, once the baton is released: woken
    // while a leader holds it, the worker preempts the leader on its core and the other
    // writers block behind a descheduled leader (BENCHMARKS.md).
    fn kick_if_rotated(&self) {
        if self.inner.rotated.swap(false, Ordering::AcqRel) {
            self.kick();
        }
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
    /// for its fdatasync), or with [`Engine::defer_log_writes`] after one fdatasync made now
    /// for all of them. `group_commit`: after the group-commit thread's next fdatasync
    /// covering them, shared by every waiter (at most about `group_commit_interval_us`).
    /// `none`: at once; that policy promises no durability before a flush.
    ///
    /// A server acknowledges a batch of writes after this returns.
    pub fn wait_durable(&self) -> Result<()> {
        match self.durable_mark() {
            Some(m) => m.wait(),
            None => Ok(()),
        }
    }

    /// The log's end now, to wait on later: [`DurableMark::wait`] returns once every write
    /// acknowledged before this call is durable (what [`Engine::wait_durable`] waits for when
    /// called here). `None` when the WAL policy has nothing to wait for (`every_write`
    /// without [`Engine::defer_log_writes`]: each write already waited; `none`: no promise).
    ///
    /// A server takes the mark right after a batch's writes, so the batch waits for the first
    /// sync covering *them*, not for one covering every write appended by the time a waiter
    /// gets to it (which is the next tick's, when others wrote in between).
    pub fn durable_mark(&self) -> Option<DurableMark> {
        self.inner.writer.lock().durable_mark()
    }

    /// Under `group_commit` or `every_write`, keeps the log's appends in the process until
    /// the next sync ([`cosine_wal::Wal::defer_writes`]): one write system call per sync
    /// instead of one per write group, and under `every_write` no fdatasync in a put's path:
    /// the caller's [`Engine::durable_mark`] syncs, so concurrent callers' writes share one
    /// (Redis' `appendfsync always`). For a caller that acknowledges writes only after a mark
    /// taken after them returned (cosine-server): a crash of the process then loses only
    /// writes nobody was told about. Without it a `put` that returned survives a crash of the
    /// process (its record reached the OS; under `every_write`, the disk), as
    /// docs/engine-contract.md states for in-process users. A no-op under `none`.
    pub fn defer_log_writes(&self) {
        self.inner.writer.lock().defer_writes();
    }

    /// Whether a put waits for its own fdatasync before it returns: `every_write` without
    /// [`Engine::defer_log_writes`].
    pub fn syncs_in_put(&self) -> bool {
        self.inner.cfg.durability.wal_sync == cosine_config::WalSync::EveryWrite && !self.inner.writer.lock().defers_writes()
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
        Ok(self.lookup_with(k, io, |v| v.map(<[u8]>::to_vec))?.1)
    }

    /// The newest version of the normalized key `k` handed to `f` where it lies (`None`:
    /// absent or deleted): a memtable (under its shard's read lock), else the block of the
    /// run or log segment holding it. Also whether it was found.
    fn lookup_with<R>(&self, k: &[u8], io: &IoCounter, f: impl FnOnce(Option<&[u8]>) -> R) -> Result<(bool, R)> {
        let f = |v: Option<&[u8]>| (v.is_some(), f(v));
        let sv = self.snapshot();
        let mut f = match sv.mem.get_with(k, f) {
            Ok(r) => {
                self.inner.stats.buffer_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(r);
            }
            Err(f) => f,
        };
        for m in &sv.imms {
            f = match m.get_with(k, f) {
                Ok(r) => {
                    self.inner.stats.buffer_hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(r);
                }
                Err(f) => f,
            };
        }
        match &self.inner.store {
            Store::Tree => Ok(match sv.tree.find_at(k, hash64(k), io)? {
                Some((level, hit)) => {
                    self.inner.stats.level_hits[level.min(COUNTED_LEVELS - 1)].fetch_add(1, Ordering::Relaxed);
                    f(hit.value())
                }
                None => f(None),
            }),
            Store::Log(log) => {
                let hit = log.find(k, io)?;
                let v = hit.as_ref().and_then(|h| h.value());
                if v.is_some() {
                    self.inner.stats.level_hits[0].fetch_add(1, Ordering::Relaxed);
                }
                Ok(f(v))
            }
        }
    }

    /// Runs `f` on `key` padded with NULs (or cut) to the design's `key_bytes`, as
    /// [`Config::normalize_key`] makes it, without allocating for keys up to [`STACK_KEY`] bytes.
    fn with_normalized<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
        let n = self.inner.cfg.layout.key_bytes;
        if key.len() >= n {
            return f(&key[..n]);
        }
        if n <= STACK_KEY {
            let mut buf = [0u8; STACK_KEY];
            buf[..key.len()].copy_from_slice(key);
            return f(&buf[..n]);
        }
        f(&self.inner.cfg.normalize_key(key))
    }

    /// Point lookup.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_counted(key)?.0)
    }

    /// Point lookup that hands the value to `f` instead of returning a copy of it: `f` sees
    /// the value where it lies (`None`: absent or deleted), in the memtable (under a shard's
    /// read lock, so `f` should be short: copy the value out, as cosine-server encodes a GET's
    /// reply straight into its output) or in the cached block; `f` must not write to this
    /// engine (a put to that shard would wait for the lock `f` runs under). The same answer,
    /// statistics and I/O as [`Engine::get`], with one copy of the value fewer (issue 48).
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        let io = self.op_counter();
        let (found, r) = self.with_normalized(key, |k| self.lookup_with(k, &io, f))?;
        self.inner.stats.record(if found { OpKind::GetFound } else { OpKind::GetEmpty }, &io.snapshot());
        Ok(r)
    }

    /// Point lookup that also returns the blocks it read.
    pub fn get_counted(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, IoSnapshot)> {
        let io = self.op_counter();
        let v = self.with_normalized(key, |k| self.lookup(k, &io))?;
        let s = io.snapshot();
        self.inner.stats.record(if v.is_some() { OpKind::GetFound } else { OpKind::GetEmpty }, &s);
        Ok((v, s))
    }

    /// Read-modify-write: `f` maps the current value (if any) to the new one
    /// (`None` deletes). Atomic with respect to other `rmw` calls on the same key.
    pub fn rmw(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> Option<Vec<u8>>) -> Result<IoSnapshot> {
        let k = self.inner.cfg.normalize_key(key);
        let _g = self.inner.rmw_locks[(hash64(&k) % RMW_STRIPES as u64) as usize].lock();
        let io = self.op_counter();
        let cur = self.lookup(&k, &io)?;
        let new = f(cur.as_deref());
        self.write(&k, new.as_deref())?;
        let s = io.snapshot();
        self.inner.stats.record(OpKind::Rmw, &s);
        Ok(s)
    }

    /// Freezes the memtable, syncs the WAL and waits until every frozen memtable is flushed.
    pub fn flush(&self) -> Result<()> {
        self.check_bg()?;
        self.inner.write_thread.exclusive(|| -> Result<()> {
            let mut wal = self.inner.writer.lock();
            if !self.inner.sv.read().mem.is_empty() {
                self.rotate(&mut wal)?;
            }
            wal.sync()
        })?;
        self.kick_if_rotated();
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

    /// Writes a consistent copy of the database into `dest`, a new directory on the same
    /// file system (files are hard-linked where they cannot change; copied otherwise):
    /// every write appended before the call, nothing after it. Writes and background work
    /// go on meanwhile; they wait only while the files are linked. `Engine::open(dest)`
    /// opens the copy. Used for Raft snapshots (cosine-raft).
    pub fn checkpoint(&self, dest: &Path) -> Result<()> {
        self.check_bg()?;
        checkpoint::checkpoint(&self.inner, dest)
    }

    /// Counters and shape.
    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.inner.stats;
        let sv = self.snapshot();
        // (1-based levels; the last counted one also holds every deeper level's hits)
        let level_hit = |level: usize| s.level_hits.get(level.saturating_sub(1)).map_or(0, |c| c.load(Ordering::Relaxed));
        let (levels, fence_memory, filter_memory, range_filter_memory) = match &self.inner.store {
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
                        lookup_hits: level_hit(l.level),
                    })
                    .collect();
                (levels, fp, bf, sv.tree.range_filter_memory())
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
                    lookup_hits: level_hit(1),
                }];
                (levels, log.memory_bytes(), 0, 0)
            }
        };
        let wal_bytes = self.inner.wal_bytes.load(Ordering::Relaxed);
        let wal_syncs = self.inner.wal_syncs.load(Ordering::Relaxed);
        StatsSnapshot {
            ops: s.snapshot_ops(),
            flush: s.flush.snapshot(),
            compaction: s.compaction.snapshot(),
            open: s.open.snapshot(),
            flushes: s.flushes.load(Ordering::Relaxed),
            compactions: s.compactions.load(Ordering::Relaxed),
            trivial_moves: s.trivial_moves.load(Ordering::Relaxed),
            deep_merges: s.deep_merges.load(Ordering::Relaxed),
            gcs: s.gcs.load(Ordering::Relaxed),
            wal_bytes,
            wal_syncs,
            stall_micros: s.stall_micros.load(Ordering::Relaxed),
            buffer_hits: s.buffer_hits.load(Ordering::Relaxed),
            levels,
            buffered: sv.mem.len() + sv.imms.iter().map(|m| m.len()).sum::<u64>(),
            fence_memory,
            filter_memory,
            range_filter_memory,
        }
    }

    /// Syncs the WAL and stops the worker. Buffered writes stay in the WAL and are
    /// replayed at the next open. Returns the worker's error, if it failed.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(()); // closed before (close, then drop)
        }
        let sync = self.inner.write_thread.exclusive(|| {
            let mut wal = self.inner.writer.lock();
            let id = wal.segment_id();
            // A clean close seals the segment: a later cut at a record boundary is then detected.
            wal.close().and_then(|len| self.inner.versions.log_and_apply(|m| versions::seal(m, id, len)))
        });
        {
            let mut bg = self.inner.bg.lock();
            bg.shutdown = true;
            self.inner.stopped.store(true, Ordering::Release);
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
