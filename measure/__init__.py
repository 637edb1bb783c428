"""Driving the Rust engine: the runner, the validation grid, calibration (Algorithm 1), the local design."""
