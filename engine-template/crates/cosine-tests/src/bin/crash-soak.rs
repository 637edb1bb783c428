//! The crash soak: `crash-soak [ROUNDS]` (default 1200, i.e. >= 1,000 kill points)
//! runs the crash harness of `cosine_tests::crash` many times. Rounds are split
//! evenly over the presets x WAL policies x {1, 2} writer threads; it prints one
//! line per cell and a total, and exits 1 if any write acknowledged under
//! `every_write` or `group_commit` was lost. `bench/engine_crash.sh` runs it.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_tests::crash::{crash_rounds, wal_sync_name, MODES};

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|s| s.parse::<usize>()) {
        None => 1200,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: crash-soak [ROUNDS]   (ROUNDS: a positive integer)");
            std::process::exit(2);
        }
    };
    let child = match std::env::current_exe() {
        Ok(me) => me.with_file_name("crash-child"),
        Err(e) => {
            eprintln!("crash-soak: cannot find its own path: {e}");
            std::process::exit(2);
        }
    };
    if !child.is_file() {
        eprintln!("crash-soak: {} is missing (cargo build --release -p cosine-tests --bins)", child.display());
        std::process::exit(2);
    }
    let exe = child.to_string_lossy().into_owned();
    let per = rounds.div_ceil(Preset::ALL.len() * MODES.len() * 2);
    let (mut kills, mut acked_strict, mut lost_strict) = (0, 0, 0);
    for (i, p) in Preset::ALL.into_iter().enumerate() {
        for (j, m) in MODES.into_iter().enumerate() {
            for threads in [1, 2] {
                let r = crash_rounds(&exe, p, m, threads, per, 1000 + (i * 10 + j) as u64 + 100 * threads);
                println!(
                    "{:<10} {:<12} threads={threads}: {} kill points, {} writes acknowledged, {} of them lost",
                    p.name(),
                    wal_sync_name(m),
                    r.kills,
                    r.acked,
                    r.lost
                );
                kills += r.kills;
                if m != WalSync::None {
                    acked_strict += r.acked;
                    lost_strict += r.lost;
                }
            }
        }
    }
    println!("crash test: {kills} kill points tried; every_write + group_commit: {acked_strict} writes acknowledged, {lost_strict} lost");
    if lost_strict > 0 {
        std::process::exit(1);
    }
}
