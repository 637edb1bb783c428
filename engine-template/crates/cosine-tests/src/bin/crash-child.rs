//! Child process for the crash tests: `THREADS` threads apply random writes to
//! their own keys (key `k` belongs to thread `k % THREADS`) and print each one
//! before issuing it (`I t P k v` / `I t D k`) and after it returned (`A t`).
//!
//! `crash-child DIR PRESET SEED OPS [WAL_SYNC] [THREADS]` (defaults: `every_write`, 1).
//! The parent SIGKILLs it at a random point (`cosine_tests::crash`).
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::crash::{parse_wal_sync, KEYS};
use rand::{Rng, SeedableRng};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(5..=7).contains(&args.len()) {
        eprintln!("usage: crash-child DIR PRESET SEED OPS [WAL_SYNC] [THREADS]");
        std::process::exit(2);
    }
    let Some(preset) = Preset::from_name(&args[2]) else {
        eprintln!("unknown preset {}", args[2]);
        std::process::exit(2);
    };
    let (Ok(seed), Ok(ops)) = (args[3].parse::<u64>(), args[4].parse::<u64>()) else {
        eprintln!("SEED and OPS must be integers");
        std::process::exit(2);
    };
    let Some(sync) = parse_wal_sync(args.get(5).map_or("every_write", |s| s.as_str())) else {
        eprintln!("unknown WAL_SYNC {}", args[5]);
        std::process::exit(2);
    };
    let threads: u64 = match args.get(6).map(|s| s.parse::<u64>()) {
        None => 1,
        Some(Ok(t)) if (1..=16).contains(&t) => t,
        Some(_) => {
            eprintln!("THREADS must be in 1..=16");
            std::process::exit(2);
        }
    };
    let mut cfg = tiny(preset);
    cfg.durability.wal_sync = sync;
    let e = match Engine::open(&args[1], &cfg) {
        Ok(e) => e,
        Err(err) => {
            println!("E open {err}");
            std::process::exit(3);
        }
    };
    std::thread::scope(|s| {
        for t in 0..threads {
            let e = &e;
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(t));
                let out = std::io::stdout();
                for _ in 0..ops {
                    let k = rng.gen_range(0..KEYS / threads) * threads + t;
                    let key = cosine_tests::key(k);
                    let del = rng.gen_range(0..10) == 0;
                    let v: u64 = rng.gen();
                    {
                        let mut o = out.lock();
                        let _ = if del { writeln!(o, "I {t} D {k}") } else { writeln!(o, "I {t} P {k} {v}") };
                        let _ = o.flush();
                    }
                    let r = if del { e.delete(&key) } else { e.put(&key, &v.to_le_bytes()) };
                    if let Err(err) = r {
                        println!("E write {err}");
                        std::process::exit(4);
                    }
                    let mut o = out.lock();
                    let _ = writeln!(o, "A {t}");
                    let _ = o.flush();
                }
            });
        }
    });
    println!("DONE");
}
