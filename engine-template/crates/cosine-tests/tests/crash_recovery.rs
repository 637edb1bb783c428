//! Crash consistency: a child applies writes (`wal_sync = every_write`) and is
//! SIGKILLed at random points, often in the middle of a flush or compaction.
//! After every kill the database reopens and holds every acknowledged write
//! with its latest value (the one in-flight write may or may not be there).
//! Rounds accumulate on one directory, so recovery of a recovered database is
//! exercised too.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum W {
    Put(u64),
    Del,
}

/// Runs `rounds` kill/reopen rounds for `preset`; returns how many kills happened.
fn crash_rounds(preset: Preset, rounds: usize, seed: u64) -> usize {
    let dir = TempDir::new("crash");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model: HashMap<u64, W> = HashMap::new();
    let mut kills = 0;
    for round in 0..rounds {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-child"))
            .args([dir.path().to_str().unwrap_or("."), preset.name(), &(seed * 1000 + round as u64).to_string(), "100000"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let kill_after: u64 = rng.gen_range(1..600);
        let mut acks = 0u64;
        let mut inflight: Option<(u64, W)> = None;
        let mut killed = false;
        let apply = |line: &str, inflight: &mut Option<(u64, W)>, model: &mut HashMap<u64, W>| -> bool {
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["I", "P", k, v] => *inflight = Some((k.parse().expect("k"), W::Put(v.parse().expect("v")))),
                ["I", "D", k] => *inflight = Some((k.parse().expect("k"), W::Del)),
                ["A"] => {
                    if let Some((k, w)) = inflight.take() {
                        model.insert(k, w);
                    }
                    return true;
                }
                ["DONE"] => {}
                _ => panic!("child said: {line}"),
            }
            false
        };
        for line in lines.by_ref() {
            let line = line.expect("line");
            if apply(&line, &mut inflight, &mut model) {
                acks += 1;
                if acks >= kill_after && !killed {
                    child.kill().expect("kill"); // SIGKILL on Unix
                    killed = true;
                }
            }
        }
        let _ = child.wait();
        if killed {
            kills += 1;
        }
        // Reopen in this process and check every acknowledged write.
        let mut cfg = tiny(preset);
        cfg.durability.wal_sync = cosine_config::WalSync::EveryWrite;
        let e = Engine::open(dir.path(), &cfg).unwrap_or_else(|err| panic!("{preset:?} round {round}: reopen failed: {err}"));
        let mut inflight_applied = None;
        for k in 0..300u64 {
            let got = e.get(&key(k)).expect("get");
            let want = match model.get(&k) {
                Some(W::Put(v)) => Some(v.to_le_bytes().to_vec()),
                _ => None,
            };
            if got == want {
                continue;
            }
            let alt = match inflight {
                Some((ik, W::Put(v))) if ik == k => Some(v.to_le_bytes().to_vec()),
                Some((ik, W::Del)) if ik == k => None,
                _ => panic!("{preset:?} round {round}: key {k}: got {got:?}, acknowledged {want:?}"),
            };
            assert_eq!(got, alt, "{preset:?} round {round}: key {k}");
            inflight_applied = inflight;
        }
        // The in-flight write became durable: it is now part of the history.
        if let Some((k, w)) = inflight_applied {
            model.insert(k, w);
        }
        e.close().expect("close");
    }
    kills
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let mut kills = 0;
    for (i, p) in Preset::ALL.into_iter().enumerate() {
        kills += crash_rounds(p, 4, 17 + i as u64);
    }
    eprintln!("crash test: {kills} kill points tried");
    assert!(kills >= 12);
}

/// Many kill points: `COSINE_CRASH_ROUNDS=250 cargo test --release -p cosine-tests
/// --test crash_recovery -- --ignored --nocapture` (bench/engine_crash.sh).
#[test]
#[ignore]
fn many_kill_points() {
    let rounds: usize = std::env::var("COSINE_CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let mut kills = 0;
    for (i, p) in Preset::ALL.into_iter().enumerate() {
        let k = crash_rounds(p, rounds.div_ceil(4), 1000 + i as u64);
        eprintln!("{:?}: {k} kill points survived", p);
        kills += k;
    }
    println!("crash test: {kills} kill points tried, all acknowledged writes recovered");
}
