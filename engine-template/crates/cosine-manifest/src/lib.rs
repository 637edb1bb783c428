//! The manifest: which run files, filter files, log segments and WAL segments are live.
//!
//! It is rewritten whole on every structural change: written to `MANIFEST.tmp`,
//! fsynced, renamed over `MANIFEST`, and the directory fsynced. A crash at any
//! point leaves either the old or the new manifest, never a mix, so a flush or
//! compaction interrupted half-way can neither lose data nor resurrect it; files
//! that no manifest names are leftovers and are deleted at open.
//!
//! It also names every WAL segment that may hold unflushed writes (recorded
//! when the segment is started, before any record goes in), so a deleted
//! segment is detected at open instead of silently losing its writes.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_core::{Decoder, Encoder, Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

const MAGIC: u64 = 0x434f_5349_4e45_4d46; // "COSINEMF"
/// Version 2 added the WAL segment list; version 1 files (no list) still open.
const VERSION: u32 = 2;
/// Manifest file name.
pub const MANIFEST: &str = "MANIFEST";
/// The manifest being written (renamed over `MANIFEST` once durable).
pub const MANIFEST_TMP: &str = "MANIFEST.tmp";

/// A live file of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// File id (`NNNNNNNN.sst`).
    pub id: u64,
    /// Entries, cross-checked against the file's own meta block at open.
    pub entries: u64,
}

/// A live run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// Run id.
    pub id: u64,
    /// Run-granularity filter file (`NNNNNNNN.rbf`), if any.
    pub filter: Option<u64>,
    /// Files in key order.
    pub files: Vec<FileRecord>,
}

/// A live hash-log segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Segment id (`NNNNNNNN.log`).
    pub id: u64,
    /// Committed length in bytes; anything beyond is an interrupted append.
    pub len: u64,
}

/// A WAL segment that may hold unflushed writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalRecord {
    /// Segment id (`NNNNNNNN.wal`).
    pub id: u64,
    /// Its final length once sealed (rotated away from, or closed cleanly); `None` while
    /// it takes appends. A sealed segment of any other length has lost or gained bytes.
    pub sealed: Option<u64>,
}

/// The whole durable state apart from the WAL contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Design class the directory was created with (refuses to open with another layout).
    pub class: String,
    /// Key width the directory was created with.
    pub key_bytes: u32,
    /// Next id for any file.
    pub next_id: u64,
    /// Flush/merge sequence counter.
    pub seq: u64,
    /// WAL segments with smaller ids are fully flushed and may be deleted.
    pub min_wal: u64,
    /// Tree layouts: runs per disk level (index 0 = level 1), newest first.
    pub levels: Vec<Vec<RunRecord>>,
    /// Hash-log layout: segments, oldest first.
    pub segments: Vec<SegmentRecord>,
    /// WAL segments (ids `>= min_wal`) that may hold unflushed writes; each must exist at open.
    pub wals: Vec<WalRecord>,
}

