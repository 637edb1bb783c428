"""The technical report's Sec. 3 worked example ("celebrity tweets"), end to end
(studies/celebrity.py; the full table is `python -m bench.celebrity`, BENCHMARKS.md).

Each model picks its design on one 16 GB AWS VM; the engine, run at 10^6 records
(the report's one-in-a-million hot keys: one hot key, every memory ratio kept),
measures which pick costs fewer block I/Os. It measures what the
distribution-aware model predicts — its pick is cheaper — and the opposite of
what the worst-case model predicts; the report's own two designs rank the same
way under each model as the report says.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cost_models.design import DesignBatch
from cost_models.evaluate import evaluate_designs
from cost_models.pricing.catalog import load_catalog
from specs.schema import load_spec
from specs.vocab import COST_MODELS, CostModel
from studies.celebrity import REPORT_DESIGNS, SPEC, VM, evaluate, node_memory, pick, report_design

DA, WC = CostModel.DISTRIBUTION_AWARE, CostModel.WORST_CASE
#: Engine runs of the test: the bench runs 4x the operations (BENCHMARKS.md).
RECORDS, OPERATIONS = 1_000_000, 100_000


@pytest.fixture(scope="module")
def setting():
    spec = load_spec(SPEC)
    return spec, load_catalog(spec.pricing).vm(*VM)


def test_report_designs_under_both_models(setting):
    """The report's two designs, rebuilt from its memory split, rank under each model as the report says;
    the worst-case figure of the report's worst-case pick (40e9) is reproduced, the others are not (docs/model.md)."""
    spec, vm = setting
    mem = node_memory(spec, vm)
    assert mem == pytest.approx(16e9, rel=1e-5)
    rows = {}
    for rd in REPORT_DESIGNS:
        d = DesignBatch.of([report_design(spec, rd, mem)])
        ev = {m: evaluate_designs(d, spec.workload, spec.workload.entries, mem, model=m) for m in COST_MODELS}
        assert all(int(e.layout.Y[0]) == 0 and bool(e.layout.feasible[0]) for e in ev.values()), rd.label
        rows[rd.label] = {m: float(e.io_total[0]) * spec.workload.operations_per_month for m, e in ev.items()}
    wc_pick, da_pick = (rows[rd.label] for rd in REPORT_DESIGNS)
    assert wc_pick[WC] == pytest.approx(40e9, rel=0.05)  # the report: 40e9
    assert wc_pick[WC] < da_pick[WC]  # the report: 40e9 < 54e9
    assert da_pick[DA] < wc_pick[DA]  # the report: 19e9 < 33e9


def test_each_model_prefers_its_pick_and_the_engine_agrees_with_the_distribution_aware_one(setting):
    spec, vm = setting
    picks = {m: pick(spec, vm, m) for m in COST_MODELS}
    assert picks[DA] != picks[WC]
    # the two engine runs side by side (block counts do not depend on the timing)
    with ThreadPoolExecutor(max_workers=len(picks)) as ex:
        futures = {m: ex.submit(evaluate, spec, vm, d, RECORDS, OPERATIONS, f"test-{m}") for m, d in picks.items()}
        rows = {m: f.result() for m, f in futures.items()}
    # each model ranks its own pick first (both rank the same two designs)
    assert rows[DA].model_io[DA] < rows[WC].model_io[DA]
    assert rows[WC].model_io[WC] < rows[DA].model_io[WC]
    # the engine: the distribution-aware pick costs fewer blocks per operation
    assert rows[DA].engine_io < rows[WC].engine_io, {m: r.engine_io_per_op for m, r in rows.items()}
    for m, r in rows.items():
        # the distribution-aware model is within 25% of the engine; the worst case is off by over 4x
        assert r.engine_model_io[DA] == pytest.approx(r.engine_io, rel=0.25), (m, r.engine_io_per_op)
        assert r.engine_model_io[WC] > 4 * r.engine_io, (m, r.engine_io_per_op)
