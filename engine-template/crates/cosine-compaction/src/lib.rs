//! Compaction policies as pure functions: `CompactionStrategy::choose(&LevelState) -> Choice`.
//!
//! The strategy never touches storage. It reads a snapshot of the tree's shape
//! (levels, runs, files, entry counts, key ranges) and answers with the next
//! structural step: place the frozen buffer into level 1, merge data from level
//! `i` into level `i + 1`, or nothing. The engine's worker executes the choice
//! with real files; [`sim`] executes it on in-memory key lists. Both turn the
//! result into the next state with the same pure function,
//! [`apply_compaction_result`].
//!
//! Rules (shared with the cost model, see `docs/engine-contract.md`):
//! * level `i >= 1` holds up to `capacity(i) = E_B * T^i` entries, in at most
//!   K runs (above the last level) or Z runs (the last level), each of up to `R^i =
//!   capacity(i) / runs` entries;
//! * incoming data merges into the level's newest run if that run has room for
//!   it, else it starts a new run;
//! * a level that cannot take the incoming data (it would pass
//!   `merge_threshold * capacity` or need one run too many) is first merged into
//!   the next level; a level found above its threshold is merged down too;
//! * *full* compaction moves a whole level and rewrites the whole target run;
//!   *partial* moves one file (chosen by the run strategy and file picking) plus
//!   the overlapping files of older runs at its level (so no older version is
//!   left above a newer one), and rewrites only the overlapping target files;
//!   *hybrid* is full for source levels `1..=full_compaction_levels`, partial below.
#![deny(unsafe_code, clippy::unwrap_used)]

mod apply;
pub mod sim;

pub use apply::{apply_compaction_result, Applied, MergeOutput};

use cosine_config::{Config, FilePicking, FilterGranularity, MergePolicy, RunStrategy};

/// Shape of one file as the strategy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// File id.
    pub id: u64,
    /// Entries (tombstones included).
    pub entries: u64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
    /// Flush sequence of the oldest data the file holds (for `oldest_flushed`).
    pub flushed_seq: u64,
    /// Sequence of the merge that wrote the file (for `oldest_merged`).
    pub merged_seq: u64,
}

/// Shape of one run: files in key order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunState {
    /// Run id (larger is newer).
    pub id: u64,
    /// Files in key order.
    pub files: Vec<FileState>,
}

impl RunState {
    /// Entries in the run.
    pub fn entries(&self) -> u64 {
        self.files.iter().map(|f| f.entries).sum()
    }
}

/// The frozen buffer waiting to be flushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFlush {
    /// Entries in the buffer.
    pub entries: u64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
}

/// Snapshot the strategy decides on. `levels[0]` is disk level 1; runs are newest first.
#[derive(Debug, Clone, Default)]
pub struct LevelState {
    /// Runs per disk level, newest first.
    pub levels: Vec<Vec<RunState>>,
    /// The oldest frozen buffer, if one waits for a flush.
    pub pending_flush: Option<PendingFlush>,
}

impl LevelState {
    /// Runs of disk level `i` (1-based); empty beyond the deepest level.
    pub fn runs(&self, i: usize) -> &[RunState] {
        self.levels.get(i.wrapping_sub(1)).map_or(&[], |v| v.as_slice())
    }
    /// Entries at disk level `i`.
    pub fn entries(&self, i: usize) -> u64 {
        self.runs(i).iter().map(|r| r.entries()).sum()
    }
    /// Deepest level holding data (0 when the tree is empty).
    pub fn depth(&self) -> usize {
        (1..=self.levels.len()).rev().find(|&i| self.entries(i) > 0).unwrap_or(0)
    }
}

/// Where merged data goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A new run, newest at the target level.
    NewRun,
    /// Into an existing run, replacing the listed files (which join the merge).
    Into {
        /// Run id at the target level.
        run: u64,
        /// Files of that run rewritten by this merge.
        replace: Vec<u64>,
    },
}

/// One merge step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    /// Source level (0 = the frozen buffer).
    pub source_level: usize,
    /// Source files by run, newest run first (empty for a flush).
    pub inputs: Vec<(u64, Vec<u64>)>,
    /// Target level (`source_level + 1`).
    pub target_level: usize,
    /// Target run.
    pub target: Target,
    /// No older data for these keys exists below the output: tombstones can go.
    pub drop_tombstones: bool,
    /// Nothing overlaps: relink the source files instead of rewriting them.
    pub trivial_move: bool,
    /// Upper bound of entries arriving at the target level.
    pub entries: u64,
}

