//! A corrupted WAL record in the middle of the log makes open fail with a
//! corruption error. A cleanly closed WAL is sealed in the manifest, so cutting
//! even its last record off is detected too (only a crash leaves a torn tail:
//! see `fault_truncation` and `crash_recovery`).

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
fn middle_record_corruption_and_a_cut_sealed_segment_fail_open() {
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
        let err = Engine::open(dir.path(), &cfg).expect_err("a sealed segment cut short is damage, not a torn tail");
        assert!(err.is_corruption() && err.to_string().contains("sealed"), "{err}");

        std::fs::write(&w, &good).expect("restore");
        let e = Engine::open(dir.path(), &cfg).expect("intact WAL");
        for i in 0..20u64 {
            assert_eq!(e.get(&key(i)).expect("get"), Some(vec![i as u8; 8]));
        }
        e.close().expect("close");
    }
}
