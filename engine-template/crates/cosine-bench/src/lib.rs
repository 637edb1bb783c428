//! The benchmark driver behind `cosine-bench`: loads records, runs a
//! `workload.json` mix on η threads, and reports throughput, latency
//! percentiles and block I/O per operation type (contract section 3).
//!
//! Engines are driven through [`BenchKv`], so peers (RocksDB, fjall) print the
//! same JSON as Cosine.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod cli;
pub mod hist;
pub mod workload;

use cosine_core::IoSnapshot;
use hist::Histogram;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use workload::{empty_range_bounds, encode_empty_key, encode_key, make_value, Sampler, Workload};

/// What the driver needs from an engine.
pub trait BenchKv: Sync {
    /// Design name for the report.
    fn design(&self) -> String;
    /// Design class for the report.
    fn class(&self) -> String;
    /// Insert or overwrite.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Point lookup: found?, blocks read.
    fn get(&self, key: &[u8]) -> Result<(bool, IoSnapshot), String>;
    /// Scan of up to `n` entries from `key`: entries returned, blocks read.
    fn range(&self, key: &[u8], n: usize) -> Result<(usize, IoSnapshot), String>;
    /// Scan of every entry with `lo <= key <= hi`: entries returned, blocks read.
    fn scan(&self, lo: &[u8], hi: &[u8]) -> Result<(usize, IoSnapshot), String>;
    /// Read-modify-write replacing the value with `value`: found?, blocks read.
    fn rmw(&self, key: &[u8], value: &[u8]) -> Result<(bool, IoSnapshot), String>;
    /// Waits until background work (flushes, compactions) is done.
    fn settle(&self) -> Result<(), String>;
    /// Cumulative background counters.
    fn background(&self) -> BTreeMap<String, u64>;
    /// Level shapes for the report.
    fn levels(&self) -> Value;
    /// Writes the buffer out and reads every key once through the block cache
    /// (the warm-up of `warm_cache`): afterwards the data is on disk, the
    /// buffer empty and every block cached. Returns the blocks read.
    fn warm(&self) -> Result<u64, String> {
        self.range(&[], usize::MAX).map(|(_, io)| io.blocks_read())
    }
    /// I/Os, bytes and wait of the provisioned volume so far (None: a local device).
    fn device(&self) -> Option<cosine_core::DeviceSnapshot> {
        None
    }
    /// Throttles to the provisioned volume (the run phase) or only counts (loading).
    fn throttle(&self, _on: bool) {}
}

/// The Cosine engine as a benchmark target.
pub struct CosineKv(pub cosine_engine::Engine);

