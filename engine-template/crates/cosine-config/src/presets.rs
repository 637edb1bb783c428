//! The four design classes as ready-made configurations (paper Table 1 initializations).
//!
//! `standard` sizes them for the benchmark (about a million 116-byte records);
//! `tiny` shrinks buffers, blocks and files so tests exercise many flushes,
//! compactions and levels with a few hundred operations.

use crate::*;
use std::path::{Path, PathBuf};

/// A named example design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// RocksDB-like LSM: T=10, K=1, Z=1, 10 bits/key, full compaction.
    RocksDb,
    /// WiredTiger-like B-tree: T=32, no filters, large blocks, cold levels below level 1.
    WiredTiger,
    /// FASTER-like log-structured hash table.
    Faster,
    /// LSM hot levels (tiered, filters) over B-tree-like cold levels.
    Hybrid,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 4] = [Preset::RocksDb, Preset::WiredTiger, Preset::Faster, Preset::Hybrid];

    /// Short name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Preset::RocksDb => "rocksdb",
            Preset::WiredTiger => "wiredtiger",
            Preset::Faster => "faster",
            Preset::Hybrid => "hybrid",
        }
    }

    /// Parses a short name.
    pub fn from_name(s: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == s)
    }

    /// File name of the preset's `engine.toml` in `engine-template/presets/`.
    pub fn file_name(self) -> String {
        format!("{}.toml", self.name())
    }
}

/// Table 1 initializations: the knobs that set the presets apart (the rest is
/// `Config::default()`). `standard` and `tiny` then size buffers, blocks and files.
fn base(p: Preset) -> Config {
    use {CompactionKind as C, DesignClass as D, FilePicking as F, RunStrategy as R};
    #[rustfmt::skip]
    let (class, t, k, z, bits, hot, compaction, full_levels, run_strategy, file_picking, threshold) = match p {
        //                     class      T       K    Z    bits  hot  compaction  full  run strategy  file picking    threshold
        Preset::RocksDb    => (D::Lsm,    10.0,   1,   1,   10.0, 16,  C::Full,    2,    R::First,     F::DenseFp,     1.0),
        Preset::WiredTiger => (D::Btree,  32.0,   1,   1,   0.0,  1,   C::Partial, 2,    R::First,     F::ChooseFirst, 0.5),
        Preset::Faster     => (D::Lsh,    1000.0, 999, 999, 0.0,  1,   C::Partial, 2,    R::First,     F::DenseFp,     0.5),
        Preset::Hybrid     => (D::Hybrid, 4.0,    2,   1,   10.0, 1,   C::Hybrid,  1,    R::Fullest,   F::DenseFp,     0.75),
    };
    let mut c = Config::default();
    c.design.name = p.name().to_string();
    c.design.class = class;
    c.layout.size_ratio = t;
    c.layout.runs_per_hot_level = k;
    c.layout.runs_per_cold_level = z;
    c.layout.bloom_bits_per_key = vec![bits];
    c.layout.hot_levels = hot;
    c.algorithms.compaction = compaction;
    c.algorithms.full_compaction_levels = full_levels;
    c.algorithms.run_strategy = run_strategy;
    c.algorithms.file_picking = file_picking;
    c.algorithms.merge_threshold = threshold;
    c
}

/// The preset sized for the benchmark (16-byte keys, 100-byte values, ~1M records).
pub fn standard(p: Preset) -> Config {
    let mut c = base(p);
    c.layout.key_bytes = 16;
    c.layout.value_bytes = 100;
    c.layout.buffer_bytes = 4 << 20;
    c.algorithms.file_entries = 65536;
    c.durability.wal_sync = WalSync::None;
    c.layout.block_entries = match p {
        Preset::WiredTiger => 256,
        _ => 32,
    };
    if p == Preset::Hybrid {
        c.layout.size_ratio = 10.0;
        c.layout.runs_per_hot_level = 3;
    }
    c
}

/// The preset shrunk for tests: a handful of entries per buffer, block and file.
pub fn tiny(p: Preset) -> Config {
    let mut c = base(p);
    c.layout.key_bytes = 16;
    c.layout.value_bytes = 8;
    c.durability.wal_sync = WalSync::None;
    let eb: u64 = match p {
        Preset::RocksDb => 4,
        Preset::WiredTiger => 2,
        Preset::Faster => 4,
        Preset::Hybrid => 2,
    };
    c.layout.buffer_bytes = eb * c.entry_bytes() as u64;
    c.layout.block_entries = match p {
        Preset::WiredTiger => 4,
        _ => 2,
    };
    c.algorithms.file_entries = match p {
        Preset::Faster => 8,
        _ => 4,
    };
    c
}

