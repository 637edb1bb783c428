//! Shared helpers for the integration tests: scratch directories, keys, and the
//! model-based harness that checks the engine against a `BTreeMap`.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod crash;

use cosine_config::Config;
use cosine_engine::{Engine, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The reference model: what the engine should hold.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A scratch directory, removed with everything in it when dropped, also when the
/// test panics (a [`tempfile::TempDir`]).
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// A fresh empty directory under `$COSINE_TEST_DIR`, else `/dev/shm` (tmpfs: the
    /// tests check logic and crash consistency, not the disk), else `$TMPDIR`.
    pub fn new(name: &str) -> TempDir {
        let base = match std::env::var_os("COSINE_TEST_DIR") {
            Some(d) => PathBuf::from(d),
            None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
            None => std::env::temp_dir(),
        };
        match tempfile::Builder::new().prefix(&format!("cosine-it-{name}-")).tempdir_in(&base) {
            Ok(d) => TempDir(d),
            Err(e) => panic!("cannot create a scratch directory in {}: {e}", base.display()),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// The tiny RocksDB preset as one hot level holding one run: a buffer of 100 entries (E_B),
/// T = 100 and files without an entry limit, so 1,000 keys never leave level 1; blocks of 4
/// entries and `bits` Bloom bits per key. The accounting and cache tests count block I/Os on it.
pub fn one_hot_level(bits: f64) -> Config {
    let mut c = cosine_config::presets::tiny(cosine_config::presets::Preset::RocksDb);
    c.layout.buffer_bytes = 100 * c.entry_bytes() as u64;
    c.layout.size_ratio = 100.0;
    c.layout.block_entries = 4;
    c.layout.bloom_bits_per_key = vec![bits];
    c.algorithms.file_entries = 1 << 20;
    c
}

/// Record index `i` as a 16-byte order-preserving key (big-endian, zero padded).
pub fn key(i: u64) -> Vec<u8> {
    let mut k = i.to_be_bytes().to_vec();
    k.resize(16, 0);
    k
}

/// A value of varying length derived from `seed`.
pub fn value(seed: u32) -> Vec<u8> {
    let len = (seed % 23) as usize;
    (0..len).map(|i| (seed.wrapping_mul(31).wrapping_add(i as u32 * 7) % 251) as u8).collect()
}

/// One step of a model-based test.
#[derive(Debug, Clone)]
pub enum Op {
    /// put(key, value)
    Put(u64, u32),
    /// delete(key)
    Delete(u64),
    /// update(key, value)
    Update(u64, u32),
    /// rmw(key): append a byte to the value (or create it)
    Rmw(u64, u8),
    /// get(key)
    Get(u64),
    /// scan(lo, hi)
    Scan(u64, u64),
    /// range(lo, limit)
    Range(u64, usize),
    /// flush()
    Flush,
    /// close and reopen
    Reopen,
}

/// Applies `ops` to a fresh engine and to a `BTreeMap`, comparing every read.
/// Ends with a full scan and a reopen. Returns a description of the first mismatch.
pub fn check_against_model(cfg: &Config, ops: &[Op]) -> std::result::Result<(), String> {
    let dir = TempDir::new(&cfg.design.name);
    let err = |e: cosine_engine::Error| format!("engine error: {e}");
    let mut engine = Some(Engine::open(dir.path(), cfg).map_err(err)?);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (step, op) in ops.iter().enumerate() {
        let Some(e) = engine.as_ref() else { return Err("engine missing".into()) };
        match op {
            Op::Put(k, v) | Op::Update(k, v) => {
                let (k, v) = (key(*k), value(*v));
                if matches!(op, Op::Put(..)) {
                    e.put(&k, &v).map_err(err)?;
                } else {
                    e.update(&k, &v).map_err(err)?;
                }
                model.insert(k, v);
            }
            Op::Delete(k) => {
                e.delete(&key(*k)).map_err(err)?;
                model.remove(&key(*k));
            }
            Op::Rmw(k, b) => {
                let k = key(*k);
                e.rmw(&k, |cur| {
                    let mut v = cur.map(|c| c.to_vec()).unwrap_or_default();
                    v.push(*b);
                    Some(v)
                })
                .map_err(err)?;
                model.entry(k).or_default().push(*b);
            }
            Op::Get(k) => {
                let got = e.get(&key(*k)).map_err(err)?;
                let want = model.get(&key(*k)).cloned();
                if got != want {
                    return Err(format!("step {step} {op:?}: engine {got:?}, model {want:?}"));
                }
            }
            Op::Scan(a, b) => {
                let (lo, hi) = (key(*a.min(b)), key(*a.max(b)));
                let got = e.scan(&lo, &hi).map_err(err)?;
                let want: Vec<_> = model.range(lo..=hi).map(|(k, v)| (k.clone(), v.clone())).collect();
                if got != want {
                    return Err(format!("step {step} {op:?}: engine {} entries, model {}", got.len(), want.len()));
                }
            }
            Op::Range(a, n) => {
                let got = e.range(&key(*a), *n).map_err(err)?;
                let want: Vec<_> = model.range(key(*a)..).take(*n).map(|(k, v)| (k.clone(), v.clone())).collect();
                if got != want {
                    return Err(format!("step {step} {op:?}: engine {} entries, model {}", got.len(), want.len()));
                }
            }
            Op::Flush => e.flush().map_err(err)?,
            Op::Reopen => {
                if let Some(e) = engine.take() {
                    e.close().map_err(err)?;
                }
                engine = Some(Engine::open(dir.path(), cfg).map_err(err)?);
            }
        }
    }
    let final_check = |e: &Engine| -> std::result::Result<(), String> {
        let all = e.scan(&key(0), &key(u64::MAX)).map_err(err)?;
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if all != want {
            return Err(format!("final scan: engine {} entries, model {}", all.len(), want.len()));
        }
        for (k, v) in &model {
            if e.get(k).map_err(err)?.as_ref() != Some(v) {
                return Err(format!("final get of {k:?} differs"));
            }
        }
        Ok(())
    };
    let Some(e) = engine.take() else { return Err("engine missing".into()) };
    e.wait_idle().map_err(err)?;
    final_check(&e)?;
    e.close().map_err(err)?;
    let e = Engine::open(dir.path(), cfg).map_err(err)?;
    final_check(&e)?;
    e.close().map_err(err)
}

/// Opens, applies `n` seeded random writes over `keys` keys, and returns the engine and model.
pub fn fill(dir: &Path, cfg: &Config, n: u64, keys: u64, seed: u64) -> Result<(Engine, Model)> {
    use rand::{Rng, SeedableRng};
    let e = Engine::open(dir, cfg)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    for _ in 0..n {
        let k = key(rng.gen_range(0..keys));
        let v = value(rng.gen());
        e.put(&k, &v)?;
        model.insert(k, v);
    }
    Ok((e, model))
}

/// Random model-test steps over keys `0..keys`, weighted towards writes so that
/// tiny designs flush, compact and reopen many times per case.
pub fn op_strategy(keys: u64) -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        8 => (0..keys, any::<u32>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0..keys).prop_map(Op::Delete),
        3 => (0..keys, any::<u32>()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => (0..keys, any::<u8>()).prop_map(|(k, b)| Op::Rmw(k, b)),
        5 => (0..keys).prop_map(Op::Get),
        1 => (0..keys, 0..keys).prop_map(|(a, b)| Op::Scan(a, b)),
        1 => (0..keys, 0usize..10).prop_map(|(a, n)| Op::Range(a, n)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// A seeded 4,000-step sequence over 600 keys with two reopens: long enough to
/// reach deep (and cold) levels of a tiny design.
pub fn long_sequence(seed: u64) -> Vec<Op> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let keys = 600;
    let mut ops = Vec::new();
    for i in 0..4000 {
        ops.push(match rng.gen_range(0..100) {
            0..=59 => Op::Put(rng.gen_range(0..keys), rng.gen()),
            60..=69 => Op::Delete(rng.gen_range(0..keys)),
            70..=74 => Op::Rmw(rng.gen_range(0..keys), rng.gen()),
            75..=97 => Op::Get(rng.gen_range(0..keys)),
            _ => Op::Range(rng.gen_range(0..keys), 20),
        });
        if i % 1500 == 1499 {
            ops.push(Op::Reopen);
        }
    }
    ops
}

/// Cases per property test: `$PROPTEST_CASES` if set (for long soak runs), else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Files in `dir` whose extension is `ext`, sorted by name.
pub fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

/// Every regular file in `dir` with its contents, by name (to prove nothing was touched).
pub fn dir_contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
            (name, bytes)
        })
        .collect()
}

/// Start offsets of the records of a WAL segment (`[len u32][crc u32][payload]`, contract §4).
pub fn wal_record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= bytes.len() {
        v.push(pos);
        let len = u32::from_le_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]]) as usize;
        pos += 8 + len;
    }
    v
}

