//! `workload.json` (contract section 2) and the key distributions.

use rand::{Rng, RngCore};
use serde::Deserialize;
use std::cell::Cell;
use std::path::Path;

/// Operation mix (fractions; normalized by their sum).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Mix {
    /// Point lookups of loaded keys.
    pub get: f64,
    /// Point lookups of keys that were never inserted.
    pub empty_get: f64,
    /// Range scans of `scan_length` entries.
    pub range: f64,
    /// Inserts of new record indexes.
    pub insert: f64,
    /// Blind updates of loaded keys.
    pub update: f64,
    /// Read-modify-writes of loaded keys.
    pub rmw: f64,
    /// Scans of `empty_range_width` consecutive key values that hold no key.
    pub empty_range: f64,
}

/// A key distribution over record indexes `0..n`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Dist {
    /// Uniform.
    #[default]
    Uniform,
    /// Scrambled zipfian (YCSB).
    Zipfian {
        /// Skew, 0 < theta < 1 (YCSB default 0.99).
        #[serde(default = "default_theta")]
        theta: f64,
    },
    /// Zipfian over the most recently inserted keys.
    Latest {
        /// Skew.
        #[serde(default = "default_theta")]
        theta: f64,
    },
    /// Normal, mean and stddev as fractions of the key space.
    Normal {
        /// Mean (fraction of the key space).
        #[serde(default = "half")]
        mean: f64,
        /// Standard deviation (fraction of the key space).
        #[serde(default = "tenth")]
        stddev: f64,
    },
    /// The first `hot_fraction` of the key space drawn with `hot_probability`.
    Skew {
        /// Fraction of keys that are hot.
        hot_fraction: f64,
        /// Probability of drawing a hot key.
        hot_probability: f64,
    },
}

fn default_theta() -> f64 {
    0.99
}
fn half() -> f64 {
    0.5
}
fn tenth() -> f64 {
    0.1
}

/// Distributions for reads and writes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Distributions {
    /// For get, range and rmw.
    pub get: Dist,
    /// For update.
    pub put: Dist,
}

/// A workload description.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct Workload {
    /// Records loaded before the run.
    pub records: u64,
    /// Operations in the run.
    pub operations: u64,
    /// Key size.
    pub key_bytes: usize,
    /// Value size.
    pub value_bytes: usize,
    /// Operation mix.
    pub mix: Mix,
    /// Entries per range scan.
    pub scan_length: usize,
    /// Key values (of the key's first 8 bytes as an integer) an empty range spans.
    pub empty_range_width: u64,
    /// Compressed size / raw size the values are made for: a random fragment of this
    /// share of the value, repeated to fill it (1.0: random, incompressible).
    pub compressibility: f64,
    /// Key distributions.
    pub distribution: Distributions,
    /// Worker threads (eta).
    pub threads: usize,
    /// RNG seed.
    pub seed: u64,
    /// Read every block once (a full scan through the block cache) before the
    /// measured phase: with a cache that holds the data, the run then reads no
    /// blocks and times the operations' CPU alone (`cosine calibrate`).
    pub warm_cache: bool,
    /// Operations of the mix run unmeasured before the measured phase (0: none), so it starts
    /// from the state the workload leaves rather than the load's.
    pub warmup_operations: u64,
    /// After `warmup_operations`, go on until two merges into the deepest level and start the
    /// measured phase where a run of `operations` lies farthest from the next ones (see
    /// `cosine_bench::aligned_phase`), not wherever a fixed count happened to leave the cycle.
    /// The report's `warmup` says what was done.
    pub warmup_phase_aligned: bool,
    /// After the warm-up (and its alignment), go on until the buffer holds this many entries
    /// (after its next flush if it holds more), so that a run shorter than a buffer's fill
    /// sees the buffer's mean content, not whatever the last flush left (None: no such step).
    /// The report's `warmup.buffered` says what the measured phase started with.
    pub warmup_buffered: Option<u64>,
    /// Before `warmup_operations`, overwrite loaded keys until the deepest level holding data
    /// is this deep, then every key once more (`cosine_bench`'s `deepen`; None: no such step).
    /// A tiered last level under overwrites keeps its older runs and deepens the tree only
    /// after some flushes of them, so the load's depth is not the workload's: a warm-up cycle
    /// counted from the load can end just after the deepening, with the new upper level empty
    /// (docs/journal/s31-s42.md §37). The report's `warmup.depth` says what was done.
    pub warmup_depth: Option<usize>,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            records: 100_000,
            operations: 100_000,
            key_bytes: 16,
            value_bytes: 100,
            mix: Mix { get: 0.5, update: 0.5, ..Mix::default() },
            scan_length: 100,
            empty_range_width: DEFAULT_EMPTY_RANGE_WIDTH,
            compressibility: 1.0,
            distribution: Distributions { get: Dist::Zipfian { theta: 0.99 }, put: Dist::Uniform },
            threads: 1,
            seed: 42,
            warm_cache: false,
            warmup_operations: 0,
            warmup_phase_aligned: false,
            warmup_buffered: None,
            warmup_depth: None,
        }
    }
}

