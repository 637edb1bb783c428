//! An I/O-free simulator: runs the strategy over in-memory key lists.
//!
//! It executes every [`Choice`] the way the engine's worker does: it reads the
//! files [`LevelState::merge_inputs`] names, writes the merged keys (sorted
//! `u64`s) split into files, and places them with [`apply_compaction_result`].
//! So level shapes and merge traffic for millions of inserts can be checked
//! against the cost model in seconds.

use crate::{
    apply_compaction_result, Choice, CompactionStrategy, FileState, LevelState, Merge, MergeOutput, PendingFlush, RunState, Target,
    TemplateStrategy,
};
use cosine_config::Config;
use cosine_core::{Error, Result};
use std::collections::{BTreeSet, HashMap};

/// Shape of one level after a simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelShape {
    /// Disk level (1-based).
    pub level: usize,
    /// Hot (filters and fence pointers in memory) or cold.
    pub hot: bool,
    /// Capacity in entries (`E_B * T^i`).
    pub capacity: u64,
    /// Runs present.
    pub runs: usize,
    /// Entries present.
    pub entries: u64,
    /// Files present.
    pub files: usize,
    /// Entries per run, newest first.
    pub run_entries: Vec<u64>,
}

/// Totals of a simulation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimTotals {
    /// Entries inserted.
    pub inserts: u64,
    /// Buffer flushes.
    pub flushes: u64,
    /// Merges (compactions), trivial moves included.
    pub compactions: u64,
    /// Merges done by relinking files.
    pub trivial_moves: u64,
    /// Data blocks written by flushes and merges.
    pub blocks_written: u64,
    /// Data blocks read by merges.
    pub blocks_read: u64,
}

/// The simulated tree.
#[derive(Debug)]
pub struct Simulator {
    cfg: Config,
    strategy: TemplateStrategy,
    buffer: BTreeSet<u64>,
    /// The shape the strategy sees.
    state: LevelState,
    /// Keys of every live file, by file id.
    keys: HashMap<u64, Vec<u64>>,
    next_id: u64,
    seq: u64,
    /// Counters.
    pub totals: SimTotals,
}

fn kb(k: u64) -> Vec<u8> {
    k.to_be_bytes().to_vec()
}

impl Simulator {
    /// An empty tree for `cfg`.
    pub fn new(cfg: &Config) -> Self {
        Simulator {
            cfg: cfg.clone(),
            strategy: TemplateStrategy::new(cfg),
            buffer: BTreeSet::new(),
            state: LevelState::default(),
            keys: HashMap::new(),
            next_id: 1,
            seq: 0,
            totals: SimTotals::default(),
        }
    }

    fn blocks(&self, n: usize) -> u64 {
        n.div_ceil(self.cfg.layout.block_entries) as u64
    }

    fn pending_flush(&self) -> Option<PendingFlush> {
        (!self.buffer.is_empty()).then(|| PendingFlush {
            entries: self.buffer.len() as u64,
            min_key: kb(*self.buffer.iter().next().unwrap_or(&0)),
            max_key: kb(*self.buffer.iter().next_back().unwrap_or(&0)),
        })
    }

    /// Inserts one key (a put of a new version), flushing and compacting as the engine would.
    ///
    /// Fails only if the strategy names files the tree does not hold (a strategy bug).
    pub fn insert(&mut self, key: u64) -> Result<()> {
        self.totals.inserts += 1;
        self.buffer.insert(key);
        if self.buffer.len() as u64 >= self.cfg.buffer_entries() {
            self.flush()?;
        }
        Ok(())
    }

    /// Flushes the buffer and runs the strategy until it is idle.
    pub fn flush(&mut self) -> Result<()> {
        loop {
            self.state.pending_flush = self.pending_flush();
            match self.strategy.choose(&self.state) {
                Choice::Idle => return Ok(()),
                Choice::Flush(m) => {
                    let keys: Vec<u64> = std::mem::take(&mut self.buffer).into_iter().collect();
                    self.seq += 1;
                    self.totals.flushes += 1;
                    self.apply(&m, keys)?;
                }
                Choice::Compact(m) => {
                    self.totals.compactions += 1;
                    self.apply(&m, Vec::new())?;
                }
            }
        }
    }

