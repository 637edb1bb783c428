"""The design tables' shortcuts change no column (solver.tables):

* a memory size whose split evaluates every design as the previous one's reuses that evaluation
  (``same_evaluation``: small shards on large nodes), compared with evaluating every memory size;
* a preset is evaluated on every memory size at once, compared with evaluating its one design on
  each VM type and volume alone (cost_models.cpu.node_throughput);
* every VM type and volume of one evaluation share its designs' demands (ycsb_a's full tables were
  compared column by column, field by field, with the code before: BENCHMARKS.md §16)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from cost_models.cloud import GIB, effective_iops
from cost_models.cpu import Demands, NodeShape
from cost_models.design import DesignBatch, preset
from cost_models.evaluate import node_io, shape_overwrites, tree_puts, workload_partitions
from cost_models.io_model import structure, window_tables
from cost_models.layout import level_shape, split_memory
from cost_models.phi import load_phi
from cost_models.pricing.catalog import load_catalog
from cost_models.robust import perturbed_workload
from cost_models.serving import served_throughput, spec_served
from solver.space import fanout_nodes, grid_for
from solver.tables import build as TB
from solver.tables import context as TC
from solver.tables import grid_eval as TG
from solver.tables.scoring import ScoreDemands, design_demands, design_demands_reusing, vm_caps
from specs.schema import parse_spec
from specs.vocab import PRESETS

SPEC = """
name: reuse
workload:
  entries: 20000000
  key_bytes: 24
  value_bytes: 1000
  operations: {{get: 0.5, update: 0.3, insert: 0.1, range: 0.1}}
  distribution: {{get: {{kind: zipfian, theta: 0.99}}, put: {{kind: zipfian, theta: 0.99}}}}
budget: {{monthly_usd: 5000, range: [10, 50000]}}
providers: [aws]
design: {{size_ratio: [2, 16], max_cluster_size: 400, memory_step: {step}}}
{robust}
"""


def _job(spec_text: str, k: int) -> dict[str, list[TC.Context]]:
    spec = parse_spec(spec_text)
    cat = load_catalog()
    vms = cat.vms["aws"]
    return TB.shard_job(
        (
            (spec,),
            cat,
            grid_for(spec),
            spec.workload.entries / k,
            vms,
            workload_partitions(spec.workload),
            PRESETS,
            load_phi(),
        )
    )[0]


@pytest.mark.parametrize(
    ("robust", "step", "compressible"),
    [("", 0.1, False), ("robustness: {noise: 0.1}", 0.1, False), ("", 0.5, False), ("", 0.1, True)],
    ids=["plain", "noisy", "coarse", "codecs"],
)
def test_reused_evaluations_give_the_same_columns(
    robust: str, step: float, compressible: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(With coarse buffer steps, x6, neighbouring memory sizes offer the same designs; compressible
    data: every design once per codec pair, grid_eval.with_codecs.)"""
    text = SPEC.format(robust=robust, step=step)
    if compressible:
        text = text.replace("  value_bytes: 1000\n", "  value_bytes: 1000\n  compressibility: 0.5\n")
        assert "compressibility" in text
    for k in (1, 400):  # 20 GB per node: small nodes differ; 50 MB: every node holds it all
        fast = _job(text, k)
        monkeypatch.setattr(TB, "REUSE_EQUAL_SPLITS", False)
        slow = _job(text, k)
        monkeypatch.setattr(TB, "REUSE_EQUAL_SPLITS", True)
        assert fast[TC.COSINE] and fast == slow  # every field of every column, exactly


def test_presets_on_every_memory_at_once_match_one_by_one() -> None:
    spec = parse_spec(SPEC.format(robust="robustness: {noise: 0.1}", step=0.1))
    wl = spec.workload
    k = 8
    s = wl.entries / k
    cols = _job(SPEC.format(robust="robustness: {noise: 0.1}", step=0.1), k)
    parts = workload_partitions(wl)
    wls = TG.workloads(spec)
    wins = [window_tables(parts, w.operations, s) for w in wls]
    checked = 0
    for name in PRESETS:
        d = preset(name)
        batch = DesignBatch.of([d])
        shape = level_shape(
            batch,
            s,
            wl.key_bytes,
            wl.value_bytes,
            overwrites=shape_overwrites(spec),
            puts=tree_puts(spec.cost_model, parts, wl, s, wins[0]),
        )
        sts = [
            structure(split_memory(shape, batch, np.inf), parts, w.operations, w.scan_length, win[0])
            for w, win in zip(wls, wins, strict=True)
        ]
        for c in cols[name]:
            lay = split_memory(shape, batch, c.vm.memory_gib * GIB * (1 - spec.design.memory_headroom))
            io, io_p = (
                node_io(spec.cost_model, lay, parts, w, win, st) for w, win, st in zip(wls, wins, sts, strict=True)
            )
            iops = effective_iops(c.storage.iops, c.storage.mibps, float(d.block_bytes))
            # served (issue 48): a node of k shards whose scans reach the next breakpoint's nodes
            # (solver.space.fanout_nodes), capped by its VM's network (solver.tables.scoring.vm_caps)
            pw = perturbed_workload(spec)
            f = fanout_nodes(spec, s)
            x0 = served_throughput(
                load_phi(), io, NodeShape.of(lay), spec_served(spec, wl, f), wl.scan_length, iops, c.vm.vcpu
            )
            xp0 = served_throughput(
                load_phi(), io_p, NodeShape.of(lay), spec_served(spec, pw, f), pw.scan_length, iops, c.vm.vcpu
            )
            xs, xps = vm_caps(spec, c.vm, s, x0, xp0)
            x, xp = xs[0], xps[0]
            assert c.throughput == pytest.approx(x, rel=1e-12) and c.perturbed == pytest.approx(xp, rel=1e-12)
            checked += 1
    assert checked > 20


