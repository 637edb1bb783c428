//! The engine as the state machine of the shard's Raft group.
//!
//! The replica's directory:
//! * `engine/`: the engine's database. It runs with `wal_sync = none`: the Raft log is the
//!   write-ahead log that acknowledgements wait for ([`crate::log_store`]); the engine's
//!   own WAL only keeps what was applied across a restart of the process;
//! * `snapshots/ID/`: the current snapshot, an engine checkpoint ([`Engine::checkpoint`]:
//!   hard links to the engine's run files, copies of its WAL and log segments) and
//!   `snapshot.meta` (the last log id and membership it holds);
//! * `raft/`: the Raft log; `tmp-*`: snapshots being built, sent or received.
//!
//! **Applied index.** Every batch of entries applied ends with one more write, of the
//! reserved key [`marker_key`] (`key_bytes` bytes of 0xFF, refused to clients), holding the
//! last log id applied and the membership. The engine recovers a prefix of its writes
//! after a crash (docs/engine-contract.md §4), so the marker it holds never claims more
//! than the data holds: on restart openraft re-applies the entries after it from the log
//! (re-applying a `SET` or `DEL` is idempotent in order).
//!
//! **Snapshots** are checkpoints of the engine, never a dump of its keys. Built under the
//! apply lock (the checkpoint then holds exactly the marker's entries); the log before it
//! can then be purged. A follower too far behind receives the snapshot's files
//! ([`crate::network`]) and [`install`](StateMachine::install_snapshot) swaps its engine for
//! a copy of them. If the engine is found older than the current snapshot at open (a machine
//! crash lost unsynced engine writes the purged log no longer holds), it is restored from
//! the snapshot.

