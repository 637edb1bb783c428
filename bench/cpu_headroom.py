"""Which designs tie on a device-bound node, and what their CPU alone would allow (docs/journal/s31-s42.md §35.1).

    .venv/bin/python -m bench.cpu_headroom [--spec specs/ycsb_a.yaml] [--vm aws:r5d.large]
        [--keys 641025.64]

On a node its volume holds at IOPS / (blocks per operation), every design that moves the fewest
blocks per operation is exactly as fast; the solver's tables carry the one whose CPU alone allows
the most (``solver.tables.columns.picked``). This prints, per design class, the best such design: its
blocks per operation and its throughput at unlimited IOPS on the VM's vCPUs (the CPU bounds, write
stalls and background thread only), for the spec's grid on one VM type and shard size, evaluated
as ``measure.local.best_design`` evaluates a node (the exact model, one memory split per layout of
the grid). Not a test; no engine run.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from cost_models.cloud import usable_bytes
from cost_models.design import allowed_classes
from cost_models.evaluate import evaluate_designs, workload_partitions
from cost_models.pricing.catalog import load_catalog, parse_vm_ref
from solver.space import grid_for
from specs.errors import InputError
from specs.schema import load_spec
from specs.vocab import DesignClass

#: Relative tolerance within which two designs' blocks per operation count as the fewest.
SAME_BLOCKS = 1e-9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, default=Path("specs/ycsb_a.yaml"))
    ap.add_argument("--vm", default="aws:r5d.large", help="PROVIDER:TYPE")
    ap.add_argument("--keys", type=float, default=641025.641025641, help="keys per node (the shard)")
    a = ap.parse_args()
    if not (math.isfinite(a.keys) and a.keys >= 1):
        ap.exit(2, f"{ap.prog}: --keys must be a finite number >= 1\n")
    try:
        spec = load_spec(a.spec)
        provider, name, _ = parse_vm_ref(a.vm)
        vm = load_catalog(spec.pricing).vm(provider, name)
    except InputError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    wl = replace(spec.workload, entries=int(a.keys))
    memory = usable_bytes(vm.memory_gib, spec.design.memory_headroom)
    batch = grid_for(spec).node_designs(memory, a.keys * wl.entry_bytes)
    ne = evaluate_designs(batch, wl, a.keys, memory, workload_partitions(wl), model=spec.cost_model)
    cpu_only = ne.throughput(wl, math.inf, vm.vcpu, cores=vm.vcpu)
    blocks = ne.io.total(wl.operations)
    ok = ne.layout.feasible & allowed_classes(ne.layout.cls, spec.design.classes)
    fewest = blocks[ok].min()
    tied = ok & (blocks <= fewest * (1 + SAME_BLOCKS))
    print(f"{spec.name}: {vm.provider}:{vm.name} ({vm.vcpu} vCPUs, {vm.memory_gib:g} GiB), {a.keys:,.0f} keys a node")
    print(f"fewest blocks per operation {fewest:.4g}: {int(tied.sum()):,} of {int(ok.sum()):,} designs")
    for code in np.unique(ne.layout.cls[tied]):
        rows = np.flatnonzero(tied & (ne.layout.cls == code))
        i = int(rows[np.argmax(cpu_only[rows])])
        d = batch.design(i, threads=vm.vcpu, name="best")
        print(
            f"  {DesignClass.of_code(int(code)):7s} CPU alone {cpu_only[i]:>12,.0f} ops/s"
            f"  (T {d.T}, K {d.K}, Z {d.Z}, {d.bloom_bits:g} bits per key, {d.block_bytes:,} B blocks)"
        )


if __name__ == "__main__":
    main()
