//! Injected write failures: a full disk without root.
//!
//! Fault tests arm a byte budget for one database directory; writes through
//! [`write_all`] to files in that directory succeed until the budget is spent,
//! then write what still fits (a short write, as a full file system does) and
//! fail with `StorageFull`. Unarmed, a write costs one relaxed atomic load more
//! than `Write::write_all`.

use std::fs::File;
use std::io::{ErrorKind, Write};
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

/// `file.write_all(buf)` for the file at `path`, subject to an armed budget of its directory.
pub fn write_all(mut file: &File, path: &Path, buf: &[u8]) -> std::io::Result<()> {
    if ARMED.load(Ordering::Acquire) {
        let allowed = {
            let mut b = budgets();
            match b.iter_mut().find(|(d, _)| path.parent() == Some(d.as_path())) {
                Some((_, left)) => {
                    let n = (*left).min(buf.len() as u64);
                    *left -= n;
                    Some(n as usize)
                }
                None => None,
            }
        };
        if let Some(n) = allowed.filter(|n| *n < buf.len()) {
            file.write_all(&buf[..n])?;
            return Err(std::io::Error::new(ErrorKind::StorageFull, "no space left on device (injected)"));
        }
    }
    file.write_all(buf)
}
