"""The technical report's Sec. 3 worked example ("celebrity tweets").

10^10 entries, 50 x 10^9 operations, 80% reads / 20% writes; 10,000 keys are
1000x more likely to be written and 8 million times more likely to be read
(p_put = 1e7/(1e7+1e10) = 0.000999, p_get = 8e10/(8e10+1e10) = 0.8889). One
16 GB AWS VM. The report states its model's I/O for two designs: 33e9 for
T=8, K=7, Z=1, M_B=3.2 GB, 10 bits/key and 19e9 for T=32, K=13, Z=1,
M_B=12.8 GB, 2.33 bits/key (FPR 0.31). Entries are 128 B (L=3 and L=2 as the
report says need E_B*584 >= 1e10 and E_B*1056 >= 1e10: 128 B entries), and the
block size is set to 106 KB so the fence pointers take the report's 0.29 GB.
This test records what our model predicts (printed; see the issue note); it
checks only that both designs are feasible and the numbers sane, because the
report's own derivation of 33e9/19e9 is not given.
"""

from __future__ import annotations

from cost_models.design import parse_design
from cost_models.evaluate import evaluate_config
from cost_models.pricing import load_catalog
from specs.schema import parse_spec

SPEC = """
name: celebrity
workload:
  entries: 10000000000
  key_bytes: 16
  value_bytes: 112
  operations: {get: 0.8, update: 0.2}
  distribution:
    get: {kind: skew, hot_fraction: 0.000001, hot_probability: 0.8889}
    put: {kind: skew, hot_fraction: 0.000001, hot_probability: 0.000999}
  operations_per_month: 5.0e10
budget: {monthly_usd: 8000}
providers: [aws]
"""

DESIGNS = {
    "worst-case optimum (report: 33e9)": "T=8,K=7,Z=1,buffer=3.2GB,bloom_bits=10,block=106KB,alloc=uniform",
    "distribution-aware optimum (report: 19e9)": (
        "T=32,K=13,Z=1,buffer=12.8GB,bloom_bits=2.33,block=106KB,alloc=uniform"
    ),
}


def test_celebrity_designs():
    spec = parse_spec(SPEC)
    cat = load_catalog("paper2021")
    vm = cat.vm("aws", "r5d.large")
    for label, d in DESIGNS.items():
        ev = evaluate_config(spec, parse_design(d), vm, 1, catalog=cat)
        total = ev.io_total * 5e10
        print(
            f"\n{label}: L={ev.levels} Y={ev.cold_levels} io/op={ev.io_total:.4f} "
            f"get={ev.io_per_op['get']:.4f} update={ev.io_per_op['update']:.4f} total={total:.3g} I/Os"
        )
        assert ev.feasible, ev.reason
        assert 0 < total < 5e10 * 10
