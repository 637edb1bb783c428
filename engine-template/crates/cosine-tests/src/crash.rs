//! The crash harness: runs `crash-child`, SIGKILLs it after a number of
//! acknowledged writes, and checks what a reopened engine recovered.
//!
//! Each child thread owns the keys `k` with `k % threads == t`, so its writes
//! form one sequence per key set. The recovered state of each thread's keys
//! must be the state after some prefix of that thread's writes (no holes, no
//! reordering); with `wal_sync = every_write` or `group_commit` the prefix must
//! cover every acknowledged write (a SIGKILL loses nothing the OS was handed),
//! with `none` the writes still buffered in the process may be missing.

use crate::TempDir;
use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::Engine;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// Keys the child writes: `0..KEYS`.
pub const KEYS: u64 = 300;

/// Parses a `wal_sync` name as `engine.toml` spells it.
pub fn parse_wal_sync(s: &str) -> Option<WalSync> {
    match s {
        "every_write" => Some(WalSync::EveryWrite),
        "group_commit" => Some(WalSync::GroupCommit),
        "none" => Some(WalSync::None),
        _ => None,
    }
}

/// `engine.toml`'s name of a `wal_sync` policy.
pub fn wal_sync_name(w: WalSync) -> &'static str {
    match w {
        WalSync::EveryWrite => "every_write",
        WalSync::GroupCommit => "group_commit",
        WalSync::None => "none",
    }
}

/// One write: a put of a value, or a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum W {
    /// put(key, value.to_le_bytes())
    Put(u64),
    /// delete(key)
    Del,
}

impl W {
    /// The value a get should return after this write.
    pub fn value(self) -> Option<Vec<u8>> {
        match self {
            W::Put(v) => Some(v.to_le_bytes().to_vec()),
            W::Del => None,
        }
    }
}

/// What one child run did, as the parent saw it.
#[derive(Debug, Default)]
pub struct History {
    /// Acknowledged writes per thread, in order.
    pub acked: Vec<Vec<(u64, W)>>,
    /// The write each thread had issued but not seen acknowledged when it died.
    pub inflight: Vec<Option<(u64, W)>>,
    /// Whether the child was killed (it may also have finished).
    pub killed: bool,
}

/// How one child run is set up.
#[derive(Debug, Clone, Copy)]
pub struct Child<'a> {
    /// The `crash-child` binary (`env!("CARGO_BIN_EXE_crash-child")` in a test).
    pub exe: &'a str,
    /// Database directory.
    pub dir: &'a Path,
    /// Preset name (`rocksdb`, `wiredtiger`, `faster`, `hybrid`).
    pub preset: &'a str,
    /// Seed of the child's writes.
    pub seed: u64,
    /// WAL policy.
    pub wal_sync: WalSync,
    /// Writer threads.
    pub threads: u64,
}

impl Child<'_> {
    /// Runs the child and SIGKILLs it after `kill_after` acknowledged writes (in all threads).
    pub fn run(&self, kill_after: u64) -> History {
        let exe = self.exe;
        let mut child = Command::new(exe)
            .arg(self.dir)
            .args([self.preset, &self.seed.to_string(), "1000000", wal_sync_name(self.wal_sync), &self.threads.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {exe}: {e}"));
        let n = self.threads as usize;
        let mut h = History { acked: vec![Vec::new(); n], inflight: vec![None; n], killed: false };
        let Some(stdout) = child.stdout.take() else { panic!("child has no stdout") };
        let mut acks = 0u64;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap_or_else(|e| panic!("reading the child: {e}"));
            let parts: Vec<&str> = line.split_whitespace().collect();
            let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("child said: {line}"));
            match parts.as_slice() {
                ["I", t, "P", k, v] => h.inflight[num(t) as usize] = Some((num(k), W::Put(num(v)))),
                ["I", t, "D", k] => h.inflight[num(t) as usize] = Some((num(k), W::Del)),
                ["A", t] => {
                    let t = num(t) as usize;
                    let Some(w) = h.inflight[t].take() else { panic!("ack without a write: {line}") };
                    h.acked[t].push(w);
                    acks += 1;
                    if acks >= kill_after && !h.killed {
                        let _ = child.kill(); // SIGKILL
                        h.killed = true;
                    }
                }
                ["DONE"] => {}
                _ => panic!("child said: {line}"),
            }
        }
        let _ = child.wait();
        h
    }
}

/// The state of every key a reopened engine holds.
pub type State = HashMap<u64, W>;

/// Reads keys `0..KEYS` from `e`.
pub fn read_state(e: &Engine) -> Result<State, String> {
    let mut s = State::new();
    for k in 0..KEYS {
        match e.get(&crate::key(k)).map_err(|err| format!("get {k}: {err}"))? {
            Some(v) if v.len() == 8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&v);
                s.insert(k, W::Put(u64::from_le_bytes(b)));
            }
            Some(v) => return Err(format!("key {k} holds {v:?}, which no write wrote")),
            None => {}
        }
    }
    Ok(s)
}

