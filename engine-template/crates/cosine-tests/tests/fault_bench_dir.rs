//! Fault: `cosine-bench --dir X` is pointed at a directory of the user's files.
//!
//! The benchmark refuses a directory that is neither empty nor a Cosine
//! database and deletes nothing in it; an empty directory, a missing one and an
//! earlier benchmark's database are accepted, and afterwards only the files the
//! engine made are removed.

use cosine_bench::cli::main_with_args;
use cosine_config::presets::{tiny, to_toml, Preset};
use cosine_tests::{dir_contents, TempDir};

fn bench(config: &std::path::Path, dir: &std::path::Path, keep: bool) -> Result<(), String> {
    let mut args: Vec<String> =
        ["--config", config.to_str().unwrap_or("."), "--dir", dir.to_str().unwrap_or(".")].iter().map(|s| s.to_string()).collect();
    args.extend(["--records", "200", "--ops", "200", "--json"].iter().map(|s| s.to_string()));
    if keep {
        args.push("--keep".into());
    }
    main_with_args(&args)
}

#[test]
fn bench_refuses_a_directory_of_user_files_and_deletes_nothing() {
    let scratch = TempDir::new("fault-bench-dir");
    let config = scratch.path().join("engine.toml");
    std::fs::write(&config, to_toml(&tiny(Preset::RocksDb))).expect("write config");

    let user = scratch.path().join("photos");
    std::fs::create_dir_all(user.join("2024")).expect("mkdir");
    std::fs::write(user.join("notes.txt"), b"not a database").expect("write");
    std::fs::write(user.join("2024").join("a.jpg"), b"jpeg").expect("write");
    let before = dir_contents(&user);
    let err = bench(&config, &user, false).expect_err("a directory of user files must be refused");
    assert!(err.contains(user.to_str().unwrap_or("?")) && err.contains("not empty"), "clear error: {err}");
    assert_eq!(dir_contents(&user), before, "user files untouched");
    assert!(user.join("2024").join("a.jpg").is_file(), "nested user files untouched");

    // A missing directory is created and removed again; an empty one is kept (empty).
    let fresh = scratch.path().join("fresh");
    bench(&config, &fresh, false).expect("missing directory");
    assert!(!fresh.exists(), "the directory the bench created is removed");
    let empty = scratch.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    bench(&config, &empty, false).expect("empty directory");
    assert!(empty.is_dir() && dir_contents(&empty).is_empty(), "an existing empty directory stays, emptied");

    // --keep leaves a database; running again on it is allowed (it is cleared first).
    let kept = scratch.path().join("kept");
    bench(&config, &kept, true).expect("keep");
    assert!(kept.join("MANIFEST").is_file());
    bench(&config, &kept, true).expect("rerun on a Cosine database");
    // A Cosine database with a stranger file in it is refused, and the stranger survives.
    std::fs::write(kept.join("thesis.tex"), b"\\documentclass").expect("write");
    let err = bench(&config, &kept, false).expect_err("a database with foreign files is refused");
    assert!(err.contains("thesis.tex"), "names the foreign file: {err}");
    assert!(kept.join("thesis.tex").is_file());
}
