//! `engine-template/presets/*.toml` are generated from the Rust presets
//! (`cosine-presets --write presets`); this fails when they drift apart.

use cosine_config::presets::{self, Preset};
use cosine_config::Config;
use std::path::PathBuf;

fn presets_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../presets")
}

#[test]
fn preset_files_are_what_the_rust_presets_generate() {
    let dir = presets_dir();
    let problems = presets::check_files(&dir).expect("presets directory readable");
    assert!(
        problems.is_empty(),
        "presets/ differs from cosine_config::presets::standard; regenerate it from engine-template/ with\n  cargo run -p cosine-config --bin cosine-presets -- --write presets\n{}",
        problems.join("\n")
    );
    for p in Preset::ALL {
        let cfg = Config::from_toml_file(dir.join(p.file_name())).expect("preset file parses");
        assert_eq!(presets::to_toml(&cfg), presets::to_toml(&presets::standard(p)), "{p:?}: to_toml does not round-trip");
    }
}

#[test]
fn check_names_missing_changed_and_unknown_files() {
    let tmp = tempfile::Builder::new().prefix("cosine-presets-check-").tempdir().expect("scratch directory");
    let dir = tmp.path();
    presets::write_files(dir).expect("write");
    assert_eq!(presets::check_files(dir).expect("check"), Vec::<String>::new());
    let hybrid = dir.join(Preset::Hybrid.file_name());
    let text = std::fs::read_to_string(&hybrid).expect("read");
    std::fs::write(&hybrid, text.replace("size_ratio = 10.0", "size_ratio = 4.0")).expect("edit");
    std::fs::remove_file(dir.join(Preset::Faster.file_name())).expect("remove");
    std::fs::write(dir.join("mystery.toml"), "").expect("extra");
    let problems = presets::check_files(dir).expect("check");
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("hybrid.toml: line 11 is `size_ratio = 4.0`, expected `size_ratio = 10.0`")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.contains("faster.toml: missing")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("mystery.toml: not a preset")), "{problems:?}");
}
