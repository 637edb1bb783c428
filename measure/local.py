"""The best engine design for one given node (no cloud search).

Used where the hardware is fixed — this machine's benchmarks and the
validation grid: the same design grid as the solver's tables
(``solver.space``), evaluated by the exact model on one node with a memory
budget, threads and a device IOPS figure, and the fastest design rendered as
engine.toml sections. One node's grid is small, so it also searches the block
sizes of ``LOCAL_BLOCK_BYTES`` that a spec's grid leaves out to keep the cloud
search fast.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, DeviceModel, usable_cores
from cost_models.design import Design
from cost_models.evaluate import evaluate_designs, workload_partitions
from render.config import engine_sections, local_entry
from solver.space import grid_for
from specs.schema import Spec
from specs.vocab import DesignClass

#: Block sizes the local pick searches besides the spec's ``design.block_bytes`` (default 4 and
#: 32 KiB, a cloud-solve speed compromise: each size multiplies the solver's grid). In the ranking of
#: BENCHMARKS.md §23.6 the model's best design of every workload's set was a 1 KiB-block neighbour
#: of the pick, outside the spec's grid, and on YCSB B and C it also measured best.
LOCAL_BLOCK_BYTES = (1024, 2048, 4096, 8192, 16384, 32768)


def best_design(
    spec: Spec, n_keys: int, memory_bytes: float, threads: int, device: DeviceModel = LOCAL_DEVICE
) -> tuple[Design, dict]:
    """(design, solution-style design entry) maximizing the node's throughput.

    ``device`` is the storage: this machine's own (no rate limit; a block
    read costs the calibrated CPU) or a volume (its IOPS, MiB/s and read
    latency, as the engine's device mode emulates). ``threads`` clients run on
    at most this machine's cores.
    """
    blocks = tuple(sorted(set(spec.design.block_bytes) | set(LOCAL_BLOCK_BYTES)))
    grid = replace(grid_for(spec), blocks=blocks)
    batch = grid.node_designs(memory_bytes, n_keys * spec.workload.entry_bytes)
    spec_n = replace(spec, workload=replace(spec.workload, entries=int(n_keys)))
    parts = workload_partitions(spec_n.workload)
    ne = evaluate_designs(batch, spec_n.workload, n_keys, memory_bytes, parts, model=spec.cost_model)
    cores = usable_cores(threads, cpu_count())
    x = ne.throughput(spec_n.workload, device.iops, threads, cores=cores, device=device)
    allowed = np.isin(ne.layout.cls, [DesignClass(c).code for c in spec.design.classes])
    x = np.where(allowed, x, 0.0)
    i = int(np.argmax(x))
    d = batch.design(i, threads=threads, name="cosine")
    return d, local_entry(d, ne.layout, i, threads, float(x[i]))


def local_engine_toml(
    spec: Spec,
    n_keys: int,
    memory_bytes: float,
    threads: int,
    device: DeviceModel = LOCAL_DEVICE,
    name: str | None = None,
    wal_sync: str = "group_commit",
) -> tuple[dict[str, Any], dict]:
    """engine.toml sections of the best local design, and its design entry."""
    _, entry = best_design(spec, n_keys, memory_bytes, threads, device)
    wl = spec.workload
    secs = engine_sections(
        entry, wl.key_bytes, wl.value_bytes, wl.operations, name or f"cosine for {spec.name}", wal_sync=wal_sync
    )
    secs["algorithms"]["threads"] = threads
    return secs, entry