impl Workload {
    /// Reads and checks a `workload.json` file; errors name the file.
    pub fn from_file(path: &Path) -> Result<Workload, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let w: Workload = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        w.validate().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(w)
    }

    /// The knobs whose range serde does not check.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.compressibility > 0.0 && self.compressibility <= 1.0) {
            return Err(format!("compressibility must be in (0, 1], got {}", self.compressibility));
        }
        if self.warmup_depth == Some(0) {
            return Err("warmup_depth must be at least 1 (a level number)".into());
        }
        if self.empty_range_width == 0 {
            return Err("empty_range_width must be at least 1".into());
        }
        if self.mix.empty_range > 0.0 && self.key_bytes < 8 {
            return Err(format!(
                "empty_range needs keys of at least 8 bytes (its width counts values of the first 8), got {}",
                self.key_bytes
            ));
        }
        Ok(())
    }

    /// Overrides the record, operation and thread counts that are given (the
    /// `--records`, `--ops` and `--threads` flags of `cosine-bench` and `cosine-peers`).
    pub fn override_counts(&mut self, records: Option<u64>, operations: Option<u64>, threads: Option<usize>) {
        self.records = records.unwrap_or(self.records);
        self.operations = operations.unwrap_or(self.operations);
        self.threads = threads.unwrap_or(self.threads);
    }
}

/// Encodes record index `i` as a key: the big-endian [`scramble`] of `i` in the
/// first 8 bytes, zero padded (keys shorter than 8 bytes: the low bytes of `i`).
pub fn encode_key(i: u64, key_bytes: usize) -> Vec<u8> {
    // YCSB's default insertorder=hashed: record i's key is a bijective mix of i,
    // so new records land all over the key space (not appended at its end).
    let be = if key_bytes >= 8 { scramble(i) } else { i }.to_be_bytes();
    if key_bytes >= 8 {
        let mut k = be.to_vec();
        k.resize(key_bytes, 0);
        k
    } else {
        be[8 - key_bytes..].to_vec()
    }
}

