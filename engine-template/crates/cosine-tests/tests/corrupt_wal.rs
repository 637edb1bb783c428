//! A corrupted WAL record in the middle of the log makes open fail with a
//! corruption error; a torn last record is cut off and the rest recovered.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};

fn wal_file(dir: &std::path::Path) -> std::path::PathBuf {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal") && std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
        .collect();
    v.sort();
    v.pop().expect("a non-empty WAL segment")
}

#[test]
fn middle_record_corruption_fails_open_and_torn_tail_is_truncated() {
    for p in [Preset::RocksDb, Preset::Faster] {
        let mut cfg = tiny(p);
        cfg.layout.buffer_bytes = 1000 * cfg.entry_bytes() as u64; // nothing flushes
        let dir = TempDir::new("corrupt-wal");
        let e = Engine::open(dir.path(), &cfg).expect("open");
        for i in 0..20u64 {
            e.put(&key(i), &[i as u8; 8]).expect("put");
        }
        e.close().expect("close");
        let w = wal_file(dir.path());
        let good = std::fs::read(&w).expect("read");
        let rec = good.len() / 20;

        let mut bad = good.clone();
        bad[5 * rec + 12] ^= 0x10;
        std::fs::write(&w, &bad).expect("write");
        let err = Engine::open(dir.path(), &cfg).expect_err("middle corruption must fail open");
        assert!(err.is_corruption(), "{err}");

        std::fs::write(&w, &good[..good.len() - rec / 2]).expect("write");
        let e = Engine::open(dir.path(), &cfg).expect("torn tail is repaired");
        for i in 0..19u64 {
            assert_eq!(e.get(&key(i)).expect("get"), Some(vec![i as u8; 8]));
        }
        assert_eq!(e.get(&key(19)).expect("get"), None);
        e.close().expect("close");
    }
}
