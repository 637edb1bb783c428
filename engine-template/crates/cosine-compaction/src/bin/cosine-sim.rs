//! `cosine-sim`: level shapes for a design after N inserts, without any I/O.
//!
//! `cosine-sim --config engine.toml --inserts 1000000 [--universe U] [--updates M] [--zipf THETA] [--seed S] [--json]`
//!
//! `--updates M` then overwrites M keys drawn uniformly from the ones inserted (the update rows
//! of `cosine validate`: a loaded store, then blind updates); with `--zipf THETA` drawn zipfian
//! of skew THETA instead (the i-th key inserted has rank i: YCSB A's and B's updates).
//! (`--preset rocksdb|wiredtiger|faster|hybrid` instead of `--config` uses a standard preset.)
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_compaction::sim::Simulator;
use cosine_config::{presets, Config};
use rand::{Rng, SeedableRng};

/// Largest `--zipf` skew accepted (YCSB's is 0.99; past a few the first key takes every draw).
const MAX_THETA: f64 = 10.0;

/// Zipfian ranks `0..n` of skew `theta` by inverse CDF: rank i has weight `(i + 1)^-theta`
/// (exact, where YCSB's generator approximates it; the model's `distributions.marginal` is exact).
struct Ranks {
    /// `cdf[i]`: the weight of ranks `0..=i`, over the total.
    cdf: Vec<f64>,
}

impl Ranks {
    fn new(n: usize, theta: f64) -> Ranks {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for i in 0..n {
            acc += ((i + 1) as f64).powf(-theta);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Ranks { cdf }
    }

    fn draw(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.gen();
        self.cdf.partition_point(|&c| c <= u).min(self.cdf.len().saturating_sub(1))
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("cosine-sim: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg: Option<Config> = None;
    let (mut inserts, mut universe, mut updates, mut seed, mut json) = (100_000u64, 0u64, 0u64, 42u64, false);
    let mut zipf: Option<f64> = None;
    let mut i = 0;
    let val = |i: usize| args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value", args[i]));
    while i < args.len() {
        match args[i].as_str() {
            "--config" => {
                cfg = Some(Config::from_toml_file(val(i)?).map_err(|e| e.to_string())?);
                i += 1;
            }
            "--preset" => {
                let p = presets::Preset::from_name(&val(i)?).ok_or("unknown preset")?;
                cfg = Some(presets::standard(p));
                i += 1;
            }
            "--inserts" => {
                inserts = val(i)?.parse().map_err(|e| format!("--inserts: {e}"))?;
                i += 1;
            }
            "--universe" => {
                universe = val(i)?.parse().map_err(|e| format!("--universe: {e}"))?;
                i += 1;
            }
            "--updates" => {
                updates = val(i)?.parse().map_err(|e| format!("--updates: {e}"))?;
                i += 1;
            }
            "--zipf" => {
                let v: f64 = val(i)?.parse().map_err(|e| format!("--zipf: {e}"))?;
                if !(v > 0.0 && v <= MAX_THETA) {
                    return Err(format!("--zipf: {v} is not a skew in (0, {MAX_THETA}]"));
                }
                zipf = Some(v);
                i += 1;
            }
            "--seed" => {
                seed = val(i)?.parse().map_err(|e| format!("--seed: {e}"))?;
                i += 1;
            }
            "--json" => json = true,
            "--emit-toml" => {
                let c = cfg.clone().ok_or("--emit-toml needs --config or --preset first")?;
                print!("{}", presets::to_toml(&c));
                return Ok(());
            }
            "-h" | "--help" => {
                println!("usage: cosine-sim (--config engine.toml | --preset NAME) [--emit-toml] [--inserts N] [--universe U] [--updates M] [--zipf THETA] [--seed S] [--json]");
                return Ok(());
            }
            a => return Err(format!("unknown argument {a}")),
        }
        i += 1;
    }
    let cfg = match cfg {
        Some(c) => c,
        None => Config::from_toml_file("engine.toml").map_err(|e| e.to_string())?,
    };
    if cfg.is_hashlog() {
        return Err("class = \"lsh\" has no levels to simulate (one append-only log)".into());
    }
    let mut sim = Simulator::new(&cfg);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut loaded = Vec::with_capacity(if updates > 0 { usize::try_from(inserts).unwrap_or(0) } else { 0 });
    for _ in 0..inserts {
        let k = if universe > 0 { rng.gen_range(0..universe) } else { rng.gen() };
        sim.insert(k).map_err(|e| e.to_string())?;
        if updates > 0 {
            loaded.push(k);
        }
    }
    let ranks = zipf.map(|theta| Ranks::new(loaded.len(), theta));
    for _ in 0..updates {
        let i = match &ranks {
            Some(r) => r.draw(&mut rng),
            None => rng.gen_range(0..loaded.len().max(1)),
        };
        let k = *loaded.get(i).ok_or("--updates needs --inserts > 0")?;
        sim.insert(k).map_err(|e| e.to_string())?;
    }
    let shape = sim.shape();
    let t = &sim.totals;
    if json {
        let levels: Vec<String> = shape
            .iter()
            .map(|l| {
                format!(
                    "{{\"level\": {}, \"hot\": {}, \"capacity\": {}, \"runs\": {}, \"entries\": {}, \"files\": {}, \"run_entries\": {:?}}}",
                    l.level, l.hot, l.capacity, l.runs, l.entries, l.files, l.run_entries
                )
            })
            .collect();
        println!(
            "{{\"design\": {:?}, \"inserts\": {}, \"buffer_entries\": {}, \"buffered\": {}, \"flushes\": {}, \"compactions\": {}, \"trivial_moves\": {}, \"blocks_written\": {}, \"blocks_read\": {}, \"levels\": [{}]}}",
            cfg.design.name,
            t.inserts,
            cfg.buffer_entries(),
            sim.buffered(),
            t.flushes,
            t.compactions,
            t.trivial_moves,
            t.blocks_written,
            t.blocks_read,
            levels.join(", ")
        );
    } else {
        println!("design {} ({:?}), E_B = {} entries, {} inserts", cfg.design.name, cfg.design.class, cfg.buffer_entries(), t.inserts);
        println!(
            "{:>5} {:>4} {:>14} {:>5} {:>12} {:>6}  run entries (newest first)",
            "level", "hot", "capacity", "runs", "entries", "files"
        );
        println!("{:>5} {:>4} {:>14} {:>5} {:>12} {:>6}", 0, "mem", cfg.buffer_entries(), 1, sim.buffered(), 0);
        for l in &shape {
            println!(
                "{:>5} {:>4} {:>14} {:>5} {:>12} {:>6}  {:?}",
                l.level,
                if l.hot { "hot" } else { "cold" },
                l.capacity,
                l.runs,
                l.entries,
                l.files,
                l.run_entries
            );
        }
        println!(
            "flushes {}, compactions {} ({} trivial moves), data blocks written {} ({:.2} per insert), read {}",
            t.flushes,
            t.compactions,
            t.trivial_moves,
            t.blocks_written,
            t.blocks_written as f64 / t.inserts.max(1) as f64,
            t.blocks_read
        );
    }
    Ok(())
}