/// The strategy's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Nothing to do.
    Idle,
    /// Write the frozen buffer into level 1.
    Flush(Merge),
    /// Merge data from one level into the next.
    Compact(Merge),
}

/// A compaction policy: a pure function of the tree's shape.
pub trait CompactionStrategy: Send + Sync {
    /// The next step for state `s`.
    fn choose(&self, s: &LevelState) -> Choice;
}

/// The template's configurable policy (Table 1 rows 11-15), driven by `engine.toml`.
#[derive(Debug, Clone)]
pub struct TemplateStrategy {
    cfg: Config,
}

fn key_num(k: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = k.len().min(16);
    b[..n].copy_from_slice(&k[..n]);
    u128::from_be_bytes(b)
}

fn overlaps(f: &FileState, lo: &[u8], hi: &[u8]) -> bool {
    f.min_key.as_slice() <= hi && f.max_key.as_slice() >= lo
}

impl TemplateStrategy {
    /// The policy described by `cfg`.
    pub fn new(cfg: &Config) -> Self {
        TemplateStrategy { cfg: cfg.clone() }
    }

    fn is_last(&self, s: &LevelState, i: usize) -> bool {
        i >= s.depth()
    }

    fn max_runs(&self, s: &LevelState, i: usize) -> usize {
        self.cfg.max_runs(i, self.is_last(s, i))
    }

    fn threshold(&self, i: usize) -> f64 {
        self.cfg.algorithms.merge_threshold * self.cfg.level_capacity(i) as f64
    }

    /// Can level `i` take `n` more entries without first merging down?
    ///
    /// The last level holds the data. Merged into its newest run, incoming entries
    /// replace their older versions there, so how many it will hold is known only
    /// after the merge: it takes them, and [`Self::over`] pushes it down afterwards
    /// if the merged level really passes its threshold. The tree deepens when the
    /// data grows, not when it is overwritten (the cost model's "the last level only
    /// grows", `cost_models/engine_model.py`).
    pub fn accepts(&self, s: &LevelState, i: usize, n: u64) -> bool {
        let runs = s.runs(i);
        let Some(newest) = runs.first() else { return true };
        let last = self.is_last(s, i);
        let fits_newest = newest.entries() + n <= self.cfg.run_capacity(i, last);
        let into_newest = fits_newest || runs.len() >= self.max_runs(s, i);
        if last && into_newest && (newest.entries() as f64) <= self.threshold(i) {
            return true;
        }
        let fits_level = (s.entries(i) + n) as f64 <= self.threshold(i);
        fits_level && (fits_newest || runs.len() < self.max_runs(s, i))
    }

    fn over(&self, s: &LevelState, i: usize) -> bool {
        s.entries(i) as f64 > self.threshold(i) || s.runs(i).len() > self.max_runs(s, i)
    }

    fn place(&self, s: &LevelState, src: usize, inputs: Vec<(u64, Vec<u64>)>, n: u64, lo: &[u8], hi: &[u8]) -> Merge {
        let t = src + 1;
        let policy = self.cfg.merge_policy(src);
        let runs = s.runs(t);
        let deepest = t >= s.depth();
        let target = match runs.first() {
            Some(r) if r.entries() + n <= self.cfg.run_capacity(t, self.is_last(s, t)) || runs.len() >= self.max_runs(s, t) => {
                let replace = match policy {
                    MergePolicy::Full => r.files.iter().map(|f| f.id).collect(),
                    MergePolicy::Partial => r.files.iter().filter(|f| overlaps(f, lo, hi)).map(|f| f.id).collect(),
                };
                Target::Into { run: r.id, replace }
            }
            _ => Target::NewRun,
        };
        let drop_tombstones = deepest
            && match &target {
                Target::NewRun => runs.is_empty(),
                Target::Into { .. } => runs.len() == 1,
            };
        let run_filter_needed =
            self.cfg.is_hot(t) && self.cfg.algorithms.filter_granularity == FilterGranularity::Run && self.cfg.bloom_bits(t) > 0.0;
        let nothing_to_rewrite = match &target {
            Target::NewRun => true,
            Target::Into { replace, .. } => replace.is_empty(),
        };
        let trivial_move = src > 0 && inputs.len() == 1 && nothing_to_rewrite && !run_filter_needed;
        Merge { source_level: src, inputs, target_level: t, target, drop_tombstones, trivial_move, entries: n }
    }

