//! Executes one merge: reads the inputs through a merging iterator, writes the
//! output files, and builds the next [`Tree`] in the shape
//! [`apply_compaction_result`] gives.

use crate::{file_state, Tree};
use cosine_buffer::MemTable;
use cosine_compaction::{apply_compaction_result, Applied, Merge, MergeOutput, Target};
use cosine_config::{Config, FilterGranularity, MergePolicy};
use cosine_core::{hash64, Error, IoCounter, KvIterator, MergingIterator, Result};
use cosine_filter::Bloom;
use cosine_run::{
    run_filter_path, table_path, write_run_filter, BlockCache, FilterKind, Run, Table, TableBuilder, TableOptions, WarmSpans, Warmed,
    WARM_MAX_BYTES,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Id and sequence counters persisted in the manifest.
#[derive(Debug, Clone, Default)]
pub struct IdAlloc {
    /// Next file/run/segment id, shared with the writer (WAL segments take ids too).
    pub next_id: Arc<AtomicU64>,
    /// Flush/merge sequence (advanced only by the background worker).
    pub seq: u64,
}

impl IdAlloc {
    /// Hands out a fresh id.
    pub fn id(&mut self) -> u64 {
        self.next_id.fetch_add(1, Ordering::SeqCst)
    }
}

/// Result of a merge, to be committed by the caller.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The next version.
    pub tree: Tree,
    /// Paths no longer referenced once the next version is committed.
    pub obsolete: Vec<PathBuf>,
    /// Paths created (removed again if the commit fails).
    pub created: Vec<PathBuf>,
}

fn table_options(cfg: &Config, level: usize) -> TableOptions {
    let hot = cfg.is_hot(level);
    let bpk = cfg.bloom_bits(level);
    let filter = if hot && bpk > 0.0 {
        match cfg.algorithms.filter_granularity {
            FilterGranularity::File => FilterKind::File,
            FilterGranularity::Block => FilterKind::Block,
            FilterGranularity::Run => FilterKind::None,
        }
    } else {
        FilterKind::None
    };
    TableOptions {
        key_len: cfg.layout.key_bytes,
        block_entries: cfg.layout.block_entries,
        index_fanout: cfg.index_fanout(),
        block_bytes: cfg.block_bytes(),
        filter,
        bits_per_key: bpk,
        hot,
        codec: cfg.codec(level),
        range_bits: cfg.range_filter_bits(level).to_vec(),
    }
}

fn needs_run_filter(cfg: &Config, level: usize) -> bool {
    cfg.is_hot(level) && cfg.bloom_bits(level) > 0.0 && cfg.algorithms.filter_granularity == FilterGranularity::Run
}

/// Where a merge writes and how: the database directory, the design, the block cache.
#[derive(Debug, Clone, Copy)]
pub struct MergeCtx<'a> {
    /// Database directory.
    pub dir: &'a Path,
    /// The design.
    pub cfg: &'a Config,
    /// Block cache handed to the files written.
    pub cache: &'a Option<Arc<BlockCache>>,
}

