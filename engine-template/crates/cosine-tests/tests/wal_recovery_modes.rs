//! The salvage modes of `[durability] wal_recovery`, end to end through
//! `engine.toml`: on a WAL whose record 500 of 2,000 has a damaged length,
//! `point_in_time` opens with records 0..500 and `skip_any_corrupted` with every
//! record but 500; both keep the original segment in `salvage/`, log what they
//! dropped, and leave a clean log that the default mode then opens.

use cosine_config::presets::{tiny, to_toml, Preset};
use cosine_config::{Config, WalRecovery, WalSync};
use cosine_engine::Engine;
use cosine_tests::{files_with_ext, key, wal_record_offsets, TempDir};

fn damaged_db(dir: &std::path::Path, cfg: &Config) -> Vec<u8> {
    let e = Engine::open(dir, cfg).expect("open");
    for i in 0..2000u64 {
        e.put(&key(i), &i.to_le_bytes()).expect("put");
    }
    e.close().expect("close");
    let wal = files_with_ext(dir, "wal").into_iter().find(|w| std::fs::metadata(w).is_ok_and(|m| m.len() > 0)).expect("WAL");
    let mut b = std::fs::read(&wal).expect("read");
    let at = wal_record_offsets(&b)[500];
    b[at + 2] ^= 0x10;
    std::fs::write(&wal, &b).expect("write");
    b
}

#[test]
fn salvage_modes_drop_what_they_say_and_keep_the_evidence() {
    for (mode, name) in [(WalRecovery::PointInTime, "point_in_time"), (WalRecovery::SkipAnyCorrupted, "skip_any_corrupted")] {
        let mut cfg = tiny(Preset::RocksDb);
        cfg.durability.wal_sync = WalSync::EveryWrite;
        cfg.layout.buffer_bytes = 4000 * cfg.entry_bytes() as u64;
        let dir = TempDir::new("wal-salvage");
        let damaged = damaged_db(dir.path(), &cfg);

        let mut salvage = cfg.clone();
        salvage.durability.wal_recovery = mode;
        let text = to_toml(&salvage);
        assert!(text.contains(&format!("wal_recovery = \"{name}\"")), "{text}");
        let salvage = Config::from_toml_str(&text).expect("engine.toml");
        let e = Engine::open(dir.path(), &salvage).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert!(!e.recovery().salvaged.is_empty(), "{name}: the salvage is reported");
        let present = |e: &Engine, i: u64| e.get(&key(i)).expect("get") == Some(i.to_le_bytes().to_vec());
        for i in 0..2000u64 {
            let want = match mode {
                WalRecovery::PointInTime => i < 500,
                _ => i != 500,
            };
            assert_eq!(present(&e, i), want, "{name}: record {i}");
        }
        e.put(&key(5000), b"after").expect("writes go on");
        e.close().expect("close");

        let kept = std::fs::read_dir(dir.path().join("salvage")).expect("salvage/").count();
        assert!(kept >= 2, "{name}: the segment copy and LOG are in salvage/");
        let log = std::fs::read_to_string(dir.path().join("salvage").join("LOG")).expect("LOG");
        assert!(log.contains(name), "{name}: {log}");
        let copy = files_with_ext(&dir.path().join("salvage"), "wal");
        assert_eq!(std::fs::read(&copy[0]).expect("copy"), damaged, "{name}: the damaged segment, byte for byte");

        let e = Engine::open(dir.path(), &cfg).unwrap_or_else(|err| panic!("{name}: the default mode reopens: {err}"));
        assert!(present(&e, 499));
        assert_eq!(present(&e, 1999), mode == WalRecovery::SkipAnyCorrupted);
        assert_eq!(e.get(&key(5000)).expect("get"), Some(b"after".to_vec()));
        e.close().expect("close");
    }
}
