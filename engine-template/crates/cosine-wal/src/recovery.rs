//! WAL replay at open, under a [`WalRecovery`] mode (modelled on RocksDB's
//! `WALRecoveryMode`).
//!
//! Every segment is first parsed whole into intact records and damaged spans.
//! A damaged span is a *torn tail* only if it is the end of the last segment
//! that holds data and no intact record follows it anywhere: a short header, a
//! record whose length runs past the end of the file (and whose bytes do not
//! form a complete record under another length, which would mean the length
//! field itself was damaged), a header followed only by zeros, or a zero-filled
//! tail. That is what a crash in the middle of an append leaves. Anything else
//! is corruption of records that were written whole, perhaps synced and
//! acknowledged.
//!
//! Nothing is applied and nothing on disk changes until the whole log has been
//! judged; an error leaves every file as it was. The salvage modes copy each
//! segment they change to `salvage/` first and log every action to stderr and
//! to `salvage/LOG`.

use crate::record::{header_at, intact_at, Record, HEADER};
use crate::{segment_path, sync_dir};
use cosine_config::WalRecovery;
use cosine_core::{crc32, Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Directory (inside the database) that keeps the original bytes a salvage dropped.
pub const SALVAGE_DIR: &str = "salvage";

/// One WAL segment to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRef {
    /// Segment id.
    pub id: u64,
    /// True if the manifest says the segment exists (so its absence is damage).
    pub expected: bool,
    /// The length the manifest recorded when the segment was sealed; any other length is damage.
    pub sealed: Option<u64>,
}

/// What recovery found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Records applied.
    pub records: u64,
    /// Bytes of torn tails cut off.
    pub torn_bytes: u64,
    /// Salvage actions taken (each also printed to stderr and appended to `salvage/LOG`).
    pub salvaged: Vec<String>,
}

#[derive(Debug)]
enum Item {
    Record(Record, usize, usize),
    Damage { pos: usize, end: usize, what: String, torn: bool },
}

fn all_zero(s: &[u8]) -> bool {
    s.iter().all(|b| *b == 0)
}

fn next_intact(data: &[u8], from: usize) -> Option<usize> {
    (from..data.len().saturating_sub(HEADER)).find(|p| intact_at(data, *p).is_some())
}

/// Splits a segment into intact records and damaged spans.
fn parse(data: &[u8]) -> Vec<Item> {
    let mut items = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        if let Some((rec, end)) = intact_at(data, pos) {
            items.push(Item::Record(rec, pos, end));
            pos = end;
            continue;
        }
        let rest = &data[pos..];
        let (what, tail_shape) = if all_zero(rest) {
            ("zero-filled tail".to_string(), true)
        } else {
            match header_at(data, pos) {
                None => (format!("short header ({} bytes)", rest.len()), true),
                Some((len, crc)) if HEADER + len > rest.len() => {
                    let whole = &rest[HEADER..];
                    if crc32(whole) == crc && crate::record::decode_payload(whole).is_some() {
                        (format!("length field says {len} bytes but the record's {} bytes are all there", whole.len()), false)
                    } else {
                        (format!("record of {len} bytes runs past the end of the file"), true)
                    }
                }
                Some((len, _)) if all_zero(&rest[HEADER..]) => (format!("record of {len} bytes is zero-filled"), true),
                Some((len, _)) => (format!("record of {len} bytes fails its checksum or does not decode"), false),
            }
        };
        match next_intact(data, pos + 1) {
            Some(next) => {
                items.push(Item::Damage { pos, end: next, what, torn: false });
                pos = next;
            }
            None => {
                items.push(Item::Damage { pos, end: data.len(), what, torn: tail_shape });
                break;
            }
        }
    }
    items
}

