//! The last committed manifest, kept in memory (RocksDB's `VersionSet`), and the
//! one way to change it: [`VersionSet::log_and_apply`] edits a copy, writes it
//! atomically, and only then makes it current. The writer (starting a WAL
//! segment) and the background worker (installing a flush, compaction or GC)
//! both commit through it, so neither can overwrite the other's change.

use cosine_core::Result;
use cosine_manifest::Manifest;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};

/// The committed manifest and the lock that orders commits.
#[derive(Debug)]
pub(crate) struct VersionSet {
    dir: PathBuf,
    current: Mutex<Manifest>,
}

impl VersionSet {
    /// Starts from a manifest that is already durable in `dir`.
    pub(crate) fn new(dir: &Path, committed: Manifest) -> VersionSet {
        VersionSet { dir: dir.to_path_buf(), current: Mutex::new(committed) }
    }

    /// Applies `edit` to a copy of the current manifest, makes it durable, and installs it.
    /// On failure the current manifest is unchanged.
    pub(crate) fn log_and_apply(&self, edit: impl FnOnce(&mut Manifest)) -> Result<()> {
        let mut cur = self.current.lock();
        let mut next = cur.clone();
        edit(&mut next);
        next.write_atomic(&self.dir)?;
        *cur = next;
        Ok(())
    }

    /// Runs `f` on the current manifest while holding the commit lock: no change is
    /// committed (and so no file it names is deleted) until `f` returns.
    pub(crate) fn with_current<R>(&self, f: impl FnOnce(&Manifest) -> R) -> R {
        f(&self.current.lock())
    }
}

/// Records that WAL segment `id` was sealed at `len` bytes.
pub(crate) fn seal(m: &mut Manifest, id: u64, len: u64) {
    if let Some(w) = m.wals.iter_mut().find(|w| w.id == id) {
        w.sealed = Some(len);
    }
}
