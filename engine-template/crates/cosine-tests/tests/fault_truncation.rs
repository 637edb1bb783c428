//! Fault: a file of the database is cut short.
//!
//! In a cleanly closed database every cut is detected: WAL segments are sealed
//! in the manifest with their final length, the manifest is checksummed, and
//! run files and log segments are checked against the manifest, so the open is
//! refused and nothing changes. The one legitimate cut, a torn tail left by a
//! crash in the middle of an append, is dropped, and every acknowledged write
//! is recovered.

use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::Engine;
use cosine_tests::crash::{check, read_state, Child, State};
use cosine_tests::{copy_dir, every_file_kind, files_of_kind, files_with_ext, open_damaged, pristine, Damaged, TempDir, FILE_KINDS};
use rand::{Rng, SeedableRng};
use std::io::Write;

#[test]
fn every_cut_of_a_closed_database_is_refused() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let mut tried = 0;
    for cfg in every_file_kind() {
        let good = TempDir::new("cut-good");
        let model = pristine(good.path(), &cfg);
        let work = TempDir::new("cut");
        for ext in FILE_KINDS {
            for f in files_of_kind(good.path(), ext).iter().take(3) {
                copy_dir(good.path(), work.path());
                let target = work.path().join(f.file_name().expect("name"));
                let len = std::fs::metadata(&target).expect("meta").len();
                let at = rng.gen_range(0..len);
                std::fs::OpenOptions::new().write(true).open(&target).and_then(|f| f.set_len(at)).expect("cut");
                let what = format!("{}: {} cut to {at} of {len} bytes", cfg.design.name, target.display());
                match open_damaged(work.path(), &cfg, &model) {
                    Err(defect) => panic!("{what}: {defect}"),
                    Ok(Damaged::Refused(_)) => {}
                    Ok(Damaged::Opened(_)) => panic!("{what}: opened"),
                }
                tried += 1;
            }
        }
    }
    assert!(tried >= 5 * 3, "{tried} cuts");
}

#[test]
fn a_torn_append_after_a_crash_is_dropped_and_nothing_acknowledged_is_lost() {
    for p in [Preset::RocksDb, Preset::Faster] {
        let dir = TempDir::new("torn-append");
        let child = Child {
            exe: env!("CARGO_BIN_EXE_crash-child"),
            dir: dir.path(),
            preset: p.name(),
            seed: 5,
            wal_sync: WalSync::EveryWrite,
            threads: 1,
        };
        let h = child.run(150);
        assert!(h.killed, "{p:?}: the child was killed");
        // The append the kill interrupted: a header promising 60 bytes, and 10 of them.
        let active = files_with_ext(dir.path(), "wal").pop().expect("a WAL segment");
        let mut f = std::fs::OpenOptions::new().append(true).open(&active).expect("open");
        f.write_all(&[60, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0]).expect("append");
        drop(f);
        let mut cfg = tiny(p);
        cfg.durability.wal_sync = WalSync::EveryWrite;
        let e = Engine::open(dir.path(), &cfg).unwrap_or_else(|err| panic!("{p:?}: a torn tail must not stop the open: {err}"));
        assert!(e.recovery().torn_bytes >= 18, "{p:?}: the torn append is cut");
        let got = read_state(&e).expect("read");
        check(&State::new(), &h, &got, true).unwrap_or_else(|err| panic!("{p:?}: {err}"));
        e.close().expect("close");
    }
}
