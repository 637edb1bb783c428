//! The background worker: flushes frozen memtables and runs the compaction
//! strategy (or the hash log's GC), one structural change at a time.

use crate::{Inner, Store, SuperVersion};
use cosine_buffer::MemTable;
use cosine_compaction::{Choice, CompactionStrategy, PendingFlush};
use cosine_core::{Error, Result};
use cosine_level::{execute, IdAlloc, MergeCtx, MergeOutcome, Tree};
use cosine_manifest::SegmentRecord;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn run(inner: Arc<Inner>) {
    // Consecutive compactions without a flush or an idle step; a correct strategy
    // always converges, so a runaway count is reported instead of spinning forever.
    let mut streak = 0u64;
    loop {
        {
            let bg = inner.bg.lock();
            if bg.shutdown || bg.error.is_some() {
                break;
            }
        }
        let before = inner.stats.flushes.load(Ordering::Relaxed);
        let result = step(&inner).and_then(|did| {
            let flushes = inner.stats.flushes.load(Ordering::Relaxed);
            streak = if did && flushes == before { streak + 1 } else { 0 };
            let sv = inner.sv.read().clone();
            let files: u64 = sv.tree.levels.iter().flatten().map(|r| r.files.len() as u64).sum();
            let limit = 64 * (files + 64) * (sv.tree.levels.len() as u64 + 2);
            if did && streak > limit {
                return Err(Error::Closed(format!(
                    "compaction did not converge after {streak} steps ({files} files, {flushes} flushes): strategy bug"
                )));
            }
            Ok(did)
        });
        match result {
            Ok(true) => {
                // Notify under the lock so a waiter between its check and its wait cannot miss it.
                let _g = inner.bg.lock();
                inner.bg_cv.notify_all();
            }
            Ok(false) => {
                let mut bg = inner.bg.lock();
                // Idle only if nothing arrived while we looked.
                if inner.sv.read().imms.is_empty() {
                    bg.idle = true;
                    inner.bg_cv.notify_all();
                    if !bg.shutdown {
                        inner.bg_cv.wait_for(&mut bg, Duration::from_millis(100));
                    }
                }
            }
            Err(e) => {
                let mut bg = inner.bg.lock();
                bg.error = Some(e);
                inner.stopped.store(true, Ordering::Release);
                inner.bg_cv.notify_all();
                break;
            }
        }
    }
}

