"""Benchmark scripts that print figures for BENCHMARKS.md.

Run each with `python -m bench.<name>`. Nothing outside bench/ imports bench/.
"""

from specs.errors import unwind_on_termination

# A benchmark's process is its own (`python -m bench.<name>` imports this package first): SIGTERM
# and SIGHUP unwind like Ctrl-C, so its scratch data directories are removed and its engine
# processes killed (measure.engine.run_scratch) instead of being left behind.
unwind_on_termination()
