//! `cosine-peers --engine rocksdb|fjall|cosine --workload W.json --dir D [--config engine.toml]
//! [--records N] [--ops N] [--threads N] [--cache-bytes N] [--json]`
//!
//! Runs the same workload through the same driver as `cosine-bench` and prints the
//! same report. Peers are configured as the paper's RocksDB baseline: size ratio 10,
//! 10 bits/key Bloom filters, the buffer size of the Cosine design, no compression.
//! Peers report no block counters (`blocks_read` stays 0): they are timed only.

use cosine_bench::workload::Workload;
use cosine_bench::{run, text_report, BenchKv, CosineKv};
use cosine_config::Config;
use cosine_core::IoSnapshot;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

struct Rocks {
    db: rocksdb::DB,
}

impl Rocks {
    fn open(dir: &PathBuf, buffer: usize, cache: usize) -> Result<Rocks, String> {
        use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options};
        let mut o = Options::default();
        o.create_if_missing(true);
        o.set_write_buffer_size(buffer);
        o.set_max_write_buffer_number(3);
        o.set_max_bytes_for_level_base((buffer * 10) as u64);
        o.set_max_bytes_for_level_multiplier(10.0);
        o.set_target_file_size_base(8 << 20);
        o.set_compression_type(DBCompressionType::None);
        o.set_bottommost_compression_type(DBCompressionType::None);
        o.set_max_background_jobs(2);
        let mut t = BlockBasedOptions::default();
        t.set_bloom_filter(10.0, false);
        t.set_block_size(4096);
        if cache > 0 {
            let c = Cache::new_lru_cache(cache).map_err(|e| e.to_string())?;
            t.set_block_cache(&c);
        } else {
            t.disable_cache();
        }
        o.set_block_based_table_factory(&t);
        let db = rocksdb::DB::open(&o, dir).map_err(|e| e.to_string())?;
        Ok(Rocks { db })
    }
}

impl BenchKv for Rocks {
    fn design(&self) -> String {
        "rocksdb (T=10, 10 bits/key, no compression)".into()
    }
    fn class(&self) -> String {
        "lsm".into()
    }
    fn put(&self, k: &[u8], v: &[u8]) -> Result<(), String> {
        self.db.put(k, v).map_err(|e| e.to_string())
    }
    fn get(&self, k: &[u8]) -> Result<(bool, IoSnapshot), String> {
        Ok((self.db.get_pinned(k).map_err(|e| e.to_string())?.is_some(), IoSnapshot::default()))
    }
    fn range(&self, k: &[u8], n: usize) -> Result<(usize, IoSnapshot), String> {
        let it = self.db.iterator(rocksdb::IteratorMode::From(k, rocksdb::Direction::Forward));
        let mut c = 0;
        for kv in it.take(n) {
            kv.map_err(|e| e.to_string())?;
            c += 1;
        }
        Ok((c, IoSnapshot::default()))
    }
    fn rmw(&self, k: &[u8], v: &[u8]) -> Result<(bool, IoSnapshot), String> {
        let found = self.db.get_pinned(k).map_err(|e| e.to_string())?.is_some();
        self.put(k, v)?;
        Ok((found, IoSnapshot::default()))
    }
    fn settle(&self) -> Result<(), String> {
        self.db.flush().map_err(|e| e.to_string())?;
        // Wait for pending compactions so the run phase starts from a settled tree.
        for _ in 0..6000 {
            let pending = self.db.property_int_value("rocksdb.compaction-pending").ok().flatten().unwrap_or(0);
            let running = self.db.property_int_value("rocksdb.num-running-compactions").ok().flatten().unwrap_or(0);
            if pending == 0 && running == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(())
    }
    fn background(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
    fn levels(&self) -> Value {
        let mut v = Vec::new();
        for l in 0..7 {
            let files = self.db.property_value(format!("rocksdb.num-files-at-level{l}").as_str()).ok().flatten().unwrap_or_default();
            v.push(json!({"level": l, "files": files.parse::<u64>().unwrap_or(0)}));
        }
        json!({"levels": v})
    }
}

struct Fjall {
    _db: fjall::Database,
    ks: fjall::Keyspace,
}

impl Fjall {
    fn open(dir: &PathBuf, buffer: u64, cache: u64) -> Result<Fjall, String> {
        use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
        let db = fjall::Database::builder(dir).cache_size(cache.max(1 << 20)).open().map_err(|e| e.to_string())?;
        let ks = db
            .keyspace("bench", || {
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(buffer)
                    .data_block_compression_policy(CompressionPolicy::disabled())
                    .index_block_compression_policy(CompressionPolicy::disabled())
                    .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(10.0))))
            })
            .map_err(|e| e.to_string())?;
        Ok(Fjall { _db: db, ks })
    }
}

