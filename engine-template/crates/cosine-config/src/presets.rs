//! The four design classes as ready-made configurations (paper Table 1 initializations).
//!
//! `standard` sizes them for the benchmark (about a million 116-byte records);
//! `tiny` shrinks buffers, blocks and files so tests exercise many flushes,
//! compactions and levels with a few hundred operations.

use crate::*;

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
}

fn base(p: Preset) -> Config {
    let mut c = Config::default();
    c.design.name = p.name().to_string();
    match p {
        Preset::RocksDb => {
            c.design.class = DesignClass::Lsm;
            c.layout.size_ratio = 10.0;
            c.layout.bloom_bits_per_key = vec![10.0];
            c.layout.hot_levels = 16;
            c.algorithms.compaction = CompactionKind::Full;
            c.algorithms.file_picking = FilePicking::DenseFp;
        }
        Preset::WiredTiger => {
            c.design.class = DesignClass::Btree;
            c.layout.size_ratio = 32.0;
            c.layout.bloom_bits_per_key = vec![0.0];
            c.layout.hot_levels = 1;
            c.algorithms.compaction = CompactionKind::Partial;
            c.algorithms.file_picking = FilePicking::ChooseFirst;
            c.algorithms.merge_threshold = 0.5;
        }
        Preset::Faster => {
            c.design.class = DesignClass::Lsh;
            c.layout.size_ratio = 1000.0;
            c.layout.runs_per_hot_level = 999;
            c.layout.runs_per_cold_level = 999;
            c.layout.bloom_bits_per_key = vec![0.0];
            c.layout.hot_levels = 1;
            c.algorithms.compaction = CompactionKind::Partial;
            c.algorithms.merge_threshold = 0.5;
        }
        Preset::Hybrid => {
            c.design.class = DesignClass::Hybrid;
            c.layout.size_ratio = 4.0;
            c.layout.runs_per_hot_level = 2;
            c.layout.runs_per_cold_level = 1;
            c.layout.bloom_bits_per_key = vec![10.0];
            c.layout.hot_levels = 1;
            c.algorithms.compaction = CompactionKind::Hybrid;
            c.algorithms.full_compaction_levels = 1;
            c.algorithms.run_strategy = RunStrategy::Fullest;
            c.algorithms.file_picking = FilePicking::DenseFp;
            c.algorithms.merge_threshold = 0.75;
        }
    }
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
        "[design]\nname = \"{}\"\nclass = \"{}\"\n\n[layout]\nkey_bytes = {}\nvalue_bytes = {}\nblock_entries = {}\nsize_ratio = {:?}\nruns_per_hot_level = {}\nruns_per_cold_level = {}\nbuffer_bytes = {}\nbloom_bits_per_key = [{}]\nhot_levels = {}\nblock_cache_bytes = {}\n\n[algorithms]\nfilter_granularity = \"{}\"\ncompaction = \"{}\"\nrun_strategy = \"{}\"\nfile_picking = \"{}\"\nmerge_threshold = {:?}\nfull_compaction_levels = {}\nfile_entries = {}\nthreads = {}\n\n[durability]\nwal_sync = \"{}\"\ngroup_commit_interval_us = {}\n",
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
    )
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
            assert_eq!(back.layout.size_ratio, c.layout.size_ratio);
        }
    }
}