/// [`parse`], for a segment whose final length the manifest recorded: a sealed segment
/// cannot have a torn tail, and bytes missing from or added to its end are damage.
fn parse_sealed(data: &[u8], sealed: Option<u64>) -> Vec<Item> {
    let Some(n) = sealed else { return parse(data) };
    let len = data.len() as u64;
    if len > n {
        let mut items = parse(&data[..n as usize]);
        items.push(Item::Damage {
            pos: n as usize,
            end: data.len(),
            what: format!("{} bytes after the end recorded when the segment was sealed", len - n),
            torn: false,
        });
        return items;
    }
    let mut items = parse(data);
    if len < n {
        let what = format!("the segment is {len} bytes but was sealed at {n}: its end was cut off");
        match items.last_mut() {
            Some(Item::Damage { end, what: w, torn, .. }) if *end == data.len() => {
                *w = format!("{w}; {what}");
                *torn = false;
            }
            _ => items.push(Item::Damage { pos: data.len(), end: data.len(), what, torn: false }),
        }
    }
    items
}

/// A change to a segment decided by recovery, made only once the whole log is judged.
#[derive(Debug)]
enum Action {
    /// Cut the segment at this length.
    Truncate(PathBuf, u64),
    /// Replace the segment by these bytes (its intact records).
    Rewrite(PathBuf, Vec<u8>),
}

struct Seg {
    path: PathBuf,
    data: Option<Vec<u8>>,
    items: Vec<Item>,
}

impl Seg {
    fn records(&self) -> usize {
        self.items.iter().filter(|i| matches!(i, Item::Record(..))).count()
    }
}

