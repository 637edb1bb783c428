"""Rendering: a solution (or a preset) -> a Rust engine workspace (Algorithm 3, threads from phi, engine.toml)."""