impl BenchKv for CosineKv {
    fn design(&self) -> String {
        self.0.config().design.name.clone()
    }
    fn class(&self) -> String {
        format!("{:?}", self.0.config().design.class).to_lowercase()
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.put(key, value).map_err(|e| e.to_string())
    }
    fn get(&self, key: &[u8]) -> Result<(bool, IoSnapshot), String> {
        self.0.get_counted(key).map(|(v, io)| (v.is_some(), io)).map_err(|e| e.to_string())
    }
    fn range(&self, key: &[u8], n: usize) -> Result<(usize, IoSnapshot), String> {
        let k = self.0.config().normalize_key(key);
        self.0.scan_counted(Some(&k), None, n).map(|(v, io)| (v.len(), io)).map_err(|e| e.to_string())
    }
    fn scan(&self, lo: &[u8], hi: &[u8]) -> Result<(usize, IoSnapshot), String> {
        let cfg = self.0.config();
        let (lo, hi) = (cfg.normalize_key(lo), cfg.normalize_key(hi));
        self.0.scan_counted(Some(&lo), Some(&hi), usize::MAX).map(|(v, io)| (v.len(), io)).map_err(|e| e.to_string())
    }
    fn rmw(&self, key: &[u8], value: &[u8]) -> Result<(bool, IoSnapshot), String> {
        let mut found = false;
        let io = self
            .0
            .rmw(key, |cur| {
                found = cur.is_some();
                Some(value.to_vec())
            })
            .map_err(|e| e.to_string())?;
        Ok((found, io))
    }
    fn settle(&self) -> Result<(), String> {
        self.0.wait_background().map_err(|e| e.to_string())
    }
    fn warm(&self) -> Result<u64, String> {
        self.0.wait_idle().map_err(|e| e.to_string())?;
        self.range(&[], usize::MAX).map(|(_, io)| io.blocks_read())
    }
    fn device(&self) -> Option<cosine_core::DeviceSnapshot> {
        self.0.device()
    }
    fn throttle(&self, on: bool) {
        self.0.set_device_throttling(on);
    }
    fn background(&self) -> BTreeMap<String, u64> {
        let s = self.0.stats();
        let mut m = BTreeMap::new();
        m.insert("flush_blocks_written".into(), s.flush.blocks_written());
        m.insert("flush_blocks_read".into(), s.flush.blocks_read());
        m.insert("compaction_blocks_read".into(), s.compaction.blocks_read());
        m.insert("compaction_blocks_written".into(), s.compaction.blocks_written());
        m.insert("flush_data_blocks_written".into(), s.flush.data_written);
        m.insert("compaction_data_blocks_read".into(), s.compaction.data_read);
        m.insert("compaction_data_blocks_written".into(), s.compaction.data_written);
        m.insert("wal_bytes".into(), s.wal_bytes);
        m.insert("flushes".into(), s.flushes);
        m.insert("compactions".into(), s.compactions);
        m.insert("trivial_moves".into(), s.trivial_moves);
        m.insert("deep_merges".into(), s.deep_merges);
        m.insert("stall_micros".into(), s.stall_micros);
        m.insert("buffer_hits".into(), s.buffer_hits);
        m
    }
    fn levels(&self) -> Value {
        let s = self.0.stats();
        json!({
            "levels": s.levels.iter().map(|l| json!({
                "level": l.level, "runs": l.runs, "files": l.files, "entries": l.entries,
                "hot": l.hot, "capacity": l.capacity, "lookup_hits": l.lookup_hits,
            })).collect::<Vec<_>>(),
            "buffered": s.buffered,
            "fence_memory_bytes": s.fence_memory,
            "filter_memory_bytes": s.filter_memory,
            "range_filter_memory_bytes": s.range_filter_memory,
        })
    }
}