    fn pick_run(&self, s: &LevelState, i: usize) -> Option<usize> {
        let runs = s.runs(i);
        if runs.is_empty() {
            return None;
        }
        let oldest = runs.len() - 1;
        Some(match self.cfg.algorithms.run_strategy {
            RunStrategy::First => oldest,
            RunStrategy::LastFull => {
                let cap = self.cfg.run_capacity(i, self.is_last(s, i)) as f64 * self.cfg.algorithms.merge_threshold;
                runs.iter().position(|r| r.entries() as f64 >= cap).unwrap_or(oldest)
            }
            RunStrategy::Fullest => {
                let mut best = oldest;
                for (j, r) in runs.iter().enumerate().rev() {
                    if r.entries() > runs[best].entries() {
                        best = j;
                    }
                }
                best
            }
        })
    }

    fn pick_file(&self, r: &RunState) -> usize {
        let density = |f: &FileState| {
            let span = key_num(&f.max_key).saturating_sub(key_num(&f.min_key)) as f64 + 1.0;
            f.entries as f64 / span
        };
        let by = |better: &dyn Fn(&FileState, &FileState) -> bool| {
            let mut best = 0;
            for (j, f) in r.files.iter().enumerate() {
                if better(f, &r.files[best]) {
                    best = j;
                }
            }
            best
        };
        match self.cfg.algorithms.file_picking {
            FilePicking::ChooseFirst => 0,
            FilePicking::OldestMerged => by(&|a, b| a.merged_seq < b.merged_seq),
            FilePicking::OldestFlushed => by(&|a, b| a.flushed_seq < b.flushed_seq),
            FilePicking::DenseFp => by(&|a, b| density(a) > density(b)),
            FilePicking::SparseFp => by(&|a, b| density(a) < density(b)),
        }
    }

    /// The merge out of level `i`, or a deeper merge that must happen first.
    fn compact_from(&self, s: &LevelState, i: usize) -> Choice {
        let runs = s.runs(i);
        let (inputs, n, lo, hi) = match self.cfg.merge_policy(i) {
            MergePolicy::Full => {
                let inputs: Vec<(u64, Vec<u64>)> = runs.iter().map(|r| (r.id, r.files.iter().map(|f| f.id).collect())).collect();
                let lo = runs.iter().filter_map(|r| r.files.first()).map(|f| f.min_key.clone()).min();
                let hi = runs.iter().filter_map(|r| r.files.last()).map(|f| f.max_key.clone()).max();
                (inputs, s.entries(i), lo.unwrap_or_default(), hi.unwrap_or_default())
            }
            MergePolicy::Partial => {
                let Some(ri) = self.pick_run(s, i) else { return Choice::Idle };
                let Some(f) = runs[ri].files.get(self.pick_file(&runs[ri])) else { return Choice::Idle };
                let (mut lo, mut hi) = (f.min_key.clone(), f.max_key.clone());
                let mut chosen: Vec<Vec<u64>> = vec![Vec::new(); runs.len()];
                chosen[ri].push(f.id);
                // Take along every overlapping file of older runs, to a fixpoint, so
                // no older version of a moved key stays above it.
                loop {
                    let mut grew = false;
                    for (j, r) in runs.iter().enumerate().skip(ri + 1) {
                        for g in &r.files {
                            if overlaps(g, &lo, &hi) && !chosen[j].contains(&g.id) {
                                chosen[j].push(g.id);
                                if g.min_key < lo {
                                    lo = g.min_key.clone();
                                }
                                if g.max_key > hi {
                                    hi = g.max_key.clone();
                                }
                                grew = true;
                            }
                        }
                    }
                    if !grew {
                        break;
                    }
                }
                let mut n = 0;
                let mut inputs = Vec::new();
                for (j, ids) in chosen.into_iter().enumerate() {
                    if ids.is_empty() {
                        continue;
                    }
                    let mut ids_sorted = Vec::new();
                    for g in &runs[j].files {
                        if ids.contains(&g.id) {
                            n += g.entries;
                            ids_sorted.push(g.id);
                        }
                    }
                    inputs.push((runs[j].id, ids_sorted));
                }
                (inputs, n, lo, hi)
            }
        };
        if inputs.is_empty() {
            return Choice::Idle;
        }
        if !self.accepts(s, i + 1, n) {
            return self.compact_from(s, i + 1);
        }
        Choice::Compact(self.place(s, i, inputs, n, &lo, &hi))
    }
}

