"""Benchmark scripts that print figures for BENCHMARKS.md.

Run each with `python -m bench.<name>`. Nothing outside bench/ imports bench/.
"""
