//! Executes one merge: reads the inputs through a merging iterator, writes the
//! output files, and builds the next [`Tree`].

use crate::Tree;
use cosine_buffer::MemTable;
use cosine_compaction::{Merge, Target};
use cosine_config::{Config, FilterGranularity, MergePolicy};
use cosine_core::{hash64, Error, IoCounter, KvIterator, MergingIterator, Result};
use cosine_filter::Bloom;
use cosine_run::{table_path, run_filter_path, write_run_filter, BlockCache, FilterKind, Run, Table, TableBuilder, TableOptions};
use std::path::Path;
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
    pub obsolete: Vec<std::path::PathBuf>,
    /// Paths created (removed again if the commit fails).
    pub created: Vec<std::path::PathBuf>,
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
/// Reads and writes are charged to `io`.
pub fn execute(
    ctx: MergeCtx<'_>,
    tree: &Tree,
    m: &Merge,
    buffer: Option<&MemTable>,
    ids: &mut IdAlloc,
    io: &Arc<IoCounter>,
) -> Result<MergeOutcome> {
    let mut created = Vec::new();
    let r = execute_inner(ctx, tree, m, buffer, ids, io, &mut created);
    if r.is_err() {
        for p in &created {
            let _ = std::fs::remove_file(p);
        }
    }
    r
}

