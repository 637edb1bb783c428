//! `cosine-presets`: the preset designs' `engine.toml` files, generated from the
//! Rust presets (`cosine_config::presets::standard`), which are the one definition.
//!
//! `cosine-presets --write DIR` writes `DIR/{rocksdb,wiredtiger,faster,hybrid}.toml`;
//! `cosine-presets --check DIR` exits with status 1, listing the differences, when
//! `DIR` does not hold exactly what `--write` would write.
//! From `engine-template/`: `cargo run -p cosine-config --bin cosine-presets -- --write presets`.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::presets;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: cosine-presets (--write DIR | --check DIR)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, dir) = match args.as_slice() {
        [m, d] if m == "--write" || m == "--check" => (m.as_str(), Path::new(d)),
        [h] if h == "-h" || h == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = if mode == "--write" {
        presets::write_files(dir).map(|paths| {
            for p in paths {
                println!("wrote {}", p.display());
            }
            ExitCode::SUCCESS
        })
    } else {
        presets::check_files(dir).map(|problems| {
            for p in &problems {
                eprintln!("{p}");
            }
            if problems.is_empty() {
                println!("{} matches the Rust presets", dir.display());
                ExitCode::SUCCESS
            } else {
                eprintln!("regenerate with: cosine-presets --write {}", dir.display());
                ExitCode::FAILURE
            }
        })
    };
    result.unwrap_or_else(|e| {
        eprintln!("cosine-presets: {e}");
        ExitCode::from(2)
    })
}
