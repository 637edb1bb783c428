//! Invalid `engine.toml` values and mismatched directories give clear errors, never panics.

use cosine_config::presets::{tiny, Preset};
use cosine_config::Config;
use cosine_engine::{Engine, Error};
use cosine_tests::TempDir;

#[test]
fn invalid_configs_and_mismatched_directories_are_errors() {
    for (text, needle) in [
        ("[layout]\nblock_entries = 0\n", "block_entries"),
        ("[layout]\nruns_per_hot_level = 0\n", "runs_per_hot_level"),
        ("[layout]\nbuffer_bytes = 3\n", "buffer_bytes"),
        ("[algorithms]\nfile_picking = \"random\"\n", "random"),
        ("[algorithms]\nmerge_threshold = 1.5\n", "merge_threshold"),
        ("[durability]\nwal_sync = \"sometimes\"\n", "sometimes"),
        ("[design]\nclass = 3\n", "class"),
        ("[layout]\nbuffer_put_limit = 0.5\n", "buffer_put_limit"),
        // a number's field with something else: named, with what was expected
        ("[layout]\nsize_ratio = \"x\"\n", "expected a number"),
        ("[layout]\nbloom_bits_per_key = [\"a\"]\n", "expected a number"),
        ("not toml at all", ""),
    ] {
        match Config::from_toml_str(text) {
            Err(Error::Config(m)) => assert!(m.contains(needle), "{text:?}: {m}"),
            other => panic!("{text:?}: expected a config error, got {other:?}"),
        }
    }
    let mut bad = tiny(Preset::RocksDb);
    bad.layout.size_ratio = 1.0;
    let dir = TempDir::new("cfg");
    assert!(matches!(Engine::open(dir.path(), &bad), Err(Error::Config(_))));

    Engine::open(dir.path(), &tiny(Preset::Faster)).expect("open lsh").close().expect("close");
    let err = Engine::open(dir.path(), &tiny(Preset::RocksDb)).expect_err("tree config on a hash-log directory");
    assert!(err.to_string().contains("lsh"), "{err}");
    let mut wide = tiny(Preset::Faster);
    wide.layout.key_bytes = 32;
    assert!(matches!(Engine::open(dir.path(), &wide), Err(Error::Config(_))));
}
