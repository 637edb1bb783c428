//! Fault: a one-bit flip in the length field of WAL record 500 of 2,000.
//!
//! The 1,500 synced, acknowledged records after it must not be dropped: the
//! open stops with a corruption error naming the segment and the byte offset of
//! the damaged record, and the segment is left byte for byte as it was (the
//! evidence is kept). Repairing the bit makes every record come back.

use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::{Engine, Error};
use cosine_tests::{files_with_ext, key, wal_record_offsets, TempDir};

#[test]
fn length_flip_in_the_middle_of_the_wal_stops_the_open_and_keeps_the_file() {
    for p in [Preset::RocksDb, Preset::Faster] {
        let mut cfg = tiny(p);
        cfg.durability.wal_sync = WalSync::EveryWrite;
        cfg.layout.buffer_bytes = 4000 * cfg.entry_bytes() as u64; // 2,000 writes stay in the WAL
        let dir = TempDir::new("fault-wal-len");
        let e = Engine::open(dir.path(), &cfg).expect("open");
        for i in 0..2000u64 {
            e.put(&key(i), &i.to_le_bytes()).expect("put");
        }
        e.close().expect("close");
        let wal = files_with_ext(dir.path(), "wal").into_iter().find(|w| std::fs::metadata(w).is_ok_and(|m| m.len() > 0));
        let wal = wal.expect("a WAL segment holding the records");
        let good = std::fs::read(&wal).expect("read");
        let offsets = wal_record_offsets(&good);
        assert_eq!(offsets.len(), 2000, "{p:?}: one segment with every record");
        let at = offsets[500];
        let mut bad = good.clone();
        bad[at + 2] ^= 0x10; // bit 20 of the length: the record now runs past the end of the file
        std::fs::write(&wal, &bad).expect("write");

        let err = Engine::open(dir.path(), &cfg).expect_err("a damaged record in the middle must stop the open");
        assert!(matches!(&err, Error::CorruptAt { path, offset, .. } if *path == wal && *offset == at as u64), "{p:?}: {err}");
        let msg = err.to_string();
        let name = wal.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        assert!(msg.contains(&name), "{p:?}: error names the segment: {msg}");
        assert!(msg.contains(&format!("byte {at}")), "{p:?}: error names the offset {at}: {msg}");
        assert_eq!(std::fs::read(&wal).expect("read"), bad, "{p:?}: the segment is left untouched");

        std::fs::write(&wal, &good).expect("repair");
        let e = Engine::open(dir.path(), &cfg).expect("repaired WAL opens");
        for i in 0..2000u64 {
            assert_eq!(e.get(&key(i)).expect("get"), Some(i.to_le_bytes().to_vec()), "{p:?}: record {i}");
        }
        e.close().expect("close");
    }
}