use crate::types::{Entry, LogId, Request, Response, SnapshotFiles, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use cosine_config::{Config, WalSync};
use cosine_engine::Engine;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};
use parking_lot::{Mutex, RwLock};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The engine's directory in a replica's directory.
pub const ENGINE_DIR: &str = "engine";
/// The snapshots' directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// A snapshot's metadata file.
pub const SNAPSHOT_META: &str = "snapshot.meta";
const ENGINE_NEXT: &str = "engine.next";
const ENGINE_OLD: &str = "engine.old";
const TMP_PREFIX: &str = "tmp-";
/// How long a snapshot install waits for readers to let go of the old engine.
const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// The reserved key holding the applied log id: `key_bytes` bytes of 0xFF.
pub fn marker_key(key_bytes: usize) -> Vec<u8> {
    vec![0xFF; key_bytes]
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn sm_write(e: &io::Error) -> StorageError {
    StorageIOError::write_state_machine(e).into()
}

fn sm_read(e: &io::Error) -> StorageError {
    StorageIOError::read_state_machine(e).into()
}

fn snap_write(e: &io::Error) -> StorageError {
    StorageIOError::write_snapshot(None, e).into()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Copies an engine checkpoint's files from `src` into the new directory `dst`: run files
/// and filters (immutable) hard-linked, everything that an engine appends to or rewrites
/// (WAL and log segments, the manifest) copied, `snapshot.meta` left out; all fsynced.
fn copy_engine_files(src: &Path, dst: &Path) -> io::Result<()> {
    std::fs::create_dir(dst)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n == SNAPSHOT_META || !e.file_type()?.is_file() {
            continue;
        }
        let to = dst.join(&name);
        let immutable = n.ends_with(".sst") || n.ends_with(".rbf");
        if !(immutable && std::fs::hard_link(e.path(), &to).is_ok()) {
            std::fs::copy(e.path(), &to)?;
        }
        std::fs::File::open(&to)?.sync_all()?;
    }
    sync_dir(dst)
}

/// What the state machine has applied.
#[derive(Debug, Clone, Default)]
struct Applied {
    last: Option<LogId>,
    membership: StoredMembership,
}

/// The state shared by the state machine, its snapshot builders and the server's readers.
#[derive(Debug)]
pub struct Shared {
    dir: PathBuf,
    cfg: Config,
    engine: RwLock<Option<Arc<Engine>>>,
    applied: Mutex<Applied>,
    /// Held while a batch is applied, a snapshot is checkpointed or installed.
    apply_lock: tokio::sync::Mutex<()>,
    /// Held while the current snapshot is replaced or linked for sending.
    snapshots: Mutex<()>,
    seq: AtomicU64,
    /// Snapshots built and installed since start (for `INFO`).
    pub snapshots_built: AtomicU64,
    /// Snapshots installed from a leader since start.
    pub snapshots_installed: AtomicU64,
}

impl Shared {
    /// The engine (None while a snapshot replaces it).
    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.read().clone()
    }

    /// The design the engine runs (its `wal_sync` is `none`: see the module doc).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The last log id applied.
    pub fn applied(&self) -> Option<LogId> {
        self.applied.lock().last
    }

    fn tmp(&self, what: &str) -> PathBuf {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{TMP_PREFIX}{what}-{}-{n}", std::process::id()))
    }

    /// Takes the engine out and closes it once no reader holds it.
    fn release_engine(&self) -> io::Result<()> {
        let Some(mut e) = self.engine.write().take() else { return Ok(()) };
        let start = Instant::now();
        loop {
            match Arc::try_unwrap(e) {
                Ok(engine) => return engine.close().map_err(io_err),
                Err(back) if start.elapsed() < RELEASE_WAIT => {
                    e = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => return Err(io_err("a reader held the engine for 30 s")),
            }
        }
    }

    fn open_engine(&self) -> io::Result<(Arc<Engine>, Applied)> {
        let e = Engine::open(self.dir.join(ENGINE_DIR), &self.cfg).map_err(io_err)?;
        let applied = match e.get(&marker_key(self.cfg.layout.key_bytes)).map_err(io_err)? {
            Some(v) => {
                let (last, membership): (Option<LogId>, StoredMembership) = bincode::deserialize(&v).map_err(io_err)?;
                Applied { last, membership }
            }
            None => Applied::default(),
        };
        Ok((Arc::new(e), applied))
    }

    /// Replaces the engine directory with a copy of the snapshot in `snap` and opens it.
    fn restore_from(&self, snap: &Path) -> io::Result<Applied> {
        self.release_engine()?;
        let (next, cur, old) = (self.dir.join(ENGINE_NEXT), self.dir.join(ENGINE_DIR), self.dir.join(ENGINE_OLD));
        let _ = std::fs::remove_dir_all(&next);
        copy_engine_files(snap, &next)?;
        if cur.exists() {
            std::fs::rename(&cur, &old)?;
        }
        std::fs::rename(&next, &cur)?;
        sync_dir(&self.dir)?;
        let _ = std::fs::remove_dir_all(&old);
        let (e, applied) = self.open_engine()?;
        *self.engine.write() = Some(e);
        Ok(applied)
    }

    /// Closes the engine (flushing its memtable first), for a clean shutdown.
    pub fn close(&self) -> io::Result<()> {
        if let Some(e) = self.engine() {
            e.flush().map_err(io_err)?;
        }
        self.release_engine()
    }
}

/// The current snapshot: (its directory, its metadata), the newest of `snapshots/`.
fn current_snapshot(dir: &Path) -> io::Result<Option<(PathBuf, SnapshotMeta)>> {
    let snaps = dir.join(SNAPSHOTS_DIR);
    let mut best: Option<(PathBuf, SnapshotMeta)> = None;
    let Ok(rd) = std::fs::read_dir(&snaps) else { return Ok(None) };
    for e in rd {
        let p = e?.path();
        let Ok(bytes) = std::fs::read(p.join(SNAPSHOT_META)) else { continue };
        let meta: SnapshotMeta = bincode::deserialize(&bytes).map_err(io_err)?;
        if best.as_ref().is_none_or(|(_, b)| meta.last_log_id > b.last_log_id) {
            best = Some((p, meta));
        }
    }
    Ok(best)
}

/// Removes every snapshot but `keep`.
fn remove_other_snapshots(dir: &Path, keep: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir.join(SNAPSHOTS_DIR)) {
        for e in rd.flatten() {
            if e.path() != keep {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// The state machine handed to openraft.
#[derive(Debug, Clone)]
pub struct StateMachine {
    shared: Arc<Shared>,
}

impl StateMachine {
    /// Opens the replica's engine in `dir` with the design `cfg` (run with `wal_sync = none`),
    /// finishing or undoing an interrupted engine swap, and restoring the engine from the
    /// current snapshot if it is older.
    pub fn open(dir: &Path, cfg: &Config) -> io::Result<StateMachine> {
        std::fs::create_dir_all(dir.join(SNAPSHOTS_DIR))?;
        for e in std::fs::read_dir(dir)?.flatten() {
            if e.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let (cur, next, old) = (dir.join(ENGINE_DIR), dir.join(ENGINE_NEXT), dir.join(ENGINE_OLD));
        if !cur.exists() && next.exists() {
            std::fs::rename(&next, &cur)?; // the swap stopped between its two renames
        }
        let _ = std::fs::remove_dir_all(&next);
        let _ = std::fs::remove_dir_all(&old);
        let mut ecfg = cfg.clone();
        ecfg.durability.wal_sync = WalSync::None;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            cfg: ecfg,
            engine: RwLock::new(None),
            applied: Mutex::new(Applied::default()),
            apply_lock: tokio::sync::Mutex::new(()),
            snapshots: Mutex::new(()),
            seq: AtomicU64::new(0),
            snapshots_built: AtomicU64::new(0),
            snapshots_installed: AtomicU64::new(0),
        });
        let (e, mut applied) = shared.open_engine()?;
        *shared.engine.write() = Some(e);
        if let Some((snap, meta)) = current_snapshot(dir)? {
            remove_other_snapshots(dir, &snap);
            if meta.last_log_id > applied.last {
                eprintln!(
                    "cosine-raft: the engine holds entries up to {:?}, the snapshot up to {:?}: restoring the engine from it",
                    applied.last.map(|l| l.index),
                    meta.last_log_id.map(|l| l.index)
                );
                applied = shared.restore_from(&snap)?;
            }
        }
        *shared.applied.lock() = applied;
        Ok(StateMachine { shared })
    }

    /// The shared state (engine, applied index).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

/// Applies `entries` to `engine` in order, then writes the marker; (responses, new applied state).
fn apply_entries(
    engine: &Engine,
    key_bytes: usize,
    mut applied: Applied,
    entries: Vec<Entry>,
) -> Result<(Vec<Response>, Applied), StorageError> {
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let fail = |err: cosine_engine::Error| -> StorageError { StorageIOError::apply(e.log_id, &io_err(err)).into() };
        match &e.payload {
            EntryPayload::Blank => out.push(Response::default()),
            EntryPayload::Normal(Request { ops }) => {
                let mut results = Vec::with_capacity(ops.len());
                for op in ops {
                    results.push(match op {
                        crate::WriteOp::Set(pairs) => {
                            for (k, v) in pairs {
                                engine.put(k, v).map_err(fail)?;
                            }
                            0
                        }
                        crate::WriteOp::Del(keys) => {
                            let mut n = 0;
                            for k in keys {
                                if engine.get(k).map_err(fail)?.is_some() {
                                    n += 1;
                                }
                                engine.delete(k).map_err(fail)?;
                            }
                            n
                        }
                    });
                }
                out.push(Response { results });
            }
            EntryPayload::Membership(m) => {
                applied.membership = StoredMembership::new(Some(e.log_id), m.clone());
                out.push(Response::default());
            }
        }
        applied.last = Some(e.log_id);
    }
    if let Some(last) = applied.last {
        let marker = bincode::serialize(&(applied.last, &applied.membership))
            .map_err(|e| StorageError::from(StorageIOError::apply(last, &io_err(e))))?;
        engine.put(&marker_key(key_bytes), &marker).map_err(|e| StorageError::from(StorageIOError::apply(last, &io_err(e))))?;
    }
    Ok((out, applied))
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let a = self.shared.applied.lock().clone();
        Ok((a.last, a.membership))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let _g = self.shared.apply_lock.lock().await;
        let engine = self.shared.engine().ok_or_else(|| sm_write(&io_err("the engine is being replaced")))?;
        let applied = self.shared.applied.lock().clone();
        let key_bytes = self.shared.cfg.layout.key_bytes;
        let (out, applied) = tokio::task::spawn_blocking(move || apply_entries(&engine, key_bytes, applied, entries))
            .await
            .map_err(|e| sm_write(&io_err(e)))??;
        *self.shared.applied.lock() = applied;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder { shared: self.shared.clone() }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFiles>, StorageError> {
        let dir = self.shared.tmp("recv");
        std::fs::create_dir(&dir).map_err(|e| snap_write(&e))?;
        Ok(Box::new(SnapshotFiles::temporary(dir)))
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, mut snapshot: Box<SnapshotFiles>) -> Result<(), StorageError> {
        let _g = self.shared.apply_lock.lock().await;
        let shared = self.shared.clone();
        let meta = meta.clone();
        let src = snapshot.dir().to_path_buf();
        snapshot.keep();
        let applied = tokio::task::spawn_blocking(move || -> io::Result<Applied> {
            std::fs::write(src.join(SNAPSHOT_META), bincode::serialize(&meta).map_err(io_err)?)?;
            std::fs::File::open(src.join(SNAPSHOT_META))?.sync_all()?;
            let dst = shared.dir.join(SNAPSHOTS_DIR).join(&meta.snapshot_id);
            {
                let _s = shared.snapshots.lock();
                let _ = std::fs::remove_dir_all(&dst);
                std::fs::rename(&src, &dst)?;
                sync_dir(&shared.dir.join(SNAPSHOTS_DIR))?;
                remove_other_snapshots(&shared.dir, &dst);
            }
            let applied = shared.restore_from(&dst)?;
            if applied.last != meta.last_log_id {
                return Err(io_err(format!("the snapshot's engine applied {:?}, its metadata says {:?}", applied.last, meta.last_log_id)));
            }
            Ok(Applied { last: meta.last_log_id, membership: meta.last_membership.clone() })
        })
        .await
        .map_err(|e| snap_write(&io_err(e)))?
        .map_err(|e| snap_write(&e))?;
        *self.shared.applied.lock() = applied;
        self.shared.snapshots_installed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let shared = self.shared.clone();
        let copy = self.shared.tmp("send");
        tokio::task::spawn_blocking(move || -> io::Result<Option<Snapshot<TypeConfig>>> {
            let _s = shared.snapshots.lock();
            let Some((dir, meta)) = current_snapshot(&shared.dir)? else { return Ok(None) };
            // a private set of links: the snapshot may be replaced while it is sent
            std::fs::create_dir(&copy)?;
            let files = SnapshotFiles::temporary(copy.clone());
            for e in std::fs::read_dir(&dir)? {
                let e = e?;
                std::fs::hard_link(e.path(), copy.join(e.file_name()))?;
            }
            Ok(Some(Snapshot { meta, snapshot: Box::new(files) }))
        })
        .await
        .map_err(|e| sm_read(&io_err(e)))?
        .map_err(|e| sm_read(&e))
    }
}

/// Builds a snapshot: an engine checkpoint under the apply lock.
#[derive(Debug)]
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let shared = self.shared.clone();
        let tmp = shared.tmp("snap");
        let (applied, tmp) = {
            let _g = shared.apply_lock.lock().await;
            let applied = shared.applied.lock().clone();
            let engine = shared.engine().ok_or_else(|| snap_write(&io_err("the engine is being replaced")))?;
            let t = tmp.clone();
            tokio::task::spawn_blocking(move || engine.checkpoint(&t).map_err(io_err))
                .await
                .map_err(|e| snap_write(&io_err(e)))?
                .map_err(|e| snap_write(&e))?;
            (applied, tmp)
        };
        let n = shared.seq.fetch_add(1, Ordering::Relaxed);
        let id = match applied.last {
            Some(l) => format!("{}-{}-{}-{n}", l.leader_id.term, l.leader_id.node_id, l.index),
            None => format!("none-{n}"),
        };
        let meta = SnapshotMeta { last_log_id: applied.last, last_membership: applied.membership, snapshot_id: id.clone() };
        let sh = shared.clone();
        let m = meta.clone();
        let dst = tokio::task::spawn_blocking(move || -> io::Result<PathBuf> {
            std::fs::write(tmp.join(SNAPSHOT_META), bincode::serialize(&m).map_err(io_err)?)?;
            std::fs::File::open(tmp.join(SNAPSHOT_META))?.sync_all()?;
            sync_dir(&tmp)?;
            let dst = sh.dir.join(SNAPSHOTS_DIR).join(&m.snapshot_id);
            let _s = sh.snapshots.lock();
            std::fs::rename(&tmp, &dst)?;
            sync_dir(&sh.dir.join(SNAPSHOTS_DIR))?;
            remove_other_snapshots(&sh.dir, &dst);
            Ok(dst)
        })
        .await
        .map_err(|e| snap_write(&io_err(e)))?
        .map_err(|e| snap_write(&e))?;
        shared.snapshots_built.fetch_add(1, Ordering::Relaxed);
        Ok(Snapshot { meta, snapshot: Box::new(SnapshotFiles::kept(dst)) })
    }
}