/// Runs `m` against `tree`. `buffer` is the frozen memtable for a flush.
/// Reads and writes are charged to `io`. Files written by a merge that fails are removed.
///
/// The inputs are the files [`LevelState::merge_inputs`](cosine_compaction::LevelState::merge_inputs)
/// names; the next tree has the shape [`apply_compaction_result`] gives (the
/// simulator places its output with the same function).
pub fn execute(
    ctx: MergeCtx<'_>,
    tree: &Tree,
    m: &Merge,
    buffer: Option<&MemTable>,
    ids: &mut IdAlloc,
    io: &Arc<IoCounter>,
) -> Result<MergeOutcome> {
    let t = m.target_level;
    let snapshot = tree.state();
    let mut tables: HashMap<u64, Arc<Table>> =
        tree.levels.iter().flatten().flat_map(|r| r.files.iter()).map(|f| (f.id, f.clone())).collect();
    let inputs = snapshot
        .merge_inputs(m)?
        .iter()
        .map(|run| run.iter().map(|f| table(&tables, f.id)).collect::<Result<Vec<_>>>())
        .collect::<Result<Vec<_>>>()?;
    let mut w = Writer { ctx, ids, io, created: Vec::new() };
    let (written, hashes, warmed) = if m.trivial_move {
        // Relink: no bytes move. A file entering a cold level drops its in-memory parts.
        if !ctx.cfg.is_hot(t) {
            for f in inputs.iter().flatten().filter(|f| f.is_hot()) {
                tables.insert(f.id, f.to_cold());
            }
        }
        (Vec::new(), Vec::new(), Warmed::default())
    } else {
        w.merge(m, &inputs, buffer)?
    };
    let mut output = MergeOutput { files: written.iter().map(|f| file_state(f)).collect(), new_run: None };
    tables.extend(written.into_iter().map(|f| (f.id, f)));
    let target = match &m.target {
        Target::Into { run, .. } => *run,
        Target::NewRun => *output.new_run.insert(w.ids.id()),
    };
    let Applied { state, removed } = apply_compaction_result(&snapshot, m, &output)?;

    // The next tree: unchanged runs are shared, runs that lost source files keep
    // their filter (keys that left are harmless extra positives), the target run
    // gets the filter `run_filter` decides on.
    let mut levels = Vec::with_capacity(state.levels.len());
    for (i, runs) in state.levels.iter().enumerate() {
        let old_runs = tree.levels.get(i).map_or(&[][..], Vec::as_slice);
        let mut next = Vec::with_capacity(runs.len());
        for r in runs {
            let old = old_runs.iter().find(|o| o.id == r.id);
            let is_target = i + 1 == t && r.id == target;
            let unchanged = old.filter(|o| !is_target && o.files.iter().map(|f| f.id).eq(r.files.iter().map(|f| f.id)));
            next.push(match unchanged {
                Some(o) => o.clone(),
                None => {
                    let files = r.files.iter().map(|f| table(&tables, f.id)).collect::<Result<Vec<_>>>()?;
                    let filter = if is_target { w.run_filter(m, &files, old, &hashes)? } else { old.and_then(|o| o.filter.clone()) };
                    Arc::new(Run { id: r.id, files, filter })
                }
            });
        }
        levels.push(next);
    }
    let tree_next = Tree { levels };

    // Everything the old version held and the next one does not.
    let dir = ctx.dir;
    let mut obsolete: Vec<PathBuf> = removed.iter().map(|id| table_path(dir, *id)).collect();
    let filter_ids =
        |t: &Tree| -> HashSet<u64> { t.levels.iter().flatten().filter_map(|r| r.filter.as_ref().map(|(id, _)| *id)).collect() };
    let live = filter_ids(&tree_next);
    let mut dead: Vec<u64> = filter_ids(tree).into_iter().filter(|id| !live.contains(id)).collect();
    dead.sort_unstable();
    obsolete.extend(dead.into_iter().map(|id| run_filter_path(dir, id)));
    if let Some(cache) = ctx.cache {
        // the inputs' cached blocks make way for the output's that hold their keys (cosine_run::warm)
        warmed.install(cache, &removed.iter().copied().collect());
    }
    Ok(MergeOutcome { tree: tree_next, obsolete, created: std::mem::take(&mut w.created) })
}

fn table(tables: &HashMap<u64, Arc<Table>>, id: u64) -> Result<Arc<Table>> {
    tables.get(&id).cloned().ok_or_else(|| Error::InvalidArgument(format!("merge names unknown file {id}")))
}

