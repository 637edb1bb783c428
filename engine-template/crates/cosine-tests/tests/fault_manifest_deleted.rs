//! Fault: the MANIFEST is deleted.
//!
//! A directory that holds data files (runs, filters, log segments, WAL
//! segments) but no manifest is an error, never a fresh start: the open fails
//! and every file is left as it was.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::{Engine, Error};
use cosine_tests::{dir_contents, fill, TempDir};

#[test]
fn data_files_without_a_manifest_refuse_to_open_and_nothing_is_deleted() {
    for p in Preset::ALL {
        let cfg = tiny(p);
        let dir = TempDir::new("fault-no-manifest");
        let (e, _) = fill(dir.path(), &cfg, 300, 100, 3).expect("fill");
        e.wait_idle().expect("idle");
        for i in 0..3u64 {
            e.put(&cosine_tests::key(1000 + i), b"unflushed").expect("put"); // some WAL data too
        }
        e.close().expect("close");
        std::fs::remove_file(dir.path().join("MANIFEST")).expect("delete MANIFEST");
        let before = dir_contents(dir.path());
        assert!(before.keys().any(|n| n.ends_with(".sst") || n.ends_with(".log")), "{p:?}: data files exist");

        let err = Engine::open(dir.path(), &cfg).expect_err("data without a manifest must not open as a new database");
        assert!(matches!(err, Error::MissingManifest { .. }), "{p:?}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("MANIFEST"), "{p:?}: error names the missing manifest: {msg}");
        assert_eq!(dir_contents(dir.path()), before, "{p:?}: no file deleted or changed");
    }
}
