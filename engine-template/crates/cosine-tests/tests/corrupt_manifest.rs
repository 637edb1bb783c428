//! A flipped byte in the manifest makes open fail with a corruption error.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{fill, TempDir};

#[test]
fn flipped_manifest_byte_fails_open() {
    for p in Preset::ALL {
        let cfg = tiny(p);
        let dir = TempDir::new("corrupt-manifest");
        let (e, _) = fill(dir.path(), &cfg, 200, 100, 5).expect("fill");
        e.wait_idle().expect("idle");
        e.close().expect("close");
        let m = dir.path().join("MANIFEST");
        let good = std::fs::read(&m).expect("read");
        for at in [0, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            std::fs::write(&m, &bad).expect("write");
            let err = Engine::open(dir.path(), &cfg).expect_err("corrupt manifest must fail open");
            assert!(err.is_corruption(), "{p:?} byte {at}: {err}");
        }
        std::fs::write(&m, &good).expect("restore");
        Engine::open(dir.path(), &cfg).expect("intact manifest opens").close().expect("close");
    }
}
