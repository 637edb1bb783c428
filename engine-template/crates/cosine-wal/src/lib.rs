//! Write-ahead log: every write is appended here before it enters the memtable.
//!
//! Record layout: `[len u32][crc32 u32][payload]`, payload `kind u8, key, value`
//! ([`record`]). One segment file (`NNNNNNNN.wal`) backs each memtable; a
//! segment is deleted once its memtable is flushed and the manifest no longer
//! needs it.
//!
//! Appends take a batch of encoded records (a write group) and hand it to the
//! OS in one write; or, once [`Wal::defer_writes`] is on (`group_commit` or
//! `every_write`, a caller that acknowledges only after a [`DurableMark`] covering
//! its writes returned: cosine-server), keep it in the process until the next sync, which
//! hands every batch since the last one to the OS in one write before its
//! fdatasync (Redis' `aof_buf`, written once per event-loop pass). A failed append is rolled back (the segment is cut back to
//! its last whole record) and poisons the writer: nothing more is acknowledged
//! until the database is reopened, so a partial record can never sit in the
//! middle of the log under later acknowledged ones. A failed sync poisons too.
//!
//! Replay at open ([`recovery`]) follows a [`WalRecovery`] mode: by default only
//! a torn tail is dropped and any other damage stops the open.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod record;
pub mod recovery;

pub use record::{encode_into, encode_record, encoded_len};
pub use recovery::{recover, RecoveryReport, SegmentRef};

use cosine_config::{WalRecovery, WalSync};
use cosine_core::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Buffered bytes after which `wal_sync = none` hands its records to the OS.
const PENDING_LIMIT: usize = 64 << 10;

/// The most capacity a segment keeps in its spare buffer for deferred records
/// ([`Segment::write_deferred`]); a larger one (a burst) is given back.
const SPARE_MAX_BYTES: usize = 8 << 20;

/// The unit in which the log reaches a provisioned volume: appends are sequential and the
/// OS writes them back in 4 KiB pages, so every full page of log is one write I/O (the cost
/// model's `wal_page_bytes`, cost_models/data/model_constants.yaml).
pub const PAGE_BYTES: u64 = 4096;

/// Path of WAL segment `id` in `dir`.
pub fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:08}.wal"))
}

/// Parses a segment file name back to its id.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    name.strip_suffix(".wal")?.parse().ok()
}

/// Fsyncs a directory so created/renamed/removed entries survive a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::io(dir, e))
}

/// State of one open segment shared between the writer and syncers.
#[derive(Debug)]
pub struct Segment {
    /// Segment id.
    pub id: u64,
    path: PathBuf,
    file: File,
    /// Bytes handed to the OS so far (always a whole number of records).
    written: AtomicU64,
    /// Bytes appended so far: `written` and the deferred records not yet handed to the OS.
    appended: AtomicU64,
    /// Records appended under [`Wal::defer_writes`] and not yet handed to the OS: the next
    /// sync writes them (whole records, in append order).
    deferred: Mutex<Vec<u8>>,
    /// The buffer the last write of deferred records emptied, kept with its capacity: it
    /// becomes the next `deferred`. A new `Vec` per sync regrew by doubling, each step a fresh
    /// allocation the kernel zeroed: `Wal::append_encoded` was 7.5 % of cosine-server's CPU under
    /// redis-benchmark SET at pipeline 1 (`perf`, journal §40.2).
    spare: Mutex<Vec<u8>>,
    /// Bytes known durable; the mutex also serialises fdatasync calls.
    synced: Mutex<u64>,
    /// Signalled whenever `synced` advances (group-commit waiters, [`DurableMark`]).
    synced_cv: Condvar,
    /// fdatasync calls made on any segment of this log.
    syncs: Arc<AtomicU64>,
    /// Set when a sync failed: the writer is poisoned at its next append.
    failed: AtomicBool,
}