impl BenchKv for Fjall {
    fn design(&self) -> String {
        "fjall (leveled, 10 bits/key, no compression)".into()
    }
    fn class(&self) -> String {
        "lsm".into()
    }
    fn put(&self, k: &[u8], v: &[u8]) -> Result<(), String> {
        self.ks.insert(k, v).map_err(|e| e.to_string())
    }
    fn get(&self, k: &[u8]) -> Result<(bool, IoSnapshot), String> {
        Ok((self.ks.get(k).map_err(|e| e.to_string())?.is_some(), IoSnapshot::default()))
    }
    fn range(&self, k: &[u8], n: usize) -> Result<(usize, IoSnapshot), String> {
        let mut c = 0;
        for g in self.ks.range(k.to_vec()..).take(n) {
            g.into_inner().map_err(|e| e.to_string())?;
            c += 1;
        }
        Ok((c, IoSnapshot::default()))
    }
    fn rmw(&self, k: &[u8], v: &[u8]) -> Result<(bool, IoSnapshot), String> {
        let found = self.ks.get(k).map_err(|e| e.to_string())?.is_some();
        self.put(k, v)?;
        Ok((found, IoSnapshot::default()))
    }
    fn settle(&self) -> Result<(), String> {
        self.ks.rotate_memtable_and_wait().map_err(|e| e.to_string())
    }
    fn background(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
    fn levels(&self) -> Value {
        json!({"tables": self.ks.table_count(), "l0_tables": self.ks.l0_table_count()})
    }
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("cosine-peers: {e}");
        std::process::exit(2);
    }
}

fn real_main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut engine = "rocksdb".to_string();
    let mut config = PathBuf::from("engine.toml");
    let mut workload = None;
    let mut dir = PathBuf::from("target/peers-data");
    let (mut json_out, mut records, mut ops, mut threads, mut cache) = (false, None, None, None, None::<u64>);
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value", args[i]));
        match args[i].as_str() {
            "--engine" => engine = val(i)?,
            "--config" => config = PathBuf::from(val(i)?),
            "--workload" => workload = Some(PathBuf::from(val(i)?)),
            "--dir" => dir = PathBuf::from(val(i)?),
            "--records" => records = Some(val(i)?.parse::<u64>().map_err(|e| e.to_string())?),
            "--ops" => ops = Some(val(i)?.parse::<u64>().map_err(|e| e.to_string())?),
            "--threads" => threads = Some(val(i)?.parse::<usize>().map_err(|e| e.to_string())?),
            "--cache-bytes" => cache = Some(val(i)?.parse::<u64>().map_err(|e| e.to_string())?),
            "--json" => {
                json_out = true;
                i += 1;
                continue;
            }
            a => return Err(format!("unknown argument {a}")),
        }
        i += 2;
    }
    let mut cfg = Config::from_toml_file(&config).map_err(|e| e.to_string())?;
    if let Some(c) = cache {
        cfg.layout.block_cache_bytes = c;
    }
    let mut w = match workload {
        Some(p) => Workload::from_file(&p)?,
        None => Workload::default(),
    };
    w.override_counts(records, ops, threads);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    }
    let buffer = cfg.layout.buffer_bytes;
    let cache = cfg.layout.block_cache_bytes;
    let report = match engine.as_str() {
        "rocksdb" => run(&Rocks::open(&dir, buffer as usize, cache as usize)?, &w)?,
        "fjall" => run(&Fjall::open(&dir, buffer, cache)?, &w)?,
        "cosine" => {
            let kv = CosineKv(cosine_engine::Engine::open(&dir, &cfg).map_err(|e| e.to_string())?);
            let r = run(&kv, &w)?;
            kv.0.close().map_err(|e| e.to_string())?;
            r
        }
        other => return Err(format!("unknown engine {other} (rocksdb | fjall | cosine)")),
    };
    let _ = std::fs::remove_dir_all(&dir);
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", text_report(&report));
    }
    Ok(())
}
