"""Random band tables (solver.bottleneck.ColumnTable) for the tests that compare a compiled band search
with its reference: a few VM types, shard sizes and prices, near-equal costs (1e-7 apart) among
them, and SLA terms with and without a support plan (a percent of the spend)."""

from __future__ import annotations

import numpy as np

from cost_models.cloud import SlaTerms
from solver.bottleneck import ColumnTable


def random_table(rng: np.random.Generator, n: int) -> ColumnTable:
    """A table of ``n`` columns of four VM types, cap 4-29 units, the perturbed throughput 0.3-1 of the expected."""
    cost = rng.choice([9.0, 10.0, 12.0, 15.0, 20.0, 30.0], n) * rng.choice([1.0, 1.0, 1.0 + 1e-7], n)
    share = rng.choice([1.0, 2.0, 3.0, 5.0, 8.0], n)
    x = rng.choice([1.0, 2.0, 3.0, 4.0, 6.0], n) * share
    p = x * rng.uniform(0.3, 1.0, n)
    support = ((0.1, 5.0),) if rng.random() < 0.3 else ()
    terms = SlaTerms(float(rng.choice([0.0, 3.0])), float(rng.choice([0.0, 1.0])), 0.0, support, 1, ())
    tab = ColumnTable("aws", [], terms, int(rng.integers(4, 30)), cost, x, p, share, terms.fixed)
    tab.group = rng.integers(0, 4, n).astype(np.int64)
    return tab