/// Designs whose directories, together, hold every file kind: WAL segments,
/// MANIFEST, run files (`.sst`), run filters (`.rbf`) and hash-log segments (`.log`).
pub fn every_file_kind() -> Vec<Config> {
    let mut v: Vec<Config> = cosine_config::presets::Preset::ALL.into_iter().map(cosine_config::presets::tiny).collect();
    let mut run_filters = cosine_config::presets::tiny(cosine_config::presets::Preset::RocksDb);
    run_filters.algorithms.filter_granularity = cosine_config::FilterGranularity::Run;
    run_filters.design.name = "rocksdb-run-filters".into();
    v.push(run_filters);
    v
}

/// Every file kind of a database, as the fault tests name them (extension, or `MANIFEST`).
pub const FILE_KINDS: [&str; 5] = ["wal", "MANIFEST", "sst", "rbf", "log"];

/// The non-empty files of `kind` (one of [`FILE_KINDS`]) in `dir`.
pub fn files_of_kind(dir: &Path, kind: &str) -> Vec<PathBuf> {
    let files = if kind == "MANIFEST" { vec![dir.join(kind)] } else { files_with_ext(dir, kind) };
    files.into_iter().filter(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 0)).collect()
}

/// Builds a cleanly closed database in `dir`: flushed and compacted data plus
/// eight writes still in the WAL. Returns the model of what it holds.
pub fn pristine(dir: &Path, cfg: &Config) -> Model {
    let (e, mut model) = fill(dir, cfg, 300, 100, 11).unwrap_or_else(|e| panic!("fill: {e}"));
    e.wait_idle().unwrap_or_else(|e| panic!("idle: {e}"));
    for i in 0..8u64 {
        let (k, v) = (key(1000 + i), value(i as u32 + 1));
        e.put(&k, &v).unwrap_or_else(|e| panic!("put: {e}"));
        model.insert(k, v);
    }
    e.close().unwrap_or_else(|e| panic!("close: {e}"));
    model
}