/// CPU time and run-queue wait of one thread, from the kernel's schedstat
/// (`/proc/.../schedstat`: nanoseconds on a CPU, nanoseconds runnable but waiting
/// for one). None where the kernel does not provide it.
fn schedstat(path: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut it = text.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// This thread's run-queue wait so far, in ns (schedstat; updated at scheduler ticks).
fn runqueue_ns() -> Option<u64> {
    schedstat("/proc/thread-self/schedstat").map(|(_, w)| w)
}

const OPS: [&str; 7] = ["get", "empty_get", "range", "insert", "update", "rmw", "empty_range"];

#[derive(Default, Clone)]
struct OpAgg {
    count: u64,
    found: u64,
    io: IoSnapshot,
    entries: u64,
    hist: Histogram,
}

/// Splits `n` items over `t` threads.
fn share(n: u64, t: usize, i: usize) -> u64 {
    n / t as u64 + u64::from((i as u64) < n % t as u64)
}

/// A run's operation mix, ready to draw from.
struct Mix {
    weights: [f64; 7],
    total: f64,
    get: Sampler,
    put: Sampler,
}

/// Seed offset of the warm-up phase (its keys and choices differ from the measured phase's).
const WARMUP_SEED: u64 = 0x7761_726d;

/// Steps a search for a merge into the deepest level divides `warmup_operations` into: the
/// warm-up knows where that merge fell to this share of the operations.
const DEEP_MERGE_STEPS: u64 = 64;

/// Where the measured phase should start in a merge cycle of `spacing` operations between two
/// merges into the deepest level, for a run of `operations`: as far as its length allows from
/// a deep merge at either end (a short run started or ended where one is due takes it or not
/// by the background worker's timing). A run of f cycles (fraction part g) starts (1 - g) / 2
/// into a cycle and ends as far before the next deep merge.
pub fn aligned_phase(operations: u64, spacing: u64) -> u64 {
    if spacing == 0 {
        return 0;
    }
    let rest = spacing - operations % spacing;
    rest / 2
}

/// The unmeasured warm-up, settled: with `warmup_depth`, overwrites until the tree is that deep
/// ([`deepen`]); `warmup_operations` of the mix and, with
/// `warmup_phase_aligned`, then on until two merges into the deepest level (each searched for
/// at most `warmup_operations` more operations), whose spacing is the engine's own merge
/// cycle, and [`aligned_phase`] into the next cycle. Returns what it did: `operations` run,
/// `deep_merges_at` (operations into the warm-up where the search saw each merge; null when
/// not asked for or not both seen), `phase` (operations after the second), `buffered` and
/// `depth` (`target`, `reached` and the `puts` it took, not counted in `operations`: they
/// are not the mix; null when not asked for).
fn warm_up(kv: &dyn BenchKv, w: &Workload, mix: &Mix, inserted: &AtomicU64, threads: usize) -> Result<Value, String> {
    let seed = w.seed ^ WARMUP_SEED;
    let mut done = 0u64;
    let mut deepened = Value::Null;
    if let Some(target) = w.warmup_depth {
        let puts = deepen(kv, w, target, seed.wrapping_add(DEPTH_SEED))?;
        deepened = json!({"target": target, "reached": depth(kv), "puts": puts});
    }
    if w.warmup_operations > 0 {
        drive(kv, w, mix, inserted, w.warmup_operations, seed, threads)?;
        done += w.warmup_operations;
    }
    let mut seen: Vec<u64> = Vec::new();
    let mut phase = None;
    if w.warmup_phase_aligned && w.warmup_operations > 0 {
        let deep = |kv: &dyn BenchKv| kv.background().get("deep_merges").copied().unwrap_or(0);
        let step = w.warmup_operations.div_ceil(DEEP_MERGE_STEPS).max(1);
        let mut i = 0u64;
        while seen.len() < 2 {
            let before = deep(kv);
            let limit = done + w.warmup_operations;
            while done < limit && deep(kv) == before {
                i += 1;
                drive(kv, w, mix, inserted, step, seed.wrapping_add(i), threads)?;
                done += step;
            }
            if deep(kv) == before {
                // a merge the window's puts started may land after it on a lagging worker (a
                // loaded machine): it belongs to the window, so wait for the worker before giving up
                kv.settle()?;
                if deep(kv) == before {
                    break;
                }
            }
            seen.push(done);
        }
        if let [a, b] = seen[..] {
            let p = aligned_phase(w.operations, b - a);
            if p > 0 {
                drive(kv, w, mix, inserted, p, seed.wrapping_sub(1), threads)?;
                done += p;
            }
            phase = Some(p);
        }
    }
    if let Some(target) = w.warmup_buffered {
        done += fill_buffer(kv, w, mix, inserted, threads, target, seed.wrapping_add(BUFFER_SEED))?;
    }
    if done > 0 {
        kv.settle()?;
    }
    let at = if phase.is_some() { json!(seen) } else { Value::Null };
    let buffered = w.warmup_buffered.map(|_| buffered(kv));
    Ok(json!({"operations": done, "deep_merges_at": at, "phase": phase, "buffered": buffered, "depth": deepened}))
}

/// Seed offset of [`deepen`]'s steps.
const DEPTH_SEED: u64 = 0x6465_6570;

/// Most overwrites [`deepen`] makes, in passes over the records (a tiered last level whose
/// newest run must come to hold most keys before it passes its capacity: about 1.6 of them).
const DEPTH_LIMIT_PASSES: u64 = 16;

/// The deepest level holding data (0: none, or no levels: a hash log).
fn depth(kv: &dyn BenchKv) -> usize {
    let levels = kv.levels();
    let Some(levels) = levels.get("levels").and_then(Value::as_array) else { return 0 };
    levels
        .iter()
        .filter(|l| l.get("entries").and_then(Value::as_u64).unwrap_or(0) > 0)
        .filter_map(|l| l.get("level").and_then(Value::as_u64))
        .max()
        .map_or(0, |d| usize::try_from(d).unwrap_or(usize::MAX))
}

/// Overwrites loaded keys until the deepest level holding data is at least `target` deep, then
/// (when it had to overwrite any) every key once more, in a random order: the shape a long run
/// of overwrites converges to — the tree as deep as the workload keeps it, and every key
/// written since it took that shape (a level above the last that never merges down then holds
/// every key, as the model's steady state has it). Under the workload's own skewed puts that
/// takes millions of them (a zipfian last-level run of T 12, Z 5 reached 84 % of its capacity
/// in 140,000); uniform overwrites take about 1.6 passes. The mix's own warm-up follows, so
/// the buffer and upper levels then hold its recent keys. Settled after every step of an
/// eighth of the records; at most [`DEPTH_LIMIT_PASSES`] passes. Returns the puts made.
fn deepen(kv: &dyn BenchKv, w: &Workload, target: usize, seed: u64) -> Result<u64, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = w.records.max(1);
    let step = n.div_ceil(8);
    let mut done = 0u64;
    kv.settle()?;
    while depth(kv) < target && done < DEPTH_LIMIT_PASSES * n {
        for _ in 0..step {
            kv.put(&encode_key(rng.gen_range(0..n), w.key_bytes), &make_value(&mut rng, w.value_bytes, w.compressibility))?;
        }
        kv.settle()?;
        done += step;
    }
    if done > 0 {
        let mut order: Vec<u64> = (0..n).collect();
        order.shuffle(&mut rng);
        for i in order {
            kv.put(&encode_key(i, w.key_bytes), &make_value(&mut rng, w.value_bytes, w.compressibility))?;
        }
        kv.settle()?;
        done += n;
    }
    Ok(done)
}

