//! The Raft log on disk: the shard's write-ahead log.
//!
//! Files in the log directory:
//! * `NNNNNNNNNNNNNNNNNNNN.rlog`: segments named by the index of their first entry, each a
//!   sequence of records `[len u32][crc32 u32][payload]` (little-endian; the CRC covers the
//!   payload, a bincode [`Entry`]); a new segment starts past [`SEGMENT_BYTES`];
//! * `vote`, `committed`, `purged`: one record each, replaced atomically (temporary file,
//!   rename, directory fsync); `vote` and `purged` are fsynced first, `committed` is not
//!   (openraft re-learns it from the leader).
//!
//! **When an append is durable** (the callback openraft waits for before it counts this
//! replica's copy towards a majority, and before a follower answers the leader) follows the
//! design's `wal_sync` ([`LogSync`]):
//! * `every_write`: after the fdatasync of the segment, done by the syncer thread for every
//!   append (appends waiting while a sync runs share the next one);
//! * `group_commit`: the same syncs, at most one per `group_commit_interval_us` (the
//!   engine's group commit: fewer syncs, each append waits up to one interval longer);
//! * `none`: once the records reach the OS (a crash of the process loses nothing; a crash
//!   of the machine may lose the tail, and with it what this replica promised the leader).
//!
//! Appends are written with `pwrite` at the segment's end while the log's lock is held, so
//! they are readable (by the replication tasks, through [`RaftLogReader`]) when `append`
//! returns, before they are durable. The most recent [`CACHE_ENTRIES`] entries are also
//! kept decoded in memory; older ones are read back from the segments.
//!
//! **Recovery** at open reads every segment in order. The tail of the last segment may be
//! torn by a crash in the middle of an append (a short header, a record running past the
//! end of the file, zeros): it is cut off. Any other damage (a complete record failing its
//! CRC, a hole in the indexes) refuses the open. Entries up to `purged` are skipped.
//! **Purge** (after a snapshot) deletes the segments whose entries are all purged;
//! **truncate** (a conflicting suffix from an old leader) cuts the segment holding the
//! first removed entry and deletes the later ones.

use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogId, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// A segment takes appends until it holds this many bytes.
pub const SEGMENT_BYTES: u64 = 16 << 20;
/// Recent entries kept decoded in memory.
pub const CACHE_ENTRIES: usize = 8192;
const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "purged";
const SEGMENT_EXT: &str = "rlog";
const HEADER: usize = 8;

/// When an appended entry counts as durable (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogSync {
    /// fdatasync before the append is acknowledged.
    EveryWrite,
    /// fdatasync, at most once per interval.
    GroupCommit(Duration),
    /// Written to the OS, never synced.
    None,
}

impl LogSync {
    /// The policy of a design's `[durability]`.
    pub fn of(d: &cosine_config::DurabilitySection) -> LogSync {
        match d.wal_sync {
            cosine_config::WalSync::EveryWrite => LogSync::EveryWrite,
            cosine_config::WalSync::GroupCommit => LogSync::GroupCommit(Duration::from_micros(d.group_commit_interval_us)),
            cosine_config::WalSync::None => LogSync::None,
        }
    }
}

/// Where an entry is.
#[derive(Debug, Clone, Copy)]
struct Loc {
    seg: u64,
    offset: u64,
    len: u32,
    log_id: LogId,
}

#[derive(Debug)]
struct Segment {
    path: PathBuf,
    file: Arc<File>,
    len: u64,
}