fn execute_inner(
    ctx: MergeCtx<'_>,
    tree: &Tree,
    m: &Merge,
    buffer: Option<&MemTable>,
    ids: &mut IdAlloc,
    io: &Arc<IoCounter>,
    created: &mut Vec<std::path::PathBuf>,
) -> Result<MergeOutcome> {
    let MergeCtx { dir, cfg, cache } = ctx;
    let t = m.target_level;
    let mut levels = tree.levels.clone();
    while levels.len() < t {
        levels.push(Vec::new());
    }
    let mut obsolete = Vec::new();

    // Detach the source files from their runs (empty runs disappear).
    let mut sources: Vec<Vec<Arc<Table>>> = Vec::new();
    if m.source_level > 0 {
        let runs = &mut levels[m.source_level - 1];
        for (run_id, fids) in &m.inputs {
            let pos = runs
                .iter()
                .position(|r| r.id == *run_id)
                .ok_or_else(|| Error::InvalidArgument(format!("merge names unknown run {run_id}")))?;
            let old = &runs[pos];
            let (take, keep): (Vec<_>, Vec<_>) = old.files.iter().cloned().partition(|f| fids.contains(&f.id));
            if take.len() != fids.len() {
                return Err(Error::InvalidArgument(format!("merge names unknown files of run {run_id}")));
            }
            sources.push(take);
            if keep.is_empty() {
                if let Some((fid, _)) = &old.filter {
                    obsolete.push(run_filter_path(dir, *fid));
                }
                runs.remove(pos);
            } else {
                // Keys that left stay in a run filter as harmless extra positives.
                runs[pos] = Arc::new(Run { id: old.id, files: keep, filter: old.filter.clone() });
            }
        }
    }

    let target_runs = &levels[t - 1];
    let target_pos = match &m.target {
        Target::Into { run, .. } => Some(
            target_runs
                .iter()
                .position(|r| r.id == *run)
                .ok_or_else(|| Error::InvalidArgument(format!("merge targets unknown run {run}")))?,
        ),
        Target::NewRun => None,
    };
    let replace: Vec<u64> = match &m.target {
        Target::Into { replace, .. } => replace.clone(),
        Target::NewRun => Vec::new(),
    };

    let (outputs, hashes): (Vec<Arc<Table>>, Vec<u64>) = if m.trivial_move {
        // Relink: no bytes move. A file entering a cold level drops its in-memory parts.
        let hot = cfg.is_hot(t);
        let files = sources
            .into_iter()
            .flatten()
            .map(|f| if !hot && f.is_hot() { f.to_cold() } else { f })
            .collect();
        (files, Vec::new())
    } else {
        let mut iters: Vec<Box<dyn KvIterator + Send>> = Vec::new();
        if let Some(mem) = buffer {
            iters.push(Box::new(mem.range(None, None)));
        }
        let mut oldest_flush = u64::MAX;
        for files in &sources {
            for f in files {
                oldest_flush = oldest_flush.min(f.flushed_seq);
            }
            let tmp = Run { id: 0, files: files.clone(), filter: None };
            iters.push(Box::new(tmp.iter(None, io.clone(), false)?));
        }
        if let Some(p) = target_pos {
            let r = &target_runs[p];
            let files: Vec<Arc<Table>> = r.files.iter().filter(|f| replace.contains(&f.id)).cloned().collect();
            for f in &files {
                oldest_flush = oldest_flush.min(f.flushed_seq);
            }
            let tmp = Run { id: 0, files, filter: None };
            iters.push(Box::new(tmp.iter(None, io.clone(), false)?));
        }
        ids.seq += 1;
        let merge_seq = ids.seq;
        if buffer.is_some() {
            oldest_flush = merge_seq;
        }
        let opts = table_options(cfg, t);
        let want_hashes = needs_run_filter(cfg, t);
        let mut it = MergingIterator::new(iters);
        let mut outputs = Vec::new();
        let mut hashes = Vec::new();
        let mut builder: Option<TableBuilder> = None;
        while it.valid() {
            let v = it.value();
            if v.is_some() || !m.drop_tombstones {
                if builder.is_none() {
                    let id = ids.id();
                    created.push(table_path(dir, id));
                    let mut b = TableBuilder::create(dir, id, opts, io)?;
                    b.set_seqs(oldest_flush, merge_seq);
                    builder = Some(b);
                }
                if let Some(b) = builder.as_mut() {
                    b.add(it.key(), v)?;
                    if want_hashes {
                        hashes.push(hash64(it.key()));
                    }
                    if b.entries() as usize >= cfg.algorithms.file_entries {
                        if let Some(b) = builder.take() {
                            outputs.push(b.finish(cache.clone())?);
                        }
                    }
                }
            }
            it.next()?;
        }
        if let Some(b) = builder.take() {
            outputs.push(b.finish(cache.clone())?);
        }
        for files in &sources {
            obsolete.extend(files.iter().map(|f| table_path(dir, f.id)));
        }
        (outputs, hashes)
    };

    // Place the outputs.
    let runs = &mut levels[t - 1];
    let (mut files, old_filter, run_id) = match target_pos {
        Some(p) => {
            let r = runs[p].clone();
            let mut keep = Vec::new();
            for f in &r.files {
                if replace.contains(&f.id) {
                    obsolete.push(table_path(dir, f.id));
                } else {
                    keep.push(f.clone());
                }
            }
            (keep, r.filter.clone(), r.id)
        }
        None => (Vec::new(), None, ids.id()),
    };
    let whole_run_rewritten = files.is_empty();
    files.extend(outputs);
    files.sort_by(|a, b| a.min_key.cmp(&b.min_key));
    // A run filter must cover every key of the run: extend the old one, or build
    // one only when the whole run was rewritten (its keys all passed through here).
    let can_filter = !m.trivial_move && (whole_run_rewritten || old_filter.is_some());
    let filter = if needs_run_filter(cfg, t) && !files.is_empty() && can_filter {
        let entries: u64 = files.iter().map(|f| f.entries).sum();
        let bpk = cfg.bloom_bits(t);
        let mut b = match (&old_filter, whole_run_rewritten) {
            (Some((_, old)), false) => (**old).clone(),
            _ => {
                let partial = cfg.merge_policy(m.source_level) == MergePolicy::Partial;
                let sized = if partial { entries.max(cfg.run_capacity(t, true)) } else { entries };
                Bloom::new(sized, bpk)
            }
        };
        for h in &hashes {
            b.insert(*h);
        }
        let fid = ids.id();
        created.push(run_filter_path(dir, fid));
        write_run_filter(dir, fid, &b, cfg.block_bytes(), io)?;
        Some((fid, Arc::new(b)))
    } else {
        None
    };
    if let Some((fid, _)) = &old_filter {
        obsolete.push(run_filter_path(dir, *fid));
    }
    let new_run = Arc::new(Run { id: run_id, files, filter });
    match target_pos {
        Some(p) if new_run.files.is_empty() => {
            runs.remove(p);
        }
        Some(p) => runs[p] = new_run,
        None if new_run.files.is_empty() => {}
        None => runs.insert(0, new_run),
    }
    Ok(MergeOutcome { tree: Tree { levels }, obsolete, created: created.clone() })
}