def _same_eval(a: TG.GridEval, b: TG.GridEval) -> None:
    """Every array of two evaluations equal, exactly (the I/O per operation of both workloads,
    their cascades and the layout facts)."""
    for x, y in ((a.io, b.io), (a.io_p, b.io_p)):
        assert (x is None) == (y is None)
        if x is None or y is None:
            continue
        for op in x.per_op():
            np.testing.assert_array_equal(getattr(x, op), getattr(y, op), err_msg=op)
        np.testing.assert_array_equal(x.buffered_share(), y.buffered_share())
        assert (x.cascades is None) == (y.cascades is None)
        if x.cascades is not None and y.cascades is not None:
            for f in ("rate", "blocks", "slack_puts"):
                np.testing.assert_array_equal(getattr(x.cascades, f), getattr(y.cascades, f), err_msg=f)
    for f in ("total", "total_p", "ok", "need_gib", "block", "L", "Y", "hot_share", "offsets"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for f in ("cls", "block_bytes", "buffered"):
        np.testing.assert_array_equal(getattr(a.shape, f), getattr(b.shape, f), err_msg=f)
    assert [d.size for d in a.batches] == [d.size for d in b.batches]


@pytest.mark.parametrize("robust", ["", "robustness: {noise: 0.1}"], ids=["plain", "noisy"])
@pytest.mark.parametrize("k", [1, 40, 400])
def test_a_larger_memory_evaluates_only_the_designs_that_change(robust: str, k: int) -> None:
    """Under overwrites the buffer ladder grows with the memory (no two memory sizes offer the same
    designs, so ``same_evaluation`` never holds); a memory size takes the designs that evaluate
    alike on the last one from its evaluation (grid_eval.evaluate_splits ``prev``), and evaluates
    the rest: every array equal to evaluating all of them, and most rows reused."""
    spec = parse_spec(SPEC.format(robust=robust, step=0.1))
    assert TG.overwrites(spec)
    grid = grid_for(spec)
    s = spec.workload.entries / k
    parts = workload_partitions(spec.workload)
    wls = TG.workloads(spec)
    wins = [window_tables(parts, w.operations, s) for w in wls]
    mems = sorted({vm.memory_gib for vm in load_catalog().vms["aws"]})
    prep = TG.shard_prep(spec, grid, s, parts, wins, max(mems) * GIB)
    phi = load_phi()
    prev: TG.Evaluated | None = None
    was: tuple[np.ndarray, ScoreDemands] | None = None
    reused = rows = 0
    for mem in mems:
        splits = TG.grid_splits(spec, grid, s, mem, prep)
        full = TG.evaluate_splits(spec, s, parts, splits, prep, phi)
        if full is None:
            continue
        for sp in splits:
            got = TG._reusable(sp, prev, s)
            reused += 0 if got is None else got[1].size
            rows += sp.sel.size * sp.m
        fast = TG.evaluate_splits(spec, s, parts, splits, prep, phi, prev)
        assert fast is not None
        _same_eval(fast, full)
        # and the designs' demands: the reused rows' taken from the last memory size's
        ok = np.flatnonzero(fast.ok)
        dem = design_demands_reusing(spec, fast, ok, was)
        for a, b in zip(dem, design_demands(spec, full, ok), strict=True):
            assert (a is None) == (b is None)
            if a is None or b is None:
                continue
            for f in fields(Demands):
                x, y = getattr(a, f.name), getattr(b, f.name)
                assert (x is None) == (y is None), f.name
                if x is not None:
                    np.testing.assert_array_equal(x, y, err_msg=f.name)
        prev, was = (splits, fast), (ok, dem)
    assert reused > rows / 3, (reused, rows)