/// Renders a configuration as `engine.toml` text (the inverse of [`Config::from_toml_str`]).
pub fn to_toml(c: &Config) -> String {
    fn e<T: std::fmt::Debug>(v: T) -> String {
        // Enum variants print in CamelCase; the file uses snake_case.
        let s = format!("{v:?}");
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if ch.is_uppercase() {
                if i > 0 {
                    out.push('_');
                }
                out.extend(ch.to_lowercase());
            } else {
                out.push(ch);
            }
        }
        out
    }
    let bloom: Vec<String> = c.layout.bloom_bits_per_key.iter().map(|b| format!("{b:?}")).collect();
    format!(
        "[design]\nname = \"{}\"\nclass = \"{}\"\n\n[layout]\nkey_bytes = {}\nvalue_bytes = {}\nblock_entries = {}\nsize_ratio = {:?}\nruns_per_hot_level = {}\nruns_per_cold_level = {}\nbuffer_bytes = {}\nbloom_bits_per_key = [{}]\nhot_levels = {}\nblock_cache_bytes = {}\n\n[algorithms]\nfilter_granularity = \"{}\"\ncompaction = \"{}\"\nrun_strategy = \"{}\"\nfile_picking = \"{}\"\nmerge_threshold = {:?}\nfull_compaction_levels = {}\nfile_entries = {}\nthreads = {}\n\n[durability]\nwal_sync = \"{}\"\ngroup_commit_interval_us = {}\nwal_recovery = \"{}\"\n",
        c.design.name.replace('"', "'"),
        e(c.design.class),
        c.layout.key_bytes,
        c.layout.value_bytes,
        c.layout.block_entries,
        c.layout.size_ratio,
        c.layout.runs_per_hot_level,
        c.layout.runs_per_cold_level,
        c.layout.buffer_bytes,
        bloom.join(", "),
        c.layout.hot_levels,
        c.layout.block_cache_bytes,
        e(c.algorithms.filter_granularity),
        e(c.algorithms.compaction),
        e(c.algorithms.run_strategy),
        e(c.algorithms.file_picking),
        c.algorithms.merge_threshold,
        c.algorithms.full_compaction_levels,
        c.algorithms.file_entries,
        c.algorithms.threads,
        e(c.durability.wal_sync),
        c.durability.group_commit_interval_us,
        e(c.durability.wal_recovery),
    )
}

/// The text of preset `p`'s file in `presets/`: a note that it is generated,
/// then [`standard`] rendered by [`to_toml`].
pub fn file_text(p: Preset) -> String {
    format!(
        "# Generated from cosine_config::presets::standard(Preset::{p:?}) by `cosine-presets --write presets`.\n\
         # Edit crates/cosine-config/src/presets.rs and regenerate; do not edit this file.\n{}",
        to_toml(&standard(p))
    )
}

/// Writes [`file_text`] of every preset to `dir/<name>.toml` (the `presets/`
/// directory is generated this way); returns the paths.
pub fn write_files(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut out = Vec::new();
    for p in Preset::ALL {
        let path = dir.join(p.file_name());
        std::fs::write(&path, file_text(p)).map_err(|e| Error::io(&path, e))?;
        out.push(path);
    }
    Ok(out)
}

/// Compares `dir` with what [`write_files`] writes. Returns one line per preset
/// file that is missing or differs (naming its first differing line), and per
/// `*.toml` file in `dir` that is no preset; empty when `dir` is up to date.
pub fn check_files(dir: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for p in Preset::ALL {
        let path = dir.join(p.file_name());
        let want = file_text(p);
        let got = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(format!("{}: missing", path.display()));
                continue;
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        if got != want {
            problems.push(format!("{}: {}", path.display(), first_difference(&got, &want)));
        }
    }
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.ends_with(".toml") && !Preset::ALL.iter().any(|p| p.file_name() == name) {
            problems.push(format!("{}: not a preset (presets: {})", path.display(), Preset::ALL.map(Preset::name).join(", ")));
        }
    }
    Ok(problems)
}

fn first_difference(got: &str, want: &str) -> String {
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let end = "<end of file>";
    match (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)) {
        Some(i) => format!("line {} is `{}`, expected `{}`", i + 1, g.get(i).unwrap_or(&end), w.get(i).unwrap_or(&end)),
        None => "line endings differ".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn toml_roundtrip() {
        for p in Preset::ALL {
            let c = standard(p);
            let back = Config::from_toml_str(&to_toml(&c)).expect("roundtrip");
            assert_eq!(back.design.class, c.design.class);
            assert_eq!(back.algorithms.file_picking, c.algorithms.file_picking);
            assert_eq!(back.durability.wal_sync, c.durability.wal_sync);
            assert_eq!(back.durability.wal_recovery, c.durability.wal_recovery);
            assert_eq!(back.layout.size_ratio, c.layout.size_ratio);
        }
    }
}
