//! Write-ahead log: every write is appended here before it enters the memtable.
//!
//! Record layout: `[len u32][crc32 u32][payload]`, payload `kind u8, key, value`.
//! One segment file (`NNNNNNNN.wal`) backs each memtable; a segment is deleted
//! once its memtable is flushed and the manifest no longer needs it.
//!
//! Replay stops at a torn tail (a crash during the last append: a short header,
//! a record running past the end of file, or a bad checksum followed only by
//! zeros) and truncates it; a bad checksum with valid-looking data after it is
//! corruption in the middle of the log and is reported as an error.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::WalSync;
use cosine_core::{crc32, Decoder, Encoder, Error, Result, Value};
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
const HEADER: usize = 8;

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
    /// Bytes handed to the OS so far.
    written: AtomicU64,
    /// Bytes known durable; the mutex also serialises fdatasync calls.
    synced: Mutex<u64>,
    /// Signalled whenever `synced` advances (group-commit waiters, [`DurableMark`]).
    synced_cv: Condvar,
    /// fdatasync calls made on any segment of this log.
    syncs: Arc<AtomicU64>,
}

impl Segment {
    /// Makes everything written so far durable (one fdatasync shared by all waiters).
    pub fn sync_upto(&self, end: u64) -> Result<()> {
        let mut synced = self.synced.lock();
        if *synced >= end {
            return Ok(()); // another writer's sync already covered us
        }
        let target = self.written.load(Ordering::Acquire);
        self.file.sync_data().map_err(|e| Error::io(&self.path, e))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        *synced = target;
        self.synced_cv.notify_all();
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
}

impl DurableMark {
    /// Blocks until the group commit covering the mark has happened. If no sync comes
    /// within a few intervals (the committer stopped, or its sync failed), syncs itself.
    pub fn wait(self) -> Result<()> {
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
}

/// A promise that a record becomes durable once [`SyncTicket::wait`] returns.
#[derive(Debug)]
pub struct SyncTicket {
    seg: Option<(Arc<Segment>, u64)>,
}

impl SyncTicket {
    /// Blocks until the record is on stable storage (no-op unless `wal_sync = every_write`).
    pub fn wait(self) -> Result<()> {
        match self.seg {
            Some((s, end)) => s.sync_upto(end),
            None => Ok(()),
        }
    }
}

/// The appending side of the log; owned by the engine's writer lock.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    policy: WalSync,
    seg: Arc<Segment>,
    pending: Vec<u8>,
    bytes_total: u64,
    current: Arc<Mutex<Arc<Segment>>>,
    committer: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    group_commit_interval: Duration,
    syncs: Arc<AtomicU64>,
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
        synced: Mutex::new(len),
        synced_cv: Condvar::new(),
        syncs: syncs.clone(),
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
                        std::thread::sleep(every);
                        let s = cur2.lock().clone();
                        let end = s.written.load(Ordering::Acquire);
                        // A failed background sync resurfaces on the next rotation or close.
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
            bytes_total: 0,
            current,
            committer,
            group_commit_interval: Duration::from_micros(group_commit_interval_us),
            syncs,
        })
    }

    /// Id of the segment being appended to.
    pub fn segment_id(&self) -> u64 {
        self.seg.id
    }

    /// Total bytes appended since this handle was opened.
    pub fn bytes_total(&self) -> u64 {
        self.bytes_total
    }

    /// fdatasync calls made on this log since it was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Under `group_commit`, a mark at the current end of the log whose
    /// [`DurableMark::wait`] returns once the group commit has synced every record
    /// appended so far. `None` for `every_write` (each append's ticket already waited
    /// for its sync) and for `none` (the policy makes no durability promise).
    pub fn durable_mark(&self) -> Option<DurableMark> {
        (self.policy == WalSync::GroupCommit).then(|| DurableMark {
            seg: self.seg.clone(),
            end: self.seg.written.load(Ordering::Acquire),
            interval: self.group_commit_interval,
        })
    }

    /// Appends one record. With `every_write`, call [`SyncTicket::wait`] before acknowledging.
    pub fn append(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<SyncTicket> {
        let rec = encode_record(key, value);
        self.bytes_total += rec.len() as u64;
        if self.policy == WalSync::None {
            // Buffered in the process: cheapest, lost if the process dies before a flush.
            self.pending.extend_from_slice(&rec);
            if self.pending.len() >= 64 << 10 {
                self.flush_pending()?;
            }
            return Ok(SyncTicket { seg: None });
        }
        (&self.seg.file).write_all(&rec).map_err(|e| Error::io(&self.seg.path, e))?;
        let end = self.seg.written.fetch_add(rec.len() as u64, Ordering::AcqRel) + rec.len() as u64;
        Ok(SyncTicket { seg: (self.policy == WalSync::EveryWrite).then(|| (self.seg.clone(), end)) })
    }

    fn flush_pending(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            (&self.seg.file).write_all(&self.pending).map_err(|e| Error::io(&self.seg.path, e))?;
            self.seg.written.fetch_add(self.pending.len() as u64, Ordering::AcqRel);
            self.pending.clear();
        }
        Ok(())
    }

    /// Pushes buffered records to the OS and, unless the policy is `none`, to stable storage.
    pub fn sync(&mut self) -> Result<()> {
        self.flush_pending()?;
        if self.policy != WalSync::None {
            let end = self.seg.written.load(Ordering::Acquire);
            self.seg.sync_upto(end)?;
        }
        Ok(())
    }

    /// Seals the current segment (synced per policy) and starts segment `new_id`.
    pub fn rotate(&mut self, new_id: u64) -> Result<()> {
        self.sync()?;
        let seg = open_segment(&self.dir, new_id, self.policy != WalSync::None, &self.syncs)?;
        *self.current.lock() = seg.clone();
        self.seg = seg;
        Ok(())
    }

    /// Flushes and stops the group-commit thread.
    pub fn close(&mut self) -> Result<()> {
        self.sync()?;
        if let Some((stop, h)) = self.committer.take() {
            stop.store(true, Ordering::Release);
            let _ = h.join();
        }
        Ok(())
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Some((stop, h)) = self.committer.take() {
            stop.store(true, Ordering::Release);
            let _ = h.join();
        }
    }
}

