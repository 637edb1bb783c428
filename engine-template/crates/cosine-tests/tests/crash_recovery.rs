//! Crash consistency: a child applies writes and is SIGKILLed at random points,
//! often in the middle of a flush or compaction, for every preset, every
//! `wal_sync` policy, and one or two writer threads. After every kill the
//! database reopens; each thread's keys hold the state after a prefix of its
//! writes, and with `every_write` and `group_commit` that prefix covers every
//! acknowledged write (with `none`, writes still buffered in the process may be
//! lost, but never out of order). Rounds accumulate on one directory, so
//! recovery of a recovered database is exercised too.

use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::Engine;
use cosine_tests::crash::{check, read_state, wal_sync_name, Child, State};
use cosine_tests::TempDir;
use rand::{Rng, SeedableRng};

/// Kill points tried, writes acknowledged and acknowledged writes lost over `rounds` rounds.
fn crash_rounds(preset: Preset, wal_sync: WalSync, threads: u64, rounds: usize, seed: u64) -> (usize, u64, u64) {
    let dir = TempDir::new("crash");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut base = State::new();
    let (mut kills, mut acked, mut lost) = (0, 0, 0);
    let mut cfg = tiny(preset);
    cfg.durability.wal_sync = wal_sync;
    let child = Child { exe: env!("CARGO_BIN_EXE_crash-child"), dir: dir.path(), preset: preset.name(), seed, wal_sync, threads };
    for round in 0..rounds {
        let h = Child { seed: seed * 1000 + round as u64, ..child }.run(rng.gen_range(1..600));
        kills += usize::from(h.killed);
        acked += h.acked.iter().map(|a| a.len() as u64).sum::<u64>();
        let what = format!("{preset:?} {} threads={threads} round {round}", wal_sync_name(wal_sync));
        let e = Engine::open(dir.path(), &cfg).unwrap_or_else(|err| panic!("{what}: reopen failed: {err}"));
        let got = read_state(&e).unwrap_or_else(|err| panic!("{what}: {err}"));
        lost += check(&base, &h, &got, wal_sync != WalSync::None).unwrap_or_else(|err| panic!("{what}: {err}"));
        base = got;
        e.close().unwrap_or_else(|err| panic!("{what}: close: {err}"));
    }
    (kills, acked, lost)
}

const MODES: [WalSync; 3] = [WalSync::EveryWrite, WalSync::GroupCommit, WalSync::None];

#[test]
fn acknowledged_writes_survive_sigkill() {
    let mut kills = 0;
    for (i, p) in Preset::ALL.into_iter().enumerate() {
        for (j, m) in MODES.into_iter().enumerate() {
            for threads in [1, 2] {
                kills += crash_rounds(p, m, threads, 2, 17 + (i * 10 + j) as u64 + 100 * threads).0;
            }
        }
    }
    eprintln!("crash test: {kills} kill points tried");
    assert!(kills >= 40, "{kills} kill points");
}

/// The soak: `COSINE_CRASH_ROUNDS=1200 cargo test --release -p cosine-tests
/// --test crash_recovery -- --ignored --nocapture` (bench/engine_crash.sh).
/// Rounds are split evenly over presets x WAL policies x {1, 2} threads.
#[test]
#[ignore]
fn many_kill_points() {
    let rounds: usize = std::env::var("COSINE_CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1200);
    let per = rounds.div_ceil(Preset::ALL.len() * MODES.len() * 2);
    let (mut kills, mut acked_strict, mut lost_strict) = (0, 0, 0);
    for (i, p) in Preset::ALL.into_iter().enumerate() {
        for (j, m) in MODES.into_iter().enumerate() {
            for threads in [1, 2] {
                let (k, acked, lost) = crash_rounds(p, m, threads, per, 1000 + (i * 10 + j) as u64 + 100 * threads);
                println!(
                    "{:<10} {:<12} threads={threads}: {k} kill points, {acked} writes acknowledged, {lost} of them lost",
                    p.name(),
                    wal_sync_name(m)
                );
                kills += k;
                if m != WalSync::None {
                    acked_strict += acked;
                    lost_strict += lost;
                }
            }
        }
    }
    println!("crash test: {kills} kill points tried; every_write + group_commit: {acked_strict} writes acknowledged, {lost_strict} lost");
    assert_eq!(lost_strict, 0);
}
