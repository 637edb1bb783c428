//! `cosine-bench --config engine.toml --workload workload.json --dir DATA_DIR
//! [--json] [--records N] [--ops N] [--threads N] [--engine cosine]`
//!
//! Without arguments it runs the default workload (100k records, 50 % zipfian
//! gets / 50 % uniform updates) on `./engine.toml` in `target/cosine-bench-data`.
#![deny(unsafe_code, clippy::unwrap_used)]

/// The process's allocator. With glibc malloc a writer stalled on the arena lock while the
/// background thread freed a flushed memtable (~100,000 entries allocated by another
/// thread): a single-thread cached update run spent 11-23 % of its time off the CPU, the
/// background thread's CPU in the run matched the writer's lost time, and `LD_PRELOAD` of
/// another allocator removed it (docs/journal/s22-s30.md §23.1). RocksDB is built with jemalloc for
/// the same reason; mimalloc builds from the registry with only a C compiler.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = cosine_bench::cli::main_with_args(&args) {
        eprintln!("cosine-bench: {e}");
        std::process::exit(2);
    }
}
