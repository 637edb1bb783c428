//! Opening a database directory safely.
//!
//! * One opener at a time: an exclusive `flock` on `LOCK` (RocksDB's LOCK file),
//!   held for the engine's lifetime and released by the kernel if the process dies.
//! * Never a fresh start over data: a directory with data files but no
//!   `MANIFEST` is an error ([`Error::MissingManifest`]).
//! * Nothing is deleted at open except files the manifest proves obsolete, and
//!   only after recovery succeeded.

use cosine_config::Config;
use cosine_core::{Error, Result};
use cosine_manifest::{Manifest, MANIFEST, MANIFEST_TMP};
use cosine_wal::SegmentRef;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Name of the lock file.
pub const LOCK: &str = "LOCK";

/// File kinds the engine writes: WAL segments, run files, run filters, hash-log segments.
const DATA_EXTS: [&str; 4] = ["wal", "sst", "rbf", "log"];

/// `NNNNNNNN.ext` of one of the engine's data files: (id, ext).
pub(crate) fn data_file_id(name: &str) -> Option<(u64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    let id = stem.parse().ok().filter(|_| stem.len() >= 8 && stem.bytes().all(|b| b.is_ascii_digit()))?;
    DATA_EXTS.contains(&ext).then_some((id, ext))
}

/// True for a file name the engine itself creates in a database directory
/// (manifest, lock, WAL segments, run files, filters, log segments, and their temporaries).
pub fn is_engine_file(name: &str) -> bool {
    let base = name.strip_suffix(".tmp").unwrap_or(name);
    base == MANIFEST || name == LOCK || data_file_id(base).is_some()
}

/// How long an opener retries a held lock before it gives up. An `flock` belongs to
/// the open file, which a `fork` shares until the child's `exec` closes it: a
/// process that closes its engine while another of its threads spawns a program
/// can see the lock held for that instant.
const LOCK_WAIT: Duration = Duration::from_millis(200);

/// Takes the exclusive lock on `dir/LOCK` (creating the file).
pub(crate) fn lock(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK);
    let f = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| Error::io(&path, e))?;
    let start = Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => std::thread::sleep(Duration::from_millis(2)),
            Err(TryLockError::WouldBlock) => return Err(Error::Locked { path }),
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
    }
}

fn class_name(cfg: &Config) -> &'static str {
    if cfg.is_hashlog() {
        "lsh"
    } else {
        "tree"
    }
}

/// The directory's manifest, checked against `cfg`; a new one for a directory without data files.
pub(crate) fn manifest(dir: &Path, cfg: &Config) -> Result<Manifest> {
    if let Some(m) = Manifest::read(dir)? {
        if m.class != class_name(cfg) {
            return Err(Error::Config(format!("{} holds a '{}' layout; this design needs '{}'", dir.display(), m.class, class_name(cfg))));
        }
        if m.key_bytes as usize != cfg.layout.key_bytes {
            return Err(Error::Config(format!(
                "{} was created with key_bytes = {}, config says {}",
                dir.display(),
                m.key_bytes,
                cfg.layout.key_bytes
            )));
        }
        return Ok(m);
    }
    let mut data: Vec<String> = list(dir)?.into_iter().filter(|n| data_file_id(n).is_some()).collect();
    if !data.is_empty() {
        data.sort();
        let more = data.len().saturating_sub(4);
        data.truncate(4);
        if more > 0 {
            data.push(format!("and {more} more"));
        }
        return Err(Error::MissingManifest { dir: dir.to_path_buf(), files: data });
    }
    let m = Manifest { class: class_name(cfg).into(), key_bytes: cfg.layout.key_bytes as u32, next_id: 1, ..Manifest::default() };
    m.write_atomic(dir)?;
    Ok(m)
}

fn list(dir: &Path) -> Result<Vec<String>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        v.push(e.file_name().to_string_lossy().to_string());
    }
    Ok(v)
}

/// What the directory holds beside the manifest.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// WAL segments to replay, in id order (the manifest's list and any found on disk).
    pub wal: Vec<SegmentRef>,
    /// Largest id in use plus one.
    pub next_id: u64,
}

/// Lists the WAL segments to replay and the next free file id.
pub(crate) fn scan(dir: &Path, m: &Manifest) -> Result<Found> {
    let mut next_id = m.next_id;
    let mut on_disk = BTreeSet::new();
    for name in list(dir)? {
        let Some((id, ext)) = data_file_id(&name) else { continue };
        next_id = next_id.max(id + 1);
        if ext == "wal" && id >= m.min_wal {
            on_disk.insert(id);
        }
    }
    let listed: HashMap<u64, Option<u64>> = m.wals.iter().filter(|w| w.id >= m.min_wal).map(|w| (w.id, w.sealed)).collect();
    let ids: BTreeSet<u64> = on_disk.iter().chain(listed.keys()).copied().collect();
    next_id = next_id.max(ids.iter().max().map_or(0, |m| m + 1));
    let wal = ids.into_iter().map(|id| SegmentRef { id, expected: listed.contains_key(&id), sealed: listed.get(&id).copied().flatten() });
    Ok(Found { wal: wal.collect(), next_id })
}

/// Files the committed manifest `m` proves obsolete: WAL segments below `min_wal`, run files,
/// filters and log segments it does not name, and an unfinished `MANIFEST.tmp`.
pub(crate) fn obsolete(dir: &Path, m: &Manifest) -> Result<Vec<PathBuf>> {
    let live: HashSet<u64> = m.live_ids().into_iter().collect();
    let mut out = Vec::new();
    for name in list(dir)? {
        let dead = match data_file_id(&name) {
            Some((id, "wal")) => id < m.min_wal,
            Some((id, _)) => !live.contains(&id),
            None => name == MANIFEST_TMP && dir.join(MANIFEST).is_file(),
        };
        if dead {
            out.push(dir.join(name));
        }
    }
    Ok(out)
}
