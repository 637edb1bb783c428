"""`cosine calibrate`: measure the CPU model's terms on the Rust engine (paper Algorithm 1, extended).

What is measured, and how (docs/model.md, "CPU and throughput"):

* **CPU seconds per operation** of each (design class, operation), timed
  directly: the driver threads' own CPU time (the kernel's schedstat) over the
  operations, on a warm engine whose block cache holds all the data (the
  bench writes the buffer out and reads every block once first), so the run
  reads no blocks. Writes run on that engine too, as many as fit in the
  buffer, so no flush or merge runs beside them. Two data sizes.
* **phi** of each (class, operation): Eq. 2 on the speed-up from 1 to the
  machine's cores on the same cached runs (Algorithm 1, averaged over the
  sizes). The speed-up is taken over the time each driver thread did not
  spend waiting for a CPU held by another process (schedstat's run-queue
  wait), which on a quiet machine is all of it.
* **Ranges**: CPU = a + scan length x r per tree class, N x k + scan length x
  r for the hash log (its index has no order: every scan walks all N keys),
  by least squares over two scan lengths and two sizes.
* **Block reads** (the per-block and per-byte CPU of reading a block): least
  squares over the runs that read blocks — the class designs as they are, on
  single-operation and mixed (YCSB A, B, D, F) workloads, 1 thread — of the
  CPU each operation spent beyond its cached CPU, against its blocks read.
* **Background** (flush/merge CPU per block, fixed and per byte, and on the
  hash log per entry of the block: its index update): least squares of the
  background thread's CPU against the flush and merge blocks, over every run
  that wrote.
* **Memtable**: a search's CPU per doubling of the memtable from gets the
  memtable answers (two memtables), an insert's from cached blind writes at
  two memtables (SMALL_MEMTABLE runs write 1/8 as much).

Nothing is clamped: a fit that wants a value at or past a bound (phi outside
(0, 1], a time that is not positive) stops the calibration with a message
(:class:`CalibrationError`). The single-operation runs of the loaded designs
are kept as a check of the model on what it was not fitted to alone; Fig. 4B
(:func:`measure.calibrate.fig4b.fig4b`) checks the end-to-end prediction on mixed workloads at a size
the calibration did not use.

On a 2-core machine only eta = 1, 2 can be measured; Amdahl's law with the
learned phi extrapolates to a VM's cores, as Algorithm 1 does. The table
records the machine and the date.

The package, a module per stage: :mod:`.plan` (the runs), :mod:`.samples` (running them),
:mod:`.fit` (the terms), :mod:`.table` (phi.yaml), :mod:`.checks` (the model against the runs),
:mod:`.operation` (`--operation`), :mod:`.calibration` (the command). Fig. 4B is :mod:`.fig4b`,
the host probe :mod:`measure.host_speed`, the warm-up and run lengths :mod:`measure.cycle`.
"""

from __future__ import annotations

from specs.errors import InputError


class CalibrationError(InputError):
    """A fit wanted a value at or past a bound: the table would not be a measurement."""