/// Replays the segments `segs` of `dir` in order under `mode`, calling `apply(key, value)`
/// for every record kept. See the module documentation for what each mode does.
pub fn recover(
    dir: &Path,
    segs: &[SegmentRef],
    mode: WalRecovery,
    mut apply: impl FnMut(Vec<u8>, Option<Vec<u8>>),
) -> Result<RecoveryReport> {
    let mut loaded = Vec::with_capacity(segs.len());
    for s in segs {
        let path = segment_path(dir, s.id);
        let data = match std::fs::read(&path) {
            Ok(d) => Some(d),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && s.expected => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let items = data.as_deref().map(|d| parse_sealed(d, s.sealed)).unwrap_or_default();
        loaded.push(Seg { path, data, items });
    }
    // records_after[i]: intact records in segments after i.
    let mut records_after = vec![0usize; loaded.len()];
    for i in (0..loaded.len().saturating_sub(1)).rev() {
        records_after[i] = records_after[i + 1] + loaded[i + 1].records();
    }
    let mut report = RecoveryReport::default();
    let mut actions: Vec<Action> = Vec::new();
    let mut salvage: Vec<(PathBuf, String)> = Vec::new(); // (segment to copy, log line)
    let mut keep: Vec<Vec<bool>> = loaded.iter().map(|s| vec![true; s.items.len()]).collect();
    let mut stop: Option<usize> = None; // point in time: segments from here on are dropped
    'segments: for (si, seg) in loaded.iter().enumerate() {
        if seg.data.is_none() {
            let what = "segment named by the MANIFEST is missing".to_string();
            match mode {
                WalRecovery::TolerateCorruptedTail | WalRecovery::AbsoluteConsistency => {
                    return Err(Error::corrupt_at(&seg.path, 0, what));
                }
                WalRecovery::PointInTime => {
                    salvage.push((seg.path.clone(), format!("point_in_time: {}: {what}; replay stops here", seg.path.display())));
                    stop = Some(si);
                    break 'segments;
                }
                WalRecovery::SkipAnyCorrupted => {
                    salvage.push((seg.path.clone(), format!("skip_any_corrupted: {}: {what}; skipped", seg.path.display())));
                    continue;
                }
            }
        }
        for (ii, item) in seg.items.iter().enumerate() {
            let Item::Damage { pos, end, what, torn } = item else { continue };
            let torn_tail = *torn && records_after[si] == 0;
            let dropped = (end - pos) as u64;
            if torn_tail && mode != WalRecovery::AbsoluteConsistency {
                report.torn_bytes += dropped;
                keep[si][ii] = false;
                actions.push(Action::Truncate(seg.path.clone(), *pos as u64));
                continue;
            }
            let follow = seg.items[ii + 1..].iter().filter(|i| matches!(i, Item::Record(..))).count() + records_after[si];
            let what = if torn_tail {
                format!("{what} (a torn tail; absolute_consistency accepts none)")
            } else {
                format!("{what}; {follow} intact records follow it")
            };
            match mode {
                WalRecovery::TolerateCorruptedTail | WalRecovery::AbsoluteConsistency => {
                    return Err(Error::corrupt_at(&seg.path, *pos as u64, format!(
                        "{what} (the file is left as it is; set [durability] wal_recovery = \"point_in_time\" or \"skip_any_corrupted\" to salvage)"
                    )));
                }
                WalRecovery::PointInTime => {
                    salvage.push((
                        seg.path.clone(),
                        format!(
                            "point_in_time: {} at byte {pos}: {what}; dropped the rest of the log ({} bytes of this segment, {follow} intact records in all)",
                            seg.path.display(),
                            seg.data.as_ref().map_or(0, |d| d.len() - pos)
                        ),
                    ));
                    keep[si][ii..].iter_mut().for_each(|k| *k = false);
                    actions.push(Action::Truncate(seg.path.clone(), *pos as u64));
                    stop = Some(si + 1);
                    break 'segments;
                }
                WalRecovery::SkipAnyCorrupted => {
                    salvage.push((
                        seg.path.clone(),
                        format!("skip_any_corrupted: {} bytes {pos}..{end}: {what}; skipped", seg.path.display()),
                    ));
                    keep[si][ii] = false;
                }
            }
        }
        if mode == WalRecovery::SkipAnyCorrupted && keep[si].iter().any(|k| !k) && salvage.iter().any(|(p, _)| *p == seg.path) {
            // Rewrite the segment with its intact records only (torn tail included in the cut).
            let data = seg.data.as_deref().unwrap_or_default();
            let mut clean = Vec::new();
            for (item, k) in seg.items.iter().zip(&keep[si]) {
                if let (Item::Record(_, a, b), true) = (item, k) {
                    clean.extend_from_slice(&data[*a..*b]);
                }
            }
            actions.retain(|a| !matches!(a, Action::Truncate(p, _) if *p == seg.path));
            actions.push(Action::Rewrite(seg.path.clone(), clean));
        }
    }
    if let Some(from) = stop {
        for seg in loaded.iter().skip(from) {
            if seg.data.as_ref().is_some_and(|d| !d.is_empty()) {
                salvage.push((seg.path.clone(), format!("point_in_time: {} dropped whole (it follows the damage)", seg.path.display())));
                actions.push(Action::Truncate(seg.path.clone(), 0));
            }
        }
    }
    // Judged: keep the evidence, then change the log, then apply what is kept.
    if !salvage.is_empty() {
        let sdir = dir.join(SALVAGE_DIR);
        std::fs::create_dir_all(&sdir).map_err(|e| Error::io(&sdir, e))?;
        let mut copied: Vec<&PathBuf> = Vec::new();
        for (path, line) in &salvage {
            if !copied.contains(&path) && path.exists() {
                let dst = free_name(&sdir, path);
                std::fs::copy(path, &dst).map_err(|e| Error::io(&dst, e))?;
                File::open(&dst).and_then(|f| f.sync_all()).map_err(|e| Error::io(&dst, e))?;
                copied.push(path);
            }
            log(&sdir, line)?;
            report.salvaged.push(line.clone());
        }
        sync_dir(&sdir)?;
    }
    for a in &actions {
        match a {
            Action::Truncate(path, len) => {
                let f = OpenOptions::new().write(true).open(path).map_err(|e| Error::io(path, e))?;
                f.set_len(*len).map_err(|e| Error::io(path, e))?;
                f.sync_all().map_err(|e| Error::io(path, e))?;
            }
            Action::Rewrite(path, bytes) => {
                let tmp = path.with_extension("wal.tmp");
                let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
                f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| Error::io(&tmp, e))?;
                std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
                sync_dir(dir)?;
            }
        }
    }
    for (si, seg) in loaded.into_iter().enumerate() {
        if stop.is_some_and(|s| si >= s) {
            break;
        }
        for (item, k) in seg.items.into_iter().zip(&keep[si]) {
            if let (Item::Record(r, _, _), true) = (item, k) {
                apply(r.key, r.value);
                report.records += 1;
            }
        }
    }
    Ok(report)
}

