"""The replication plans' tables built together (solver.tables.build.build_many): a shard size the
plans' node views evaluate alike is one job, and every plan's tables are those it builds alone."""

from __future__ import annotations

import dataclasses

import pytest

from cost_models.evaluate import spec_partitions, workload_partitions
from cost_models.replication import node_spec
from solver.tables import build as TB
from solver.tables.grid_eval import shares_io
from specs.schema import ReplicaPlan, parse_spec
from tests.test_solver import small_catalog

PLANS = (ReplicaPlan(1, 1), ReplicaPlan(2, 2), ReplicaPlan(3, 3))


def _spec(ops: str, dist: str = "uniform", extra: str = "") -> object:
    return parse_spec(
        f"name: p\nworkload: {{entries: 2000000, key_bytes: 16, value_bytes: 100, operations: {ops},\n"
        f"  distribution: {{get: {{kind: {dist}}}, put: {{kind: {dist}}}}}, operations_per_month: 2.6e9}}\n"
        "budget: {monthly_usd: 500}\nproviders: [aws]\ndesign: {max_cluster_size: 6}\n" + extra
    )


def _views(ops: str, dist: str = "uniform", extra: str = "") -> list:
    spec = _spec(ops, dist, extra)
    return [node_spec(spec, plan)[0] for plan in PLANS]  # type: ignore[arg-type]


def _plans(views: list) -> list:
    cat = small_catalog("ondemand")
    return [TB._plan(v, cat, ("aws",), (TB.COSINE, "rocksdb"), None, None) for v in views]


def _rows(t: object) -> object:
    return {p: [dataclasses.asdict(c) for c in cs] for p, cs in t.contexts.items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("ops", "dist", "extra"),
    [
        ("{get: 0.5, update: 0.5}", "uniform", ""),
        ("{get: 0.5, update: 0.5}", "uniform", "robustness: {noise: 0.1}\n"),
        ("{get: 0.5, update: 0.5}", "zipfian", ""),
    ],
    ids=["plain", "noisy", "zipfian"],
)
def test_the_plans_share_jobs_and_each_gets_its_own_tables(ops: str, dist: str, extra: str) -> None:
    cat = small_catalog("ondemand")
    views = _views(ops, dist, extra)
    groups = TB.plan_groups(_plans(views), cat)
    assert any(len(members) > 1 for _, _, members in groups)  # RF 2's and 3's shard sizes are RF 1's
    together = TB.build_many([(v, ("aws",)) for v in views], cat, workers=1, presets=("rocksdb",))
    for v, t in zip(views, together, strict=True):
        alone = TB.build_tables(v, cat, ("aws",), workers=1, presets=("rocksdb",))
        assert t.contexts["aws"] and _rows(t) == _rows(alone)  # every field of every column
        assert {k: _rows(dataclasses.replace(alone, contexts=c)) for k, c in t.presets.items()} == {
            k: _rows(dataclasses.replace(alone, contexts=c)) for k, c in alone.presets.items()
        }


def test_plans_that_read_the_mix_differently_are_not_shared() -> None:
    """The worst-case model reads the whole mix; another insert fraction (RF's weights move it only
    by rounding) or spec is another evaluation. Skewed keys are not: the RF copies of a key are one
    key of the distributions (cost_models.evaluate.spec_partitions; stop 58, before which the
    partitions followed the node view's RF x N keys)."""
    cat = small_catalog("ondemand")
    views = _views("{get: 0.5, update: 0.5}", extra="cost_model: worst-case\n")
    assert all(len(members) == 1 for _, _, members in TB.plan_groups(_plans(views), cat))
    zipf = _views("{get: 0.5, update: 0.5}", dist="zipfian")
    assert shares_io(zipf[0], zipf[1])  # the same reads of the mix, and the same keys
    assert TB.same_partitions(spec_partitions(zipf[0]), spec_partitions(zipf[1]))
    assert not TB.same_partitions(workload_partitions(zipf[0].workload), workload_partitions(zipf[1].workload))
    a = _views("{get: 0.5, update: 0.5}")[0]

    def mix(ops: dict[str, float]) -> object:
        return dataclasses.replace(a, workload=dataclasses.replace(a.workload, operations=ops))

    assert shares_io(a, mix({"get": 0.3, "update": 0.7}))  # no inserts either: only the totals differ
    assert not shares_io(a, mix({"get": 0.5, "insert": 0.1, "update": 0.4}))
    assert not shares_io(a, dataclasses.replace(a, noise=0.1))
