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
from cost_models.design import Design, allowed_classes
from cost_models.evaluate import NodeEval, evaluate_designs, workload_partitions
from cost_models.phi import PhiTable
from render.config import LocalDesign, engine_sections, local_entry
from solver.space import grid_for
from specs.schema import Spec
from specs.vocab import WalSync

#: Block sizes the local pick searches besides the spec's ``design.block_bytes`` (default 4 and
#: 32 KiB, a cloud-solve speed compromise: each size multiplies the solver's grid). In the ranking of
#: docs/journal/s22-s30.md §23.6 the model's best design of every workload's set was a 1 KiB-block neighbour
#: of the pick, outside the spec's grid, and on YCSB B and C it also measured best. Not below 1 KiB:
#: the block-read CPU is measured on 232 B to 32 KiB blocks (measure.calibrate.plan.BLOCK_SIZE_STEPS,
#: cost_models.cpu.block_read_shape), but its 464-byte point is not yet reliable — calibrate-39's
#: came out below its 232-byte one, and 464-byte blocks ran 1.16-1.30x below prediction where 232 B
#: and 1-32 KiB held within 0.89-1.15x; with the floor at 256 B the picks of YCSB B and D went to
#: 464-byte blocks and ran 1.73x and 1.36x below prediction (§36.3). Under the earlier power law
#: the 256-byte neighbour of a 1 KiB pick measured best on tmpfs C and at 16,000 IOPS on A and F
#: (§35.2-35.3).
LOCAL_BLOCK_BYTES = (1024, 2048, 4096, 8192, 16384, 32768)


def best_design(
    spec: Spec,
    n_keys: int,
    memory_bytes: float,
    threads: int,
    device: DeviceModel = LOCAL_DEVICE,
    grown_keys: float | None = None,
    phi: PhiTable | None = None,
) -> tuple[Design, LocalDesign]:
    """(design, solution-style design entry) maximizing the node's throughput.

    ``device`` is the storage: this machine's own (no rate limit; a block
    read costs the calibrated CPU) or a volume (its IOPS, MiB/s and read
    latency, as the engine's device mode emulates). ``threads`` clients run on
    at most this machine's cores. ``grown_keys``: the most keys the node holds while it
    runs (a run's inserts grow the store): each design is scored at the worse of ``n_keys``
    and ``grown_keys``, so a design whose last level the inserts overflow is scored with the
    level they add (the ranking's YCSB E pick sat exactly at a level's capacity: docs/journal/s22-s30.md §25).
    """
    blocks = tuple(sorted(set(spec.design.block_bytes) | set(LOCAL_BLOCK_BYTES)))
    grid = replace(grid_for(spec), blocks=blocks)
    batch = grid.node_designs(memory_bytes, n_keys * spec.workload.entry_bytes)
    cores = usable_cores(threads, cpu_count())

    def scored(n: float) -> tuple[np.ndarray, NodeEval]:
        wl = replace(spec.workload, entries=int(n))
        ne = evaluate_designs(batch, wl, n, memory_bytes, workload_partitions(wl), model=spec.cost_model, phi=phi)
        return ne.throughput(wl, device.iops, threads, cores=cores, device=device), ne

    x, ne = scored(n_keys)
    if grown_keys is not None and grown_keys > n_keys:
        x = np.minimum(x, scored(grown_keys)[0])
    allowed = allowed_classes(ne.layout.cls, spec.design.classes)
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
    wal_sync: WalSync = WalSync.GROUP_COMMIT,
) -> tuple[dict[str, Any], LocalDesign]:
    """engine.toml sections of the best local design, and its design entry."""
    _, entry = best_design(spec, n_keys, memory_bytes, threads, device)
    wl = spec.workload
    secs = engine_sections(
        entry, wl.key_bytes, wl.value_bytes, wl.operations, name or f"cosine for {spec.name}", wal_sync=wal_sync
    )
    secs["algorithms"]["threads"] = threads
    return secs, entry
