//! Applying a merge to the level state: the one definition of where a merge's
//! inputs leave and its output lands.
//!
//! The engine's executor (`cosine-level`) and the [`sim`](crate::sim) both
//! execute a [`Merge`] in three steps: read the files
//! [`LevelState::merge_inputs`] names, write the output (real files, or sorted
//! key lists), then call [`apply_compaction_result`] for the next state. Only
//! the middle step differs between them.

use crate::{FileState, LevelState, Merge, RunState, Target};
use cosine_core::{Error, Result};

/// What a merge produced, handed to [`apply_compaction_result`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeOutput {
    /// Files the merge wrote, in key order. Empty for a trivial move: its source
    /// files move to the target level as they are.
    pub files: Vec<FileState>,
    /// Id of the run a [`Target::NewRun`] merge creates; required for such a
    /// merge, unused for [`Target::Into`].
    pub new_run: Option<u64>,
}

/// The state after a merge.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The next state. Its `pending_flush` is cleared after a flush (the buffer is
    /// now on disk) and kept after a compaction.
    pub state: LevelState,
    /// Files of the snapshot the next state no longer holds: the merged source
    /// files and the rewritten target files (a trivial move's files are moved, not removed).
    pub removed: Vec<u64>,
}

fn run_pos(runs: &[RunState], run: u64, what: &str) -> Result<usize> {
    runs.iter().position(|r| r.id == run).ok_or_else(|| Error::InvalidArgument(format!("merge {what} unknown run {run}")))
}

/// The files of `run` that `ids` names, in key order; every id must name one.
fn pick<'a>(run: &'a RunState, ids: &[u64]) -> Result<Vec<&'a FileState>> {
    let files: Vec<&FileState> = run.files.iter().filter(|f| ids.contains(&f.id)).collect();
    if files.len() != ids.len() {
        return Err(Error::InvalidArgument(format!("merge names unknown files of run {}", run.id)));
    }
    Ok(files)
}

fn check_levels(m: &Merge) -> Result<()> {
    if m.target_level != m.source_level + 1 {
        return Err(Error::InvalidArgument(format!(
            "merge from level {} must target level {}, not {}",
            m.source_level,
            m.source_level + 1,
            m.target_level
        )));
    }
    Ok(())
}

impl LevelState {
    /// The files merge `m` reads, by run in merge priority order: each source run
    /// of `m.inputs` (newest first), then, for [`Target::Into`], the target files
    /// it rewrites. Files of one run are in key order.
    ///
    /// Fails like [`apply_compaction_result`] when `m` names a run or file this
    /// state does not hold.
    pub fn merge_inputs(&self, m: &Merge) -> Result<Vec<Vec<&FileState>>> {
        check_levels(m)?;
        let mut out = Vec::new();
        if m.source_level > 0 {
            let runs = self.runs(m.source_level);
            for (run, ids) in &m.inputs {
                out.push(pick(&runs[run_pos(runs, *run, "names")?], ids)?);
            }
        }
        if let Target::Into { run, replace } = &m.target {
            let runs = self.runs(m.target_level);
            let r = &runs[run_pos(runs, *run, "targets")?];
            out.push(r.files.iter().filter(|f| replace.contains(&f.id)).collect());
        }
        Ok(out)
    }
}