/// Seed offset of [`fill_buffer`]'s steps.
const BUFFER_SEED: u64 = 0x6275_6666;

/// Entries in the buffer (the active one and those frozen, waiting for the worker).
fn buffered(kv: &dyn BenchKv) -> u64 {
    kv.levels().get("buffered").and_then(Value::as_u64).unwrap_or(0)
}

/// Runs the mix until the buffer holds at least `target` entries, first through its next flush
/// if it holds more; at most `warmup_operations` (or
/// [`FILL_LIMIT`]) operations. Steps shrink as the buffer nears the target (half the missing
/// entries' puts), so it overshoots by a few entries. Returns the operations run.
fn fill_buffer(
    kv: &dyn BenchKv,
    w: &Workload,
    mix: &Mix,
    inserted: &AtomicU64,
    threads: usize,
    target: u64,
    seed: u64,
) -> Result<u64, String> {
    let writes =
        OPS.iter().zip(mix.weights).filter(|(o, _)| matches!(**o, "insert" | "update" | "rmw")).map(|(_, wt)| wt).sum::<f64>() / mix.total;
    if writes.is_nan() || writes <= 0.0 {
        return Ok(0);
    }
    let ops_for = |entries: u64| ((entries.max(MIN_FILL_STEP) as f64) / writes).ceil() as u64;
    let limit = w.warmup_operations.max(FILL_LIMIT);
    let (mut done, mut i) = (0u64, 0u64);
    kv.settle()?; // (a buffer frozen by the warm-up is not the active one's content)
                  // settled after every step, the buffer holds only its active part, which grows until the
                  // flush empties it: the step after which it shrank holds at most a step (half the target,
                  // or a 64th of the buffer's fill for a small target)
    let mut b = buffered(kv);
    while b > target && done < limit {
        let step = ops_for((b / 16).min(target / 2).max(b / 64));
        i += 1;
        drive(kv, w, mix, inserted, step, seed.wrapping_add(i), threads)?;
        kv.settle()?;
        done += step;
        let now = buffered(kv);
        if now < b {
            break;
        }
        b = now;
    }
    loop {
        let b = buffered(kv);
        if b >= target || done >= limit {
            break;
        }
        let step = ops_for((target - b) / 2);
        i += 1;
        drive(kv, w, mix, inserted, step, seed.wrapping_add(i), threads)?;
        done += step;
    }
    Ok(done)
}

