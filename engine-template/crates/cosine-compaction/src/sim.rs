//! An I/O-free simulator: runs the strategy over in-memory key lists.
//!
//! It executes every [`Choice`] the way the engine's worker does (same merge,
//! split and placement rules) but on sorted `u64` keys, so level shapes and
//! merge traffic for millions of inserts can be checked against the cost model
//! in seconds.

use crate::{Choice, CompactionStrategy, FileState, LevelState, Merge, PendingFlush, RunState, Target, TemplateStrategy};
use cosine_config::Config;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
struct SimFile {
    id: u64,
    keys: Vec<u64>,
    flushed_seq: u64,
    merged_seq: u64,
}

#[derive(Debug, Clone)]
struct SimRun {
    id: u64,
    files: Vec<SimFile>,
}

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
    levels: Vec<Vec<SimRun>>,
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
            levels: Vec::new(),
            next_id: 1,
            seq: 0,
            totals: SimTotals::default(),
        }
    }

    fn blocks(&self, n: usize) -> u64 {
        n.div_ceil(self.cfg.layout.block_entries) as u64
    }

    fn state(&self, pending: bool) -> LevelState {
        LevelState {
            levels: self
                .levels
                .iter()
                .map(|runs| {
                    runs.iter()
                        .map(|r| RunState {
                            id: r.id,
                            files: r
                                .files
                                .iter()
                                .map(|f| FileState {
                                    id: f.id,
                                    entries: f.keys.len() as u64,
                                    min_key: kb(f.keys[0]),
                                    max_key: kb(f.keys[f.keys.len() - 1]),
                                    flushed_seq: f.flushed_seq,
                                    merged_seq: f.merged_seq,
                                })
                                .collect(),
                        })
                        .collect()
                })
                .collect(),
            pending_flush: (pending && !self.buffer.is_empty()).then(|| PendingFlush {
                entries: self.buffer.len() as u64,
                min_key: kb(*self.buffer.iter().next().unwrap_or(&0)),
                max_key: kb(*self.buffer.iter().next_back().unwrap_or(&0)),
            }),
        }
    }

    /// Inserts one key (a put of a new version), flushing and compacting as the engine would.
    pub fn insert(&mut self, key: u64) {
        self.totals.inserts += 1;
        self.buffer.insert(key);
        if self.buffer.len() as u64 >= self.cfg.buffer_entries() {
            self.flush();
        }
    }

    /// Flushes the buffer and runs the strategy until it is idle.
    pub fn flush(&mut self) {
        loop {
            let pending = !self.buffer.is_empty();
            match self.strategy.choose(&self.state(pending)) {
                Choice::Idle => break,
                Choice::Flush(m) => {
                    let keys: Vec<u64> = std::mem::take(&mut self.buffer).into_iter().collect();
                    self.seq += 1;
                    self.totals.flushes += 1;
                    self.apply(&m, vec![keys]);
                }
                Choice::Compact(m) => {
                    self.totals.compactions += 1;
                    self.apply(&m, Vec::new());
                }
            }
        }
    }

    fn take_files(&mut self, level: usize, run: u64, ids: &[u64]) -> Vec<SimFile> {
        let mut out = Vec::new();
        if let Some(runs) = self.levels.get_mut(level - 1) {
            if let Some(r) = runs.iter_mut().find(|r| r.id == run) {
                let (take, keep): (Vec<SimFile>, Vec<SimFile>) = r.files.drain(..).partition(|f| ids.contains(&f.id));
                r.files = keep;
                out = take;
            }
            runs.retain(|r| !r.files.is_empty());
        }
        out
    }

    fn apply(&mut self, m: &Merge, buffer: Vec<Vec<u64>>) {
        let t = m.target_level;
        while self.levels.len() < t {
            self.levels.push(Vec::new());
        }
        // Gather sources, newest first.
        let mut sources: Vec<SimFile> = Vec::new();
        let mut flushed_seq = self.seq;
        for (run, ids) in &m.inputs {
            let fs = self.take_files(m.source_level, *run, ids);
            sources.extend(fs);
        }
        let outputs: Vec<SimFile> = if m.trivial_move {
            self.totals.trivial_moves += 1;
            sources
        } else {
            let mut replaced = Vec::new();
            if let Target::Into { run, replace } = &m.target {
                replaced = self.take_files(t, *run, replace);
            }
            let mut all: Vec<u64> = Vec::new();
            for k in buffer.into_iter().flatten() {
                all.push(k);
            }
            for f in sources.iter().chain(replaced.iter()) {
                self.totals.blocks_read += self.blocks(f.keys.len());
                flushed_seq = flushed_seq.min(f.flushed_seq);
                all.extend_from_slice(&f.keys);
            }
            all.sort_unstable();
            all.dedup();
            self.seq += 1;
            let fe = self.cfg.algorithms.file_entries;
            let mut out = Vec::new();
            for chunk in all.chunks(fe) {
                self.totals.blocks_written += self.blocks(chunk.len());
                out.push(SimFile { id: self.next_id, keys: chunk.to_vec(), flushed_seq, merged_seq: self.seq });
                self.next_id += 1;
            }
            out
        };
        let runs = &mut self.levels[t - 1];
        match &m.target {
            Target::NewRun => {
                let id = self.next_id;
                self.next_id += 1;
                runs.insert(0, SimRun { id, files: outputs });
            }
            Target::Into { run, .. } => match runs.iter_mut().find(|r| r.id == *run) {
                Some(r) => {
                    r.files.extend(outputs);
                    r.files.sort_by_key(|f| f.keys[0]);
                }
                None => {
                    // The whole target run was replaced (full rewrite): keep its place as newest.
                    let id = *run;
                    runs.insert(0, SimRun { id, files: outputs });
                }
            },
        }
        runs.retain(|r| !r.files.is_empty());
    }

    /// Level shapes (levels 1..deepest).
    pub fn shape(&self) -> Vec<LevelShape> {
        let depth = self.levels.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
        (1..=depth)
            .map(|i| {
                let runs = &self.levels[i - 1];
                let run_entries: Vec<u64> =
                    runs.iter().map(|r| r.files.iter().map(|f| f.keys.len() as u64).sum()).collect();
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
            sim.insert(rng.gen());
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
                sim.insert(k);
            }
            sim.flush();
            let total: u64 = sim.shape().iter().map(|l| l.entries).sum();
            assert!(total >= keys.len() as u64, "{p:?} lost keys");
            for l in sim.shape() {
                assert!(l.runs <= cfg.layout.runs_per_hot_level.max(cfg.layout.runs_per_cold_level), "{p:?} {l:?}");
            }
        }
    }
}
