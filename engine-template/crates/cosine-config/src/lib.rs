//! `engine.toml`: one design of the Cosine template (paper Table 1), parsed and validated.
//!
//! Everything design-specific in the engine is read from here; the derived
//! quantities (`E_B`, level capacities, runs per level, hot/cold split) follow
//! the engine contract (`docs/engine-contract.md`) exactly, because the cost model
//! computes the same numbers.
#![deny(unsafe_code, clippy::unwrap_used)]

mod num;
pub mod presets;

pub use cosine_compress::Codec;
use cosine_core::{Error, Result};
use serde::{Deserialize, Deserializer};
use std::path::Path;

/// Design class (paper Algorithm 3). `lsh` selects the hash-log layout; the others share the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DesignClass {
    /// Log-structured merge tree: filters, all levels hot.
    Lsm,
    /// B-tree-like: no filters, large fanout, cold levels with on-disk fence pointers.
    Btree,
    /// Log-structured hash table (FASTER-like).
    Lsh,
    /// LSM-like hot levels over B-tree-like cold levels.
    Hybrid,
}

/// Granularity of Bloom filters (Table 1, row 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterGranularity {
    /// One filter per data block.
    Block,
    /// One filter per file (SST).
    File,
    /// One filter per run.
    Run,
}

/// Compaction / restructuring algorithm (Table 1, row 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionKind {
    /// Level-to-level: a whole level is merged into the next.
    Full,
    /// File-to-file: one file (plus what it overlaps) moves down at a time.
    Partial,
    /// Full on levels `1..=full_compaction_levels`, partial below.
    Hybrid,
}

/// Which run of a level partial compaction takes a file from (Table 1, row 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStrategy {
    /// The first (oldest) run of the level.
    First,
    /// The most recent run that is full.
    LastFull,
    /// The run holding the most entries.
    Fullest,
}

/// Which file partial compaction moves (Table 1, row 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilePicking {
    /// The file least recently produced by a merge.
    OldestMerged,
    /// The file holding the oldest flushed data.
    OldestFlushed,
    /// The file with the densest fence pointers (most entries per unit of key range).
    DenseFp,
    /// The file with the sparsest fence pointers (fewest entries per unit of key range).
    SparseFp,
    /// The first file in key order.
    ChooseFirst,
}

/// When the write-ahead log is forced to stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WalSync {
    /// fdatasync before every write is acknowledged (concurrent writers share a sync).
    EveryWrite,
    /// Records reach the OS at once; a background thread syncs every `group_commit_interval_us`.
    GroupCommit,
    /// Records are buffered in the process and never synced explicitly.
    None,
}

/// What replaying the write-ahead log does with a damaged record (modelled on
/// RocksDB's `WALRecoveryMode`; contract section 4 of `docs/engine-contract.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WalRecovery {
    /// The default. Only a torn tail is dropped: the last record of the last
    /// segment cut short by a crash (a short header, or a record running past the
    /// end of the file with nothing valid after it), or a zero-filled tail. Any
    /// other damage stops the open with the file and byte offset, and nothing is
    /// changed on disk (RocksDB `kTolerateCorruptedTailRecords`).
    TolerateCorruptedTail,
    /// Any damage, a torn tail included, stops the open (`kAbsoluteConsistency`).
    AbsoluteConsistency,
    /// Salvage: replay stops at the first damaged record and drops it and
    /// everything after it, later segments included; the database opens at that
    /// point in time (`kPointInTimeRecovery`). Dropped bytes are copied to
    /// `salvage/` and every action is logged.
    PointInTime,
    /// Salvage: damaged records are skipped and replay resumes at the next intact
    /// record (`kSkipAnyCorruptedRecords`). Dropped bytes are copied to
    /// `salvage/` and every action is logged.
    SkipAnyCorrupted,
}

/// `[design]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct DesignSection {
    /// Free text printed by the bench.
    pub name: String,
    /// Design class.
    pub class: DesignClass,
}

