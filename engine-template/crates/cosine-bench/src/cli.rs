//! The `cosine-bench` command line: parses flags, runs one benchmark, prints the report.

use crate::workload::Workload;
use crate::{run, text_report, CosineKv};
use cosine_config::Config;
use cosine_engine::{is_engine_file, MANIFEST};
use std::path::{Path, PathBuf};

const USAGE: &str = "usage: cosine-bench [--config engine.toml] [--workload workload.json] [--dir DATA_DIR] [--json] [--records N] [--ops N] [--threads N] [--engine cosine|rocksdb|fjall] [--keep]";

/// Runs `cosine-bench` with `args` (without the program name); an `Err` is the one-line
/// message the binary prints before exiting with status 2.
pub fn main_with_args(args: &[String]) -> Result<(), String> {
    let mut config = PathBuf::from("engine.toml");
    let mut workload: Option<PathBuf> = None;
    let mut dir = PathBuf::from("target/cosine-bench-data");
    let (mut json, mut keep) = (false, false);
    let (mut records, mut ops, mut threads): (Option<u64>, Option<u64>, Option<usize>) = (None, None, None);
    let mut engine = "cosine".to_string();
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value\n{USAGE}", args[i]));
        let num = |i: usize| -> Result<u64, String> { val(i)?.parse::<u64>().map_err(|e| format!("{}: {e}", args[i])) };
        match args[i].as_str() {
            "--config" => config = PathBuf::from(val(i)?),
            "--workload" => workload = Some(PathBuf::from(val(i)?)),
            "--dir" => dir = PathBuf::from(val(i)?),
            "--records" => records = Some(num(i)?),
            "--ops" => ops = Some(num(i)?),
            "--threads" => threads = Some(num(i)? as usize),
            "--engine" => engine = val(i)?,
            "--json" => {
                json = true;
                i += 1;
                continue;
            }
            "--keep" => {
                keep = true;
                i += 1;
                continue;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            a => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
        i += 2;
    }
    let cfg = Config::from_toml_file(&config).map_err(|e| e.to_string())?;
    let mut w = match &workload {
        Some(p) => Workload::from_file(p)?,
        None => Workload { threads: cfg.algorithms.threads, ..Workload::default() },
    };
    w.override_counts(records, ops, threads);
    if w.key_bytes != cfg.layout.key_bytes {
        eprintln!("note: workload key_bytes {} differs from the design's {}; keys are padded/truncated", w.key_bytes, cfg.layout.key_bytes);
    }
    let created = prepare_dir(&dir)?;
    let report = match engine.as_str() {
        "cosine" => {
            let e = cosine_engine::Engine::open(&dir, &cfg).map_err(|e| e.to_string())?;
            let kv = CosineKv(e);
            let r = run(&kv, &w)?;
            kv.0.close().map_err(|e| e.to_string())?;
            r
        }
        other => return Err(format!("engine '{other}' is not built into this binary (peers live in bench/peers)")),
    };
    if !keep {
        remove_engine_files(&dir)?;
        if created {
            let _ = std::fs::remove_dir(&dir); // only if empty
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", text_report(&report));
    }
    Ok(())
}

/// Makes `dir` ready for a benchmark without touching anything that is not the
/// engine's: a missing directory is created (returns true), an empty one is
/// used, an earlier benchmark's database is cleared file by file; a directory
/// holding anything else is refused.
fn prepare_dir(dir: &Path) -> Result<bool, String> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        return Ok(true);
    }
    if !dir.is_dir() {
        return Err(format!("--dir {} is not a directory", dir.display()));
    }
    let (engine, mut foreign) = classify(dir)?;
    if engine.is_empty() && foreign.is_empty() {
        return Ok(false);
    }
    if !engine.iter().any(|p| p.file_name().is_some_and(|n| n == MANIFEST)) {
        return Err(format!(
            "--dir {} is not empty and not a Cosine database (no MANIFEST); refusing to use it: give a new or empty directory",
            dir.display()
        ));
    }
    if !foreign.is_empty() {
        foreign.sort();
        foreign.truncate(5);
        return Err(format!(
            "--dir {} is a Cosine database but also holds other files ({}); refusing to clear it",
            dir.display(),
            foreign.join(", ")
        ));
    }
    remove_engine_files(dir)?;
    Ok(false)
}

// (engine files, names of everything else) directly in `dir`.
fn classify(dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), String> {
    let (mut engine, mut foreign) = (Vec::new(), Vec::new());
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for e in entries {
        let e = e.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let name = e.file_name().to_string_lossy().to_string();
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if is_file && is_engine_file(&name) {
            engine.push(e.path());
        } else {
            foreign.push(name);
        }
    }
    Ok((engine, foreign))
}

fn remove_engine_files(dir: &Path) -> Result<(), String> {
    for p in classify(dir)?.0 {
        std::fs::remove_file(&p).map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
    }
    Ok(())
}
