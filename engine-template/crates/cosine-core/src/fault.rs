//! Injected write failures: a full disk without root.
//!
//! Fault tests arm a byte budget for one database directory; writes through
//! [`write_all`] to files in that directory succeed until the budget is spent,
//! then write what still fits (a short write, as a full file system does) and
//! fail with `StorageFull`. Unarmed, a write costs one relaxed atomic load more
//! than `Write::write_all`.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ARMED: AtomicBool = AtomicBool::new(false);
static BUDGETS: Mutex<Vec<(PathBuf, u64)>> = Mutex::new(Vec::new());

fn budgets() -> std::sync::MutexGuard<'static, Vec<(PathBuf, u64)>> {
    BUDGETS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lets `bytes` more bytes be written to files directly in `dir`, then fails writes there.
pub fn fail_writes_after(dir: &Path, bytes: u64) {
    let mut b = budgets();
    b.retain(|(d, _)| d != dir);
    b.push((dir.to_path_buf(), bytes));
    ARMED.store(true, Ordering::Release);
}

/// Removes the budget of `dir` (space came back).
pub fn clear(dir: &Path) {
    let mut b = budgets();
    b.retain(|(d, _)| d != dir);
    ARMED.store(!b.is_empty(), Ordering::Release);
}

/// The bytes of a `len`-byte write to `path` an armed budget lets through, when fewer than `len`
/// (the budget is then spent); None when the write goes through whole.
fn short_write(path: &Path, len: usize) -> Option<usize> {
    if !ARMED.load(Ordering::Acquire) {
        return None;
    }
    let mut b = budgets();
    let (_, left) = b.iter_mut().find(|(d, _)| path.parent() == Some(d.as_path()))?;
    let n = (*left).min(len as u64);
    *left -= n;
    (n < len as u64).then_some(n as usize)
}

fn storage_full() -> std::io::Error {
    std::io::Error::new(ErrorKind::StorageFull, "no space left on device (injected)")
}

/// `file.write_all(buf)` for the file at `path`, subject to an armed budget of its directory.
pub fn write_all(mut file: &File, path: &Path, buf: &[u8]) -> std::io::Result<()> {
    if let Some(n) = short_write(path, buf.len()) {
        file.write_all(&buf[..n])?;
        return Err(storage_full());
    }
    file.write_all(buf)
}

/// `file.write_all_at(buf, offset)` for the file at `path`, subject to an armed budget of its
/// directory (a positional write: the WAL's, into the space it set aside ahead of its end).
pub fn write_all_at(file: &File, path: &Path, buf: &[u8], offset: u64) -> std::io::Result<()> {
    if let Some(n) = short_write(path, buf.len()) {
        file.write_all_at(&buf[..n], offset)?;
        return Err(storage_full());
    }
    file.write_all_at(buf, offset)
}
