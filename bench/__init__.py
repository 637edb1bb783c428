"""Running the Rust engine and the benchmark scripts (kept out of the test paths)."""