/// `[layout]`: the layout primitives.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LayoutSection {
    /// Fixed key size; keys are zero-padded or truncated to it.
    pub key_bytes: usize,
    /// Nominal value size (used for `E_B` and block sizing; values may differ).
    pub value_bytes: usize,
    /// B: entries per logical data block.
    pub block_entries: usize,
    /// T: capacity(level i+1) = T * capacity(level i).
    #[serde(deserialize_with = "num::f64_any")]
    pub size_ratio: f64,
    /// K: runs a hot level (not the last) may hold.
    pub runs_per_hot_level: usize,
    /// Z: runs a cold level and the last level may hold.
    pub runs_per_cold_level: usize,
    /// M_B: memtable capacity in bytes of `key_bytes + value_bytes` entries.
    pub buffer_bytes: u64,
    /// The memtable is also frozen once it took this many times `E_B` puts (overwrites
    /// included) without filling: its log holds at most that many records. Rendered from the
    /// cost model's `buffer_put_limit` (cost_models/data/model_constants.yaml), which prices
    /// the flushes it brings; [`DEFAULT_BUFFER_PUT_LIMIT`] when absent.
    #[serde(deserialize_with = "num::f64_any")]
    pub buffer_put_limit: f64,
    /// Bloom bits per key for disk levels 1..; missing levels reuse the last; 0 = none.
    #[serde(deserialize_with = "num::f64_vec")]
    pub bloom_bits_per_key: Vec<f64>,
    /// L - Y: levels 1..=hot_levels keep filters and fence pointers in memory.
    pub hot_levels: usize,
    /// Block cache size in bytes (0 disables it).
    pub block_cache_bytes: u64,
}

/// `[layout] buffer_put_limit` when a config has none: the cost model's value
/// (cost_models/data/model_constants.yaml `buffer_put_limit`; tests/test_render.py checks both).
pub const DEFAULT_BUFFER_PUT_LIMIT: f64 = 2.0;

/// `[algorithms]`: the algorithmic abstractions.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct AlgorithmsSection {
    /// Filter granularity.
    pub filter_granularity: FilterGranularity,
    /// Compaction algorithm.
    pub compaction: CompactionKind,
    /// Run strategy for partial compaction.
    pub run_strategy: RunStrategy,
    /// File picking for partial compaction.
    pub file_picking: FilePicking,
    /// A level is compacted when more than this fraction of its capacity is used.
    #[serde(deserialize_with = "num::f64_any")]
    pub merge_threshold: f64,
    /// Hybrid only: levels 1..=n use full compaction, deeper ones partial.
    pub full_compaction_levels: usize,
    /// Entries per file (SST); partial compaction moves whole files.
    pub file_entries: usize,
    /// η: worker threads for the benchmark.
    pub threads: usize,
}

/// `[durability]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct DurabilitySection {
    /// WAL sync policy.
    pub wal_sync: WalSync,
    /// Group-commit sync interval in microseconds.
    pub group_commit_interval_us: u64,
    /// What WAL replay does with damaged records.
    pub wal_recovery: WalRecovery,
}

/// `[compression]`: how data blocks are stored, per level class (Table 1 of the
/// technical report lists compression as a knob). `none`, `lz4`, `zstd` (level 3)
/// or `zstd:LEVEL` (1..=22). A file keeps the codec it was written with, also when
/// a trivial move relinks it into a level of the other class.
#[derive(Debug, Clone, Copy, Deserialize, Default)]
#[serde(default)]
pub struct CompressionSection {
    /// Codec of files written into hot levels (`1..=hot_levels`).
    #[serde(deserialize_with = "codec")]
    pub hot: Codec,
    /// Codec of files written into cold levels.
    #[serde(deserialize_with = "codec")]
    pub cold: Codec,
}

fn codec<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Codec, D::Error> {
    let text = String::deserialize(d)?;
    Codec::parse(&text).map_err(|e| serde::de::Error::custom(e.to_string()))
}

/// `[range_filter]`: a Rosetta-style range filter (cosine-filter `range`) in every
/// file of a hot level, held in memory with the level's fence pointers; scans with
/// an upper bound skip a file whose filter rules the range out.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct RangeFilterSection {
    /// Bits per distinct key prefix at each dyadic height (index 0: whole keys);
    /// empty or all 0: no range filter. At most 64 heights.
    #[serde(deserialize_with = "num::f64_vec")]
    pub bits_per_height: Vec<f64>,
}

impl RangeFilterSection {
    /// True when files of hot levels carry a range filter.
    pub fn enabled(&self) -> bool {
        self.bits_per_height.iter().any(|b| *b > 0.0)
    }
}

