//! `cosine-resp-bench --workload workload.json --host HOST:PORT [--shards HOST:PORT,...]
//! [--connections C] [--pipeline P] [--threads T] [--warmup-ops N] [--no-load]`
//!
//! Drives a `workload.json` mix (the contract `cosine-bench` reads: records, operations, key and
//! value sizes, mix, distributions, scan length) over RESP2 on TCP: `C` connections, each sending
//! a batch of `P` requests and reading their replies before the next batch (redis-benchmark's
//! `-P`), on `T` client threads (a tokio current-thread runtime each). Point operations go to
//! `--host` (one cosine-server, nutcracker or redis-server); a scan goes to every `--shards`
//! server (default: the host) and its latency is the last shard's reply (deploy/scatter.py).
//!
//! Operations: get / empty_get `GET`, insert / update `SET`, rmw `GET` then `SET` (YCSB's read-
//! modify-write: its write depends on its read, so the batch's rmw `SET`s go out together once the
//! batch's replies are in, a second round trip; until stop 61 both were in the one batch, which a
//! client that modifies what it read cannot do), range / empty_range `RANGE start count`. Keys are `key_bytes`
//! long: 16 hex digits of the record's scrambled index, then `0`s (cosine-bench's order of
//! records; a key never ends with NUL, which cosine-server refuses). Values: `cosine-bench`'s.
//!
//! Prints one JSON object: throughput, per-operation count and latency percentiles (from the
//! batch's send to the operation's reply), errors, misses, and the client's own CPU seconds.
#![deny(unsafe_code, clippy::unwrap_used)]

use cosine_bench::hist::Histogram;
use cosine_bench::workload::{make_value, scramble, Sampler, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const OPS: [&str; 7] = ["get", "empty_get", "range", "insert", "update", "rmw", "empty_range"];
const USAGE: &str = "usage: cosine-resp-bench --workload workload.json --host HOST:PORT [--shards HOST:PORT,...] \
[--connections C] [--pipeline P] [--threads T] [--warmup-ops N] [--no-load]";
/// Requests a load batch pipelines.
const LOAD_PIPELINE: usize = 64;

struct Args {
    workload: Workload,
    host: String,
    shards: Vec<String>,
    connections: usize,
    pipeline: usize,
    threads: usize,
    warmup: u64,
    load: bool,
}

fn parse_args() -> Result<Args, String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (mut wl, mut host, mut shards) = (None, None, None);
    let (mut connections, mut pipeline, mut threads, mut warmup, mut load) = (50usize, 1usize, 1usize, 0u64, true);
    let mut i = 0;
    while i < a.len() {
        let flag = a[i].as_str();
        if flag == "--no-load" {
            load = false;
            i += 1;
            continue;
        }
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.into());
        }
        let v = a.get(i + 1).ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |lo: u64, hi: u64| -> Result<u64, String> {
            v.parse::<u64>().ok().filter(|n| (lo..=hi).contains(n)).ok_or_else(|| format!("{flag}: expected {lo}..{hi}, got {v:?}"))
        };
        match flag {
            "--workload" => wl = Some(Workload::from_file(std::path::Path::new(v))?),
            "--host" => host = Some(v.clone()),
            "--shards" => shards = Some(v.split(',').map(str::to_string).collect::<Vec<_>>()),
            "--connections" => connections = num(1, 10_000)? as usize,
            "--pipeline" => pipeline = num(1, 1024)? as usize,
            "--threads" => threads = num(1, 256)? as usize,
            "--warmup-ops" => warmup = num(0, 1 << 40)?,
            _ => return Err(format!("unknown argument {flag}\n{USAGE}")),
        }
        i += 2;
    }
    let workload = wl.ok_or("--workload is required")?;
    if workload.key_bytes < 16 {
        return Err(format!("keys of at least 16 bytes are needed (16 hex digits), the workload has {}", workload.key_bytes));
    }
    let host = host.ok_or("--host is required")?;
    let shards = shards.unwrap_or_else(|| vec![host.clone()]);
    Ok(Args { workload, host, shards, connections, pipeline, threads: threads.min(connections), warmup, load })
}

/// The key of record `i`: 16 hex digits of its scrambled index, padded with `0` to `n` bytes.
#[cfg(test)]
fn key(i: u64, n: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(n);
    put_key(&mut k, i, n);
    k
}

