//! Child process for the crash test: applies writes with `wal_sync = every_write`
//! and prints each one before issuing it (`I`) and after it returned (`A`).
//!
//! `crash-child DIR PRESET SEED OPS` — the parent SIGKILLs it at a random point.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_config::presets::{tiny, Preset};
use cosine_config::WalSync;
use cosine_engine::Engine;
use rand::{Rng, SeedableRng};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: crash-child DIR PRESET SEED OPS");
        std::process::exit(2);
    }
    let Some(preset) = Preset::from_name(&args[2]) else {
        eprintln!("unknown preset {}", args[2]);
        std::process::exit(2);
    };
    let seed: u64 = args[3].parse().unwrap_or(0);
    let ops: u64 = args[4].parse().unwrap_or(1000);
    let mut cfg = tiny(preset);
    cfg.durability.wal_sync = WalSync::EveryWrite;
    let e = match Engine::open(&args[1], &cfg) {
        Ok(e) => e,
        Err(err) => {
            println!("E open {err}");
            std::process::exit(3);
        }
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let out = std::io::stdout();
    for _ in 0..ops {
        let k: u64 = rng.gen_range(0..300);
        let key = cosine_tests::key(k);
        let del = rng.gen_range(0..10) == 0;
        let v: u64 = rng.gen();
        {
            let mut o = out.lock();
            let _ = if del { writeln!(o, "I D {k}") } else { writeln!(o, "I P {k} {v}") };
            let _ = o.flush();
        }
        let r = if del { e.delete(&key) } else { e.put(&key, &v.to_le_bytes()) };
        if let Err(err) = r {
            println!("E write {err}");
            std::process::exit(4);
        }
        let mut o = out.lock();
        let _ = writeln!(o, "A");
        let _ = o.flush();
    }
    println!("DONE");
}
