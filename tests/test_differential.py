"""The threshold method, the whole MIP and the oracle on random small specs (issue 47.4).

Each seed draws a spec: design classes, key distribution, operation mix, data size, providers,
SLAs, storage rule (realistic volumes or the paper's flat IOPS), robustness on or off, a cluster
cap of two to four nodes and a budget. On every provider and objective (expected; with robustness
also perturbed and the robust rule at (1 - tolerance) x the best perturbed) the three answer the
same band problem: solver.bottleneck.best_within, solver.model.build_mip solved by HiGHS, and
solver.exhaustive. Their throughputs agree to 1e-6 and they agree on feasibility. A failure names
its seed (the test id) and prints the spec.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cost_models.pricing.catalog import Catalog
from cost_models.replication import node_spec
from solver.backends import HighsBackend
from solver.bottleneck import Floor, best_within, column_table
from solver.exhaustive import exhaustive
from solver.model import build_mip, columns_for, read_solution
from solver.tables.build import build_tables
from specs.schema import ReplicaPlan, Spec, parse_spec
from specs.vocab import Objective
from tests.test_solver import small_catalog

#: How many random specs (issue 47: 50 or more).
SPECS = 60
RF_SPECS = 12  # of them, also as a replicated node view
#: The first seed (seeds SEED .. SEED + SPECS - 1).
SEED = 4700
#: Agreement asked of the three methods' throughputs (issue 47: 1e-6).
REL = 1e-6

CLASSES = ("lsm", "btree", "lsh", "hybrid")
DISTRIBUTIONS = (
    "{kind: uniform}",
    "{kind: zipfian, theta: 0.99}",
    "{kind: zipfian, theta: 0.8}",
    "{kind: skew, hot_fraction: 0.01, hot_probability: 0.9}",
)
OPERATIONS = ("get", "empty_get", "range", "insert", "update", "rmw")
SLAS = ("", "availability", "backup, support", "availability, support", "backup, reliability")
ROBUSTNESS = ("", "", "{noise: 0.1}", "{noise: 0.1, tolerance: 0.3}", "{kl_radius: 0.5}")
PRICE_SETS = ("ondemand", "paper2021-flat-iops")


def random_spec(seed: int) -> tuple[str, Spec]:
    rng = np.random.default_rng(seed)
    classes = [c for c in CLASSES if rng.random() < 0.5] or [str(rng.choice(CLASSES))]
    ops = rng.choice(OPERATIONS, size=int(rng.integers(1, 4)), replace=False)
    twentieths = rng.multinomial(20 - len(ops), np.ones(len(ops)) / len(ops)) + 1  # each op at least 5%
    mix = ", ".join(f"{op}: {n / 20:g}" for op, n in zip(ops, twentieths, strict=True))
    providers = [p for p in ("aws", "gcp", "azure") if rng.random() < 0.6] or ["gcp"]
    dist = str(rng.choice(DISTRIBUTIONS))
    robustness = str(rng.choice(ROBUSTNESS))
    text = (
        f"name: diff{seed}\n"
        "workload:\n"
        f"  entries: {int(rng.choice([500_000, 3_000_000, 20_000_000]))}\n"
        "  key_bytes: 16\n"
        f"  value_bytes: {int(rng.choice([100, 400]))}\n"
        f"  operations: {{{mix}}}\n"
        f"  distribution: {{get: {dist}, put: {dist}}}\n"
        f"budget: {{monthly_usd: {float(np.exp(rng.uniform(np.log(80), np.log(5000)))):.2f}}}\n"
        f"providers: [{', '.join(providers)}]\n"
        f"slas: [{rng.choice(SLAS)}]\n"
        f"pricing: {rng.choice(PRICE_SETS)}\n"
        "design:\n"
        f"  classes: [{', '.join(classes)}]\n"
        "  size_ratio: [4, 10]\n"
        f"  max_cluster_size: {int(rng.integers(2, 5))}\n" + (f"robustness: {robustness}\n" if robustness else "")
    )
    return text, parse_spec(text)


def small(price_set: str) -> Catalog:
    """Two VM types per provider (tests/test_solver.py's small catalog)."""
    return small_catalog(price_set, per_provider=2)


def _mip_value(spec, cat, ctx, budget, mc, provider, objective, floor):
    m, meta = build_mip(
        spec,
        cat,
        columns_for(ctx, objective),
        budget,
        mc,
        [provider],
        objective=objective,
        floor_kops=floor,
    )
    res = HighsBackend().solve(m, gap=1e-9, time_limit=60.0)
    if res.x is None:
        return None
    ch = read_solution(m, meta, res.x, spec, cat)
    assert ch.monthly_cost <= budget * (1 + 1e-6), "the MIP's cluster is over the budget"
    return ch.value(objective)


@pytest.mark.parametrize("seed", range(SEED, SEED + SPECS))
def test_threshold_mip_and_oracle_agree(seed):
    text, spec = random_spec(seed)
    _agree(seed, text, spec)


@pytest.mark.parametrize("seed", range(SEED, SEED + RF_SPECS))
def test_replica_groups_threshold_mip_and_oracle_agree(seed):
    """A replicated spec's node view (issue 49): every count is a replica group of RF nodes of one
    column, in the threshold method, the MIP and the oracle alike."""
    text, spec = random_spec(seed)
    rf = 2 + seed % 2
    mc = int(spec.design.max_cluster_size or 4)
    spec = dataclasses.replace(spec, design=dataclasses.replace(spec.design, max_cluster_size=mc * rf))
    node, _ = node_spec(spec, ReplicaPlan(rf, rf))
    _agree(seed, f"{text}(node view of RF {rf} in {rf} zones)\n", node, unit=rf)


def _agree(seed: int, text: str, spec: Spec, unit: int = 1) -> None:
    cat = small(spec.pricing)
    tables = build_tables(spec, cat, spec.providers, workers=1)
    mc = tables.max_cluster
    budget = spec.budget_usd
    robust = spec.noise > 0 or spec.kl_radius is not None
    checked = 0
    for provider in spec.providers:
        ctx = tables.contexts.get(provider, [])
        if not ctx:
            continue
        tab = column_table(spec, cat, ctx, provider, mc)
        mask = tab.w + tab.fixed <= budget * (1 + 1e-12)
        objectives = [Objective.EXPECTED, Objective.PERTURBED, Objective.ROBUST] if robust else [Objective.EXPECTED]
        best_p = 0.0
        for objective in objectives:
            floor = (1 - spec.tolerance) * best_p if objective == Objective.ROBUST else 0.0
            flo = Floor(tab.p, floor) if objective == Objective.ROBUST and floor > 0 else None
            ans = best_within(spec, tab, objective, mask, budget, floor=flo)
            oracle = exhaustive(spec, cat, ctx, budget, mc, objective=objective, floor_kops=floor)
            mip = _mip_value(spec, cat, ctx, budget, mc, provider, objective, floor)
            where = f"seed {seed}, {provider}, {objective}, budget ${budget:,.2f}:\n{text}"
            checked += 1
            if not oracle.nodes:
                assert ans.chosen is None, f"threshold found {ans.note}, the oracle nothing; {where}"
                assert mip is None, f"the MIP found {mip}, the oracle nothing; {where}"
                continue
            want = oracle.perturbed_kops if objective == Objective.PERTURBED else oracle.throughput_kops
            assert ans.chosen is not None, f"the threshold method found nothing, the oracle {want}; {where}"
            assert ans.chosen.value(objective) == pytest.approx(want, rel=REL), f"threshold vs oracle; {where}"
            assert mip is not None and mip == pytest.approx(want, rel=REL), f"MIP {mip} vs oracle {want}; {where}"
            assert ans.chosen.monthly_cost <= budget * (1 + 1e-9)
            for nodes in (ans.chosen.nodes, [(ctx[i], k) for i, k in oracle.nodes]):
                assert all(k % unit == 0 for _, k in nodes), f"counts {nodes} not groups of {unit}; {where}"
            if objective == Objective.PERTURBED:
                best_p = oracle.perturbed_kops
    assert checked or not any(tables.contexts.values()), "nothing compared"


def test_the_random_specs_cover_the_space():
    """The seeds draw every class, distribution, storage rule, robustness and SLA set."""
    seen: dict[str, set[str]] = {k: set() for k in ("classes", "dist", "pricing", "robust", "slas", "providers")}
    for seed in range(SEED, SEED + SPECS):
        _, spec = random_spec(seed)
        seen["classes"] |= set(spec.design.classes)
        seen["dist"].add(repr(spec.workload.get_distribution))
        seen["pricing"].add(spec.pricing)
        seen["robust"].add("kl" if spec.kl_radius else "noise" if spec.noise else "off")
        seen["slas"].add(",".join(spec.slas))
        seen["providers"] |= set(spec.providers)
    assert seen["classes"] == set(CLASSES)
    assert len(seen["dist"]) >= 3 and seen["pricing"] == set(PRICE_SETS)
    assert seen["robust"] == {"kl", "noise", "off"} and len(seen["slas"]) >= 4
    assert seen["providers"] == {"aws", "gcp", "azure"}
