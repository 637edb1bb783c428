"""solver.tables.scoring.candidates is exact: the columns built from its designs are the columns built by
scoring every design of the grid on every volume (plain, noisy and KL-robust specs; small VMs,
where the volume binds, and large ones, where the CPU does).

Before this test the pruning compared I/O per operation within a design class only; on a 96-vCPU
VM the designs it kept were up to 21% slower than the best of the grid (ycsb_a, aws r5d.24xlarge)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.cloud import GIB, storage_choices
from cost_models.evaluate import workload_partitions
from cost_models.io_model import window_tables
from cost_models.phi import load_phi
from cost_models.pricing.catalog import load_catalog
from solver.space import grid_for
from solver.tables import columns as TCol
from solver.tables import context as TC
from solver.tables import grid_eval as TG
from solver.tables import scoring as TS
from solver.tables import volumes as TV
from specs.schema import parse_spec

#: ycsb_a's workload on one node (where the old pruning lost 18% on a 96-vCPU VM), and a mix of
#: every kind of operation.
SPEC = """
name: pruning
workload:
  entries: {entries}
  key_bytes: {key}
  value_bytes: {value}
  operations: {mix}
  distribution: {{get: {{kind: zipfian, theta: 0.99}}, put: {{kind: zipfian, theta: 0.99}}}}
