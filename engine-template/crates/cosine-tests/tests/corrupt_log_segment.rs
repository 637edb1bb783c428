//! A flipped byte in a hash-log segment is reported as corruption when the
//! index is rebuilt at open.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{fill, TempDir};

#[test]
fn flipped_log_byte_fails_open() {
    let cfg = tiny(Preset::Faster);
    let dir = TempDir::new("corrupt-log");
    let (e, _) = fill(dir.path(), &cfg, 300, 100, 9).expect("fill");
    e.wait_idle().expect("idle");
    e.close().expect("close");
    let seg = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("a log segment");
    let mut b = std::fs::read(&seg).expect("read");
    let at = b.len() / 2;
    b[at] ^= 0x22;
    std::fs::write(&seg, &b).expect("write");
    let err = Engine::open(dir.path(), &cfg).expect_err("corrupt segment must fail open");
    assert!(err.is_corruption(), "{err}");
}