/// Appends [`key`]`(i, n)` to `out` (no allocation).
fn put_key(out: &mut Vec<u8>, i: u64, n: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let x = scramble(i);
    for d in (0..16).rev() {
        out.push(HEX[((x >> (4 * d)) & 0xf) as usize]);
    }
    out.resize(out.len() + n.saturating_sub(16), b'0');
}

/// Appends a request whose key is record `i`'s (and whose value, when given, is `value`).
fn push_keyed(out: &mut Vec<u8>, name: &[u8], i: u64, n: usize, tail: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(2 + tail.len()).as_bytes());
    out.extend_from_slice(b"\r\n$");
    out.extend_from_slice(itoa::Buffer::new().format(name.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(name);
    out.extend_from_slice(b"\r\n$");
    out.extend_from_slice(itoa::Buffer::new().format(n.max(16)).as_bytes());
    out.extend_from_slice(b"\r\n");
    put_key(out, i, n);
    out.extend_from_slice(b"\r\n");
    for a in tail {
        out.push(b'$');
        out.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The index of a key never loaded: past every record the run can insert.
fn empty_index(i: u64, records: u64) -> u64 {
    records + (1 << 40) + i
}

#[cfg(test)]
fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// What one parsed reply was.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reply {
    Ok,
    Nil,
    Error,
}

/// One connection with its read buffer.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

fn line_end(b: &[u8], from: usize) -> Option<usize> {
    b[from..].windows(2).position(|w| w == b"\r\n").map(|p| from + p)
}

/// Parses one reply at `b[at..]`: `Some((end, kind))`, or None if incomplete.
fn parse(b: &[u8], at: usize) -> Result<Option<(usize, Reply)>, String> {
    if at >= b.len() {
        return Ok(None);
    }
    let Some(e) = line_end(b, at + 1) else { return Ok(None) };
    let head = std::str::from_utf8(&b[at + 1..e]).map_err(|_| "bad reply header".to_string())?;
    match b[at] {
        b'+' | b':' => Ok(Some((e + 2, Reply::Ok))),
        b'-' => Ok(Some((e + 2, Reply::Error))),
        b'$' => {
            let n: i64 = head.parse().map_err(|_| format!("bad bulk length {head:?}"))?;
            if n < 0 {
                return Ok(Some((e + 2, Reply::Nil)));
            }
            let end = e + 2 + n as usize + 2;
            Ok(if end <= b.len() { Some((end, Reply::Ok)) } else { None })
        }
        b'*' => {
            let n: i64 = head.parse().map_err(|_| format!("bad array length {head:?}"))?;
            let mut p = e + 2;
            for _ in 0..n.max(0) {
                match parse(b, p)? {
                    Some((q, Reply::Error)) => return Ok(Some((q, Reply::Error))),
                    Some((q, _)) => p = q,
                    None => return Ok(None),
                }
            }
            Ok(Some((p, Reply::Ok)))
        }
        c => Err(format!("unexpected reply byte {c:?}")),
    }
}

impl Conn {
    async fn open(addr: &str) -> Result<Conn, String> {
        let s = TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Conn { s, buf: Vec::with_capacity(64 << 10), pos: 0 })
    }

    async fn send(&mut self, data: &[u8]) -> Result<(), String> {
        self.s.write_all(data).await.map_err(|e| format!("write: {e}"))
    }

    async fn reply(&mut self) -> Result<Reply, String> {
        loop {
            if let Some((end, r)) = parse(&self.buf, self.pos)? {
                self.pos = end;
                if self.pos == self.buf.len() {
                    self.buf.clear();
                    self.pos = 0;
                }
                return Ok(r);
            }
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            self.buf.reserve(64 << 10);
            let n = self.s.read_buf(&mut self.buf).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
        }
    }
}

/// Per-operation results of one client thread.
#[derive(Default, Clone)]
struct Agg {
    count: u64,
    errors: u64,
    misses: u64,
    hist: Histogram,
}

/// What a thread shares with its connections.
struct Shared {
    w: Workload,
    weights: [f64; 7],
    total: f64,
    get: Sampler,
    put: Sampler,
    /// record indexes handed out to inserts (across threads)
    inserted: Arc<AtomicU64>,
    /// operations still to hand out in this phase (this thread's share)
    left: Cell<u64>,
    aggs: RefCell<Vec<Agg>>,
    measure: bool,
}

async fn run_connection(sh: Rc<Shared>, host: String, shards: Vec<String>, pipeline: usize, seed: u64) -> Result<(), String> {
    let mut point = Conn::open(&host).await?;
    let mut scan_conns = Vec::new();
    for s in &shards {
        scan_conns.push(Conn::open(s).await?);
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let w = &sh.w;
    let (kb, vb) = (w.key_bytes, w.value_bytes);
    let count = w.scan_length.max(1).to_string();
    let mut out = Vec::with_capacity(pipeline * (vb + kb + 64));
    let mut scan_out = Vec::new();
    // the batch's rmw writes, sent once the batch's replies (their reads') are in
    let mut writes = Vec::new();
    loop {
        let n = (sh.left.get()).min(pipeline as u64);
        if n == 0 {
            return Ok(());
        }
        sh.left.set(sh.left.get() - n);
        out.clear();
        scan_out.clear();
        writes.clear();
        // (op index, point replies, whether it scans)
        let mut batch: Vec<(usize, usize, bool)> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let mut x = rng.gen::<f64>() * sh.total;
            let mut op = 0;
            for (i, wgt) in sh.weights.iter().enumerate() {
                if x < *wgt {
                    op = i;
                    break;
                }
                x -= wgt;
                op = i;
            }
            let present = w.records + sh.inserted.load(Ordering::Relaxed);
            match OPS[op] {
                "get" => {
                    push_keyed(&mut out, b"GET", sh.get.sample(&mut rng, present), kb, &[]);
                    batch.push((op, 1, false));
                }
                "empty_get" => {
                    push_keyed(&mut out, b"GET", empty_index(rng.gen_range(0..w.records.max(1)), w.records), kb, &[]);
                    batch.push((op, 1, false));
                }
                "insert" => {
                    let i = w.records + sh.inserted.fetch_add(1, Ordering::Relaxed);
                    push_keyed(&mut out, b"SET", i, kb, &[&make_value(&mut rng, vb, w.compressibility)]);
                    batch.push((op, 1, false));
                }
                "update" => {
                    let k = sh.put.sample(&mut rng, present);
                    push_keyed(&mut out, b"SET", k, kb, &[&make_value(&mut rng, vb, w.compressibility)]);
                    batch.push((op, 1, false));
                }
                "rmw" => {
                    let k = sh.get.sample(&mut rng, present);
                    push_keyed(&mut out, b"GET", k, kb, &[]);
                    push_keyed(&mut writes, b"SET", k, kb, &[&make_value(&mut rng, vb, w.compressibility)]);
                    batch.push((op, 1, false));
                }
                "range" => {
                    push_keyed(&mut scan_out, b"RANGE", sh.get.sample(&mut rng, present), kb, &[count.as_bytes()]);
                    batch.push((op, 0, true));
                }
                _ => {
                    // empty_range: cosine-server has no bounded RANGE; a RANGE from a key never loaded
                    let i = empty_index(rng.gen_range(0..w.records.max(1)), w.records);
                    push_keyed(&mut scan_out, b"RANGE", i, kb, &[count.as_bytes()]);
                    batch.push((op, 0, true));
                }
            }
        }
        let t0 = Instant::now();
        if !out.is_empty() {
            point.send(&out).await?;
        }
        if !scan_out.is_empty() {
            for c in scan_conns.iter_mut() {
                c.send(&scan_out).await?;
            }
        }
        let mut results: Vec<(usize, u64, bool, bool)> = Vec::with_capacity(batch.len());
        // the rmws' reads, as (op, error, miss): each finished by its write's reply below
        let mut reads: Vec<(usize, bool, bool)> = Vec::new();
        for &(op, replies, scans) in &batch {
            if scans {
                continue;
            }
            let mut err = false;
            let mut miss = false;
            for r in 0..replies {
                match point.reply().await? {
                    Reply::Error => err = true,
                    Reply::Nil if r == 0 && OPS[op] != "empty_get" => miss = true,
                    _ => {}
                }
            }
            if OPS[op] == "rmw" {
                reads.push((op, err, miss));
            } else {
                results.push((op, t0.elapsed().as_nanos() as u64, err, miss));
            }
        }
        if !writes.is_empty() {
            point.send(&writes).await?;
            for (op, err, miss) in reads {
                let wrote = point.reply().await? == Reply::Error;
                results.push((op, t0.elapsed().as_nanos() as u64, err || wrote, miss));
            }
        }
        let scans: Vec<usize> = batch.iter().filter(|b| b.2).map(|b| b.0).collect();
        if !scans.is_empty() {
            let mut errs = vec![false; scans.len()];
            for c in scan_conns.iter_mut() {
                for e in errs.iter_mut() {
                    if c.reply().await? == Reply::Error {
                        *e = true;
                    }
                }
            }
            let done = t0.elapsed().as_nanos() as u64;
            for (op, e) in scans.into_iter().zip(errs) {
                results.push((op, done, e, false));
            }
        }
        if sh.measure {
            let mut aggs = sh.aggs.borrow_mut();
            for (op, ns, err, miss) in results {
                let a = &mut aggs[op];
                a.count += 1;
                a.errors += u64::from(err);
                a.misses += u64::from(miss);
                a.hist.record(ns);
            }
        }
    }
}

/// Loads records `lo..hi` (every `step`-th from `first`) through one connection, pipelined.
async fn load_part(host: String, w: Workload, first: u64, step: u64, seed: u64) -> Result<u64, String> {
    let mut c = Conn::open(&host).await?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut pending = 0usize;
    let mut errors = 0u64;
    let mut i = first;
    while i < w.records {
        push_keyed(&mut out, b"SET", i, w.key_bytes, &[&make_value(&mut rng, w.value_bytes, w.compressibility)]);
        pending += 1;
        i += step;
        if pending == LOAD_PIPELINE || i >= w.records {
            c.send(&out).await?;
            out.clear();
            for _ in 0..pending {
                if c.reply().await? == Reply::Error {
                    errors += 1;
                }
            }
            pending = 0;
        }
    }
    Ok(errors)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())
}