/// What kind of storage the engine's blocks live on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// The local file system as it is (tmpfs, a local SSD): blocks cost what it charges.
    Local,
    /// A provisioned cloud volume: every block moved pays its IOPS, throughput and read latency.
    Volume,
}

/// `[device]`: the storage the blocks pay for (`cosine render` fills it from the chosen volume).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceSection {
    /// `local` (no throttling) or `volume`.
    pub kind: DeviceKind,
    /// Provisioned I/O operations per second (one per block moved).
    #[serde(deserialize_with = "num::f64_any")]
    pub iops: f64,
    /// Provisioned throughput in MiB per second.
    #[serde(deserialize_with = "num::f64_any")]
    pub throughput_mib_s: f64,
    /// Microseconds a foreground read waits for the volume (its service time).
    #[serde(deserialize_with = "num::f64_any")]
    pub read_latency_us: f64,
    /// I/Os the token bucket holds: what the volume absorbs in a burst after idling.
    #[serde(deserialize_with = "num::f64_any")]
    pub burst_ios: f64,
}

impl Default for DeviceSection {
    fn default() -> Self {
        DeviceSection { kind: DeviceKind::Local, iops: 0.0, throughput_mib_s: 0.0, read_latency_us: 0.0, burst_ios: 0.0 }
    }
}

impl DeviceSection {
    /// The volume to throttle to, or `None` for a local device.
    pub fn spec(&self) -> Option<cosine_core::DeviceSpec> {
        match self.kind {
            DeviceKind::Local => None,
            DeviceKind::Volume => Some(cosine_core::DeviceSpec {
                iops: self.iops,
                bytes_per_s: self.throughput_mib_s * 1048576.0,
                read_latency: std::time::Duration::from_secs_f64(self.read_latency_us * 1e-6),
                burst_ios: self.burst_ios,
            }),
        }
    }

    fn validate(&self) -> Result<()> {
        if self.kind == DeviceKind::Local {
            return Ok(());
        }
        let bad = |m: String| Err(Error::Config(m));
        if !self.iops.is_finite() || !(1.0..=1e8).contains(&self.iops) {
            return bad(format!("device.iops must be a number in [1, 1e8] for a volume, got {}", self.iops));
        }
        if !self.throughput_mib_s.is_finite() || !(0.01..=1e6).contains(&self.throughput_mib_s) {
            return bad(format!("device.throughput_mib_s must be in [0.01, 1e6] for a volume, got {}", self.throughput_mib_s));
        }
        if !self.read_latency_us.is_finite() || !(0.0..=1e6).contains(&self.read_latency_us) {
            return bad(format!("device.read_latency_us must be in [0, 1e6] (at most a second), got {}", self.read_latency_us));
        }
        if !self.burst_ios.is_finite() || !(0.0..=1e9).contains(&self.burst_ios) {
            return bad(format!("device.burst_ios must be in [0, 1e9], got {}", self.burst_ios));
        }
        Ok(())
    }
}

/// `[server]`: settings of `cosine-server`, which serves the engine over RESP (the
/// engine itself ignores them). Every key is optional: an absent key takes the
/// server's default, and `cosine-server`'s command-line flags override them (its
/// crate docs, `output` module, and `docs/deploy.md` give the defaults and why).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    /// Redis' `client-output-buffer-limit` hard limit: reply bytes one connection may
    /// have queued (produced, not yet written) before it is closed at once; 0 = none.
    pub client_output_buffer_hard_bytes: Option<u64>,
    /// The soft limit: queued reply bytes a connection may stay over only for
    /// `client_output_buffer_soft_seconds`; 0 = none.
    pub client_output_buffer_soft_bytes: Option<u64>,
    /// Seconds in a row over the soft limit before the connection is closed.
    pub client_output_buffer_soft_seconds: Option<u64>,
}

/// One complete design, as read from `engine.toml`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct Config {
    /// `[design]`
    pub design: DesignSection,
    /// `[layout]`
    pub layout: LayoutSection,
    /// `[algorithms]`
    pub algorithms: AlgorithmsSection,
    /// `[durability]`
    pub durability: DurabilitySection,
    /// `[compression]`
    pub compression: CompressionSection,
    /// `[range_filter]`
    pub range_filter: RangeFilterSection,
    /// `[device]` (absent: the local device, unthrottled)
    pub device: DeviceSection,
    /// `[server]` (absent: `cosine-server`'s defaults)
    pub server: ServerSection,
}