/// The splitmix64 finalizer: a bijection on u64 (xor-shifts and odd multipliers
/// are invertible), so distinct records keep distinct keys.
pub fn scramble(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A key inside the loaded range that was never inserted: index `i` with a
/// non-zero padding byte (sorts between `i` and `i + 1`), so fence pointers
/// cannot rule it out. Keys shorter than 9 bytes use indexes past the loaded set.
pub fn encode_empty_key(i: u64, records: u64, key_bytes: usize) -> Vec<u8> {
    if key_bytes > 8 {
        let mut k = encode_key(i, key_bytes);
        if let Some(last) = k.last_mut() {
            *last = 1;
        }
        k
    } else {
        encode_key(records + (1 << 40) + i, key_bytes)
    }
}

/// Width of an empty range when the workload names none.
pub const DEFAULT_EMPTY_RANGE_WIDTH: u64 = 64;

/// Bounds of the empty range that starts at key value `x` and spans `width` values
/// of the key's first 8 bytes: `lo` is `x` zero padded, `hi` is `x + width - 1`
/// padded with `0xff`, so a loaded key (zero padded) is inside exactly when its
/// first 8 bytes are in `x..x + width`. `x` is clamped so the range fits in 64 bits.
pub fn empty_range_bounds(x: u64, width: u64, key_bytes: usize) -> (Vec<u8>, Vec<u8>) {
    let w = width.max(1);
    let x = x.min(u64::MAX - (w - 1));
    let mut lo = x.to_be_bytes().to_vec();
    lo.resize(key_bytes.max(8), 0);
    let mut hi = (x + (w - 1)).to_be_bytes().to_vec();
    hi.resize(key_bytes.max(8), 0xff);
    (lo, hi)
}

/// A value of `n` bytes whose compressed size is about `compressibility * n`: a
/// random fragment of that many bytes repeated to fill the value, as RocksDB's
/// `db_bench` makes values for its `--compression_ratio` (util `CompressibleString`).
/// At 1.0 every byte is random (and the generator is drawn exactly as before).
pub fn make_value(rng: &mut impl RngCore, n: usize, compressibility: f64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let fragment = ((n as f64 * compressibility).round() as usize).clamp(usize::from(n > 0), n);
    rng.fill_bytes(&mut v[..fragment]);
    for i in fragment..n {
        v[i] = v[i % fragment.max(1)];
    }
    v
}

/// YCSB's zipfian generator over `0..n` (Gray et al.).
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipf {
    /// A generator over `n` items with skew `theta` (clamped to (0, 0.9999]).
    pub fn new(n: u64, theta: f64) -> Zipf {
        let n = n.max(1);
        let theta = theta.clamp(1e-6, 0.9999);
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n, theta, alpha, zetan, eta }
    }

    /// A rank in `0..n`; rank 0 is the most popular.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
    }
}

/// Terms of the generalized harmonic number summed exactly by [`Recency`] (beyond them,
/// Euler-Maclaurin: as the model's `distributions.harmonic`).
const EXACT_HARMONIC: usize = 10_000;

/// YCSB's "latest" (`SkewedLatestGenerator`): a zipfian rank over the keys present *now*,
/// counted back from the newest. YCSB's `ZipfianGenerator.nextLong(itemcount)` brings zeta(n)
/// up to date as inserts grow the count; here zeta(n) is an exact prefix sum up to
/// [`EXACT_HARMONIC`] terms and Euler-Maclaurin beyond (relative error below 1e-9), so a draw
/// costs O(1) at any n and needs no shared state between the driver threads.
#[derive(Debug, Clone)]
pub struct Recency {
    theta: f64,
    alpha: f64,
    zeta2: f64,
    /// `0.5^theta`: the second rank's threshold.
    half_theta: f64,
    /// `m^(1-theta)`, `m^-theta`, `m^(-theta-1)` and `2^(1-theta)` at m = [`EXACT_HARMONIC`]: a draw
    /// beyond the prefix then needs one `powf` for zeta and eta.
    m_1t: f64,
    m_t: f64,
    m_t1: f64,
    two_1t: f64,
    /// `prefix[i]` = sum of `k^-theta` for k in 1..=i.
    prefix: Vec<f64>,
}

impl Recency {
    /// Ranks with skew `theta` (clamped to (0, 0.9999], as [`Zipf`]).
    pub fn new(theta: f64) -> Recency {
        let theta = theta.clamp(1e-6, 0.9999);
        let mut prefix = Vec::with_capacity(EXACT_HARMONIC + 1);
        prefix.push(0.0);
        let mut acc = 0.0;
        for k in 1..=EXACT_HARMONIC {
            acc += 1.0 / (k as f64).powf(theta);
            prefix.push(acc);
        }
        let m = EXACT_HARMONIC as f64;
        Recency {
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2: prefix[2],
            half_theta: 0.5f64.powf(theta),
            m_1t: m.powf(1.0 - theta),
            m_t: m.powf(-theta),
            m_t1: m.powf(-theta - 1.0),
            two_1t: 2f64.powf(1.0 - theta),
            prefix,
        }
    }

    /// zeta(n) = sum of `k^-theta` for k in 1..=n.
    pub fn zeta(&self, n: u64) -> f64 {
        self.zeta_eta(n).0
    }