/// Most operations [`fill_buffer`] runs when `warmup_operations` is fewer.
const FILL_LIMIT: u64 = 100_000;

/// Fewest entries' puts of one [`fill_buffer`] step.
const MIN_FILL_STEP: u64 = 8;

/// (per-op aggregates, CPU ns, run-queue wait ns, seconds until the thread finished)
type ThreadResult = (Vec<OpAgg>, u64, Option<u64>, f64);

/// Runs `operations` operations of the mix on `threads` threads.
fn drive(
    kv: &dyn BenchKv,
    w: &Workload,
    mix: &Mix,
    inserted: &AtomicU64,
    operations: u64,
    seed: u64,
    threads: usize,
) -> Result<Vec<ThreadResult>, String> {
    let t2 = Instant::now();
    std::thread::scope(|s| -> Result<Vec<_>, String> {
        let hs: Vec<_> = (0..threads)
            .map(|ti| {
                let (get_s, put_s, weights, total) = (&mix.get, &mix.put, &mix.weights, mix.total);
                s.spawn(move || -> Result<ThreadResult, String> {
                    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(31) ^ (ti as u64 + 1));
                    let mut agg = vec![OpAgg::default(); OPS.len()];
                    let cpu0 = cpu_time::ThreadTime::now();
                    let rq0 = runqueue_ns();
                    for _ in 0..share(operations, threads, ti) {
                        let mut x = rng.gen::<f64>() * total;
                        // rounding may leave x past every weight: the last operation of the mix
                        let mut op = weights.iter().rposition(|w| *w > 0.0).unwrap_or(0);
                        for (i, wgt) in weights.iter().enumerate() {
                            if x < *wgt {
                                op = i;
                                break;
                            }
                            x -= wgt;
                        }
                        let n = w.records + inserted.load(Ordering::Relaxed);
                        let start = Instant::now();
                        let (found, io, entries) = match OPS[op] {
                            "get" => {
                                let (f, io) = kv.get(&encode_key(get_s.sample(&mut rng, n), w.key_bytes))?;
                                (f, io, 0)
                            }
                            "empty_get" => {
                                let k = encode_empty_key(rng.gen_range(0..w.records.max(1)), w.records, w.key_bytes);
                                let (f, io) = kv.get(&k)?;
                                (f, io, 0)
                            }
                            "range" => {
                                let k = encode_key(get_s.sample(&mut rng, n), w.key_bytes);
                                let (c, io) = kv.range(&k, w.scan_length)?;
                                (c > 0, io, c as u64)
                            }
                            "insert" => {
                                let i = w.records + inserted.fetch_add(1, Ordering::Relaxed);
                                kv.put(&encode_key(i, w.key_bytes), &make_value(&mut rng, w.value_bytes, w.compressibility))?;
                                (false, IoSnapshot::default(), 0)
                            }
                            "update" => {
                                let k = encode_key(put_s.sample(&mut rng, n), w.key_bytes);
                                kv.put(&k, &make_value(&mut rng, w.value_bytes, w.compressibility))?;
                                (false, IoSnapshot::default(), 0)
                            }
                            "empty_range" => {
                                // A uniform start in the key space: with N keys spread over 2^64
                                // values, a range of w values holds one with probability ~ N w / 2^64.
                                let (lo, hi) = empty_range_bounds(rng.gen::<u64>(), w.empty_range_width, w.key_bytes);
                                let (c, io) = kv.scan(&lo, &hi)?;
                                (c > 0, io, c as u64)
                            }
                            _ => {
                                let k = encode_key(get_s.sample(&mut rng, n), w.key_bytes);
                                let (f, io) = kv.rmw(&k, &make_value(&mut rng, w.value_bytes, w.compressibility))?;
                                (f, io, 0)
                            }
                        };
                        let ns = start.elapsed().as_nanos() as u64;
                        let a = &mut agg[op];
                        a.count += 1;
                        a.found += u64::from(found);
                        a.io = a.io.plus(&io);
                        a.entries += entries;
                        a.hist.record(ns);
                    }
                    let cpu = cpu0.elapsed().as_nanos() as u64;
                    let rq = rq0.zip(runqueue_ns()).map(|(a, b)| b.saturating_sub(a));
                    Ok((agg, cpu, rq, t2.elapsed().as_secs_f64()))
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in hs {
            out.push(h.join().map_err(|_| "worker thread panicked".to_string())??);
        }
        Ok(out)
    })
}

/// Loads `w.records` records (shuffled order) and runs `w.operations` operations.
pub fn run(kv: &dyn BenchKv, w: &Workload) -> Result<Value, String> {
    let threads = w.threads.max(1);
    // A provisioned volume throttles the measured phase, not the load and warm-up.
    kv.throttle(false);
    // Load: a seeded permutation, so keys arrive in random order as in YCSB's hashed load.
    let mut order: Vec<u64> = (0..w.records).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(w.seed));
    let chunk = order.len().div_ceil(threads).max(1);
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<(), String> {
        let hs: Vec<_> = order
            .chunks(chunk)
            .enumerate()
            .map(|(ti, part)| {
                s.spawn(move || -> Result<(), String> {
                    let mut rng = SmallRng::seed_from_u64(w.seed ^ (0x10ad + ti as u64));
                    for &i in part {
                        kv.put(&encode_key(i, w.key_bytes), &make_value(&mut rng, w.value_bytes, w.compressibility))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| "load thread panicked".to_string())??;
        }
        Ok(())
    })?;
    let load_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    kv.settle()?;
    let settle_secs = t1.elapsed().as_secs_f64();
    // Run.
    let m = &w.mix;
    let weights = [m.get, m.empty_get, m.range, m.insert, m.update, m.rmw, m.empty_range];
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err("workload mix is empty".into());
    }
    let mix = Mix { weights, total, get: Sampler::new(&w.distribution.get, w.records), put: Sampler::new(&w.distribution.put, w.records) };
    let inserted = AtomicU64::new(0);
    // A warm-up runs the mix unmeasured first, so the measured phase starts from the state the
    // workload itself leaves (hot keys moved up the levels), not the load's.
    let warmup = warm_up(kv, w, &mix, &inserted, threads)?;
    let warm_blocks = if w.warm_cache { Some(kv.warm()?) } else { None };
    let bg0 = kv.background();
    let shape0 = kv.levels();
    let codec0 = cosine_compress::stats();
    let rf0 = cosine_filter::range::stats();
    let dev0 = kv.device();
    kv.throttle(true);
    let proc0 = cpu_time::ProcessTime::now();
    let t2 = Instant::now();
    let results = drive(kv, w, &mix, &inserted, w.operations, w.seed, threads)?;
    let run_secs = t2.elapsed().as_secs_f64();
    let proc1 = proc0.elapsed();
    let dev1 = kv.device();
    let bg_run = kv.background();
    let in_run = |key: &str| bg_run.get(key).copied().unwrap_or(0) - bg0.get(key).copied().unwrap_or(0);
    let (deep_in_run, flushes_in_run) = (in_run("deep_merges"), in_run("flushes"));
    let t3 = Instant::now();
    kv.settle()?;
    let run_settle_secs = t3.elapsed().as_secs_f64();
    let proc2 = proc0.elapsed();
    let bg1 = kv.background();

    let mut all = Histogram::default();
    let mut per_op = Map::new();
    for (i, name) in OPS.iter().enumerate() {
        let mut a = OpAgg::default();
        for (r, _, _, _) in &results {
            let b = &r[i];
            a.count += b.count;
            a.found += b.found;
            a.io = a.io.plus(&b.io);
            a.entries += b.entries;
            a.hist.merge(&b.hist);
        }
        all.merge(&a.hist);
        if a.count == 0 {
            continue;
        }
        let mut o = json!({
            "count": a.count,
            "blocks_read": a.io.blocks_read(),
            "blocks_written": a.io.blocks_written(),
            "data_blocks_read": a.io.data_read,
            "index_blocks_read": a.io.index_read,
            "filter_blocks_read": a.io.filter_read,
            "latency_us": {"p50": a.hist.quantile(0.5) as f64 / 1e3, "p99": a.hist.quantile(0.99) as f64 / 1e3, "mean": a.hist.mean() / 1e3},
        });
        if matches!(*name, "get" | "empty_get" | "rmw" | "range" | "empty_range") {
            o["found"] = json!(a.found);
        }
        if matches!(*name, "range" | "empty_range") {
            o["entries"] = json!(a.entries);
        }
        per_op.insert(name.to_string(), o);
    }
    let mut background = Map::new();
    for (k, v) in &bg1 {
        background.insert(k.clone(), json!(v - bg0.get(k).copied().unwrap_or(0)));
    }
    let load_bg: Map<String, Value> = bg0.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let throughput = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    // CPU of the run phase: the driver threads' own (each thread's CPU clock),
    // and everything else the process did meanwhile (the engine's background
    // worker: flushes, merges, GC), then during the settle after it.
    let fg_ns: u64 = results.iter().map(|(_, c, _, _)| *c).sum();
    let rq_ns: Option<u64> = results.iter().map(|(_, _, r, _)| *r).sum();
    let per_thread: Vec<Value> = results
        .iter()
        .map(|(agg, c, r, secs)| {
            json!({
                "operations": agg.iter().map(|a| a.count).sum::<u64>(),
                "seconds": secs,
                "cpu_seconds": *c as f64 / 1e9,
                "runqueue_seconds": r.map(|r| r as f64 / 1e9),
            })
        })
        .collect();
    let cpu = json!({
        "foreground_seconds": fg_ns as f64 / 1e9,
        "foreground_runqueue_seconds": rq_ns.map(|r| r as f64 / 1e9),
        "background_seconds": proc1.as_secs_f64() - fg_ns as f64 / 1e9,
        "settle_background_seconds": (proc2 - proc1).as_secs_f64(),
        "threads": per_thread,
    });
    let device = match (dev0, dev1) {
        (Some(a), Some(b)) => json!({
            "ios": b.ios - a.ios, "bytes": b.bytes - a.bytes, "waited_seconds": (b.waited_ns - a.waited_ns) as f64 / 1e9,
            "read_ios": b.read_ios - a.read_ios, "write_ios": (b.ios - b.read_ios) - (a.ios - a.read_ios),
            "foreground_read_ios": b.foreground_read_ios - a.foreground_read_ios,
            "background_read_ios": (b.read_ios - b.foreground_read_ios) - (a.read_ios - a.foreground_read_ios),
            "sleeps": b.sleeps - a.sleeps,
        }),
        _ => Value::Null,
    };
    Ok(json!({
        "design": kv.design(),
        "class": kv.class(),
        "records": w.records,
        "operations": w.operations,
        "threads": threads,
        "load": {"seconds": load_secs, "throughput_ops": throughput(w.records, load_secs), "settle_seconds": settle_secs, "background": load_bg, "shape": shape0},
        "warmup": warmup,
        "warm_blocks_read": warm_blocks,
        "cpu": cpu,
        "device": device,
        "run": {"seconds": run_secs, "throughput_ops": throughput(w.operations, run_secs), "settle_seconds": run_settle_secs,
                "deep_merges": deep_in_run, "flushes": flushes_in_run,
                "latency_us": {"p50": all.quantile(0.5) as f64 / 1e3, "p99": all.quantile(0.99) as f64 / 1e3,
                               "p999": all.quantile(0.999) as f64 / 1e3, "mean": all.mean() / 1e3}},
        "per_op": per_op,
        "background": background,
        "compression": {"load": codec_json(&codec0), "run": codec_json(&cosine_compress::stats().since(&codec0))},
        "range_filter": range_filter_json(&cosine_filter::range::stats(), &rf0),
        "stats": kv.levels(),
    }))
}

fn codec_json(c: &cosine_compress::CodecSnapshot) -> Value {
    json!({
        "blocks_compressed": c.blocks_compressed, "compressed_raw_bytes": c.compressed_raw_bytes,
        "compressed_stored_bytes": c.compressed_stored_bytes, "compress_ns": c.compress_ns,
        "blocks_decompressed": c.blocks_decompressed, "decompressed_raw_bytes": c.decompressed_raw_bytes,
        "decompressed_stored_bytes": c.decompressed_stored_bytes, "decompress_ns": c.decompress_ns,
    })
}

/// Range-filter queries of the run phase (`now` minus `before`).
fn range_filter_json(now: &cosine_filter::range::RangeFilterStats, before: &cosine_filter::range::RangeFilterStats) -> Value {
    json!({
        "queries": now.queries - before.queries,
        "positives": now.positives - before.positives,
        "probes": now.probes - before.probes,
    })
}

/// Renders a report as text.
pub fn text_report(r: &Value) -> String {
    let mut s = String::new();
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    s += &format!(
        "design {} ({}), {} records, {} operations, {} threads\n",
        r["design"].as_str().unwrap_or("?"),
        r["class"].as_str().unwrap_or("?"),
        r["records"],
        r["operations"],
        r["threads"]
    );
    s += &format!(
        "load: {:.2} s, {:.0} ops/s (then {:.2} s settling)\n",
        f(&r["load"]["seconds"]),
        f(&r["load"]["throughput_ops"]),
        f(&r["load"]["settle_seconds"])
    );
    let l = &r["run"]["latency_us"];
    s += &format!(
        "run:  {:.2} s, {:.0} ops/s; latency us p50 {:.1} p99 {:.1} p99.9 {:.1} mean {:.1}\n",
        f(&r["run"]["seconds"]),
        f(&r["run"]["throughput_ops"]),
        f(&l["p50"]),
        f(&l["p99"]),
        f(&l["p999"]),
        f(&l["mean"])
    );
    s += &format!("{:>10} {:>10} {:>10} {:>12} {:>12} {:>10}\n", "op", "count", "found", "blocks_read", "blocks/op", "p50 us");
    if let Some(m) = r["per_op"].as_object() {
        for (k, v) in m {
            let c = f(&v["count"]).max(1.0);
            s += &format!(
                "{:>10} {:>10} {:>10} {:>12} {:>12.3} {:>10.1}\n",
                k,
                v["count"],
                v.get("found").map_or("-".to_string(), |x| x.to_string()),
                v["blocks_read"],
                f(&v["blocks_read"]) / c,
                f(&v["latency_us"]["p50"])
            );
        }
    }
    s += &format!("background: {}\n", r["background"]);
    s += &format!("levels: {}\n", r["stats"]);
    s
}