budget: {{monthly_usd: 5000, range: [10, 50000]}}
providers: [aws]
design: {{size_ratio: [2, 64], max_cluster_size: 4}}
{robust}
"""
YCSB_A = {"entries": 5_000_000, "key": 128, "value": 896, "mix": "{get: 0.5, update: 0.5}"}
MIXED = {
    "entries": 3_000_000,
    "key": 16,
    "value": 200,
    "mix": "{get: 0.4, update: 0.3, insert: 0.1, range: 0.1, empty_get: 0.1}",
}


def _columns(spec_text: str, vcpus: tuple[int, ...]) -> list[tuple[list[tuple], list[tuple]]]:
    spec = parse_spec(spec_text)
    cat = load_catalog()
    grid = grid_for(spec)
    wl = spec.workload
    parts = workload_partitions(wl)
    s = float(wl.entries)
    vms = [vm for vm in cat.vms["aws"] if vm.vcpu in vcpus]
    assert vms, vcpus
    wls = TG.workloads(spec)
    wins = [window_tables(parts, w.operations, s) for w in wls]
    max_mem = max(vm.memory_gib for vm in vms) * GIB * (1 - spec.design.memory_headroom)
    prep = TG.shard_prep(spec, grid, s, parts, wins, max_mem)
    vols = TV.shard_volumes(spec, cat, grid, vms, s, grid.blocks)
    out = []
    for vm in vms:
        ge = TG.evaluate_splits(spec, s, parts, TG.grid_splits(spec, grid, s, vm.memory_gib, prep), prep, load_phi())
        assert ge is not None
        ge = TG.with_codecs(spec, grid, ge)
        thr = TV.volume_thresholds([vols[vm.key]])
        cand, bucket = TS.candidates(spec, ge, thr, vm.vcpu)
        every = np.flatnonzero(ge.ok)
        b_every = np.searchsorted(thr * (1 + 1e-9), ge.need_gib, side="left")[every]
        every, b_every = every[b_every < thr.size], b_every[b_every < thr.size]
        assert 0 < cand.size < every.size

        def key(ctxs: list[TC.Context]) -> list[tuple]:
            # a column as the MIP sees it (designs of equal scores are interchangeable)
            return sorted(
                (c.storage.product, c.storage.disks, c.storage.gib, round(c.cost_month, 9))
                + (round(c.throughput, 6), round(c.perturbed, 6))
                for c in TCol.prune_columns(ctxs)
            )

        pruned = key([c.context() for c in TCol.columns_for_vm(spec, vm, s, vols[vm.key], ge, cand, bucket, thr)])
        full = key([c.context() for c in TCol.columns_for_vm(spec, vm, s, vols[vm.key], ge, every, b_every, thr)])
        out.append((pruned, full))
    return out


@pytest.mark.parametrize("robust", ["", "robustness: {noise: 0.1}", "robustness: {kl_radius: 0.5}"])
@pytest.mark.parametrize("workload", [YCSB_A, MIXED], ids=["ycsb_a", "mixed"])
def test_pruned_designs_give_every_column_of_the_full_grid(workload: dict, robust: str) -> None:
    for pruned, full in _columns(SPEC.format(**workload, robust=robust), vcpus=(2, 96)):
        assert pruned == full


@pytest.mark.parametrize("robust", ["", "robustness: {noise: 0.1}"])
def test_one_design_columns_are_picked_then_pruned(robust: str) -> None:
    """The presets' columns (one design per VM type, pruned as arrays) are those of _picked on each
    VM type then prune_columns: random scores with ties, repeats, dead volumes and NaNs."""
    spec = parse_spec(SPEC.format(robust=robust, **YCSB_A))
    cat = load_catalog()
    rng = np.random.default_rng(7)
    vms = cat.vms["aws"][:4] + cat.vms["gcp"][:3]
    per_vm = []
    for k, vm in enumerate(sorted(vms, key=lambda v: v.usd_per_hour)):  # dearer VM types faster
        choices = storage_choices(cat, vm, [50.0, 400.0])
        m = len(choices)
        xe = rng.integers(0, 6, size=(m, 1)) * 1e4 * (1 + k)  # ties, repeats, dead volumes
        xe = np.where(rng.random((m, 1)) < 0.05, np.nan, xe)
        with np.errstate(invalid="ignore"):  # 0 x inf: a NaN too
            xp = (
                xe
                if not robust
                else np.where(rng.random((m, 1)) < 0.5, xe, xe * rng.choice([0.5, 1.2, np.inf, np.nan]))
            )
        fits = rng.random((m, 1)) < 0.85
        per_vm.append((vm, choices, int(rng.integers(0, 50)), fits, xe, xp))
    picked = []
    for vm, choices, row, fits, xe, xp in per_vm:
        picked += TCol.picked(spec, vm, 1e6, choices, None, np.array([row]), fits, xe, xp, "rocksdb")
    old = [(c.vm, c.storage, c.throughput, c.perturbed, c.row) for c in TCol.prune_columns(picked)]
    new = [
        (c.vm, c.storage, c.throughput, c.perturbed, c.row)
        for c in TCol.one_design_columns(1e6, None, "rocksdb", per_vm)
    ]
    assert len(old) > 5 and new == old


@pytest.mark.parametrize("robust", ["", "robustness: {noise: 0.1}", "robustness: {kl_radius: 0.5}"])
def test_shared_cpu_scores_give_the_same_columns(robust: str) -> None:
    """columns_for_vm with the CPU part of the throughput computed once per core count
    (cpu_scores, then each volume's caps) gives, bit for bit, the columns of scoring each VM type
    from scratch; a preset's rows taken from it too; and the candidates found from every feasible
    design's shared scores are those found alone."""
    spec = parse_spec(SPEC.format(**YCSB_A, robust=robust))
    cat = load_catalog()
    grid = grid_for(spec)
    wl = spec.workload
    parts = workload_partitions(wl)
    s = float(wl.entries) / 3
    vms = cat.vms["aws"][:4]  # scored on one memory size's designs: only the cores differ
    wls = TG.workloads(spec)
    wins = [window_tables(parts, w.operations, s) for w in wls]
    prep = TG.shard_prep(spec, grid, s, parts, wins, vms[0].memory_gib * GIB * (1 - spec.design.memory_headroom))
    vols = TV.shard_volumes(spec, cat, grid, vms, s, grid.blocks)
    ge = TG.evaluate_splits(spec, s, parts, TG.grid_splits(spec, grid, s, vms[0].memory_gib, prep), prep, load_phi())
    assert ge is not None
    checked = 0
    for vm in vms:
        thr = TV.volume_thresholds([vols[vm.key]])
        cand, bucket = TS.candidates(spec, ge, thr, vm.vcpu)
        # the candidates from the feasible designs' shared demands and CPU scores (shard_job's way)
        ok = np.flatnonzero(ge.ok)
        dem_ok = TS.design_demands(spec, ge, ok)
        at = np.searchsorted(ok, TS.usable(ge, thr)[0])
        from_shared = TS.candidates(
            spec, ge, thr, vm.vcpu, TS.take_demands(dem_ok, at), TS.take_scores(TS.cpu_scores(dem_ok, vm.vcpu), at)
        )
        assert all(np.array_equal(a, b) for a, b in zip(from_shared, (cand, bucket), strict=True))
        dem = TS.design_demands(spec, ge, cand)
        rows = np.repeat(cand, 2)[::-1].copy()  # scores of rows taken from the shared ones, repeats too
        cpu = TS.cpu_scores(dem, vm.vcpu)
        pos = np.searchsorted(cand, rows)
        taken = TS.take_scores(cpu, pos)
        iops = np.full((3, rows.size), 4000.0)
        assert all(
            np.array_equal(a, b, equal_nan=True)
            for a, b in zip(
                TS.node_scores(spec, ge, rows, iops, vm.vcpu, TS.take_demands(dem, pos), taken),
                TS.node_scores(spec, ge, rows, iops, vm.vcpu),
                strict=True,
            )
        )

        def key(cols: list[TCol.Column]) -> list[tuple]:
            return [(c.storage, c.throughput, c.perturbed, c.row) for c in cols]

        shared = TCol.columns_for_vm(spec, vm, s, vols[vm.key], ge, cand, bucket, thr, dem=dem, cpu=cpu)
        alone = TCol.columns_for_vm(spec, vm, s, vols[vm.key], ge, cand, bucket, thr)
        assert shared and key(shared) == key(alone)
        checked += 1
    assert checked >= 2