impl Manifest {
    /// Serializes with magic, version and checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.u64(MAGIC);
        e.u32(VERSION);
        e.len_bytes(self.class.as_bytes());
        e.u32(self.key_bytes);
        e.u64(self.next_id);
        e.u64(self.seq);
        e.u64(self.min_wal);
        e.u32(self.levels.len() as u32);
        for runs in &self.levels {
            e.u32(runs.len() as u32);
            for r in runs {
                e.u64(r.id);
                e.u64(r.filter.map_or(0, |f| f + 1));
                e.u32(r.files.len() as u32);
                for f in &r.files {
                    e.u64(f.id);
                    e.u64(f.entries);
                }
            }
        }
        e.u32(self.segments.len() as u32);
        for s in &self.segments {
            e.u64(s.id);
            e.u64(s.len);
        }
        e.u32(self.wals.len() as u32);
        for w in &self.wals {
            e.u64(w.id);
            e.u64(w.sealed.map_or(0, |n| n + 1));
        }
        e.seal();
        e.finish()
    }

    /// Decodes and verifies a manifest.
    pub fn decode(buf: &[u8]) -> Result<Manifest> {
        let mut d = Decoder::checked(buf, "MANIFEST")?;
        if d.u64()? != MAGIC {
            return Err(d.error("bad magic"));
        }
        let version = d.u32()?;
        if version != 1 && version != VERSION {
            return Err(d.error("unknown version"));
        }
        let class = String::from_utf8(d.len_bytes()?.to_vec()).map_err(|_| d.error("class is not UTF-8"))?;
        let key_bytes = d.u32()?;
        let next_id = d.u64()?;
        let seq = d.u64()?;
        let min_wal = d.u64()?;
        let nlevels = d.u32()? as usize;
        let mut levels = Vec::new();
        for _ in 0..nlevels {
            let nruns = d.u32()? as usize;
            let mut runs = Vec::new();
            for _ in 0..nruns {
                let id = d.u64()?;
                let filter = d.u64()?.checked_sub(1);
                let nfiles = d.u32()? as usize;
                let mut files = Vec::new();
                for _ in 0..nfiles {
                    files.push(FileRecord { id: d.u64()?, entries: d.u64()? });
                }
                runs.push(RunRecord { id, filter, files });
            }
            levels.push(runs);
        }
        let nseg = d.u32()? as usize;
        let mut segments = Vec::new();
        for _ in 0..nseg {
            segments.push(SegmentRecord { id: d.u64()?, len: d.u64()? });
        }
        let mut wals = Vec::new();
        if version >= 2 {
            for _ in 0..d.u32()? {
                wals.push(WalRecord { id: d.u64()?, sealed: d.u64()?.checked_sub(1) });
            }
        }
        if d.remaining() != 0 {
            return Err(d.error("trailing bytes"));
        }
        Ok(Manifest { class, key_bytes, next_id, seq, min_wal, levels, segments, wals })
    }

    /// Atomically replaces `dir/MANIFEST` with this manifest (temp + fsync + rename + dir fsync).
    pub fn write_atomic(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(MANIFEST_TMP);
        let bytes = self.encode();
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        drop(f);
        let dst = dir.join(MANIFEST);
        std::fs::rename(&tmp, &dst).map_err(|e| Error::io(&dst, e))?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io(dir, e))?;
        Ok(())
    }

    /// Reads `dir/MANIFEST`; `Ok(None)` if the directory has none yet.
    pub fn read(dir: &Path) -> Result<Option<Manifest>> {
        let p = dir.join(MANIFEST);
        match std::fs::read(&p) {
            Ok(b) => Manifest::decode(&b).map(Some).map_err(|e| match e {
                Error::Corruption { what } => Error::corruption(format!("{}: {what}", p.display())),
                other => other,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&p, e)),
        }
    }

    /// Every file id the manifest keeps alive (run files, run filters, log segments).
    pub fn live_ids(&self) -> Vec<u64> {
        let mut v = Vec::new();
        for runs in &self.levels {
            for r in runs {
                v.extend(r.filter);
                v.extend(r.files.iter().map(|f| f.id));
            }
        }
        v.extend(self.segments.iter().map(|s| s.id));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_atomic_write_and_corruption() {
        let tmp = tempfile::Builder::new().prefix("cosine-manifest-").tempdir().expect("scratch directory");
        let dir = tmp.path();
        assert_eq!(Manifest::read(dir).expect("read"), None);
        let m = Manifest {
            class: "lsm".into(),
            key_bytes: 16,
            next_id: 9,
            seq: 3,
            min_wal: 4,
            levels: vec![vec![RunRecord { id: 2, filter: Some(0), files: vec![FileRecord { id: 5, entries: 10 }] }]],
            segments: vec![SegmentRecord { id: 7, len: 100 }],
            wals: vec![WalRecord { id: 4, sealed: Some(0) }, WalRecord { id: 8, sealed: None }],
        };
        m.write_atomic(dir).expect("write");
        assert_eq!(Manifest::read(dir).expect("read"), Some(m.clone()));
        assert_eq!(m.live_ids(), vec![0, 5, 7]);
        let p = dir.join(MANIFEST);
        let mut b = std::fs::read(&p).expect("read");
        b[20] ^= 4;
        std::fs::write(&p, &b).expect("write");
        assert!(Manifest::read(dir).expect_err("corrupt").is_corruption());
    }
}