/// Encodes one record (header + payload).
pub fn encode_record(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut p = Encoder::with_capacity(key.len() + value.map_or(0, |v| v.len()) + 9);
    p.u8(if value.is_some() { KIND_PUT } else { KIND_DELETE });
    p.len_bytes(key);
    if let Some(v) = value {
        p.len_bytes(v);
    }
    let payload = p.finish();
    let mut out = Vec::with_capacity(payload.len() + HEADER);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// What replaying a segment found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReplayReport {
    /// Records applied.
    pub records: u64,
    /// Bytes cut off a torn tail (0 when the segment ended cleanly).
    pub truncated_bytes: u64,
}

/// Replays segment file `path`, calling `apply(key, value)` for each intact record in order.
///
/// A torn tail is truncated (and the truncation made durable); corruption before the
/// tail is returned as [`Error::Corruption`] and nothing after it is applied.
pub fn replay(path: &Path, mut apply: impl FnMut(Vec<u8>, Value)) -> Result<ReplayReport> {
    let data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let mut pos = 0usize;
    let mut report = ReplayReport::default();
    let all_zero = |s: &[u8]| s.iter().all(|b| *b == 0);
    while pos < data.len() {
        let rest = &data[pos..];
        if rest.len() < HEADER || all_zero(rest) {
            break; // torn header or zero-filled tail
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if HEADER + len > rest.len() {
            break; // record runs past end of file: torn append
        }
        let payload = &rest[HEADER..HEADER + len];
        if crc32(payload) != crc {
            if all_zero(&rest[HEADER + len..]) {
                break; // last record half-written
            }
            return Err(Error::corruption(format!(
                "WAL {}: record at byte {pos} fails its checksum and is followed by more records",
                path.display()
            )));
        }
        let mut d = Decoder::new(payload, "WAL record");
        let kind = d.u8()?;
        let key = d.len_bytes()?.to_vec();
        let value = match kind {
            KIND_PUT => Some(d.len_bytes()?.to_vec()),
            KIND_DELETE => None,
            k => return Err(Error::corruption(format!("WAL {}: unknown record kind {k} at byte {pos}", path.display()))),
        };
        apply(key, value);
        report.records += 1;
        pos += HEADER + len;
    }
    if pos < data.len() {
        report.truncated_bytes = (data.len() - pos) as u64;
        let f = OpenOptions::new().write(true).open(path).map_err(|e| Error::io(path, e))?;
        f.set_len(pos as u64).map_err(|e| Error::io(path, e))?;
        f.sync_all().map_err(|e| Error::io(path, e))?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cosine-wal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    type Records = Vec<(Vec<u8>, Value)>;

    fn collect(path: &Path) -> Result<(Records, ReplayReport)> {
        let mut v = Vec::new();
        let r = replay(path, |k, val| v.push((k, val)))?;
        Ok((v, r))
    }

    #[test]
    fn roundtrip_all_policies() {
        for (i, p) in [WalSync::EveryWrite, WalSync::GroupCommit, WalSync::None].into_iter().enumerate() {
            let d = tmpdir(&format!("rt{i}"));
            let mut w = Wal::open(&d, 1, p, 200).expect("open");
            for j in 0..100u32 {
                let t = w.append(&j.to_be_bytes(), if j % 7 == 0 { None } else { Some(b"value") }).expect("append");
                t.wait().expect("sync");
            }
            w.close().expect("close");
            let (v, r) = collect(&segment_path(&d, 1)).expect("replay");
            assert_eq!(v.len(), 100);
            assert_eq!(r.truncated_bytes, 0);
            assert_eq!(v[7].1, None);
            assert_eq!(v[8].1.as_deref(), Some(&b"value"[..]));
        }
    }

    #[test]
    fn group_commit_mark_waits_for_the_committer_sync() {
        let d = tmpdir("mark");
        let mut w = Wal::open(&d, 1, WalSync::GroupCommit, 500).expect("open");
        assert!(w.durable_mark().is_some());
        w.append(b"k", Some(b"v")).expect("append").wait().expect("no-op ticket");
        let before = w.syncs();
        let mark = w.durable_mark().expect("mark");
        mark.wait().expect("durable");
        assert!(w.syncs() > before, "the mark returned before any sync");
        assert_eq!(*w.seg.synced.lock(), w.seg.written.load(Ordering::Acquire));
        w.close().expect("close");
        for p in [WalSync::EveryWrite, WalSync::None] {
            let d = tmpdir(&format!("mark-{p:?}"));
            assert!(Wal::open(&d, 1, p, 500).expect("open").durable_mark().is_none());
        }
    }

    #[test]
    fn torn_tail_is_truncated_and_middle_corruption_is_an_error() {
        let d = tmpdir("torn");
        let mut w = Wal::open(&d, 3, WalSync::EveryWrite, 1000).expect("open");
        for j in 0..10u32 {
            w.append(&j.to_be_bytes(), Some(b"abcdef")).expect("append").wait().expect("sync");
        }
        w.close().expect("close");
        let p = segment_path(&d, 3);
        let full = std::fs::read(&p).expect("read");
        let rec = full.len() / 10;
        // Cut the last record in half: replay keeps 9 and truncates.
        std::fs::write(&p, &full[..full.len() - rec / 2]).expect("write");
        let (v, r) = collect(&p).expect("replay");
        assert_eq!(v.len(), 9);
        assert!(r.truncated_bytes > 0);
        assert_eq!(std::fs::metadata(&p).expect("meta").len() as usize, 9 * rec);
        // Flip a byte in record 4: an error, not silent loss.
        let mut bad = full.clone();
        bad[4 * rec + HEADER + 2] ^= 0x40;
        std::fs::write(&p, &bad).expect("write");
        assert!(collect(&p).expect_err("corrupt").is_corruption());
        // Flip a byte in the last record: treated as a torn tail.
        let mut last = full.clone();
        let n = last.len();
        last[n - 2] ^= 0x40;
        std::fs::write(&p, &last).expect("write");
        assert_eq!(collect(&p).expect("replay").0.len(), 9);
    }
}