impl Segment {
    /// Makes everything appended so far durable (one fdatasync shared by all waiters),
    /// handing the deferred records to the OS first.
    pub fn sync_upto(&self, end: u64) -> Result<()> {
        let mut synced = self.synced.lock();
        if self.failed.load(Ordering::Acquire) {
            // A later fdatasync may "succeed" without the lost pages: never trust it.
            return Err(Error::Poisoned(format!("an earlier write or fdatasync of {} failed", self.path.display())));
        }
        if *synced >= end {
            return Ok(()); // another writer's sync already covered us
        }
        // (under `synced`: the deferred records reach the file in append order, one sync at a time)
        self.write_deferred()?;
        let target = self.written.load(Ordering::Acquire);
        if let Err(e) = self.file.sync_data() {
            // After a failed fsync the kernel may have dropped the dirty pages: trust nothing.
            self.failed.store(true, Ordering::Release);
            return Err(Error::io(&self.path, e));
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        *synced = target;
        self.synced_cv.notify_all();
        Ok(())
    }

    /// Hands the deferred records to the OS in one write. A failed write cuts the segment
    /// back to its last whole record and marks it failed: no mark it should have covered is
    /// answered `Ok`, and the writer is poisoned at its next append.
    fn write_deferred(&self) -> Result<()> {
        let mut bytes = std::mem::take(&mut *self.spare.lock());
        std::mem::swap(&mut bytes, &mut *self.deferred.lock());
        if bytes.is_empty() {
            *self.spare.lock() = bytes;
            return Ok(());
        }
        let start = self.written.load(Ordering::Acquire);
        if let Err(e) = cosine_core::fault::write_all(&self.file, &self.path, &bytes) {
            self.failed.store(true, Ordering::Release);
            let _ = self.file.set_len(start).and_then(|_| self.file.sync_all());
            return Err(Error::io(&self.path, e));
        }
        self.written.fetch_add(bytes.len() as u64, Ordering::AcqRel);
        if bytes.capacity() <= SPARE_MAX_BYTES {
            bytes.clear();
            *self.spare.lock() = bytes;
        }
        Ok(())
    }
}

/// The log's end at one instant, under `group_commit`: [`DurableMark::wait`] returns
/// once the group-commit thread's fdatasync has covered it, so every record appended
/// before the mark was taken is on stable storage. Concurrent waiters share one sync.
#[derive(Debug)]
pub struct DurableMark {
    seg: Arc<Segment>,
    end: u64,
    interval: Duration,
    /// Whether a group-commit thread syncs every interval (`group_commit`); under a deferred
    /// `every_write` none does, and [`DurableMark::wait`] syncs at once.
    ticking: bool,
}

impl DurableMark {
    /// Blocks until the group commit covering the mark has happened. If no sync comes
    /// within a few intervals (the committer stopped, or its sync failed), syncs itself.
    pub fn wait(self) -> Result<()> {
        if !self.ticking {
            return self.seg.sync_upto(self.end);
        }
        let patience = self.interval.saturating_mul(4).max(Duration::from_millis(2));
        {
            let mut synced = self.seg.synced.lock();
            if *synced >= self.end {
                return Ok(());
            }
            // A timed-out wait falls through to syncing ourselves.
            let _ = self.seg.synced_cv.wait_for(&mut synced, patience);
            if *synced >= self.end {
                return Ok(());
            }
        }
        self.seg.sync_upto(self.end)
    }

