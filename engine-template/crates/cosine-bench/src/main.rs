//! `cosine-bench --config engine.toml --workload workload.json --dir DATA_DIR
//! [--json] [--records N] [--ops N] [--threads N] [--engine cosine]`
//!
//! Without arguments it runs the default workload (100k records, 50 % zipfian
//! gets / 50 % uniform updates) on `./engine.toml` in `target/cosine-bench-data`.
#![deny(unsafe_code, clippy::unwrap_used)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = cosine_bench::cli::main_with_args(&args) {
        eprintln!("cosine-bench: {e}");
        std::process::exit(2);
    }
}