    /// Executes `m`; `buffer` holds the flushed keys (sorted).
    fn apply(&mut self, m: &Merge, buffer: Vec<u64>) -> Result<()> {
        let mut output = MergeOutput::default();
        if m.trivial_move {
            self.totals.trivial_moves += 1;
        } else {
            let mut all = buffer;
            let mut flushed_seq = self.seq;
            for f in self.state.merge_inputs(m)?.into_iter().flatten() {
                let keys = self.keys.get(&f.id).ok_or_else(|| Error::InvalidArgument(format!("no keys for file {}", f.id)))?;
                self.totals.blocks_read += self.blocks(keys.len());
                flushed_seq = flushed_seq.min(f.flushed_seq);
                all.extend_from_slice(keys);
            }
            all.sort_unstable();
            all.dedup();
            self.seq += 1;
            for chunk in all.chunks(self.cfg.algorithms.file_entries) {
                self.totals.blocks_written += self.blocks(chunk.len());
                let id = self.next_id;
                self.next_id += 1;
                output.files.push(FileState {
                    id,
                    entries: chunk.len() as u64,
                    min_key: kb(chunk[0]),
                    max_key: kb(chunk[chunk.len() - 1]),
                    flushed_seq,
                    merged_seq: self.seq,
                });
                self.keys.insert(id, chunk.to_vec());
            }
        }
        if m.target == Target::NewRun {
            output.new_run = Some(self.next_id);
            self.next_id += 1;
        }
        let applied = apply_compaction_result(&self.state, m, &output)?;
        for id in &applied.removed {
            self.keys.remove(id);
        }
        self.state = applied.state;
        Ok(())
    }

    /// Level shapes (levels 1..deepest).
    pub fn shape(&self) -> Vec<LevelShape> {
        let depth = self.state.levels.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
        (1..=depth)
            .map(|i| {
                let runs = &self.state.levels[i - 1];
                let run_entries: Vec<u64> = runs.iter().map(RunState::entries).collect();
                LevelShape {
                    level: i,
                    hot: self.cfg.is_hot(i),
                    capacity: self.cfg.level_capacity(i),
                    runs: runs.len(),
                    entries: run_entries.iter().sum(),
                    files: runs.iter().map(|r| r.files.len()).sum(),
                    run_entries,
                }
            })
            .collect()
    }

    /// Entries still in the buffer.
    pub fn buffered(&self) -> u64 {
        self.buffer.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosine_config::presets::{tiny, Preset};
    use rand::{Rng, SeedableRng};

    #[test]
    fn leveled_shapes_follow_capacity() {
        let mut cfg = tiny(Preset::RocksDb); // E_B = 4, T = 10
        cfg.algorithms.file_entries = 1 << 20;
        let mut sim = Simulator::new(&cfg);
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..1000 {
            sim.insert(rng.gen()).expect("insert");
        }
        let shape = sim.shape();
        for l in &shape {
            assert!(l.entries <= l.capacity, "{l:?}");
            assert_eq!(l.runs, 1);
        }
        let total: u64 = shape.iter().map(|l| l.entries).sum::<u64>() + sim.buffered();
        assert_eq!(total, 1000);
        assert_eq!(shape.len(), 3); // 40 + 400 < 1000 <= 4000
    }

    #[test]
    fn every_preset_keeps_every_key() {
        for p in Preset::ALL {
            let cfg = tiny(p);
            let mut sim = Simulator::new(&cfg);
            let mut rng = rand::rngs::StdRng::seed_from_u64(2);
            let mut keys = BTreeSet::new();
            for _ in 0..3000 {
                let k = rng.gen_range(0..2000u64);
                keys.insert(k);
                sim.insert(k).expect("insert");
            }
            sim.flush().expect("flush");
            let total: u64 = sim.shape().iter().map(|l| l.entries).sum();
            assert!(total >= keys.len() as u64, "{p:?} lost keys");
            for l in sim.shape() {
                assert!(l.runs <= cfg.layout.runs_per_hot_level.max(cfg.layout.runs_per_cold_level), "{p:?} {l:?}");
            }
        }
    }
}
