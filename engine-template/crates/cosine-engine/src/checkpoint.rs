//! A checkpoint: a consistent copy of an open database in another directory, made of the
//! engine's own files (RocksDB's `Checkpoint::CreateCheckpoint`), while writes and
//! background work go on.
//!
//! Under the WAL writer's lock (no record is being appended; `none` mode's buffer is first
//! handed to the OS) and the manifest's commit lock (no flush, merge or GC can commit, so no
//! file the manifest names is deleted), every file of the current manifest is hard-linked
//! into the destination, and the manifest itself is written there. Run files and filters
//! are immutable and are linked as they are. WAL segments and hash-log segments only grow:
//! each is linked under a temporary name with its length at that instant (a sealed WAL
//! segment: its sealed length; the open one: what was written; a log segment: its committed
//! length), and once the locks are released that prefix is copied into the destination and
//! the temporary link removed. So the locks are held for a few `link(2)` calls, not for any
//! copying. Every file of the destination and the directory are fsynced.
//!
//! Opening the checkpoint recovers exactly the writes appended before it was taken (the
//! WAL prefix replays into the memtable, as after a crash).

use crate::Inner;
use cosine_core::{Error, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Suffix of a segment's temporary link while its prefix is copied.
const PART: &str = ".part";

/// A segment linked under a temporary name: copy its first `len` bytes to `dst`.
struct Prefix {
    link: PathBuf,
    dst: PathBuf,
    len: u64,
}

/// Links `src` to `dst`; copies it when the two are on different file systems.
fn link_or_copy(src: &Path, dst: &Path) -> Result<()> {
    match std::fs::hard_link(src, dst) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(18) => std::fs::copy(src, dst).map(|_| ()).map_err(|e| Error::io(dst, e)), // EXDEV
        Err(e) => Err(Error::io(dst, e)),
    }
}

fn copy_prefix(p: &Prefix) -> Result<()> {
    let mut src = File::open(&p.link).map_err(|e| Error::io(&p.link, e))?;
    let mut dst = File::create(&p.dst).map_err(|e| Error::io(&p.dst, e))?;
    let copied = std::io::copy(&mut (&mut src).take(p.len), &mut dst).map_err(|e| Error::io(&p.dst, e))?;
    if copied != p.len {
        return Err(Error::corruption(format!("{}: {copied} bytes, the checkpoint needs {}", p.link.display(), p.len)));
    }
    dst.flush().map_err(|e| Error::io(&p.dst, e))?;
    drop(dst);
    std::fs::remove_file(&p.link).map_err(|e| Error::io(&p.link, e))
}

fn name(path: &Path) -> Result<&std::ffi::OsStr> {
    path.file_name().ok_or_else(|| Error::corruption(format!("{}: no file name", path.display())))
}

/// See the module doc. `dest` must not exist (its parent must).
pub(crate) fn checkpoint(inner: &Inner, dest: &Path) -> Result<()> {
    std::fs::create_dir(dest).map_err(|e| Error::io(dest, e))?;
    let dir = &inner.dir;
    let prefixes = {
        let mut wal = inner.writer.lock();
        wal.sync()?;
        let open_id = wal.segment_id();
        let open_len = wal.segment_len();
        inner.versions.with_current(|m| -> Result<Vec<Prefix>> {
            let mut prefixes = Vec::new();
            for runs in &m.levels {
                for r in runs {
                    for f in &r.files {
                        let src = cosine_run::table_path(dir, f.id);
                        link_or_copy(&src, &dest.join(name(&src)?))?;
                    }
                    if let Some(id) = r.filter {
                        let src = cosine_run::run_filter_path(dir, id);
                        link_or_copy(&src, &dest.join(name(&src)?))?;
                    }
                }
            }
            let mut grown = Vec::new();
            for s in &m.segments {
                grown.push((cosine_hashlog::segment_path(dir, s.id), s.len));
            }
            for w in &m.wals {
                let len = match w.sealed {
                    Some(len) => len,
                    None if w.id == open_id => open_len,
                    // (only the open segment is unsealed; anything else: all that is there)
                    None => std::fs::metadata(cosine_wal::segment_path(dir, w.id)).map_or(0, |md| md.len()),
                };
                grown.push((cosine_wal::segment_path(dir, w.id), len));
            }
            for (src, len) in grown {
                let file = name(&src)?;
                let dst = dest.join(file);
                let mut link = dst.clone().into_os_string();
                link.push(PART);
                let link = PathBuf::from(link);
                if src.exists() {
                    link_or_copy(&src, &link)?;
                    prefixes.push(Prefix { link, dst, len });
                } else if len == 0 {
                    File::create(&dst).map_err(|e| Error::io(&dst, e))?;
                } else {
                    return Err(Error::corruption(format!("{}: named by the manifest, missing", src.display())));
                }
            }
            m.write_atomic(dest)?;
            Ok(prefixes)
        })?
    };
    for p in &prefixes {
        copy_prefix(p)?;
    }
    for entry in std::fs::read_dir(dest).map_err(|e| Error::io(dest, e))? {
        let path = entry.map_err(|e| Error::io(dest, e))?.path();
        File::open(&path).and_then(|f| f.sync_all()).map_err(|e| Error::io(&path, e))?;
    }
    cosine_wal::sync_dir(dest)
}
