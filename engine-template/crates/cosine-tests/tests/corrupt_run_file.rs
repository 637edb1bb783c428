//! A flipped byte in a run file is reported as corruption (at open or at the
//! read that touches it) and never returned as data, never a panic.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{fill, TempDir};

fn files_with_ext(dir: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn flipped_byte_in_run_file_is_an_error_not_wrong_data() {
    for p in [Preset::RocksDb, Preset::WiredTiger, Preset::Hybrid] {
        let cfg = tiny(p);
        let dir = TempDir::new("corrupt-run");
        let (e, model) = fill(dir.path(), &cfg, 400, 150, 3).expect("fill");
        e.wait_idle().expect("idle");
        e.close().expect("close");
        let files = files_with_ext(dir.path(), "sst");
        assert!(!files.is_empty());
        for (fi, f) in files.iter().enumerate() {
            let good = std::fs::read(f).expect("read");
            for at in [0, good.len() / 3, good.len() / 2, good.len() - 10] {
                let mut bad = good.clone();
                bad[at] ^= 0x5a;
                std::fs::write(f, &bad).expect("write");
                let mut saw_error = false;
                match Engine::open(dir.path(), &cfg) {
                    Err(err) => {
                        assert!(err.is_corruption(), "{p:?} file {fi} byte {at}: {err}");
                        saw_error = true;
                    }
                    Ok(e) => {
                        for (k, v) in &model {
                            match e.get(k) {
                                Ok(got) => assert_eq!(got.as_ref(), Some(v), "{p:?}: wrong data after flip"),
                                Err(err) => {
                                    assert!(err.is_corruption(), "{err}");
                                    saw_error = true;
                                }
                            }
                        }
                        match e.scan(&cosine_tests::key(0), &cosine_tests::key(u64::MAX)) {
                            Ok(all) => assert_eq!(all.len(), model.len()),
                            Err(err) => {
                                assert!(err.is_corruption(), "{err}");
                                saw_error = true;
                            }
                        }
                        drop(e);
                    }
                }
                assert!(saw_error, "{p:?} file {fi} byte {at}: corruption went unnoticed");
                std::fs::write(f, &good).expect("restore");
            }
        }
    }
}