fn free_name(sdir: &Path, path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut dst = sdir.join(&name);
    let mut n = 1;
    while dst.exists() {
        dst = sdir.join(format!("{name}.{n}"));
        n += 1;
    }
    dst
}

fn log(sdir: &Path, line: &str) -> Result<()> {
    eprintln!("cosine: WAL salvage: {line}");
    let p = sdir.join("LOG");
    let mut f = OpenOptions::new().create(true).append(true).open(&p).map_err(|e| Error::io(&p, e))?;
    writeln!(f, "{line}").and_then(|_| f.sync_data()).map_err(|e| Error::io(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::tmpdir;
    use crate::Wal;
    use cosine_config::WalSync;

    // Two segments (ids 1 and 2) of 10 records each; returns the record size.
    fn two_segments(d: &Path) -> usize {
        for id in [1u64, 2] {
            let mut w = Wal::open(d, id, WalSync::EveryWrite, 1000).expect("open");
            for j in 0..10u32 {
                w.append(&(id as u32 * 100 + j).to_be_bytes(), Some(b"abcdef")).expect("append").wait().expect("sync");
            }
            w.close().expect("close");
        }
        std::fs::metadata(segment_path(d, 1)).expect("meta").len() as usize / 10
    }

    fn run(d: &Path, mode: WalRecovery) -> Result<(Vec<u32>, RecoveryReport)> {
        let segs = [SegmentRef { id: 1, expected: true, sealed: None }, SegmentRef { id: 2, expected: true, sealed: None }];
        let mut keys = Vec::new();
        let r = recover(d, &segs, mode, |k, _| keys.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]])))?;
        Ok((keys, r))
    }

    fn flip(d: &Path, id: u64, at: usize) {
        let p = segment_path(d, id);
        let mut b = std::fs::read(&p).expect("read");
        b[at] ^= 0x08;
        std::fs::write(&p, &b).expect("write");
    }

    #[test]
    fn a_torn_tail_before_a_later_segment_is_not_a_tail() {
        let tmp = tmpdir("rec-torn-mid");
        let d = tmp.path();
        let rec = two_segments(d);
        let p = segment_path(d, 1);
        let b = std::fs::read(&p).expect("read");
        std::fs::write(&p, &b[..b.len() - rec / 2]).expect("cut");
        let e = run(d, WalRecovery::TolerateCorruptedTail).expect_err("records follow in segment 2");
        assert!(matches!(e, Error::CorruptAt { offset, .. } if offset == 9 * rec as u64), "{e}");
        // The same cut in the last segment is a torn tail.
        let tmp2 = tmpdir("rec-torn-last");
        let d2 = tmp2.path();
        two_segments(d2);
        let p2 = segment_path(d2, 2);
        let b2 = std::fs::read(&p2).expect("read");
        std::fs::write(&p2, &b2[..b2.len() - rec / 2]).expect("cut");
        let (keys, r) = run(d2, WalRecovery::TolerateCorruptedTail).expect("torn tail");
        assert_eq!(keys.len(), 19);
        assert_eq!(r.torn_bytes as usize, rec - rec / 2);
        assert!(run(d2, WalRecovery::TolerateCorruptedTail).is_ok(), "the cut was made durable");
        std::fs::write(&p2, &b2[..b2.len() - rec / 2]).expect("cut again");
        assert!(run(d2, WalRecovery::AbsoluteConsistency).is_err(), "absolute consistency refuses a torn tail");
    }

    #[test]
    fn point_in_time_stops_at_the_damage_and_keeps_the_evidence() {
        let tmp = tmpdir("pit");
        let d = tmp.path();
        let rec = two_segments(d);
        flip(d, 1, 4 * rec + HEADER + 3);
        let damaged = std::fs::read(segment_path(d, 1)).expect("read");
        let later = std::fs::read(segment_path(d, 2)).expect("read");
        let (keys, r) = run(d, WalRecovery::PointInTime).expect("salvage");
        assert_eq!(keys, (100..104).collect::<Vec<_>>(), "records before the damage, nothing after");
        assert_eq!(r.salvaged.len(), 2, "{:?}", r.salvaged);
        let s = d.join(SALVAGE_DIR);
        assert_eq!(std::fs::read(s.join("00000001.wal")).expect("copy"), damaged);
        assert_eq!(std::fs::read(s.join("00000002.wal")).expect("copy"), later);
        assert!(std::fs::read_to_string(s.join("LOG")).expect("log").contains("point_in_time"));
        // The log is now clean: the default mode opens it at the same point in time.
        assert_eq!(run(d, WalRecovery::TolerateCorruptedTail).expect("clean").0, keys);
    }

    #[test]
    fn skip_any_corrupted_drops_only_the_damaged_record() {
        let tmp = tmpdir("skip");
        let d = tmp.path();
        let rec = two_segments(d);
        flip(d, 1, 4 * rec + 1); // the length field of record 4
        let (keys, r) = run(d, WalRecovery::SkipAnyCorrupted).expect("salvage");
        let want: Vec<u32> = (100..110).filter(|k| *k != 104).chain(200..210).collect();
        assert_eq!(keys, want);
        assert_eq!(r.salvaged.len(), 1);
        assert_eq!(run(d, WalRecovery::AbsoluteConsistency).expect("rewritten clean").0, want);
    }

    #[test]
    fn a_sealed_segment_cut_at_a_record_boundary_is_damage() {
        let tmp = tmpdir("sealed");
        let d = tmp.path();
        let rec = two_segments(d);
        let p = segment_path(d, 1);
        let b = std::fs::read(&p).expect("read");
        std::fs::write(&p, &b[..5 * rec]).expect("cut");
        let segs = |sealed| [SegmentRef { id: 1, expected: true, sealed }, SegmentRef { id: 2, expected: true, sealed: None }];
        let e = recover(d, &segs(Some(10 * rec as u64)), WalRecovery::TolerateCorruptedTail, |_, _| {}).expect_err("cut short");
        assert!(matches!(e, Error::CorruptAt { offset, .. } if offset == 5 * rec as u64), "{e}");
        // Without the sealed length, the same cut looks like a log that ended there.
        assert!(recover(d, &segs(None), WalRecovery::TolerateCorruptedTail, |_, _| {}).is_ok());
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let tmp = tmpdir("everybit");
        let d = tmp.path();
        let mut w = Wal::open(d, 1, WalSync::EveryWrite, 1000).expect("open");
        for j in 0..4u32 {
            w.append(&j.to_be_bytes(), Some(b"v")).expect("append").wait().expect("sync");
        }
        w.close().expect("close");
        let p = segment_path(d, 1);
        let good = std::fs::read(&p).expect("read");
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[byte] ^= 1 << bit;
                std::fs::write(&p, &bad).expect("write");
                let segs = [SegmentRef { id: 1, expected: true, sealed: None }];
                let r = recover(d, &segs, WalRecovery::TolerateCorruptedTail, |_, _| {});
                assert!(r.as_ref().is_err_and(|e| e.is_corruption()), "byte {byte} bit {bit}: {r:?}");
                assert_eq!(std::fs::read(&p).expect("read"), bad, "byte {byte} bit {bit}: file changed");
            }
        }
    }
}
