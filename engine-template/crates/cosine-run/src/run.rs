//! A run: sorted, non-overlapping files, optionally guarded by one run-wide filter.

use crate::hit::Hit;
use crate::table::{Table, TableIter};
use cosine_core::io::BlockKind;
use cosine_core::{Error, IoCounter, KvIterator, Result, Value};
use cosine_filter::Bloom;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An immutable sorted run.
#[derive(Debug, Clone)]
pub struct Run {
    /// Run id (creation order: larger is newer).
    pub id: u64,
    /// Files in key order, non-overlapping.
    pub files: Vec<Arc<Table>>,
    /// Run-granularity filter (and the id of the file that persists it).
    pub filter: Option<(u64, Arc<Bloom>)>,
}

impl Run {
    /// Entries across all files.
    pub fn entries(&self) -> u64 {
        self.files.iter().map(|f| f.entries).sum()
    }

    /// Smallest and largest key.
    pub fn key_range(&self) -> Option<(&[u8], &[u8])> {
        Some((self.files.first()?.min_key.as_slice(), self.files.last()?.max_key.as_slice()))
    }

    /// The file whose range may hold `key`.
    pub fn file_for(&self, key: &[u8]) -> Option<&Arc<Table>> {
        let i = self.files.partition_point(|f| f.max_key.as_slice() < key);
        self.files.get(i).filter(|f| f.min_key.as_slice() <= key)
    }

    /// Point lookup within the run (`Some(None)` = tombstone).
    pub fn get(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<Value>> {
        Ok(self.find(key, hash, io)?.map(|h| h.to_value()))
    }

    /// [`Run::get`] without copying the value: the block entry holding `key` (a tombstone too).
    pub fn find(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<Hit>> {
        let Some(f) = self.file_for(key) else { return Ok(None) };
        if let Some((_, b)) = &self.filter {
            if !b.may_contain(hash) {
                return Ok(None);
            }
        }
        f.find(key, hash, io)
    }

    /// A cursor over the run from the first key `>= lo`; with an upper bound `hi`
    /// only the files that may hold keys in `lo..=hi` are read: those whose key
    /// span reaches the range and whose range filter (hot levels) does not rule it out.
    pub fn iter(&self, lo: Option<&[u8]>, hi: Option<&[u8]>, io: Arc<IoCounter>, use_cache: bool) -> Result<RunIter> {
        let start = match lo {
            Some(k) => self.files.partition_point(|f| f.max_key.as_slice() < k),
            None => 0,
        };
        let files = match hi {
            None => self.files[start..].to_vec(),
            Some(h) => {
                let end = self.files.partition_point(|f| f.min_key.as_slice() <= h).max(start);
                let from = lo.unwrap_or(&[]);
                self.files[start..end].iter().filter(|f| f.may_hold_range(from, h)).cloned().collect()
            }
        };
        let mut it = RunIter { files, next_file: 0, cur: None, io, use_cache, lo: lo.map(|k| k.to_vec()) };
        it.open_next()?;
        Ok(it)
    }
}

/// Concatenates the cursors of a run's files.
pub struct RunIter {
    files: Vec<Arc<Table>>,
    next_file: usize,
    cur: Option<TableIter>,
    io: Arc<IoCounter>,
    use_cache: bool,
    lo: Option<Vec<u8>>,
}

impl RunIter {
    fn open_next(&mut self) -> Result<()> {
        loop {
            if let Some(c) = &self.cur {
                if c.valid() {
                    return Ok(());
                }
            }
            let Some(f) = self.files.get(self.next_file) else {
                self.cur = None;
                return Ok(());
            };
            self.next_file += 1;
            let lo = self.lo.take();
            self.cur = Some(f.iter(lo.as_deref(), self.io.clone(), self.use_cache)?);
        }
    }
}

impl KvIterator for RunIter {
    fn valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.key())
    }
    fn value(&self) -> Option<&[u8]> {
        self.cur.as_ref().and_then(|c| c.value())
    }
    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cur {
            c.next()?;
        }
        self.open_next()
    }
}

/// Path of run-filter file `id`.
pub fn run_filter_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:08}.rbf"))
}

/// Persists a run-granularity filter (fsynced) and charges its blocks to `io`.
pub fn write_run_filter(dir: &Path, id: u64, b: &Bloom, block_bytes: usize, io: &IoCounter) -> Result<()> {
    let p = run_filter_path(dir, id);
    let enc = b.encode();
    let mut f = OpenOptions::new().write(true).create_new(true).open(&p).map_err(|e| Error::io(&p, e))?;
    f.write_all(&enc).map_err(|e| Error::io(&p, e))?;
    f.sync_all().map_err(|e| Error::io(&p, e))?;
    io.wrote(BlockKind::Filter, enc.len().div_ceil(block_bytes.max(1)) as u64, enc.len() as u64);
    Ok(())
}

/// Loads a run-granularity filter written by [`write_run_filter`].
pub fn read_run_filter(dir: &Path, id: u64, io: &IoCounter) -> Result<Bloom> {
    let p = run_filter_path(dir, id);
    let raw = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
    io.read(BlockKind::Filter, 1, raw.len() as u64);
    Bloom::decode(&raw).map_err(|e| Error::corruption(format!("{}: {e}", p.display())))
}