/// A merge in progress: where it writes, and the files it has created so far,
/// which are removed again unless the merge hands them over in its outcome.
struct Writer<'a> {
    ctx: MergeCtx<'a>,
    ids: &'a mut IdAlloc,
    io: &'a Arc<IoCounter>,
    created: Vec<PathBuf>,
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        for p in &self.created {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Writer<'_> {
    /// Merges the frozen `buffer` and the `inputs` (runs in priority order) into
    /// new files for the target level. Returns them (in key order), when the
    /// target level keeps run filters the hashes of the keys written, and the blocks written
    /// over keys whose input blocks the cache held (cosine_run::warm).
    fn merge(&mut self, m: &Merge, inputs: &[Vec<Arc<Table>>], buffer: Option<&MemTable>) -> Result<(Vec<Arc<Table>>, Vec<u64>, Warmed)> {
        match buffer {
            // the frozen buffer read in place, under its read locks, for the whole merge
            Some(mem) => mem.with_range(None, None, |entries| self.merge_from(m, inputs, Some(Box::new(entries)))),
            None => self.merge_from(m, inputs, None),
        }
    }

    /// [`Writer::merge`] with the buffer's entries, if any, as the first source.
    fn merge_from<'b>(
        &mut self,
        m: &Merge,
        inputs: &[Vec<Arc<Table>>],
        buffer: Option<Box<dyn KvIterator + Send + 'b>>,
    ) -> Result<(Vec<Arc<Table>>, Vec<u64>, Warmed)> {
        let MergeCtx { dir, cfg, cache } = self.ctx;
        let t = m.target_level;
        let flushes = buffer.is_some();
        let mut iters: Vec<Box<dyn KvIterator + Send + 'b>> = buffer.into_iter().collect();
        let mut oldest_flush = u64::MAX;
        for files in inputs {
            for f in files {
                oldest_flush = oldest_flush.min(f.flushed_seq);
            }
            let tmp = Run { id: 0, files: files.clone(), filter: None };
            iters.push(Box::new(tmp.iter(None, None, self.io.clone(), false)?));
        }
        self.ids.seq += 1;
        let merge_seq = self.ids.seq;
        if flushes {
            oldest_flush = merge_seq;
        }
        let opts = table_options(cfg, t);
        let want_hashes = needs_run_filter(cfg, t);
        let mut it = MergingIterator::new(iters);
        let mut outputs = Vec::new();
        let mut hashes = Vec::new();
        let mut builder: Option<TableBuilder> = None;
        let warm = cache.as_ref().and_then(|c| WarmSpans::of_inputs(c, inputs.iter().flatten())).map(Arc::new);
        let mut warmed = Warmed::default();
        while it.valid() {
            let v = it.value();
            if v.is_some() || !m.drop_tombstones {
                if builder.is_none() {
                    let id = self.ids.id();
                    self.created.push(table_path(dir, id));
                    let mut b = TableBuilder::create(dir, id, opts.clone(), self.io)?;
                    b.set_seqs(oldest_flush, merge_seq);
                    if let Some(w) = &warm {
                        b.warm_from(w.clone(), WARM_MAX_BYTES.saturating_sub(warmed.bytes()));
                    }
                    builder = Some(b);
                }
                if let Some(b) = builder.as_mut() {
                    b.add(it.key(), v)?;
                    if want_hashes {
                        hashes.push(hash64(it.key()));
                    }
                    if b.entries() as usize >= cfg.algorithms.file_entries {
                        if let Some(b) = builder.take() {
                            let (f, blocks) = b.finish_warm(cache.clone())?;
                            outputs.push(f);
                            warmed.extend(blocks);
                        }
                    }
                }
            }
            it.next()?;
        }
        if let Some(b) = builder.take() {
            let (f, blocks) = b.finish_warm(cache.clone())?;
            outputs.push(f);
            warmed.extend(blocks);
        }
        Ok((outputs, hashes, warmed))
    }

    /// The run filter of the target run, now holding `files`; `old` is the run
    /// before the merge (none for a new run), `hashes` the keys the merge wrote.
    fn run_filter(&mut self, m: &Merge, files: &[Arc<Table>], old: Option<&Arc<Run>>, hashes: &[u64]) -> Result<Option<(u64, Arc<Bloom>)>> {
        let MergeCtx { dir, cfg, .. } = self.ctx;
        let t = m.target_level;
        let old_filter = old.and_then(|o| o.filter.as_ref());
        let whole_run_rewritten = match (old, &m.target) {
            (Some(o), Target::Into { replace, .. }) => o.files.iter().all(|f| replace.contains(&f.id)),
            _ => true,
        };
        // A run filter must cover every key of the run: extend the old one, or build
        // one only when the whole run was rewritten (its keys all passed through here).
        let can_filter = !m.trivial_move && (whole_run_rewritten || old_filter.is_some());
        if !needs_run_filter(cfg, t) || files.is_empty() || !can_filter {
            return Ok(None);
        }
        let entries: u64 = files.iter().map(|f| f.entries).sum();
        let bpk = cfg.bloom_bits(t);
        let mut b = match (old_filter, whole_run_rewritten) {
            (Some((_, old)), false) => (**old).clone(),
            _ => {
                let partial = cfg.merge_policy(m.source_level) == MergePolicy::Partial;
                let sized = if partial { entries.max(cfg.run_capacity(t, true)) } else { entries };
                Bloom::new(sized, bpk)
            }
        };
        for h in hashes {
            b.insert(*h);
        }
        let fid = self.ids.id();
        self.created.push(run_filter_path(dir, fid));
        write_run_filter(dir, fid, &b, cfg.block_bytes(), self.io)?;
        Ok(Some((fid, Arc::new(b))))
    }
}
