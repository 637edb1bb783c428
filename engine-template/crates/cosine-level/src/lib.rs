//! Levels of runs: one immutable version of the tree, and the worker that turns a
//! strategy's [`Choice`](cosine_compaction::Choice) into a new version.
//!
//! A [`Tree`] is never modified in place: a flush or merge builds the next tree
//! (sharing unchanged runs through `Arc`), the engine commits it to the manifest
//! and then swaps it in. Readers keep using the version they started with, whose
//! files stay readable through their open handles even after being unlinked.
#![deny(unsafe_code, clippy::unwrap_used)]

mod exec;

pub use exec::{execute, IdAlloc, MergeCtx, MergeOutcome};

use cosine_compaction::{FileState, LevelState, RunState};
use cosine_config::Config;
use cosine_core::{Error, IoCounter, KvIterator, Result, Value};
use cosine_manifest::{FileRecord, RunRecord};
use cosine_run::{read_run_filter, BlockCache, Hit, Run, Table};
use std::path::Path;
use std::sync::Arc;

/// The shape of file `f` as the compaction strategy sees it.
fn file_state(f: &Table) -> FileState {
    FileState {
        id: f.id,
        entries: f.entries,
        min_key: f.min_key.clone(),
        max_key: f.max_key.clone(),
        flushed_seq: f.flushed_seq,
        merged_seq: f.merged_seq,
    }
}

/// One version of the on-disk levels. `levels[0]` is disk level 1; runs newest first.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// Runs per level.
    pub levels: Vec<Vec<Arc<Run>>>,
}

/// Shape of one level (for `stats()` and the benchmark JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelInfo {
    /// Disk level (1-based).
    pub level: usize,
    /// Hot (in-memory filters and fence pointers) or cold.
    pub hot: bool,
    /// Runs.
    pub runs: usize,
    /// Files.
    pub files: usize,
    /// Entries (tombstones included).
    pub entries: u64,
    /// Capacity `E_B * T^i`.
    pub capacity: u64,
}

impl Tree {
    /// Looks `key` up level by level, newest run first; the first hit wins.
    pub fn get(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<Value>> {
        Ok(self.get_at(key, hash, io)?.map(|(_, v)| v))
    }

    /// [`Tree::get`], with the index (0-based) of the level whose run held the hit.
    pub fn get_at(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<(usize, Value)>> {
        Ok(self.find_at(key, hash, io)?.map(|(i, h)| (i, h.to_value())))
    }

    /// [`Tree::get_at`] without copying the value: the level index and the block entry of the
    /// first hit (a tombstone too).
    pub fn find_at(&self, key: &[u8], hash: u64, io: &IoCounter) -> Result<Option<(usize, Hit)>> {
        for (i, runs) in self.levels.iter().enumerate() {
            for r in runs {
                if let Some(h) = r.find(key, hash, io)? {
                    return Ok(Some((i, h)));
                }
            }
        }
        Ok(None)
    }

    /// Cursors over every run from `lo`, newest first (merge priority order); with
    /// an upper bound `hi` a run reads only files that may hold keys in `lo..=hi`
    /// (their key span and range filter: [`Run::iter`]).
    pub fn iters(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        io: &Arc<IoCounter>,
        use_cache: bool,
    ) -> Result<Vec<Box<dyn KvIterator + Send>>> {
        let mut v: Vec<Box<dyn KvIterator + Send>> = Vec::new();
        for runs in &self.levels {
            for r in runs {
                v.push(Box::new(r.iter(lo, hi, io.clone(), use_cache)?));
            }
        }
        Ok(v)
    }

    /// The shape the compaction strategy decides on.
    pub fn state(&self) -> LevelState {
        LevelState {
            levels: self
                .levels
                .iter()
                .map(|runs| runs.iter().map(|r| RunState { id: r.id, files: r.files.iter().map(|f| file_state(f)).collect() }).collect())
                .collect(),
            pending_flush: None,
        }
    }

    /// Manifest records for this version.
    pub fn records(&self) -> Vec<Vec<RunRecord>> {
        self.levels
            .iter()
            .map(|runs| {
                runs.iter()
                    .map(|r| RunRecord {
                        id: r.id,
                        filter: r.filter.as_ref().map(|(id, _)| *id),
                        files: r.files.iter().map(|f| FileRecord { id: f.id, entries: f.entries }).collect(),
                    })
                    .collect()
            })
            .collect()
    }

    /// Opens the files a manifest names; hot levels load fences and filters (charged to `io`).
    pub fn open(dir: &Path, cfg: &Config, levels: &[Vec<RunRecord>], cache: Option<Arc<BlockCache>>, io: &IoCounter) -> Result<Tree> {
        let mut out = Vec::new();
        for (li, runs) in levels.iter().enumerate() {
            let level = li + 1;
            let hot = cfg.is_hot(level);
            let mut rv = Vec::new();
            for r in runs {
                let mut files = Vec::new();
                for f in &r.files {
                    let t = Table::open(dir, f.id, hot, cfg.layout.key_bytes, cache.clone(), io)?;
                    if t.entries != f.entries {
                        return Err(Error::corruption(format!(
                            "file {} holds {} entries, the manifest says {}",
                            f.id, t.entries, f.entries
                        )));
                    }
                    files.push(t);
                }
                for w in files.windows(2) {
                    if w[0].max_key >= w[1].min_key {
                        return Err(Error::corruption(format!("run {} has overlapping files", r.id)));
                    }
                }
                let filter = match r.filter {
                    Some(id) if hot => Some((id, Arc::new(read_run_filter(dir, id, io)?))),
                    _ => None,
                };
                rv.push(Arc::new(Run { id: r.id, files, filter }));
            }
            out.push(rv);
        }
        Ok(Tree { levels: out })
    }

    /// Shape per level.
    pub fn shape(&self, cfg: &Config) -> Vec<LevelInfo> {
        self.levels
            .iter()
            .enumerate()
            .map(|(i, runs)| LevelInfo {
                level: i + 1,
                hot: cfg.is_hot(i + 1),
                runs: runs.len(),
                files: runs.iter().map(|r| r.files.len()).sum(),
                entries: runs.iter().map(|r| r.entries()).sum(),
                capacity: cfg.level_capacity(i + 1),
            })
            .collect()
    }

    /// Memory held for range filters, in bytes.
    pub fn range_filter_memory(&self) -> usize {
        self.levels.iter().flatten().flat_map(|r| r.files.iter()).map(|f| f.range_filter_bytes()).sum()
    }

    /// Memory held for fence pointers and filters: `(M_FP, M_BF)` in bytes.
    pub fn memory(&self) -> (usize, usize) {
        let (mut fp, mut bf) = (0, 0);
        for runs in &self.levels {
            for r in runs {
                if let Some((_, b)) = &r.filter {
                    bf += b.byte_len();
                }
                for f in &r.files {
                    let (a, b) = f.memory_bytes();
                    fp += a;
                    bf += b;
                }
            }
        }
        (fp, bf)
    }
}