// Does one unit of work; false when there was nothing to do.
fn step(inner: &Arc<Inner>) -> Result<bool> {
    let sv = inner.sv.read().clone();
    let oldest = sv.imms.last().cloned();
    match &inner.store {
        Store::Tree => {
            let mut state = sv.tree.state();
            if let Some(m) = &oldest {
                if let Some((lo, hi)) = m.key_range() {
                    state.pending_flush = Some(PendingFlush { entries: m.len(), min_key: lo, max_key: hi });
                }
            }
            let mut ids = IdAlloc { next_id: inner.next_id.clone(), seq: inner.seq.load(Ordering::SeqCst) };
            match inner.strategy.choose(&state) {
                Choice::Idle => {
                    if let Some(m) = oldest.filter(|m| m.is_empty()) {
                        install_tree(inner, &mut ids, (*sv.tree).clone(), Vec::new(), Vec::new(), Some(&m))?;
                        return Ok(true);
                    }
                    Ok(false)
                }
                Choice::Flush(m) => {
                    let Some(mem) = oldest else { return Ok(false) };
                    let out = execute(ctx(inner), &sv.tree, &m, Some(&mem), &mut ids, &inner.stats.flush)?;
                    let MergeOutcome { tree, obsolete, created } = out;
                    install_tree(inner, &mut ids, tree, obsolete, created, Some(&mem))?;
                    inner.stats.flushes.fetch_add(1, Ordering::Relaxed);
                    Ok(true)
                }
                Choice::Compact(m) => {
                    let out = execute(ctx(inner), &sv.tree, &m, None, &mut ids, &inner.stats.compaction)?;
                    let MergeOutcome { tree, obsolete, created } = out;
                    install_tree(inner, &mut ids, tree, obsolete, created, None)?;
                    inner.stats.compactions.fetch_add(1, Ordering::Relaxed);
                    if m.trivial_move {
                        inner.stats.trivial_moves.fetch_add(1, Ordering::Relaxed);
                    } else if m.target_level >= state.depth() {
                        inner.stats.deep_merges.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(true)
                }
            }
        }
        Store::Log(log) => {
            let mut next = || inner.next_id.fetch_add(1, Ordering::SeqCst);
            if let Some(mem) = oldest {
                let p = log.prepare_flush(&mem, &mut next, &inner.stats.flush)?;
                let created = p.created(&inner.dir);
                commit_manifest(inner, Vec::new(), p.segments.clone(), Some(&mem), &created)?;
                let _ = log.commit(p);
                swap(inner, None, Some(&mem));
                inner.stats.flushes.fetch_add(1, Ordering::Relaxed);
                return Ok(true);
            }
            if log.needs_gc() {
                if let Some(p) = log.prepare_gc(&mut next, &inner.stats.compaction)? {
                    let created = p.created(&inner.dir);
                    commit_manifest(inner, Vec::new(), p.segments.clone(), None, &created)?;
                    if let Some(path) = log.commit(p) {
                        let _ = std::fs::remove_file(path);
                    }
                    inner.stats.gcs.fetch_add(1, Ordering::Relaxed);
                    inner.stats.compactions.fetch_add(1, Ordering::Relaxed);
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

fn min_wal(inner: &Inner, flushed: Option<&Arc<MemTable>>) -> u64 {
    let sv = inner.sv.read();
    std::iter::once(&sv.mem)
        .chain(sv.imms.iter())
        .filter(|m| flushed.is_none_or(|f| !Arc::ptr_eq(m, f)))
        .flat_map(|m| m.wal_ids().iter().copied())
        .min()
        .unwrap_or(0)
}

fn commit_manifest(
    inner: &Inner,
    levels: Vec<Vec<cosine_manifest::RunRecord>>,
    segments: Vec<SegmentRecord>,
    flushed: Option<&Arc<MemTable>>,
    created: &[PathBuf],
) -> Result<()> {
    let min_wal = min_wal(inner, flushed);
    let r = inner.versions.log_and_apply(|m| {
        m.next_id = m.next_id.max(inner.next_id.load(Ordering::SeqCst));
        m.seq = inner.seq.load(Ordering::SeqCst);
        m.min_wal = min_wal;
        m.wals.retain(|w| w.id >= min_wal);
        m.levels = levels;
        m.segments = segments;
    });
    if let Err(e) = r {
        for p in created {
            let _ = std::fs::remove_file(p);
        }
        return Err(e);
    }
    Ok(())
}

// Publishes the next version and retires the flushed memtable.
fn swap(inner: &Inner, tree: Option<Tree>, flushed: Option<&Arc<MemTable>>) {
    {
        let mut g = inner.sv.write();
        let cur = g.clone();
        *g = Arc::new(SuperVersion {
            mem: cur.mem.clone(),
            imms: cur.imms.iter().filter(|m| flushed.is_none_or(|f| !Arc::ptr_eq(m, f))).cloned().collect(),
            tree: tree.map_or_else(|| cur.tree.clone(), Arc::new),
        });
    }
    if let Some(f) = flushed {
        for id in f.wal_ids() {
            let _ = std::fs::remove_file(cosine_wal::segment_path(&inner.dir, *id));
        }
    }
}

fn install_tree(
    inner: &Inner,
    ids: &mut IdAlloc,
    tree: Tree,
    obsolete: Vec<PathBuf>,
    created: Vec<PathBuf>,
    flushed: Option<&Arc<MemTable>>,
) -> Result<()> {
    inner.seq.store(ids.seq, Ordering::SeqCst);
    commit_manifest(inner, tree.records(), Vec::new(), flushed, &created)?;
    swap(inner, Some(tree), flushed);
    // Readers holding the old version keep their open handles; unlinking is safe.
    for p in obsolete {
        if let Err(e) = std::fs::remove_file(&p) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(Error::io(&p, e));
            }
        }
    }
    Ok(())
}

fn ctx(inner: &Inner) -> MergeCtx<'_> {
    MergeCtx { dir: &inner.dir, cfg: &inner.cfg, cache: &inner.cache }
}