    /// Makes the mark durable now: returns at once if a sync already covered it, else
    /// fdatasyncs the segment (covering every record appended so far, so the marks taken
    /// before this call's sync return at once after it). A server's waiter calls this as
    /// soon as a batch waits, instead of waiting for the group-commit thread's next tick:
    /// the batches that queue during one sync share the next, as Redis' `appendfsync
    /// always` shares one fsync per event-loop pass.
    pub fn sync(self) -> Result<()> {
        self.seg.sync_upto(self.end)
    }
}

/// A promise that a batch becomes durable once [`SyncTicket::wait`] returns.
#[derive(Debug)]
pub struct SyncTicket {
    seg: Option<(Arc<Segment>, u64)>,
}

impl SyncTicket {
    /// Blocks until the batch is on stable storage (no-op unless `wal_sync = every_write`).
    pub fn wait(self) -> Result<()> {
        match self.seg {
            Some((s, end)) => s.sync_upto(end),
            None => Ok(()),
        }
    }
}

/// The appending side of the log; used by one writer at a time (the write-group leader).
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    policy: WalSync,
    seg: Arc<Segment>,
    pending: Vec<u8>,
    bytes_total: Arc<AtomicU64>,
    current: Arc<Mutex<Arc<Segment>>>,
    committer: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    poisoned: Option<String>,
    closed: bool,
    group_commit_interval: Duration,
    syncs: Arc<AtomicU64>,
    /// [`Wal::defer_writes`]: appends stay in the process until a sync.
    defer: bool,
}

fn open_segment(dir: &Path, id: u64, sync_dir_after: bool, syncs: &Arc<AtomicU64>) -> Result<Arc<Segment>> {
    let path = segment_path(dir, id);
    let file = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| Error::io(&path, e))?;
    let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
    if sync_dir_after {
        sync_dir(dir)?;
    }
    Ok(Arc::new(Segment {
        id,
        path,
        file,
        written: AtomicU64::new(len),
        appended: AtomicU64::new(len),
        deferred: Mutex::new(Vec::new()),
        spare: Mutex::new(Vec::new()),
        synced: Mutex::new(len),
        synced_cv: Condvar::new(),
        syncs: syncs.clone(),
        failed: AtomicBool::new(false),
    }))
}

impl Wal {
    /// Opens (creating if needed) segment `id` in `dir` for appending.
    pub fn open(dir: &Path, id: u64, policy: WalSync, group_commit_interval_us: u64) -> Result<Wal> {
        let syncs = Arc::new(AtomicU64::new(0));
        let seg = open_segment(dir, id, policy != WalSync::None, &syncs)?;
        let current = Arc::new(Mutex::new(seg.clone()));
        let committer = if policy == WalSync::GroupCommit {
            let stop = Arc::new(AtomicBool::new(false));
            let (stop2, cur2) = (stop.clone(), current.clone());
            let every = Duration::from_micros(group_commit_interval_us);
            let h = std::thread::Builder::new()
                .name("cosine-wal-sync".into())
                .spawn(move || {
                    while !stop2.load(Ordering::Acquire) {
                        // (parked, not asleep: stopping unparks it instead of waiting out the interval)
                        let slept = std::time::Instant::now();
                        while slept.elapsed() < every && !stop2.load(Ordering::Acquire) {
                            std::thread::park_timeout(every.saturating_sub(slept.elapsed()));
                        }
                        let s = cur2.lock().clone();
                        let end = s.appended.load(Ordering::Acquire);
                        // A failed sync marks the segment; the next append is refused. (Skipping
                        // this tick when another thread synced since the last one saved a SET
                        // server ~13 % of its fdatasyncs, but left bytes appended after that sync
                        // for the next tick: up to two intervals, past the loss window the
                        // contract states, docs/engine-contract.md. Not done.)
                        let _ = s.sync_upto(end);
                    }
                })
                .map_err(|e| Error::io(dir, e))?;
            Some((stop, h))
        } else {
            None
        };
        Ok(Wal {
            dir: dir.to_path_buf(),
            policy,
            seg,
            pending: Vec::new(),
            bytes_total: Arc::new(AtomicU64::new(0)),
            current,
            committer,
            poisoned: None,
            closed: false,
            group_commit_interval: Duration::from_micros(group_commit_interval_us),
            syncs,
            defer: false,
        })
    }

    /// Id of the segment being appended to.
    pub fn segment_id(&self) -> u64 {
        self.seg.id
    }