#[derive(Debug, Default)]
struct State {
    /// Segments by the index of their first entry.
    segs: BTreeMap<u64, Segment>,
    /// The entries present, from index `base` on.
    locs: VecDeque<Loc>,
    base: u64,
    cache: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

impl State {
    fn last_log_id(&self) -> Option<LogId> {
        self.locs.back().map(|l| l.log_id).or(self.last_purged)
    }
    fn next_index(&self) -> u64 {
        self.base + self.locs.len() as u64
    }
}

struct SyncJob {
    files: Vec<Arc<File>>,
    callback: LogFlushed<TypeConfig>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    policy: LogSync,
    state: Mutex<State>,
    syncer: Mutex<Option<mpsc::Sender<SyncJob>>>,
    syncs: Arc<AtomicU64>,
}

/// The durable Raft log of one replica (cheap to clone: the clones are its readers).
#[derive(Debug, Clone)]
pub struct LogStore {
    inner: Arc<Inner>,
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.{SEGMENT_EXT}"))
}

fn encode_record(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// A record at `buf[pos..]`: `Ok(Some((payload, next)))`, `Ok(None)` for a torn tail, `Err` for damage.
fn decode_record(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, String> {
    let rest = &buf[pos..];
    if rest.len() < HEADER {
        return Ok(None);
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    if rest.iter().all(|b| *b == 0) {
        return Ok(None); // a zero-filled tail
    }
    if HEADER + len > rest.len() {
        return Ok(None);
    }
    let payload = &rest[HEADER..HEADER + len];
    if crc32fast::hash(payload) != crc {
        return Err(format!("record at byte {pos} fails its checksum"));
    }
    Ok(Some((payload, pos + HEADER + len)))
}

fn write_io(e: &io::Error) -> StorageError {
    StorageIOError::write_logs(e).into()
}

fn read_io(e: &(impl std::error::Error + 'static)) -> StorageError {
    StorageIOError::read_logs(e).into()
}

fn damage(msg: String) -> StorageError {
    StorageIOError::read_logs(&io::Error::new(io::ErrorKind::InvalidData, msg)).into()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with one record of `value` (fsynced first when `durable`).
fn write_small<T: Serialize>(dir: &Path, name: &str, value: &T, durable: bool) -> io::Result<()> {
    let payload = bincode::serialize(value).map_err(io::Error::other)?;
    let mut rec = Vec::with_capacity(payload.len() + HEADER);
    encode_record(&payload, &mut rec);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(&rec)?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    std::fs::rename(&tmp, dir.join(name))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

fn read_small<T: DeserializeOwned>(dir: &Path, name: &str) -> Result<Option<T>, String> {
    let path = dir.join(name);
    let buf = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    match decode_record(&buf, 0) {
        Ok(Some((payload, _))) => bincode::deserialize(payload).map(Some).map_err(|e| format!("{}: {e}", path.display())),
        Ok(None) => Err(format!("{}: truncated", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

impl LogStore {
    /// Opens (creating) the log in `dir` (see the module doc for the recovery rules).
    pub fn open(dir: &Path, policy: LogSync) -> Result<LogStore, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| write_io(&e))?;
        let mut st = State {
            vote: read_small(dir, VOTE).map_err(damage)?,
            committed: read_small(dir, COMMITTED).map_err(damage)?,
            last_purged: read_small(dir, PURGED).map_err(damage)?,
            ..State::default()
        };
        st.base = st.last_purged.map_or(0, |l| l.index + 1);
        let mut firsts: Vec<u64> = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| read_io(&e))? {
            let name = e.map_err(|e| read_io(&e))?.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(&format!(".{SEGMENT_EXT}")) {
                if let Ok(first) = stem.parse::<u64>() {
                    firsts.push(first);
                }
            }
        }
        firsts.sort_unstable();
        let count = firsts.len();
        for (i, first) in firsts.into_iter().enumerate() {
            let path = segment_path(dir, first);
            let buf = std::fs::read(&path).map_err(|e| read_io(&e))?;
            let mut pos = 0;
            let mut expect = first;
            while pos < buf.len() {
                let (payload, next) = match decode_record(&buf, pos) {
                    Ok(Some(r)) => r,
                    Ok(None) if i + 1 == count => {
                        eprintln!("cosine-raft: {}: cut a torn tail at byte {pos} of {}", path.display(), buf.len());
                        break;
                    }
                    Ok(None) => return Err(damage(format!("{}: truncated record at byte {pos} (not the last segment)", path.display()))),
                    Err(e) => return Err(damage(format!("{}: {e}", path.display()))),
                };
                let entry: Entry = bincode::deserialize(payload).map_err(|e| damage(format!("{}: byte {pos}: {e}", path.display())))?;
                let log_id = *entry.get_log_id();
                if log_id.index != expect {
                    return Err(damage(format!("{}: entry {} where {expect} was expected", path.display(), log_id.index)));
                }
                expect += 1;
                if log_id.index >= st.base {
                    if log_id.index != st.next_index() {
                        return Err(damage(format!(
                            "{}: entry {} after a hole (next is {})",
                            path.display(),
                            log_id.index,
                            st.next_index()
                        )));
                    }
                    st.locs.push_back(Loc { seg: first, offset: pos as u64, len: (next - pos) as u32, log_id });
                }
                pos = next;
            }
            let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| read_io(&e))?;
            if (pos as u64) < buf.len() as u64 {
                file.set_len(pos as u64).and_then(|_| file.sync_all()).map_err(|e| write_io(&e))?;
            }
            st.segs.insert(first, Segment { path, file: Arc::new(file), len: pos as u64 });
        }
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            policy,
            state: Mutex::new(st),
            syncer: Mutex::new(None),
            syncs: Arc::new(AtomicU64::new(0)),
        });
        if policy != LogSync::None {
            let (tx, rx) = mpsc::channel::<SyncJob>();
            let (every, syncs) = (
                match policy {
                    LogSync::GroupCommit(d) => d,
                    _ => Duration::ZERO,
                },
                inner.syncs.clone(),
            );
            std::thread::Builder::new()
                .name("cosine-raft-sync".into())
                .spawn(move || syncer(rx, every, syncs))
                .map_err(|e| write_io(&e))?;
            *inner.syncer.lock() = Some(tx);
        }
        Ok(LogStore { inner })
    }

    /// When an append counts as durable.
    pub fn policy(&self) -> LogSync {
        self.inner.policy
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// fdatasync calls made on the log's segments since it was opened.
    pub fn syncs(&self) -> u64 {
        self.inner.syncs.load(Ordering::Relaxed)
    }

    /// The first index present and the last log id (or the purged one), for `INFO`.
    pub fn bounds(&self) -> (u64, Option<LogId>) {
        let st = self.inner.state.lock();
        (st.base, st.last_log_id())
    }

    fn read_entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let (mut out, missing) = {
            let st = self.inner.state.lock();
            let start = start.max(st.base);
            let end = end.min(st.next_index());
            let mut out: Vec<Option<Entry>> = Vec::with_capacity(end.saturating_sub(start) as usize);
            let mut missing = Vec::new();
            for idx in start..end {
                match st.cache.get(&idx) {
                    Some(e) => out.push(Some(e.clone())),
                    None => {
                        let loc = st.locs[(idx - st.base) as usize];
                        let file = st.segs.get(&loc.seg).map(|s| s.file.clone());
                        missing.push((out.len(), loc, file));
                        out.push(None);
                    }
                }
            }
            (out, missing)
        };
        // read the missing ones in spans of consecutive records of one segment
        let mut i = 0;
        while i < missing.len() {
            let (_, first, file) = &missing[i];
            let Some(file) = file else {
                return Err(damage(format!("entry {} has no segment", first.log_id.index)));
            };
            let mut j = i + 1;
            while j < missing.len() {
                let (prev, next) = (&missing[j - 1].1, &missing[j].1);
                if next.seg != first.seg || next.offset != prev.offset + prev.len as u64 || next.offset - first.offset > (4 << 20) {
                    break;
                }
                j += 1;
            }
            let last = missing[j - 1].1;
            let mut buf = vec![0u8; (last.offset + last.len as u64 - first.offset) as usize];
            file.read_exact_at(&mut buf, first.offset).map_err(|e| read_io(&e))?;
            for (slot, loc, _) in &missing[i..j] {
                let pos = (loc.offset - first.offset) as usize;
                let (payload, _) = decode_record(&buf, pos)
                    .map_err(|e| damage(format!("entry {}: {e}", loc.log_id.index)))?
                    .ok_or_else(|| damage(format!("entry {}: short record", loc.log_id.index)))?;
                out[*slot] = Some(bincode::deserialize(payload).map_err(|e| read_io(&*e))?);
            }
            i = j;
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn append_now(&self, entries: Vec<Entry>) -> Result<Vec<Arc<File>>, StorageError> {
        let mut guard = self.inner.state.lock();
        let st = &mut *guard;
        let mut touched: Vec<Arc<File>> = Vec::new();
        let mut batch = Batch::default();
        let mut seg_first: Option<u64> = st.segs.last_key_value().map(|(k, _)| *k);
        if st.locs.is_empty() && st.last_purged.is_none() {
            // an empty log starts wherever it is told (openraft starts at 0; its test suite elsewhere)
            if let Some(e) = entries.first() {
                st.base = e.get_log_id().index;
            }
        }
        let mut next = st.next_index();
        for entry in entries {
            let log_id = *entry.get_log_id();
            if st.last_purged.is_some_and(|p| log_id.index <= p.index) {
                continue; // already covered by the purged prefix (openraft's test suite does this)
            }
            if log_id.index != next {
                return Err(damage(format!("append of entry {} where {next} is next: a hole", log_id.index)));
            }
            let seg_len = seg_first.and_then(|f| st.segs.get(&f)).map(|s| s.len);
            if seg_len.is_none_or(|len| len + batch.buf.len() as u64 >= SEGMENT_BYTES) {
                if let Some(f) = seg_first {
                    batch.write(st, f, &mut touched)?;
                }
                let path = segment_path(&self.inner.dir, log_id.index);
                let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).map_err(|e| write_io(&e))?;
                sync_dir(&self.inner.dir).map_err(|e| write_io(&e))?;
                st.segs.insert(log_id.index, Segment { path, file: Arc::new(file), len: 0 });
                seg_first = Some(log_id.index);
            }
            let payload = bincode::serialize(&entry).map_err(|e| write_io(&io::Error::other(e)))?;
            let off = batch.buf.len() as u64;
            encode_record(&payload, &mut batch.buf);
            batch.entries.push((off, (batch.buf.len() as u64 - off) as u32, entry));
            next += 1;
        }
        if let Some(f) = seg_first {
            batch.write(st, f, &mut touched)?;
        }
        while st.cache.len() > CACHE_ENTRIES {
            st.cache.pop_first();
        }
        Ok(touched)
    }
}

/// Records encoded for one segment, written with one `pwrite`.
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    /// (offset in `buf`, record length, the entry)
    entries: Vec<(u64, u32, Entry)>,
}

impl Batch {
    /// Writes the records at the end of segment `seg_first`; they become readable.
    /// A failed write is cut back off the segment.
    fn write(&mut self, st: &mut State, seg_first: u64, touched: &mut Vec<Arc<File>>) -> Result<(), StorageError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let Some(seg) = st.segs.get_mut(&seg_first) else {
            return Err(damage(format!("segment {seg_first} vanished")));
        };
        if let Err(e) = seg.file.write_all_at(&self.buf, seg.len) {
            let _ = seg.file.set_len(seg.len);
            return Err(write_io(&e));
        }
        let start = seg.len;
        seg.len += self.buf.len() as u64;
        if !touched.iter().any(|f| Arc::ptr_eq(f, &seg.file)) {
            touched.push(seg.file.clone());
        }
        for (off, len, entry) in self.entries.drain(..) {
            let log_id = *entry.get_log_id();
            st.locs.push_back(Loc { seg: seg_first, offset: start + off, len, log_id });
            st.cache.insert(log_id.index, entry);
        }
        self.buf.clear();
        Ok(())
    }
}

/// The syncer thread: fdatasyncs the segments of queued appends, then calls their callbacks;
/// appends queued during a sync share the next one; with `every > 0`, at most one sync per `every`.
fn syncer(rx: mpsc::Receiver<SyncJob>, every: Duration, syncs: Arc<AtomicU64>) {
    let mut last = Instant::now() - every;
    let mut failed: Option<String> = None;
    while let Ok(first) = rx.recv() {
        if !every.is_zero() {
            let due = last + every;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let mut jobs = vec![first];
        while let Ok(j) = rx.try_recv() {
            jobs.push(j);
        }
        let mut files: Vec<Arc<File>> = Vec::new();
        for j in &jobs {
            for f in &j.files {
                if !files.iter().any(|g| Arc::ptr_eq(f, g)) {
                    files.push(f.clone());
                }
            }
        }
        last = Instant::now();
        if failed.is_none() {
            for f in &files {
                syncs.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = f.sync_data() {
                    // after a failed fsync the kernel may have dropped the pages: nothing later is durable
                    failed = Some(format!("fdatasync of the Raft log failed: {e}"));
                    break;
                }
            }
        }
        for j in jobs {
            j.callback.log_io_completed(match &failed {
                None => Ok(()),
                Some(m) => Err(io::Error::other(m.clone())),
            });
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(&mut self, range: RB) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(e) => e.saturating_add(1),
            Bound::Excluded(e) => *e,
            Bound::Unbounded => u64::MAX,
        };
        self.read_entries(start, end)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let st = self.inner.state.lock();
        Ok(LogState { last_purged_log_id: st.last_purged, last_log_id: st.last_log_id() })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        write_small(&self.inner.dir, VOTE, vote, true).map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))?;
        self.inner.state.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.state.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        match &committed {
            Some(c) => write_small(&self.inner.dir, COMMITTED, c, false).map_err(|e| write_io(&e))?,
            None => match std::fs::remove_file(self.inner.dir.join(COMMITTED)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(write_io(&e)),
                _ => {}
            },
        }
        self.inner.state.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.inner.state.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let files = self.append_now(entries.into_iter().collect())?;
        let tx = self.inner.syncer.lock().clone();
        match tx {
            None => callback.log_io_completed(Ok(())),
            Some(tx) => {
                if let Err(mpsc::SendError(job)) = tx.send(SyncJob { files, callback }) {
                    job.callback.log_io_completed(Err(io::Error::other("the Raft log's syncer stopped")));
                }
            }
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut st = self.inner.state.lock();
        let idx = log_id.index;
        if idx >= st.next_index() {
            return Ok(());
        }
        if idx < st.base {
            return Err(damage(format!("truncate from {idx}, below the first entry present ({})", st.base)));
        }
        let loc = st.locs[(idx - st.base) as usize];
        let later: Vec<u64> = st.segs.range(loc.seg + 1..).map(|(k, _)| *k).collect();
        for first in later {
            if let Some(s) = st.segs.remove(&first) {
                std::fs::remove_file(&s.path).map_err(|e| write_io(&e))?;
            }
        }
        if let Some(seg) = st.segs.get_mut(&loc.seg) {
            seg.file.set_len(loc.offset).and_then(|_| seg.file.sync_all()).map_err(|e| write_io(&e))?;
            seg.len = loc.offset;
        }
        sync_dir(&self.inner.dir).map_err(|e| write_io(&e))?;
        let keep = (idx - st.base) as usize;
        st.locs.truncate(keep);
        let _ = st.cache.split_off(&idx);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        write_small(&self.inner.dir, PURGED, &log_id, true).map_err(|e| write_io(&e))?;
        let mut st = self.inner.state.lock();
        let idx = log_id.index;
        st.last_purged = Some(log_id);
        while st.locs.front().is_some_and(|l| l.log_id.index <= idx) {
            st.locs.pop_front();
        }
        st.base = st.base.max(idx + 1);
        st.cache.retain(|k, _| *k > idx);
        // a segment goes once every entry it holds is purged: the next segment starts at or below idx + 1
        let firsts: Vec<u64> = st.segs.keys().copied().collect();
        let mut removed = false;
        for (i, first) in firsts.iter().enumerate() {
            let all_purged = match firsts.get(i + 1) {
                Some(next) => *next <= idx + 1,
                None => st.locs.is_empty(), // the last one: only when nothing is left in it
            };
            if all_purged {
                if let Some(s) = st.segs.remove(first) {
                    std::fs::remove_file(&s.path).map_err(|e| write_io(&e))?;
                    removed = true;
                }
            }
        }
        if removed {
            sync_dir(&self.inner.dir).map_err(|e| write_io(&e))?;
        }
        Ok(())
    }
}

/// The id a purged or present entry `index` of `st` has (tests).
#[cfg(test)]
fn id_at(st: &State, index: u64) -> Option<LogId> {
    st.locs.get(index.checked_sub(st.base)? as usize).map(|l| l.log_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_and_tails_are_told_from_damage() {
        let mut buf = Vec::new();
        encode_record(b"hello", &mut buf);
        encode_record(b"world!", &mut buf);
        let (p, next) = decode_record(&buf, 0).ok().flatten().expect("first");
        assert_eq!(p, b"hello");
        assert_eq!(decode_record(&buf, next).ok().flatten().map(|r| r.0), Some(&b"world!"[..]));
        // torn: short header, a length past the end, zeros
        assert!(matches!(decode_record(&buf[..next + 3], next), Ok(None)));
        assert!(matches!(decode_record(&buf[..buf.len() - 1], next), Ok(None)));
        assert!(matches!(decode_record(&[0u8; 20], 0), Ok(None)));
        // a complete record with a flipped byte is damage
        let mut bad = buf.clone();
        bad[HEADER + 1] ^= 1;
        assert!(decode_record(&bad, 0).is_err());
        let st = State::default();
        assert_eq!(id_at(&st, 0), None);
    }
}