impl Default for DesignSection {
    fn default() -> Self {
        DesignSection { name: "default-lsm".into(), class: DesignClass::Lsm }
    }
}

impl Default for LayoutSection {
    fn default() -> Self {
        LayoutSection {
            key_bytes: 16,
            value_bytes: 100,
            block_entries: 4,
            size_ratio: 10.0,
            runs_per_hot_level: 1,
            runs_per_cold_level: 1,
            buffer_bytes: 8 << 20,
            buffer_put_limit: DEFAULT_BUFFER_PUT_LIMIT,
            bloom_bits_per_key: vec![10.0],
            hot_levels: 8,
            block_cache_bytes: 0,
        }
    }
}

impl Default for AlgorithmsSection {
    fn default() -> Self {
        AlgorithmsSection {
            filter_granularity: FilterGranularity::File,
            compaction: CompactionKind::Full,
            run_strategy: RunStrategy::First,
            file_picking: FilePicking::DenseFp,
            merge_threshold: 1.0,
            full_compaction_levels: 2,
            file_entries: 65536,
            threads: 1,
        }
    }
}

impl Default for DurabilitySection {
    fn default() -> Self {
        DurabilitySection {
            wal_sync: WalSync::EveryWrite,
            group_commit_interval_us: 1000,
            wal_recovery: WalRecovery::TolerateCorruptedTail,
        }
    }
}

/// Compaction policy applied to a merge out of one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergePolicy {
    /// Move the whole source level; rewrite the whole target run.
    Full,
    /// Move one file (and what it must take along); rewrite only overlapping target files.
    Partial,
}

