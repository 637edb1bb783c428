"""A column's scan fan-out and its reach (issues 47 and 48, docs/solver.md "Scans fan out").

A served node's rate is tabled with its scans reaching the next breakpoint's node count
(solver.space.fanout_nodes), and the column is credited only in clusters of at most that many
nodes (solver.space.reach): then the band model's value is a lower bound of the exact one, which
sends every scan to the cluster's own shards.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from solver.bottleneck import ColumnTable, reach_classes
from solver.space import fanout_nodes, has_scans, ladder, reach, shard_counts
from specs.schema import parse_spec
from specs.vocab import WorkloadKind
from tests.conftest import TINY_SPEC

SCANS = TINY_SPEC.replace("operations: {get: 0.5, update: 0.5}", "operations: {get: 0.45, range: 0.1, update: 0.45}")


def test_the_fanout_is_the_next_breakpoint_whatever_the_cap() -> None:
    spec = parse_spec(SCANS)
    n = spec.workload.entries
    steps = list(itertools_take(ladder(), 40))
    for k, nxt in zip(steps, steps[1:], strict=False):
        assert fanout_nodes(spec, n / k) == nxt
    # the cap's own count (not on the ladder) reaches the ladder's next one
    assert 250 not in steps and fanout_nodes(spec, n / 250) == min(s for s in steps if s > 250)
    # the tables' counts are the ladder's below the cap: a count's fan-out does not depend on it
    assert shard_counts(1000)[:-1] == [s for s in steps if s < 1000]


def itertools_take(it: Any, n: int) -> list[int]:
    return [next(it) for _ in range(n)]


def test_reach_only_where_the_valued_workload_scans() -> None:
    plain = parse_spec(TINY_SPEC)
    scans = parse_spec(SCANS)
    noisy = parse_spec(TINY_SPEC + "robustness: {noise: 0.1}\n")
    kl = parse_spec(TINY_SPEC + "robustness: {kl_radius: 0.5}\n")
    half = plain.workload.entries / 2
    assert reach(plain, half) == math.inf and not has_scans(plain, WorkloadKind.BOTH)
    assert reach(scans, half, WorkloadKind.EXPECTED) == 3
    # noise adds ranges to the perturbed mix only; a KL radius is priced on one node's engine
    assert reach(noisy, half, WorkloadKind.EXPECTED) == math.inf
    assert reach(noisy, half, WorkloadKind.PERTURBED) == 3 and reach(noisy, half) == 3
    assert reach(kl, half) == math.inf


def test_reach_classes_partition_the_cluster_sizes() -> None:
    rng = np.random.default_rng(48)
    for _ in range(50):
        cap = int(rng.integers(3, 40))
        r = rng.choice([2.0, 3.0, 5.0, 8.0, 13.0, 21.0, math.inf], size=12)
        tab = ColumnTable("aws", [], None, cap, *(np.ones(12),) * 4, 0.0)  # type: ignore[arg-type]
        mask = rng.random(12) < 0.8
        classes = reach_classes(tab, mask, r)
        for m in range(1, cap + 1):
            mine = [c for c in classes if c[1] <= m <= c[0]]
            assert len(mine) == 1, (m, [c[:2] for c in classes])
            # the class holds every column a cluster of m units may use
            assert np.array_equal(mine[0][2], mask & (r >= mine[0][0])) and (r[mine[0][2]] >= m).all()
            assert np.array_equal(mine[0][2] | (mask & (r >= m) & (r < mine[0][0])), mine[0][2])


def test_the_credit_is_a_lower_bound_with_scans(runner: Any, tmp_path: Path) -> None:
    """A scanning workload's answer: the band model's value is at most the exact throughput of the
    cluster (its scans sent to the cluster's own shards), and close to it."""
    from cli.main import app

    spec = tmp_path / "scans.yaml"
    spec.write_text(SCANS.replace("name: tiny", "name: tiny_scans"))
    res = runner.invoke(app, ["solve", str(spec), "--out", str(tmp_path / "run"), "--bands", "4", "--json"])
    assert res.exit_code == 0, res.output
    sol = json.loads(res.stdout)
    band = -sol["certificate"]["objective"] * 1e3
    assert band <= sol["predicted"]["throughput_ops"] * (1 + 1e-9)
    assert sol["certificate"]["approx_error"] < 0.1, sol["certificate"]["approx_error"]