    /// Total bytes appended since this handle was opened (shared counter, readable without the writer).
    pub fn bytes_total(&self) -> Arc<AtomicU64> {
        self.bytes_total.clone()
    }

    /// fdatasync calls made on this log since it was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// The shared counter behind [`Wal::syncs`] (readable without the writer).
    pub fn sync_counter(&self) -> Arc<AtomicU64> {
        self.syncs.clone()
    }

    /// Under `group_commit` or `every_write`, keeps later appends in the process until the
    /// next sync (the group-commit thread's, a [`DurableMark`]'s, [`Wal::sync`]'s), which hands
    /// them to the OS in one write: one write system call per sync instead of one per write
    /// group, and under `every_write` no sync in the append's path: the caller's mark syncs,
    /// so the writes of concurrent callers share one fdatasync, as Redis' `appendfsync always`
    /// shares one per event-loop pass. For a caller that acknowledges a write only after a
    /// mark taken after it returned (a server): a crash of the process then loses only
    /// unacknowledged writes. A no-op under `none`.
    pub fn defer_writes(&mut self) {
        self.defer = self.policy != WalSync::None;
    }

    /// Whether [`Wal::defer_writes`] is on.
    pub fn defers_writes(&self) -> bool {
        self.defer
    }

    /// A mark at the current end of the log whose [`DurableMark::wait`] returns once a sync
    /// has covered every record appended so far: under `group_commit`, and under a deferred
    /// `every_write` (its appends' tickets wait for nothing then). `None` for `every_write`
    /// writing through (each append's ticket already waited for its sync) and for `none` (the
    /// policy makes no durability promise).
    pub fn durable_mark(&self) -> Option<DurableMark> {
        (self.policy == WalSync::GroupCommit || (self.policy == WalSync::EveryWrite && self.defer)).then(|| DurableMark {
            seg: self.seg.clone(),
            end: self.seg.appended.load(Ordering::Acquire),
            interval: self.group_commit_interval,
            ticking: self.committer.is_some(),
        })
    }

    /// Bytes in the segment being appended to (whole records handed to the OS; `none` mode's
    /// buffer and deferred records excluded: [`Wal::sync`] first for all of them).
    pub fn segment_len(&self) -> u64 {
        self.seg.written.load(Ordering::Acquire)
    }