impl Config {
    /// Parses and validates TOML text.
    pub fn from_toml_str(text: &str) -> Result<Config> {
        let cfg: Config = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads, parses and validates an `engine.toml` file.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Config> {
        let p = path.as_ref();
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
        Self::from_toml_str(&text).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", p.display())),
            other => other,
        })
    }

    /// Checks every knob; the first violation is returned as [`Error::Config`].
    pub fn validate(&self) -> Result<()> {
        let l = &self.layout;
        let a = &self.algorithms;
        let bad = |m: String| Err(Error::Config(m));
        if l.key_bytes == 0 || l.key_bytes > 4096 {
            return bad(format!("layout.key_bytes must be in 1..=4096, got {}", l.key_bytes));
        }
        if l.value_bytes > (1 << 30) {
            return bad(format!("layout.value_bytes must be at most 1 GiB, got {}", l.value_bytes));
        }
        if l.block_entries == 0 || l.block_entries > 1 << 16 {
            return bad(format!("layout.block_entries (B) must be in 1..=65536, got {}", l.block_entries));
        }
        if !l.size_ratio.is_finite() || l.size_ratio < 2.0 {
            return bad(format!("layout.size_ratio (T) must be a number >= 2, got {}", l.size_ratio));
        }
        if l.runs_per_hot_level == 0 || l.runs_per_hot_level > 1 << 16 {
            return bad(format!("layout.runs_per_hot_level (K) must be in 1..=65536, got {}", l.runs_per_hot_level));
        }
        if l.runs_per_cold_level == 0 || l.runs_per_cold_level > 1 << 16 {
            return bad(format!("layout.runs_per_cold_level (Z) must be in 1..=65536, got {}", l.runs_per_cold_level));
        }
        if l.buffer_bytes < self.entry_bytes() as u64 {
            return bad(format!(
                "layout.buffer_bytes (M_B) must hold at least one entry of {} bytes, got {}",
                self.entry_bytes(),
                l.buffer_bytes
            ));
        }
        if !l.buffer_put_limit.is_finite() || !(1.0..=1e6).contains(&l.buffer_put_limit) {
            return bad(format!("layout.buffer_put_limit must be a number in [1, 1e6], got {}", l.buffer_put_limit));
        }
        for (i, b) in l.bloom_bits_per_key.iter().enumerate() {
            if !b.is_finite() || *b < 0.0 || *b > 64.0 {
                return bad(format!("layout.bloom_bits_per_key[{i}] must be in [0, 64], got {b}"));
            }
        }
        if l.hot_levels > 64 {
            return bad(format!("layout.hot_levels must be at most 64, got {}", l.hot_levels));
        }
        if !a.merge_threshold.is_finite() || a.merge_threshold <= 0.0 || a.merge_threshold > 1.0 {
            return bad(format!("algorithms.merge_threshold must be in (0, 1], got {}", a.merge_threshold));
        }
        if a.file_entries < l.block_entries {
            return bad(format!(
                "algorithms.file_entries ({}) must be at least layout.block_entries ({})",
                a.file_entries, l.block_entries
            ));
        }
        if a.threads == 0 || a.threads > 1024 {
            return bad(format!("algorithms.threads must be in 1..=1024, got {}", a.threads));
        }
        if self.durability.group_commit_interval_us == 0 {
            return bad("durability.group_commit_interval_us must be positive".into());
        }
        let rf = &self.range_filter.bits_per_height;
        if rf.len() > cosine_filter::range::MAX_HEIGHTS {
            return bad(format!("range_filter.bits_per_height has {} heights, at most {}", rf.len(), cosine_filter::range::MAX_HEIGHTS));
        }
        for (h, b) in rf.iter().enumerate() {
            if !b.is_finite() || *b < 0.0 || *b > 64.0 {
                return bad(format!("range_filter.bits_per_height[{h}] must be in [0, 64], got {b}"));
            }
        }
        if self.is_hashlog() && (self.compression.hot != Codec::None || self.compression.cold != Codec::None || self.range_filter.enabled())
        {
            return bad("class lsh: the hash log takes no [compression] or [range_filter] (its segments are not sorted runs)".into());
        }
        self.device.validate()
    }

    /// Bytes of one nominal entry (`key_bytes + value_bytes`).
    pub fn entry_bytes(&self) -> usize {
        self.layout.key_bytes + self.layout.value_bytes
    }

    /// E_B: entries the buffer holds before it is flushed.
    pub fn buffer_entries(&self) -> u64 {
        (self.layout.buffer_bytes / self.entry_bytes().max(1) as u64).max(1)
    }

    /// Puts after which the active memtable is frozen even if it is not full:
    /// `buffer_put_limit * E_B` (at least `E_B`).
    pub fn buffer_put_limit(&self) -> u64 {
        let e_b = self.buffer_entries() as f64;
        (self.layout.buffer_put_limit.max(1.0) * e_b).min(u64::MAX as f64 / 2.0) as u64
    }

    /// Capacity of disk level `i >= 1` in entries: `E_B * T^i`.
    pub fn level_capacity(&self, level: usize) -> u64 {
        let c = self.buffer_entries() as f64 * self.layout.size_ratio.powi(level as i32);
        if c >= u64::MAX as f64 / 2.0 {
            u64::MAX / 2
        } else {
            c.round() as u64
        }
    }

    /// Whether disk level `i` is hot (filters and fence pointers in memory).
    pub fn is_hot(&self, level: usize) -> bool {
        level >= 1 && level <= self.layout.hot_levels
    }

    /// Runs level `i` may hold: Z at the last (deepest) level, K above it.
    ///
    /// By position, not by hot/cold: the run structure then does not depend on
    /// how much memory the fence pointers get, which is what the cost model
    /// assumes (docs/model.md, "Where this departs from the paper", 4).
    pub fn max_runs(&self, _level: usize, is_last: bool) -> usize {
        if is_last {
            self.layout.runs_per_cold_level
        } else {
            self.layout.runs_per_hot_level
        }
    }

    /// R^i: entries one run of level `i` holds when the level is full.
    pub fn run_capacity(&self, level: usize, is_last: bool) -> u64 {
        let k = self.max_runs(level, is_last) as u64;
        self.level_capacity(level).div_ceil(k).max(1)
    }

    /// Bloom bits per key at level `i` (0 at cold levels, which have no filter).
    pub fn bloom_bits(&self, level: usize) -> f64 {
        if !self.is_hot(level) {
            return 0.0;
        }
        let v = &self.layout.bloom_bits_per_key;
        match v.len() {
            0 => 0.0,
            n => v[(level - 1).min(n - 1)],
        }
    }

    /// Codec of files written into disk level `i`.
    pub fn codec(&self, level: usize) -> Codec {
        if self.is_hot(level) {
            self.compression.hot
        } else {
            self.compression.cold
        }
    }

    /// Range-filter bits per height for files of disk level `i` (empty: none; cold levels have none).
    pub fn range_filter_bits(&self, level: usize) -> &[f64] {
        if self.is_hot(level) && self.range_filter.enabled() {
            &self.range_filter.bits_per_height
        } else {
            &[]
        }
    }

    /// Policy of a merge whose source is level `source` (0 = the buffer).
    pub fn merge_policy(&self, source: usize) -> MergePolicy {
        match self.algorithms.compaction {
            CompactionKind::Full => MergePolicy::Full,
            CompactionKind::Partial => MergePolicy::Partial,
            CompactionKind::Hybrid => {
                if source <= self.algorithms.full_compaction_levels {
                    MergePolicy::Full
                } else {
                    MergePolicy::Partial
                }
            }
        }
    }

    /// Nominal bytes of one data block (`B` entries); filter blocks are counted in these units.
    pub fn block_bytes(&self) -> usize {
        (self.layout.block_entries * self.entry_bytes()).max(64)
    }

    /// Fence pointers per on-disk index block, chosen so an index block is about one data block.
    pub fn index_fanout(&self) -> usize {
        (self.block_bytes() / (self.layout.key_bytes + 12)).max(2)
    }

    /// Pads or truncates a user key to `key_bytes`.
    pub fn normalize_key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = key.to_vec();
        k.resize(self.layout.key_bytes, 0);
        k
    }

    /// True for the hash-log layout.
    pub fn is_hashlog(&self) -> bool {
        self.design.class == DesignClass::Lsh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTRACT_EXAMPLE: &str = r#"
[design]
name = "ycsb_a on aws:r5d.xlarge"
class = "lsm"

[layout]
key_bytes = 16
value_bytes = 100
block_entries = 4
size_ratio = 10
runs_per_hot_level = 1
runs_per_cold_level = 1
buffer_bytes = 67108864
bloom_bits_per_key = [10.0, 10.0, 10.0, 10.0]
hot_levels = 4
block_cache_bytes = 0

[algorithms]
filter_granularity = "file"
compaction = "full"
run_strategy = "first"
file_picking = "dense_fp"
merge_threshold = 1.0
full_compaction_levels = 2
file_entries = 65536
threads = 2

[durability]
wal_sync = "every_write"
group_commit_interval_us = 1000
wal_recovery = "tolerate_corrupted_tail"
"#;

    #[test]
    fn parses_contract_example() {
        let c = Config::from_toml_str(CONTRACT_EXAMPLE).expect("valid");
        assert_eq!(c.buffer_entries(), 67108864 / 116);
        assert_eq!(c.level_capacity(2), c.buffer_entries() * 100);
        assert!(c.is_hot(4) && !c.is_hot(5));
        assert_eq!(c.bloom_bits(7), 0.0);
        assert_eq!(c.bloom_bits(3), 10.0);
        assert_eq!(c.durability.wal_recovery, WalRecovery::TolerateCorruptedTail);
        let salvage = Config::from_toml_str("[durability]\nwal_recovery = \"point_in_time\"\n").expect("valid");
        assert_eq!(salvage.durability.wal_recovery, WalRecovery::PointInTime);
        assert_eq!(Config::default().durability.wal_recovery, WalRecovery::TolerateCorruptedTail, "safe default");
        assert!(Config::from_toml_str("[durability]\nwal_recovery = \"yolo\"\n").is_err());
    }

    #[test]
    fn rejects_bad_values_with_messages() {
        let e = Config::from_toml_str("[layout]\nsize_ratio = 1\n").expect_err("T=1 invalid");
        assert!(e.to_string().contains("size_ratio"));
        let e = Config::from_toml_str("[algorithms]\ncompaction = \"weird\"\n").expect_err("bad enum");
        assert!(e.to_string().contains("weird") || e.to_string().contains("compaction"));
        let e = Config::from_toml_str("[algorithms]\nmerge_threshold = 0\n").expect_err("0 invalid");
        assert!(e.to_string().contains("merge_threshold"));
        assert!(Config::from_toml_str("[layout\n").is_err());
        assert!(Config::from_toml_str("[layout]\nbloom_bits_per_key = [1, -2]\n").is_err());
    }

    #[test]
    fn compression_and_range_filter_sections() {
        let c = Config::from_toml_str("[compression]\nhot = \"lz4\"\ncold = \"zstd:7\"\n[range_filter]\nbits_per_height = [10, 2, 2]\n")
            .expect("valid");
        assert_eq!((c.codec(1), c.codec(9)), (Codec::Lz4, Codec::Zstd(7)));
        assert_eq!(c.range_filter_bits(1), &[10.0, 2.0, 2.0]);
        assert!(c.range_filter_bits(9).is_empty(), "cold levels keep no range filter");
        let d = Config::default();
        assert_eq!((d.compression.hot, d.compression.cold), (Codec::None, Codec::None));
        assert!(!d.range_filter.enabled());
        for (bad, word) in [
            ("[compression]\nhot = \"gzip\"\n", "gzip"),
            ("[compression]\ncold = \"zstd:40\"\n", "zstd:40"),
            ("[range_filter]\nbits_per_height = [1, -1]\n", "bits_per_height[1]"),
            ("[design]\nclass = \"lsh\"\n[compression]\nhot = \"lz4\"\n", "lsh"),
        ] {
            let e = Config::from_toml_str(bad).expect_err(bad);
            assert!(e.to_string().contains(word), "{bad}: {e}");
        }
    }

    #[test]
    fn device_section_parses_and_validates() {
        let c = Config::from_toml_str("").expect("no [device] is a local device");
        assert_eq!(c.device.spec(), None);
        let c = Config::from_toml_str(
            "[device]\nkind = \"volume\"\niops = 3000\nthroughput_mib_s = 125\nread_latency_us = 500\nburst_ios = 6\n",
        )
        .expect("valid volume");
        let s = c.device.spec().expect("a volume");
        assert_eq!((s.iops, s.bytes_per_s, s.read_latency.as_micros(), s.burst_ios), (3000.0, 125.0 * 1048576.0, 500, 6.0));
        for (bad, field) in [
            ("kind = \"volume\"\niops = 0\nthroughput_mib_s = 125", "device.iops"),
            ("kind = \"volume\"\niops = 3000\nthroughput_mib_s = 0", "device.throughput_mib_s"),
            ("kind = \"volume\"\niops = 3000\nthroughput_mib_s = 1\nread_latency_us = -1", "device.read_latency_us"),
            ("kind = \"volume\"\niops = 3000\nthroughput_mib_s = 1\nburst_ios = -2", "device.burst_ios"),
            ("kind = \"ssd\"", "ssd"),
            ("kind = \"volume\"\niops = 3000\nthroughput_mib_s = 1\nlatency = 5", "latency"),
        ] {
            let e = Config::from_toml_str(&format!("[device]\n{bad}\n")).expect_err(bad);
            assert!(e.to_string().contains(field), "{bad}: {e}");
        }
    }

    #[test]
    fn server_section_is_optional_and_checked() {
        let c = Config::from_toml_str(CONTRACT_EXAMPLE).expect("no [server]: the server's defaults");
        assert_eq!(c.server.client_output_buffer_hard_bytes, None);
        let c = Config::from_toml_str("[server]\nclient_output_buffer_hard_bytes = 1048576\nclient_output_buffer_soft_seconds = 0\n")
            .expect("valid");
        assert_eq!(c.server.client_output_buffer_hard_bytes, Some(1 << 20));
        assert_eq!((c.server.client_output_buffer_soft_bytes, c.server.client_output_buffer_soft_seconds), (None, Some(0)));
        for (bad, word) in [
            ("client_output_buffer_hard_bytes = -1", "client_output_buffer_hard_bytes"),
            ("client_output_buffer_hard = 5", "client_output_buffer_hard"),
            ("client_output_buffer_soft_seconds = \"60\"", "client_output_buffer_soft_seconds"),
        ] {
            let e = Config::from_toml_str(&format!("[server]\n{bad}\n")).expect_err(bad);
            assert!(e.to_string().contains(word), "{bad}: {e}");
        }
    }

    #[test]
    fn presets_validate() {
        for p in presets::Preset::ALL {
            presets::tiny(p).validate().expect("preset valid");
            presets::standard(p).validate().expect("preset valid");
        }
    }
}