/// Replaces the files of `to` by copies of the files of `from`.
pub fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    for (name, bytes) in dir_contents(from) {
        std::fs::write(to.join(&name), bytes).unwrap_or_else(|e| panic!("copy {name}: {e}"));
    }
}

/// What opening a damaged database did.
#[derive(Debug)]
pub enum Damaged {
    /// The open failed with this error and changed no file.
    Refused(cosine_engine::Error),
    /// The open succeeded; every read returned the model's value or a corruption
    /// error (this many did).
    Opened(usize),
}

/// Opens the damaged database in `dir` and checks the only two acceptable outcomes:
/// refused with every file left as it was, or opened with no read returning a wrong
/// value or missing an acknowledged entry (a read may fail with a corruption error).
pub fn open_damaged(dir: &Path, cfg: &Config, model: &Model) -> std::result::Result<Damaged, String> {
    let before = dir_contents(dir);
    let e = match Engine::open(dir, cfg) {
        Err(err) => {
            if dir_contents(dir) != before {
                return Err(format!("refused ({err}) but changed files"));
            }
            return Ok(Damaged::Refused(err));
        }
        Ok(e) => e,
    };
    let mut read_errors = 0;
    for (k, v) in model {
        match e.get(k) {
            Ok(got) if got.as_ref() == Some(v) => {}
            Ok(got) => return Err(format!("opened, but key {k:?} reads {got:?}, acknowledged {v:?}")),
            Err(err) if err.is_corruption() => read_errors += 1,
            Err(err) => return Err(format!("opened, but a get failed with a non-corruption error: {err}")),
        }
    }
    match e.scan(&key(0), &key(u64::MAX)) {
        Ok(all) => {
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if all != want {
                return Err(format!("opened, but a full scan returned {} entries, model {}", all.len(), want.len()));
            }
        }
        Err(err) if err.is_corruption() => read_errors += 1,
        Err(err) => return Err(format!("opened, but the scan failed with a non-corruption error: {err}")),
    }
    let _ = e.close(); // the worker may have met the damage too
    Ok(Damaged::Opened(read_errors))
}