/// Checks the recovered state `got` against `base` (the state before the run) and the
/// run's history: for every thread it must be the state after a prefix of the thread's
/// writes (the in-flight one may be included). With `strict`, the prefix must cover
/// every acknowledged write. Returns the acknowledged writes missing (0 when strict).
pub fn check(base: &State, h: &History, got: &State, strict: bool) -> Result<u64, String> {
    let threads = h.acked.len() as u64;
    let mut lost = 0;
    for t in 0..threads {
        let ops: Vec<(u64, W)> = h.acked[t as usize].iter().copied().chain(h.inflight[t as usize]).collect();
        let mine = |k: &u64| k % threads == t;
        let differs = |state: &State, k: u64| state.get(&k) != got.get(&k);
        let mut state: State = base.iter().filter(|(k, _)| mine(k)).map(|(k, w)| (*k, *w)).collect();
        let mut mismatched = (0..KEYS).filter(|k| mine(k) && differs(&state, *k)).count();
        let mut best = (mismatched == 0).then_some(0usize);
        for (j, (k, w)) in ops.iter().enumerate() {
            let before = differs(&state, *k);
            match w {
                W::Put(_) => state.insert(*k, *w),
                W::Del => state.remove(k),
            };
            let after = differs(&state, *k);
            mismatched = mismatched + usize::from(after) - usize::from(before);
            if mismatched == 0 {
                best = Some(j + 1);
            }
        }
        let acked = h.acked[t as usize].len();
        let Some(j) = best else {
            return Err(format!("thread {t}: the recovered state is no prefix of its {} writes (a hole or a reordering)", ops.len()));
        };
        if strict && j < acked {
            return Err(format!("thread {t}: {} of {acked} acknowledged writes lost", acked - j));
        }
        lost += acked.saturating_sub(j) as u64;
    }
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(acked: Vec<(u64, W)>, inflight: Option<(u64, W)>) -> History {
        History { acked: vec![acked], inflight: vec![inflight], killed: true }
    }

    #[test]
    fn holes_reorderings_and_losses_are_caught() {
        let h = history(vec![(1, W::Put(10)), (2, W::Put(20)), (1, W::Put(11))], Some((3, W::Del)));
        let all: State = [(1, W::Put(11)), (2, W::Put(20))].into_iter().collect();
        assert_eq!(check(&State::new(), &h, &all, true), Ok(0));
        // The last write missing: a loss (an error when strict).
        let short: State = [(1, W::Put(10)), (2, W::Put(20))].into_iter().collect();
        assert_eq!(check(&State::new(), &h, &short, false), Ok(1));
        assert!(check(&State::new(), &h, &short, true).is_err());
        // Write 2 missing while the later write 3 is there: a hole.
        let hole: State = [(1, W::Put(11))].into_iter().collect();
        assert!(check(&State::new(), &h, &hole, false).is_err());
        // A value nobody wrote.
        let alien: State = [(1, W::Put(99)), (2, W::Put(20))].into_iter().collect();
        assert!(check(&State::new(), &h, &alien, false).is_err());
    }
}

/// Every WAL policy the crash harness exercises.
pub const MODES: [WalSync; 3] = [WalSync::EveryWrite, WalSync::GroupCommit, WalSync::None];

/// What a series of kill rounds saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rounds {
    /// Rounds whose child was killed (the others finished their writes).
    pub kills: usize,
    /// Writes the children acknowledged.
    pub acked: u64,
    /// Acknowledged writes missing after recovery (allowed only under `none`).
    pub lost: u64,
}

/// Runs `rounds` kill rounds of `exe` (the `crash-child` binary) on one directory
/// with `preset`, `wal_sync` and `threads` writer threads; after each kill the
/// database is reopened and checked against the history (`check`). Panics,
/// naming the round, on any recovery failure or ordering violation.
pub fn crash_rounds(exe: &str, preset: Preset, wal_sync: WalSync, threads: u64, rounds: usize, seed: u64) -> Rounds {
    let dir = TempDir::new("crash");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut base = State::new();
    let mut out = Rounds::default();
    let mut cfg = tiny(preset);
    cfg.durability.wal_sync = wal_sync;
    let child = Child { exe, dir: dir.path(), preset: preset.name(), seed, wal_sync, threads };
    for round in 0..rounds {
        let h = Child { seed: seed * 1000 + round as u64, ..child }.run(rng.gen_range(1..600));
        out.kills += usize::from(h.killed);
        out.acked += h.acked.iter().map(|a| a.len() as u64).sum::<u64>();
        let what = format!("{preset:?} {} threads={threads} round {round}", wal_sync_name(wal_sync));
        let e = Engine::open(dir.path(), &cfg).unwrap_or_else(|err| panic!("{what}: reopen failed: {err}"));
        let got = read_state(&e).unwrap_or_else(|err| panic!("{what}: {err}"));
        out.lost += check(&base, &h, &got, wal_sync != WalSync::None).unwrap_or_else(|err| panic!("{what}: {err}"));
        base = got;
        e.close().unwrap_or_else(|err| panic!("{what}: close: {err}"));
    }
    out
}
