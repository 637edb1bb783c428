"""The bounds of every design knob and run-directory count: the one copy, in the lowest layer.

A spec (``design.size_ratio``, ``design.block_bytes``), a ``--design`` string
(:class:`cost_models.design.Design`) and a solution.json read back
(:mod:`solver.rundir`) are all checked against these numbers.
"""

from __future__ import annotations

#: Size ratio T: at least 2 (a level must outgrow the one above it); at most 1024: the
#: search's own ladder stops at 64 (solver.space.T_LADDER), 1024 leaves room for hand-made
#: designs while K, Z <= T - 1 stay far within the engine's 65,536 runs per level.
MIN_SIZE_RATIO, MAX_SIZE_RATIO = 2, 1024
#: Bloom bits per key: the engine's range (cosine-config: bloom_bits_per_key in [0, 64]);
#: 64 bits per key already give a false-positive rate of 1e-13.
MAX_BLOOM_BITS = 64.0
#: Block bytes: from 64 (smaller blocks hold no entry with its header) to 16 MiB (the
#: engine reads at most 65,536 entries per block). One minimum for specs, designs and
#: solutions (a spec used to refuse blocks under 512 B that a ``--design`` accepted).
MIN_BLOCK_BYTES, MAX_BLOCK_BYTES = 64, 1 << 24
#: Buffer bytes: at most 16 TiB, more memory than any VM of the catalog has (864 GiB).
MAX_BUFFER_BYTES = float(1 << 44)
#: Hash-index bytes per key of a hash log: at most 1 MiB (far above any key + location).
MAX_HASH_INDEX_BYTES = float(1 << 20)
#: Worker threads: the engine's limit (cosine-config: algorithms.threads in 1..=1024).
MAX_THREADS = 1024
#: Entries above this are rejected as absurd (1e15 x 1 KiB = 1 EB).
MAX_ENTRIES = 1e15
#: Most levels a design may have (the engine's limit on hot levels; 2^64 entries need fewer).
MAX_LEVELS = 64
#: Most nodes of a cluster: ``design.max_cluster_size``, a ``--vm`` count, one design entry
#: of a solution.json.
MAX_CLUSTER_SIZE = 1_000_000
#: Most operations per second a spec, a flag or a trace may ask for: a million nodes (the cluster
#: cap) each serving a million operations per second, far above any configuration of the catalog.
MAX_THROUGHPUT_OPS = 1e12
#: Most operations a month a spec may name: MAX_THROUGHPUT_OPS for the longest month (31 days).
MAX_OPERATIONS_PER_MONTH = MAX_THROUGHPUT_OPS * 31 * 86400
#: Longest time a workload trace may span, seconds (ten years of 365.25 days).
MAX_TRACE_SECONDS = 10 * 365.25 * 86400
#: Most copies of the data a spec may ask the solver to consider (``replication.factors``): three
#: replicas in three zones survive a zone and a node lost at once, the usual ceiling of replicated
#: stores (a Raft group of 3 tolerates one failure, of 5 two; cloud regions have three zones).
MAX_REPLICATION_FACTOR = 3