    /// `Err(Poisoned)` once an append or sync has failed, `Err(Closed)` after [`Wal::close`].
    pub fn check(&mut self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("the write-ahead log is closed".into()));
        }
        if self.poisoned.is_none() && self.seg.failed.load(Ordering::Acquire) {
            self.poisoned = Some(format!("a write or fdatasync of {} failed", self.seg.path.display()));
        }
        match &self.poisoned {
            Some(m) => Err(Error::Poisoned(m.clone())),
            None => Ok(()),
        }
    }

    /// Refuses every later append: something the log depends on (the manifest entry
    /// of a new segment) could not be made durable.
    pub fn poison(&mut self, why: String) {
        self.poisoned.get_or_insert(why);
    }

    /// Appends one record. With `every_write`, call [`SyncTicket::wait`] before acknowledging.
    pub fn append(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<SyncTicket> {
        self.append_encoded(&encode_record(key, value))
    }

    /// Appends a batch of encoded records ([`encode_into`]) in one write: a write group.
    /// With `every_write`, call [`SyncTicket::wait`] before acknowledging any of them.
    pub fn append_encoded(&mut self, records: &[u8]) -> Result<SyncTicket> {
        self.check()?;
        self.bytes_total.fetch_add(records.len() as u64, Ordering::Relaxed);
        if self.policy == WalSync::None {
            // Buffered in the process: cheapest, lost if the process dies before a flush.
            self.pending.extend_from_slice(records);
            if self.pending.len() >= PENDING_LIMIT {
                self.flush_pending()?;
            }
            return Ok(SyncTicket { seg: None });
        }
        if self.defer {
            // (the segment's lock orders this with a sync taking the records; appended moves after)
            self.seg.deferred.lock().extend_from_slice(records);
            self.seg.appended.fetch_add(records.len() as u64, Ordering::AcqRel);
            return Ok(SyncTicket { seg: None });
        }
        let end = self.write_out(records)?;
        Ok(SyncTicket { seg: (self.policy == WalSync::EveryWrite).then(|| (self.seg.clone(), end)) })
    }

    // Hands `bytes` to the OS; on failure cuts the segment back to its last whole
    // record and poisons the writer. Returns the segment length afterwards.
    fn write_out(&mut self, bytes: &[u8]) -> Result<u64> {
        let start = self.seg.written.load(Ordering::Acquire);
        if let Err(e) = cosine_core::fault::write_all(&self.seg.file, &self.seg.path, bytes) {
            let rollback = self.seg.file.set_len(start).and_then(|_| self.seg.file.sync_all());
            let path = self.seg.path.display();
            self.poisoned = Some(match rollback {
                Ok(()) => format!("append to {path} failed ({e}); rolled back to byte {start}"),
                Err(r) => format!("append to {path} failed ({e}); rolling back to byte {start} failed too ({r})"),
            });
            return Err(Error::io(&self.seg.path, e));
        }
        self.seg.appended.fetch_add(bytes.len() as u64, Ordering::AcqRel);
        Ok(self.seg.written.fetch_add(bytes.len() as u64, Ordering::AcqRel) + bytes.len() as u64)
    }

    fn flush_pending(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            let bytes = std::mem::take(&mut self.pending);
            self.write_out(&bytes)?;
        }
        Ok(())
    }

    /// Pushes buffered records to the OS and, unless the policy is `none`, to stable storage.
    pub fn sync(&mut self) -> Result<()> {
        self.check()?;
        self.flush_pending()?;
        if self.policy != WalSync::None {
            let end = self.seg.appended.load(Ordering::Acquire);
            self.seg.sync_upto(end)?;
        }
        Ok(())
    }

    /// Seals the current segment (synced per policy) and starts segment `new_id`.
    /// Returns the sealed segment's id and final length.
    pub fn rotate(&mut self, new_id: u64) -> Result<(u64, u64)> {
        self.sync()?;
        let sealed = (self.seg.id, self.segment_len());
        let seg = match open_segment(&self.dir, new_id, self.policy != WalSync::None, &self.syncs) {
            Ok(s) => s,
            Err(e) => {
                self.poisoned = Some(format!("cannot start WAL segment {new_id}: {e}"));
                return Err(e);
            }
        };
        *self.current.lock() = seg.clone();
        self.seg = seg;
        Ok(sealed)
    }

    /// Flushes and stops the group-commit thread; reports an earlier failure.
    /// Returns the final (sealed) length of the segment; later appends are refused.
    pub fn close(&mut self) -> Result<u64> {
        let r = self.sync();
        self.stop_committer();
        self.closed = true;
        r.map(|_| self.segment_len())
    }

    fn stop_committer(&mut self) {
        if let Some((stop, h)) = self.committer.take() {
            stop.store(true, Ordering::Release);
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop_committer();
    }
}