/// The state after merge `m` ran on `snapshot` and produced `output` — a pure
/// function, in the manner of mini-lsm's `apply_compaction_result`.
///
/// * The source files leave their runs; a run left without files disappears.
/// * The target run is [`Target::NewRun`] (placed newest, with id
///   `output.new_run`) or [`Target::Into`] an existing run, which keeps its place
///   and loses the files listed in `replace`.
/// * The target run receives `output.files` and, for a trivial move, the source
///   files themselves; its files are kept in key order. A target run left
///   without files disappears.
///
/// Fails with [`Error::InvalidArgument`] when `m` names a run or file the
/// snapshot does not hold, when its target is not the next level, or when a
/// new run has no id.
pub fn apply_compaction_result(snapshot: &LevelState, m: &Merge, output: &MergeOutput) -> Result<Applied> {
    check_levels(m)?;
    let t = m.target_level;
    let mut levels = snapshot.levels.clone();
    if levels.len() < t {
        levels.resize_with(t, Vec::new);
    }
    let mut removed = Vec::new();

    // Detach the source files from their runs (empty runs disappear).
    let mut moved = Vec::new();
    if m.source_level > 0 {
        let runs = &mut levels[m.source_level - 1];
        for (run, ids) in &m.inputs {
            let pos = run_pos(runs, *run, "names")?;
            let take: Vec<FileState> = pick(&runs[pos], ids)?.into_iter().cloned().collect();
            runs[pos].files.retain(|f| !ids.contains(&f.id));
            if runs[pos].files.is_empty() {
                runs.remove(pos);
            }
            if m.trivial_move {
                moved.extend(take);
            } else {
                removed.extend(take.iter().map(|f| f.id));
            }
        }
    }

    // Place the output.
    moved.extend(output.files.iter().cloned());
    let runs = &mut levels[t - 1];
    match &m.target {
        Target::Into { run, replace } => {
            let pos = run_pos(runs, *run, "targets")?;
            let files = &mut runs[pos].files;
            removed.extend(files.iter().filter(|f| replace.contains(&f.id)).map(|f| f.id));
            files.retain(|f| !replace.contains(&f.id));
            files.extend(moved);
            files.sort_by(|a, b| a.min_key.cmp(&b.min_key));
            if files.is_empty() {
                runs.remove(pos);
            }
        }
        Target::NewRun => {
            let id = output.new_run.ok_or_else(|| Error::InvalidArgument("a merge into a new run needs the run's id".into()))?;
            let mut files = moved;
            files.sort_by(|a, b| a.min_key.cmp(&b.min_key));
            if !files.is_empty() {
                runs.insert(0, RunState { id, files });
            }
        }
    }
    let pending_flush = if m.source_level == 0 { None } else { snapshot.pending_flush.clone() };
    Ok(Applied { state: LevelState { levels, pending_flush }, removed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(id: u64, lo: u8, hi: u8) -> FileState {
        FileState { id, entries: u64::from(hi - lo) + 1, min_key: vec![lo], max_key: vec![hi], flushed_seq: id, merged_seq: id }
    }

    fn ids(s: &LevelState) -> Vec<Vec<(u64, Vec<u64>)>> {
        s.levels.iter().map(|runs| runs.iter().map(|r| (r.id, r.files.iter().map(|f| f.id).collect())).collect()).collect()
    }

    fn merge(source_level: usize, inputs: Vec<(u64, Vec<u64>)>, target: Target, trivial_move: bool) -> Merge {
        Merge { source_level, inputs, target_level: source_level + 1, target, drop_tombstones: false, trivial_move, entries: 0 }
    }

    fn two_levels() -> LevelState {
        LevelState {
            levels: vec![
                vec![RunState { id: 9, files: vec![file(1, 0, 9), file(2, 20, 29)] }, RunState { id: 8, files: vec![file(3, 5, 25)] }],
                vec![RunState { id: 7, files: vec![file(4, 0, 14), file(5, 15, 40)] }],
            ],
            pending_flush: None,
        }
    }

    #[test]
    fn partial_merge_rewrites_overlapping_target_files() {
        let s = two_levels();
        let m = merge(1, vec![(9, vec![1]), (8, vec![3])], Target::Into { run: 7, replace: vec![4, 5] }, false);
        let reads: Vec<Vec<u64>> = s.merge_inputs(&m).expect("inputs").iter().map(|r| r.iter().map(|f| f.id).collect()).collect();
        assert_eq!(reads, vec![vec![1], vec![3], vec![4, 5]]);
        let out = MergeOutput { files: vec![file(11, 0, 20), file(10, 21, 40)], new_run: None };
        let a = apply_compaction_result(&s, &m, &out).expect("apply");
        assert_eq!(ids(&a.state), vec![vec![(9, vec![2])], vec![(7, vec![11, 10])]]);
        assert_eq!(a.removed, vec![1, 3, 4, 5]);
        assert_eq!(ids(&s), ids(&two_levels()), "the snapshot is untouched");
    }

    #[test]
    fn trivial_move_relinks_into_a_new_run_and_flush_clears_the_buffer() {
        let mut s = two_levels();
        let m = merge(2, vec![(7, vec![4, 5])], Target::NewRun, true);
        let a = apply_compaction_result(&s, &m, &MergeOutput { files: vec![], new_run: Some(12) }).expect("apply");
        assert_eq!(ids(&a.state)[1..], [vec![], vec![(12, vec![4, 5])]]);
        assert!(a.removed.is_empty());
        assert!(apply_compaction_result(&s, &m, &MergeOutput::default()).is_err(), "a new run needs an id");

        s.pending_flush = Some(crate::PendingFlush { entries: 1, min_key: vec![1], max_key: vec![1] });
        let flush = merge(0, vec![], Target::NewRun, false);
        let a = apply_compaction_result(&s, &flush, &MergeOutput { files: vec![file(13, 1, 1)], new_run: Some(14) }).expect("apply");
        assert_eq!(a.state.levels[0][0].id, 14);
        assert!(a.state.pending_flush.is_none());
    }

    #[test]
    fn unknown_runs_and_files_are_errors() {
        let s = two_levels();
        for m in [
            merge(1, vec![(6, vec![1])], Target::NewRun, false),
            merge(1, vec![(9, vec![3])], Target::NewRun, false),
            merge(1, vec![(9, vec![1])], Target::Into { run: 6, replace: vec![] }, false),
            Merge { target_level: 3, ..merge(1, vec![(9, vec![1])], Target::NewRun, false) },
        ] {
            let out = MergeOutput { files: vec![], new_run: Some(20) };
            assert!(matches!(apply_compaction_result(&s, &m, &out), Err(Error::InvalidArgument(_))), "{m:?}");
            assert!(s.merge_inputs(&m).is_err(), "{m:?}");
        }
    }
}