impl CompactionStrategy for TemplateStrategy {
    fn choose(&self, s: &LevelState) -> Choice {
        if let Some(p) = &s.pending_flush {
            if !self.accepts(s, 1, p.entries) {
                return self.compact_from(s, 1);
            }
            return Choice::Flush(self.place(s, 0, Vec::new(), p.entries, &p.min_key, &p.max_key));
        }
        for i in 1..=s.levels.len() {
            if self.over(s, i) {
                return self.compact_from(s, i);
            }
        }
        Choice::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosine_config::presets::{tiny, Preset};

    fn file(id: u64, entries: u64, lo: u8, hi: u8) -> FileState {
        FileState { id, entries, min_key: vec![lo], max_key: vec![hi], flushed_seq: id, merged_seq: id }
    }

    #[test]
    fn flush_into_empty_tree_makes_a_run() {
        let cfg = tiny(Preset::RocksDb);
        let s = LevelState { levels: vec![], pending_flush: Some(PendingFlush { entries: 4, min_key: vec![1], max_key: vec![9] }) };
        match TemplateStrategy::new(&cfg).choose(&s) {
            Choice::Flush(m) => {
                assert_eq!(m.target, Target::NewRun);
                assert!(m.drop_tombstones);
            }
            c => panic!("unexpected {c:?}"),
        }
    }

    #[test]
    fn leveling_merges_into_the_last_level_until_the_data_outgrows_it() {
        let cfg = tiny(Preset::RocksDb); // E_B = 4, T = 10: level 1 holds 40
        let st = TemplateStrategy::new(&cfg);
        let run = RunState { id: 1, files: vec![file(1, 36, 0, 100)] };
        let mut s =
            LevelState { levels: vec![vec![run]], pending_flush: Some(PendingFlush { entries: 4, min_key: vec![1], max_key: vec![9] }) };
        assert!(matches!(st.choose(&s), Choice::Flush(Merge { target: Target::Into { run: 1, .. }, .. })));
        // A full last level still takes the flush: the flushed keys may overwrite its own.
        s.levels[0][0].files[0].entries = 40;
        assert!(matches!(st.choose(&s), Choice::Flush(Merge { target: Target::Into { run: 1, .. }, .. })));
        // They did not (the merge left 44 > 40): the level is pushed down, the tree deepens.
        s.levels[0][0].files[0].entries = 44;
        s.pending_flush = None;
        match st.choose(&s) {
            Choice::Compact(m) => {
                assert_eq!((m.source_level, m.target_level), (1, 2));
                assert!(m.trivial_move, "single run into an empty level is relinked");
            }
            c => panic!("unexpected {c:?}"),
        }
        // A full level above the last one cannot take the flush: it is merged down first.
        s.levels[0][0].files[0].entries = 40;
        s.levels.push(vec![RunState { id: 2, files: vec![file(2, 100, 0, 100)] }]);
        s.pending_flush = Some(PendingFlush { entries: 4, min_key: vec![1], max_key: vec![9] });
        match st.choose(&s) {
            Choice::Compact(m) => assert_eq!((m.source_level, m.target_level), (1, 2)),
            c => panic!("unexpected {c:?}"),
        }
    }

    #[test]
    fn partial_takes_overlapping_older_files_along() {
        let mut cfg = tiny(Preset::Hybrid);
        cfg.algorithms.compaction = cosine_config::CompactionKind::Partial;
        cfg.algorithms.file_picking = FilePicking::ChooseFirst;
        cfg.algorithms.run_strategy = RunStrategy::Fullest;
        let st = TemplateStrategy::new(&cfg);
        // Level 1 (cap 8, K = 2): newest run is fullest; its first file [10,20]
        // overlaps older file [15,40], which in turn overlaps nothing else.
        let s = LevelState {
            levels: vec![vec![
                RunState { id: 5, files: vec![file(10, 3, 10, 20), file(11, 3, 50, 60)] },
                RunState { id: 4, files: vec![file(8, 2, 15, 40)] },
            ]],
            pending_flush: None,
        };
        match st.choose(&s) {
            Choice::Compact(m) => {
                assert_eq!(m.inputs, vec![(5, vec![10]), (4, vec![8])]);
                assert!(!m.trivial_move);
            }
            c => panic!("unexpected {c:?}"),
        }
    }
}