    /// (zeta(n), `(2/n)^(1-theta)`): beyond the exact prefix both from one `powf` (`n^(1-theta)`).
    fn zeta_eta(&self, n: u64) -> (f64, f64) {
        let b = n as f64;
        if n <= EXACT_HARMONIC as u64 {
            return (self.prefix[n as usize], (2.0 / b).powf(1.0 - self.theta));
        }
        let t = self.theta;
        let b_1t = b.powf(1.0 - t);
        let (b_t, b_t1) = (b_1t / b, b_1t / b / b);
        let integral = (b_1t - self.m_1t) / (1.0 - t);
        let correction = 0.5 * (b_t - self.m_t) + t / 12.0 * (self.m_t1 - b_t1);
        (self.prefix[EXACT_HARMONIC] + integral + correction, self.two_1t / b_1t)
    }

    /// A recency rank in `0..n` (0: the newest key), drawn as [`Zipf::next`] over `n` items.
    pub fn next(&self, rng: &mut impl Rng, n: u64) -> u64 {
        let n = n.max(1);
        if n == 1 {
            return 0;
        }
        let (zetan, eta) = self.at(n);
        let u: f64 = rng.gen();
        let uz = u * zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_theta {
            return 1;
        }
        ((n as f64 * (eta * u - eta + 1.0).powf(self.alpha)) as u64).min(n - 1)
    }

    /// (zeta(n), eta(n)) of Gray et al.'s draw, kept per driver thread for the last (theta, n):
    /// the count changes only at an insert (YCSB D: one operation in twenty), and the draw then
    /// costs what [`Zipf::next`] costs.
    fn at(&self, n: u64) -> (f64, f64) {
        thread_local! {
            static LAST: Cell<(u64, u64, f64, f64)> = const { Cell::new((0, 0, 0.0, 0.0)) };
        }
        let key = self.theta.to_bits();
        LAST.with(|last| {
            let (k, m, zetan, eta) = last.get();
            if k == key && m == n {
                return (zetan, eta);
            }
            let (zetan, two_n) = self.zeta_eta(n);
            let eta = (1.0 - two_n) / (1.0 - self.zeta2 / zetan);
            last.set((key, n, zetan, eta));
            (zetan, eta)
        })
    }
}

/// A bijection of `0..n` (`n >= 1`): the scrambled zipfian's rank-to-record map, so that every
/// record has exactly one rank and is drawn with that rank's probability. A bijection of the
/// `k`-bit integers (`2^k >= n`: an xor with a constant, xor-shifts and odd multipliers, all
/// taken mod `2^k`) is walked until it lands inside `0..n` (cycle walking: the walk from a
/// value inside comes back inside, so the restriction is a bijection too). YCSB hashes ranks
/// with FNV-1a modulo the record count instead; FNV's low bits are weak and modulo 250,000 half
/// of the records were never drawn (a random map leaves 37 %), which made the engine's workload
/// more skewed than the zipfian the model prices (docs/journal/s22-s30.md §29).
pub fn permute(x: u64, n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let k = 64 - (n - 1).leading_zeros();
    let mask = if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
    let s = (k / 2).max(1);
    let mut z = x & mask;
    loop {
        z ^= 0x9e37_79b9_7f4a_7c15 & mask;
        z = (z ^ (z >> s)).wrapping_mul(0xbf58_476d_1ce4_e5b9) & mask;
        z = (z ^ (z >> s)).wrapping_mul(0x94d0_49bb_1331_11eb) & mask;
        z ^= z >> s;
        if z < n {
            return z;
        }
    }
}

/// A sampler for one distribution.
#[derive(Debug, Clone)]
pub enum Sampler {
    /// Uniform over the loaded keys.
    Uniform,
    /// Scrambled zipfian.
    Zipf(Zipf),
    /// Zipfian by recency over the keys present at each draw (YCSB's latest).
    Latest(Recency),
    /// Normal.
    Normal(f64, f64),
    /// Hot/cold skew.
    Skew(f64, f64),
}

impl Sampler {
    /// Prepares `d` over `n` records.
    pub fn new(d: &Dist, n: u64) -> Sampler {
        match d {
            Dist::Uniform => Sampler::Uniform,
            Dist::Zipfian { theta } => Sampler::Zipf(Zipf::new(n, *theta)),
            Dist::Latest { theta } => Sampler::Latest(Recency::new(*theta)),
            Dist::Normal { mean, stddev } => Sampler::Normal(*mean, *stddev),
            Dist::Skew { hot_fraction, hot_probability } => Sampler::Skew(*hot_fraction, *hot_probability),
        }
    }

