//! The engine's level shapes after a sequence of inserts equal the I/O-free
//! simulator's for the same design: the worker executes the strategy's choices
//! exactly as the model (and `cosine-sim`) assume.

use cosine_compaction::sim::Simulator;
use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use rand::{Rng, SeedableRng};

#[test]
fn engine_shapes_match_the_simulator() {
    for p in [Preset::RocksDb, Preset::WiredTiger, Preset::Hybrid] {
        let mut cfg = tiny(p);
        cfg.layout.buffer_bytes = 8 * cfg.entry_bytes() as u64;
        let dir = TempDir::new("shapes");
        let e = Engine::open(dir.path(), &cfg).expect("open");
        let mut sim = Simulator::new(&cfg);
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..3000 {
            let k: u64 = rng.gen_range(0..1_000_000);
            e.put(&key(k), b"v").expect("put");
            sim.insert(k).expect("simulated insert");
            // Keep the engine in lock-step with the simulator's synchronous flushes.
            if sim.buffered() == 0 {
                e.wait_idle().expect("idle");
            }
        }
        e.wait_idle().expect("idle");
        sim.flush().expect("simulated flush");
        let got: Vec<(usize, u64)> = e.stats().levels.iter().filter(|l| l.entries > 0).map(|l| (l.runs, l.entries)).collect();
        let want: Vec<(usize, u64)> = sim.shape().iter().filter(|l| l.entries > 0).map(|l| (l.runs, l.entries)).collect();
        assert_eq!(got, want, "{p:?}");
        assert!(want.len() >= 2, "{p:?} should reach level 2: {want:?}");
        if p != Preset::RocksDb {
            assert!(e.stats().levels.iter().any(|l| !l.hot && l.entries > 0), "{p:?} should have a cold level");
        }
    }
}