/// Replays segment `path` alone under the default mode (tests and tools);
/// the engine replays all live segments together with [`recover`].
pub fn replay(dir: &Path, id: u64, apply: impl FnMut(Vec<u8>, Option<Vec<u8>>)) -> Result<RecoveryReport> {
    recover(dir, &[SegmentRef { id, expected: true, sealed: None }], WalRecovery::TolerateCorruptedTail, apply)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use record::HEADER;

    /// A fresh scratch directory for this crate's unit tests (in `$TMPDIR`), removed
    /// when it is dropped, also when the test panics.
    pub(crate) fn tmpdir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("cosine-wal-{name}-")).tempdir().expect("scratch directory")
    }

    type Records = Vec<(Vec<u8>, Option<Vec<u8>>)>;

    fn collect(dir: &Path, id: u64) -> Result<(Records, RecoveryReport)> {
        let mut v = Vec::new();
        let r = replay(dir, id, |k, val| v.push((k, val)))?;
        Ok((v, r))
    }

    #[test]
    fn roundtrip_all_policies() {
        for (i, p) in [WalSync::EveryWrite, WalSync::GroupCommit, WalSync::None].into_iter().enumerate() {
            let tmp = tmpdir(&format!("rt{i}"));
            let d = tmp.path();
            let mut w = Wal::open(d, 1, p, 200).expect("open");
            for j in 0..100u32 {
                let t = w.append(&j.to_be_bytes(), if j % 7 == 0 { None } else { Some(b"value") }).expect("append");
                t.wait().expect("sync");
            }
            let mut batch = Vec::new();
            encode_into(&mut batch, b"g1", Some(b"x"));
            encode_into(&mut batch, b"g2", None);
            assert_eq!(batch.len(), encoded_len(b"g1", Some(b"x")) + encoded_len(b"g2", None));
            w.append_encoded(&batch).expect("group").wait().expect("sync");
            w.close().expect("close");
            let (v, r) = collect(d, 1).expect("replay");
            assert_eq!(v.len(), 102);
            assert_eq!(r.torn_bytes, 0);
            assert_eq!(v[7].1, None);
            assert_eq!(v[8].1.as_deref(), Some(&b"value"[..]));
            assert_eq!(v[101], (b"g2".to_vec(), None));
        }
    }

    #[test]
    fn group_commit_mark_waits_for_the_committer_sync() {
        let tmp = tmpdir("mark");
        let d = tmp.path();
        let mut w = Wal::open(d, 1, WalSync::GroupCommit, 500).expect("open");
        assert!(w.durable_mark().is_some());
        w.append(b"k", Some(b"v")).expect("append").wait().expect("no-op ticket");
        let before = w.syncs();
        let mark = w.durable_mark().expect("mark");
        mark.wait().expect("durable");
        assert!(w.syncs() > before, "the mark returned before any sync");
        assert_eq!(*w.seg.synced.lock(), w.seg.written.load(Ordering::Acquire));
        w.close().expect("close");
        for p in [WalSync::EveryWrite, WalSync::None] {
            let tmp = tmpdir(&format!("mark-{p:?}"));
            let d = tmp.path();
            assert!(Wal::open(d, 1, p, 500).expect("open").durable_mark().is_none());
        }
    }

    #[test]
    fn a_mark_synced_now_covers_every_earlier_mark_without_the_committer() {
        let tmp = tmpdir("mark-sync");
        let mut w = Wal::open(tmp.path(), 1, WalSync::GroupCommit, 60_000_000).expect("open"); // no tick in the test
        w.append(b"a", Some(b"1")).expect("append");
        let first = w.durable_mark().expect("mark");
        w.append(b"b", Some(b"2")).expect("append");
        let second = w.durable_mark().expect("mark");
        let before = w.syncs();
        second.sync().expect("synced");
        assert_eq!(w.syncs(), before + 1, "one fdatasync");
        assert_eq!(*w.seg.synced.lock(), w.seg.written.load(Ordering::Acquire));
        let t = std::time::Instant::now();
        first.sync().expect("already covered");
        assert_eq!(w.syncs(), before + 1, "a covered mark syncs nothing");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        w.close().expect("close");
    }

    #[test]
    fn torn_tail_is_truncated_and_any_other_damage_is_an_error() {
        let tmp = tmpdir("torn");
        let d = tmp.path();
        let mut w = Wal::open(d, 3, WalSync::EveryWrite, 1000).expect("open");
        for j in 0..10u32 {
            w.append(&j.to_be_bytes(), Some(b"abcdef")).expect("append").wait().expect("sync");
        }
        w.close().expect("close");
        let p = segment_path(d, 3);
        let full = std::fs::read(&p).expect("read");
        let rec = full.len() / 10;
        // Cut the last record in half: replay keeps 9 and truncates.
        std::fs::write(&p, &full[..full.len() - rec / 2]).expect("write");
        let (v, r) = collect(d, 3).expect("replay");
        assert_eq!(v.len(), 9);
        assert!(r.torn_bytes > 0);
        assert_eq!(std::fs::metadata(&p).expect("meta").len() as usize, 9 * rec);
        // Flip a byte in record 4: an error at its offset, and the file is untouched.
        let mut bad = full.clone();
        bad[4 * rec + HEADER + 2] ^= 0x40;
        std::fs::write(&p, &bad).expect("write");
        let e = collect(d, 3).expect_err("corrupt");
        assert!(matches!(e, Error::CorruptAt { offset, .. } if offset == 4 * rec as u64), "{e}");
        assert_eq!(std::fs::read(&p).expect("read"), bad);
        // A flipped payload byte in the last record is damage too: the record was written whole.
        let mut last = full.clone();
        let n = last.len();
        last[n - 2] ^= 0x40;
        std::fs::write(&p, &last).expect("write");
        assert!(collect(d, 3).expect_err("corrupt last record").is_corruption());
        // So is a length flip in the last record that makes it run past the end.
        let mut len_flip = full.clone();
        len_flip[9 * rec + 1] ^= 0x01;
        std::fs::write(&p, &len_flip).expect("write");
        assert!(collect(d, 3).expect_err("damaged length").is_corruption());
    }

    #[test]
    fn injected_full_disk_rolls_back_and_poisons() {
        let tmp = tmpdir("enospc");
        let d = tmp.path();
        let mut w = Wal::open(d, 1, WalSync::EveryWrite, 1000).expect("open");
        w.append(b"a", Some(b"1")).expect("append").wait().expect("sync");
        let good = std::fs::metadata(segment_path(d, 1)).expect("meta").len();
        cosine_core::fault::fail_writes_after(d, 5);
        assert!(w.append(b"b", Some(b"2")).is_err(), "the full disk fails the append");
        cosine_core::fault::clear(d);
        assert_eq!(std::fs::metadata(segment_path(d, 1)).expect("meta").len(), good, "partial record rolled back");
        assert!(matches!(w.append(b"c", Some(b"3")), Err(Error::Poisoned(_))), "nothing more is acknowledged");
        assert!(w.close().is_err());
        assert_eq!(collect(d, 1).expect("replay").0, vec![(b"a".to_vec(), Some(b"1".to_vec()))]);
    }

    #[test]
    fn deferred_appends_reach_the_file_at_the_sync_that_covers_them() {
        let tmp = tmpdir("defer");
        let d = tmp.path();
        let mut w = Wal::open(d, 1, WalSync::GroupCommit, 60_000_000).expect("open"); // no tick in the test
        w.defer_writes();
        let len = || std::fs::metadata(segment_path(d, 1)).expect("meta").len();
        let writes = |w: &mut Wal, from: u32| {
            for j in from..from + 10 {
                w.append(&j.to_be_bytes(), Some(b"value")).expect("append").wait().expect("no-op ticket");
            }
        };
        writes(&mut w, 0);
        assert_eq!(len(), 0, "deferred: nothing handed to the OS before a sync");
        let mark = w.durable_mark().expect("mark");
        writes(&mut w, 10); // appended after the mark: the sync takes them too
        let before = w.syncs();
        mark.sync().expect("durable");
        assert_eq!(w.syncs(), before + 1, "one fdatasync");
        let all = 20 * encoded_len(&0u32.to_be_bytes(), Some(b"value")) as u64;
        assert_eq!(len(), all, "every deferred record in one write before the sync");
        assert_eq!(*w.seg.synced.lock(), all);
        // the written buffer is kept, emptied, and the next sync's appends go into it
        let kept = w.seg.spare.lock().capacity();
        assert!(kept >= all as usize && w.seg.spare.lock().is_empty(), "the spare keeps its capacity");
        writes(&mut w, 20);
        w.durable_mark().expect("mark").sync().expect("durable");
        assert_eq!(len(), all * 3 / 2, "the next ten records, after the first twenty");
        assert!(w.seg.deferred.lock().capacity() >= kept, "the kept buffer takes the next appends");
        w.close().expect("close syncs the rest");
        let (v, r) = collect(d, 1).expect("replay");
        assert_eq!(r.torn_bytes, 0);
        let keys: Vec<u32> = v.iter().map(|(k, _)| u32::from_be_bytes([k[0], k[1], k[2], k[3]])).collect();
        assert_eq!(keys, (0..30).collect::<Vec<_>>(), "in append order");
        // `none` writes through (into its own buffer) and has no mark
        let tmp = tmpdir("defer-none");
        let mut w = Wal::open(tmp.path(), 1, WalSync::None, 1000).expect("open");
        w.defer_writes();
        assert!(!w.defers_writes() && w.durable_mark().is_none(), "none: no deferral, no mark");
    }

    #[test]
    fn deferred_every_write_appends_wait_for_the_mark_that_syncs_them() {
        let tmp = tmpdir("defer-every");
        let d = tmp.path();
        let mut w = Wal::open(d, 1, WalSync::EveryWrite, 1000).expect("open");
        assert!(w.durable_mark().is_none(), "writing through, each ticket syncs: no mark");
        w.defer_writes();
        let len = || std::fs::metadata(segment_path(d, 1)).expect("meta").len();
        let before = w.syncs();
        for j in 0u32..10 {
            w.append(&j.to_be_bytes(), Some(b"value")).expect("append").wait().expect("no-op ticket");
        }
        assert_eq!((len(), w.syncs()), (0, before), "deferred: no write, no sync in the append's path");
        let marks: Vec<DurableMark> = (0..3).map(|_| w.durable_mark().expect("mark")).collect();
        let t0 = std::time::Instant::now();
        for m in marks {
            m.wait().expect("durable"); // no group-commit thread: the first wait syncs at once
        }
        assert!(t0.elapsed() < Duration::from_millis(500), "no waiting for a tick");
        assert_eq!(w.syncs(), before + 1, "the marks share one fdatasync");
        assert_eq!(len(), 10 * encoded_len(&0u32.to_be_bytes(), Some(b"value")) as u64);
        w.close().expect("close");
        assert_eq!(collect(d, 1).expect("replay").0.len(), 10);
    }

    #[test]
    fn a_failed_deferred_write_fails_its_mark_rolls_back_and_poisons() {
        let tmp = tmpdir("defer-enospc");
        let d = tmp.path();
        let mut w = Wal::open(d, 1, WalSync::GroupCommit, 60_000_000).expect("open");
        w.defer_writes();
        w.append(b"a", Some(b"1")).expect("append");
        w.durable_mark().expect("mark").sync().expect("durable");
        let good = std::fs::metadata(segment_path(d, 1)).expect("meta").len();
        w.append(b"b", Some(b"2")).expect("deferred: the append itself writes nothing");
        let mark = w.durable_mark().expect("mark");
        cosine_core::fault::fail_writes_after(d, 5);
        assert!(mark.sync().is_err(), "the full disk fails the mark covering the write");
        cosine_core::fault::clear(d);
        assert_eq!(std::fs::metadata(segment_path(d, 1)).expect("meta").len(), good, "partial record rolled back");
        assert!(w.durable_mark().expect("mark").sync().is_err(), "no later mark is answered Ok");
        assert!(matches!(w.append(b"c", Some(b"3")), Err(Error::Poisoned(_))), "nothing more is acknowledged");
        assert!(w.close().is_err());
        assert_eq!(collect(d, 1).expect("replay").0, vec![(b"a".to_vec(), Some(b"1".to_vec()))]);
    }
}