/// Runs `phase` operations on every thread (each its share of the connections and operations).
fn phase(args: &Args, ops: u64, measure: bool, inserted: &Arc<AtomicU64>, seed: u64) -> Result<(Vec<Agg>, f64), String> {
    let m = &args.workload.mix;
    let weights = [m.get, m.empty_get, m.range, m.insert, m.update, m.rmw, m.empty_range];
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err("the workload's mix is empty".into());
    }
    let t0 = Instant::now();
    let results: Vec<Result<Vec<Agg>, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..args.threads)
            .map(|t| {
                let inserted = inserted.clone();
                s.spawn(move || -> Result<Vec<Agg>, String> {
                    let conns = args.connections / args.threads + usize::from(t < args.connections % args.threads);
                    let mine = ops / args.threads as u64 + u64::from((t as u64) < ops % args.threads as u64);
                    let w = args.workload.clone();
                    let sh = Rc::new(Shared {
                        get: Sampler::new(&w.distribution.get, w.records),
                        put: Sampler::new(&w.distribution.put, w.records),
                        w,
                        weights,
                        total,
                        inserted,
                        left: Cell::new(mine),
                        aggs: RefCell::new(vec![Agg::default(); OPS.len()]),
                        measure,
                    });
                    let rt = runtime()?;
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&rt, async {
                        let mut hs = Vec::new();
                        for c in 0..conns {
                            let seed = seed ^ ((t as u64) << 32) ^ c as u64;
                            hs.push(tokio::task::spawn_local(run_connection(
                                sh.clone(),
                                args.host.clone(),
                                args.shards.clone(),
                                args.pipeline,
                                seed,
                            )));
                        }
                        for h in hs {
                            h.await.map_err(|e| e.to_string())??;
                        }
                        Ok::<(), String>(())
                    })?;
                    let out = sh.aggs.borrow().clone();
                    Ok(out)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().map_err(|_| "a client thread panicked".to_string()).and_then(|r| r)).collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut all = vec![Agg::default(); OPS.len()];
    for r in results {
        for (a, b) in all.iter_mut().zip(r?) {
            a.count += b.count;
            a.errors += b.errors;
            a.misses += b.misses;
            a.hist.merge(&b.hist);
        }
    }
    Ok((all, secs))
}

fn run(args: &Args) -> Result<Value, String> {
    let w = &args.workload;
    let t0 = Instant::now();
    let mut load_errors = 0;
    if args.load {
        let rt = runtime()?;
        let conns = args.connections.clamp(1, 64) as u64;
        load_errors = tokio::task::LocalSet::new().block_on(&rt, async {
            let mut hs = Vec::new();
            for c in 0..conns {
                hs.push(tokio::task::spawn_local(load_part(args.host.clone(), w.clone(), c, conns, w.seed ^ c)));
            }
            let mut errors = 0;
            for h in hs {
                errors += h.await.map_err(|e| e.to_string())??;
            }
            Ok::<u64, String>(errors)
        })?;
    }
    let load_secs = t0.elapsed().as_secs_f64();
    let inserted = Arc::new(AtomicU64::new(0));
    if args.warmup > 0 {
        phase(args, args.warmup, false, &inserted, w.seed ^ 0x7761_726d)?;
    }
    let cpu0 = cpu_time::ProcessTime::now();
    let (aggs, secs) = phase(args, w.operations, true, &inserted, w.seed)?;
    let client_cpu = cpu0.elapsed().as_secs_f64();
    let mut per_op = Map::new();
    let mut all = Histogram::default();
    let (mut ops, mut errors, mut misses) = (0u64, 0u64, 0u64);
    for (i, a) in aggs.iter().enumerate() {
        if a.count == 0 {
            continue;
        }
        ops += a.count;
        errors += a.errors;
        misses += a.misses;
        all.merge(&a.hist);
        per_op.insert(
            OPS[i].to_string(),
            json!({"count": a.count, "errors": a.errors, "misses": a.misses,
                   "latency_us": {"p50": a.hist.quantile(0.5) as f64 / 1e3, "p99": a.hist.quantile(0.99) as f64 / 1e3, "mean": a.hist.mean() / 1e3}}),
        );
    }
    Ok(json!({
        "host": args.host, "shards": args.shards, "connections": args.connections, "pipeline": args.pipeline,
        "client_threads": args.threads, "records": w.records, "load": {"seconds": load_secs, "errors": load_errors},
        "warmup_operations": args.warmup,
        "run": {"operations": ops, "seconds": secs, "throughput_ops": if secs > 0.0 { ops as f64 / secs } else { 0.0 },
                "errors": errors, "misses": misses, "client_cpu_seconds": client_cpu,
                "latency_us": {"p50": all.quantile(0.5) as f64 / 1e3, "p99": all.quantile(0.99) as f64 / 1e3, "mean": all.mean() / 1e3}},
        "per_op": per_op,
    }))
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cosine-resp-bench: {e}");
            std::process::exit(2);
        }
    };
    match run(&args) {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("cosine-resp-bench: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replies_and_waits_for_whole_ones() {
        let b = b"+OK\r\n$3\r\nabc\r\n$-1\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n-ERR x\r\n:5\r\n";
        let mut at = 0;
        let mut kinds = Vec::new();
        while let Some((end, r)) = parse(b, at).expect("valid") {
            kinds.push(r);
            at = end;
        }
        assert_eq!(at, b.len());
        assert!(kinds == [Reply::Ok, Reply::Ok, Reply::Nil, Reply::Ok, Reply::Error, Reply::Ok]);
        assert!(parse(b"$3\r\nab", 0).expect("valid").is_none(), "a bulk string cut short is incomplete");
        assert!(parse(b"*2\r\n$1\r\na\r\n", 0).expect("valid").is_none(), "an array cut short is incomplete");
    }

    #[test]
    fn keys_are_the_workload_size_and_never_end_with_nul() {
        let k = key(7, 24);
        assert_eq!(k.len(), 24);
        assert_ne!(k.last(), Some(&0));
        assert_ne!(key(1, 16), key(2, 16));
        assert_ne!(key(empty_index(0, 10), 16), key(0, 16));
        let mut a = Vec::new();
        push_keyed(&mut a, b"SET", 3, 20, &[b"xyz"]);
        let mut b = Vec::new();
        push_command(&mut b, &[b"SET", &key(3, 20), b"xyz"]);
        assert_eq!(a, b, "the allocation-free encoder writes what the plain one does");
    }
}
