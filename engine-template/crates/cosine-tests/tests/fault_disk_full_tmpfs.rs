//! Fault: the disk fills up during a WAL append (a real full file system).
//!
//! A 256 KiB tmpfs is mounted (this test needs root), filled with a filler
//! file, and written to until appends fail; then the filler is removed and
//! writing goes on. A failed append must not leave a partial record in the
//! middle of the WAL while later writes are acknowledged: after a reopen, every
//! acknowledged write is there. (`fault_disk_full_injected` covers the same
//! path without root, through the WAL's injected write failure.)

use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// A tmpfs mounted for the test's lifetime.
struct Mount(PathBuf);

impl Mount {
    fn new(at: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(at).expect("mkdir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount(8): {e}"));
        assert!(out.status.success(), "mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr));
        Mount(at.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn full_tmpfs_during_wal_appends_loses_no_acknowledged_write() {
    assert!(
        is_root(),
        "fault_disk_full_tmpfs needs root to mount a tmpfs; run the tests as root \
         (fault_disk_full_injected covers the same path without root)"
    );
    let scratch = TempDir::new("fault-enospc");
    let mnt = Mount::new(&scratch.path().join("mnt"), "256k");
    let db = mnt.0.join("db");
    let mut cfg = tiny(Preset::RocksDb);
    cfg.durability.wal_sync = WalSync::EveryWrite;
    cfg.layout.value_bytes = 200;
    cfg.layout.buffer_bytes = 100_000 * cfg.entry_bytes() as u64; // no flush: the WAL is all there is
    let e = Engine::open(&db, &cfg).expect("open");
    let mut acked: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let value = |i: u64| vec![(i % 251) as u8; 200];
    let mut i = 0u64;
    // A few records first, so the WAL's last page is part full and an append
    // that crosses into the next page is cut short by the full disk.
    while i < 10 {
        e.put(&key(i), &value(i)).expect("put");
        acked.insert(i, value(i));
        i += 1;
    }
    // Fill the file system.
    let filler = mnt.0.join("filler");
    {
        let mut f = std::fs::File::create(&filler).expect("filler");
        let chunk = vec![0xa5u8; 4096];
        while f.write_all(&chunk).is_ok() {}
    }
    let mut failures = 0u64;
    while failures < 3 && i < 100_000 {
        match e.put(&key(i), &value(i)) {
            Ok(()) => {
                acked.insert(i, value(i));
            }
            Err(_) => failures += 1,
        }
        i += 1;
    }
    assert!(failures > 0, "the WAL never hit the full disk");
    // Space comes back (another process deleted a file); writing goes on.
    std::fs::remove_file(&filler).expect("remove filler");
    for _ in 0..200 {
        if e.put(&key(i), &value(i)).is_ok() {
            acked.insert(i, value(i));
        }
        i += 1;
    }
    let _ = e.close(); // may report the earlier failure
    let e = Engine::open(&db, &cfg).unwrap_or_else(|err| panic!("reopen after a full disk failed: {err}"));
    for (k, v) in &acked {
        assert_eq!(e.get(&key(*k)).expect("get").as_ref(), Some(v), "acknowledged write {k} lost");
    }
    e.close().expect("close");
}
