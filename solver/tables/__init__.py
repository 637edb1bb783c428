"""Precomputed tables: the best engine designs for every (VM type, shard size, volume).

The layout knobs of one node enter no other term of the MIP: a node's design
changes only its own throughput. So the MIP does not need a binary per design:
for every *context* c = (VM type, entries per node, storage volume) we take the
best designs over the whole discretized design grid (exactly, by enumeration)
and give the MIP one integer column per (context, design). Without robustness
that is the one design of highest node throughput; with robustness it is every
design on the Pareto front of (expected-workload throughput, perturbed-workload
throughput), since the robust rule may want any of them (solver.model).

The run structure (windows, presence probabilities, merge costs) does not
depend on memory, so it is computed once per shard size (and workload) and
combined with each VM's memory split (cost_models.io_model.combine).

Storage enters a node's throughput only through the I/Os per second it
sustains at the design's block size (``StorageChoice.effective_iops``), its
MiB/s and the room it has: X = min(X_cpu, IOPS(b)/io, MiB/s/(io b)), with X_cpu
(the CPU bounds, write stalls and background thread on the VM's cores) the
same on every volume. So among designs of one block size, one that needs no
more room, no more I/O per operation and has an X_cpu at least as high
(expected and perturbed) is never worse on any volume: only the designs no
other one dominates so are scored per volume (scoring.candidates, per vCPU
count). Volumes and columns are pruned the same way (cost_models.pareto), so
every pruning step is exact (tests/test_tables_pruning.py: the columns equal
those of scoring every design).

A module per stage of a shard's job (no names re-exported here):

* ``context``: a column (:class:`~solver.tables.context.Context`) and a spec's columns (``Tables``);
* ``grid_eval``: the grid's layouts, their run structures per shard, memory splits and I/O
  (``GridEval``);
* ``scoring``: CPU demands and scores, node throughput on a volume, the exact candidate pruning;
* ``volumes``: each VM type's volumes for a shard and their size buckets;
* ``columns``: per VM type and volume the best design (or front), and the column pruning;
* ``presets``: the presets' one design on every VM type;
* ``build``: the shard jobs, their process pool and the table cache (``build_tables``).
"""