    /// A record index in `0..n` (`n` = keys present now, which grows with inserts).
    pub fn sample(&self, rng: &mut impl Rng, n: u64) -> u64 {
        let n = n.max(1);
        match self {
            Sampler::Uniform => rng.gen_range(0..n),
            // a scrambled zipfian: ranks permuted over the loaded records (`Zipf::n`), so the
            // hot keys stay the same keys while inserts grow the store (permuting over the
            // growing count would move every hot key at each insert)
            Sampler::Zipf(z) => permute(z.next(rng), z.n) % n,
            Sampler::Latest(r) => n - 1 - r.next(rng, n),
            Sampler::Normal(mean, sd) => {
                // Box-Muller.
                let u1: f64 = rng.gen::<f64>().max(1e-12);
                let u2: f64 = rng.gen();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let x = (mean + sd * z) * n as f64;
                (x.max(0.0) as u64).min(n - 1)
            }
            Sampler::Skew(frac, p) => {
                let hot = ((frac * n as f64) as u64).clamp(1, n);
                if rng.gen::<f64>() < *p || hot == n {
                    rng.gen_range(0..hot)
                } else {
                    rng.gen_range(hot..n)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_contract_example() {
        let w: Workload = serde_json::from_str(
            r#"{"records": 1000000, "operations": 1000000, "key_bytes": 16, "value_bytes": 100,
                "mix": {"get": 0.5, "empty_get": 0.0, "range": 0.0, "insert": 0.0, "update": 0.5, "rmw": 0.0},
                "scan_length": 100,
                "distribution": {"get": {"kind": "zipfian", "theta": 0.99}, "put": {"kind": "uniform"}},
                "threads": 2, "seed": 42}"#,
        )
        .expect("parse");
        assert_eq!(w.threads, 2);
        assert!(matches!(w.distribution.get, Dist::Zipfian { .. }));
        let s: Dist = serde_json::from_str(r#"{"kind": "skew", "hot_fraction": 0.1, "hot_probability": 0.9}"#).expect("skew");
        assert!(matches!(s, Dist::Skew { .. }));
    }

    #[test]
    fn empty_ranges_span_their_width_and_values_their_compressibility() {
        let (lo, hi) = empty_range_bounds(1000, 64, 16);
        assert!(encode_key(0, 16) < lo || encode_key(0, 16) > hi);
        let inside = |p: u64| {
            let mut k = p.to_be_bytes().to_vec();
            k.resize(16, 0);
            lo <= k && k <= hi
        };
        assert!(inside(1000) && inside(1063) && !inside(999) && !inside(1064));
        let (lo, hi) = empty_range_bounds(u64::MAX, 10, 16);
        assert!(lo < hi && hi == vec![0xff; 16]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let v = make_value(&mut rng, 1000, 0.25);
        assert_eq!(v.len(), 1000);
        assert_eq!(v[..250], v[250..500]);
        let distinct: std::collections::HashSet<&[u8]> = v.chunks(250).collect();
        assert_eq!(distinct.len(), 1);
        let mut a = rand::rngs::StdRng::seed_from_u64(5);
        let mut b = rand::rngs::StdRng::seed_from_u64(5);
        let mut raw = vec![0u8; 37];
        b.fill_bytes(&mut raw);
        assert_eq!(make_value(&mut a, 37, 1.0), raw, "incompressible values draw the generator as before");
        assert!(Workload { compressibility: 0.0, ..Workload::default() }.validate().is_err());
        let w = Workload { key_bytes: 4, mix: Mix { empty_range: 1.0, ..Mix::default() }, ..Workload::default() };
        assert!(w.validate().is_err());
    }

    #[test]
    fn keys_preserve_order_and_empty_keys_interleave() {
        assert!(encode_key(1, 16) < encode_empty_key(1, 10, 16));
        assert!(encode_empty_key(1, 10, 16) < encode_key(2, 16));
        assert!(encode_key(255, 16) < encode_key(256, 16));
    }

    #[test]
    fn scrambled_zipfian_keeps_its_hot_keys_while_the_store_grows() {
        let s = Sampler::new(&Dist::Zipfian { theta: 0.99 }, 1000);
        let hot = |n: u64| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let mut counts = std::collections::HashMap::new();
            for _ in 0..20_000 {
                *counts.entry(s.sample(&mut rng, n)).or_insert(0u32) += 1;
            }
            counts.into_iter().max_by_key(|(_, c)| *c).map(|(k, _)| k)
        };
        assert_eq!(hot(1000), hot(1001));
        assert_eq!(hot(1000), hot(5000));
    }

    #[test]
    fn the_rank_map_is_a_bijection() {
        for n in [1u64, 2, 3, 7, 8, 9, 1000, 1024, 1025, 50_000, 250_000] {
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let i = permute(r, n);
                assert!(i < n && !seen[i as usize], "n {n} rank {r}");
                seen[i as usize] = true;
            }
        }
    }

    #[test]
    fn every_record_is_drawn_with_its_ranks_probability() {
        // 1,000 records, theta 0.99: the least likely is drawn with p ~ 1.4e-4, ~56 times in
        // 400,000 draws; under FNV modulo the record count some records had no rank at all
        let n = 1000;
        let s = Sampler::new(&Dist::Zipfian { theta: 0.99 }, n);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..400_000 {
            counts[s.sample(&mut rng, n) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 0));
        let hottest = counts[permute(0, n) as usize];
        assert!(counts.iter().all(|&c| c <= hottest));
    }

    #[test]
    fn recency_zeta_is_the_exact_sum_at_every_size() {
        let r = Recency::new(0.99);
        let mut exact = 0.0;
        let mut k = 0u64;
        for n in [1u64, 2, 10, 9_999, 10_000, 10_001, 123_457, 1_000_000] {
            while k < n {
                k += 1;
                exact += 1.0 / (k as f64).powf(0.99);
            }
            let rel = (r.zeta(n) - exact).abs() / exact;
            assert!(rel < 1e-9, "n {n}: {} vs {exact}", r.zeta(n));
        }
    }

    #[test]
    fn recency_draws_as_zipf_over_the_same_count() {
        // up to EXACT_HARMONIC keys the two compute the same zeta, term by term
        for n in [2u64, 1000, 10_000] {
            let z = Zipf::new(n, 0.99);
            let r = Recency::new(0.99);
            let mut a = rand::rngs::StdRng::seed_from_u64(5);
            let mut b = rand::rngs::StdRng::seed_from_u64(5);
            for _ in 0..10_000 {
                assert_eq!(z.next(&mut a), r.next(&mut b, n));
            }
        }
    }

    #[test]
    fn latest_spans_the_keys_present_now() {
        // YCSB's SkewedLatestGenerator: zipfian over the current count, newest first. Built over
        // 1,000 loaded records and drawn after the store grew to 4,000, the 3,000 oldest keys are
        // drawn with their ranks' share (they were never drawn when the ranks stayed over the loaded
        // records), and the newest key with 1 / zeta(4000)
        let n = 4000u64;
        let s = Sampler::new(&Dist::Latest { theta: 0.99 }, 1000);
        let r = Recency::new(0.99);
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let draws = 400_000;
        let (mut old, mut newest) = (0u32, 0u32);
        for _ in 0..draws {
            let i = s.sample(&mut rng, n);
            assert!(i < n);
            old += u32::from(i < 3000);
            newest += u32::from(i == n - 1);
        }
        let want_old = (r.zeta(n) - r.zeta(1000)) / r.zeta(n);
        let got_old = f64::from(old) / f64::from(draws);
        assert!((got_old - want_old).abs() < 0.01, "{got_old} vs {want_old}");
        let want_newest = 1.0 / r.zeta(n);
        let got_newest = f64::from(newest) / f64::from(draws);
        assert!((got_newest / want_newest - 1.0).abs() < 0.05, "{got_newest} vs {want_newest}");
    }

    #[test]
    fn zipf_is_skewed_and_skew_respects_probability() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let z = Zipf::new(1000, 0.99);
        let top = (0..10_000).filter(|_| z.next(&mut rng) < 10).count();
        assert!(top > 3000, "{top}");
        let s = Sampler::new(&Dist::Skew { hot_fraction: 0.1, hot_probability: 0.9 }, 1000);
        let hot = (0..10_000).filter(|_| s.sample(&mut rng, 1000) < 100).count();
        assert!((8700..9300).contains(&hot), "{hot}");
    }
}
