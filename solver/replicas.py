"""Replication as a decision: one frontier per replication plan, and the best of them.

A spec's answer may keep 1, 2 or 3 copies of its data (``replication.factors``), each plan's nodes
serving its node view of the spec (cost_models.replication.node_spec: every copy of the data at the
growth horizon, the node operations' mix, throughputs in operations of the workload). The plans are
mutually exclusive, like the providers: a cluster keeps one replication factor. So each plan's
frontier is solved on its own tables (solver.frontier), and per band and provider the answer is the
best of the plans' answers (:func:`solve_plans`), certified as the plan's answer was.

The robust rule compares a configuration with the best perturbed throughput the budget buys, over
every plan: each plan's frontier is begun (nominal and perturbed objectives, :func:`start_frontier`),
then finished with the floors the best plan sets (:func:`finish_frontier` ``pstar_elsewhere``), so
that the union of the plans' robust answers is the robust rule's answer over all of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cost_models.pricing.catalog import Catalog
from cost_models.replication import node_spec, plans
from solver.backends import Backend
from solver.band_cache import BandCache
from solver.frontier import Frontier, Point, baselines, cheapest, finish_frontier, start_frontier
from solver.reeval_cache import ReevalCache
from solver.tables.build import build_many
from solver.tables.context import Tables
from specs.schema import ReplicaPlan, Spec

if TYPE_CHECKING:
    from solver.table_cache import TableCache


@dataclass
class PlanTables:
    """One replication plan's node view of the spec, its providers (those whose region can place
    it) and its design tables."""

    plan: ReplicaPlan
    spec: Spec
    providers: tuple[str, ...]
    tables: Tables


def plan_specs(
    spec: Spec, catalog: Catalog, providers: tuple[str, ...]
) -> list[tuple[ReplicaPlan, Spec, tuple[str, ...]]]:
    """Every plan some provider can place, with its node view and those providers (in the spec's
    order of factors)."""
    by_plan: dict[ReplicaPlan, list[str]] = {}
    for p in providers:
        for plan in plans(spec, catalog, p):
            by_plan.setdefault(plan, []).append(p)
    return [(plan, node_spec(spec, plan)[0], tuple(ps)) for plan, ps in by_plan.items()]


def plan_tables(
    spec: Spec,
    catalog: Catalog,
    providers: tuple[str, ...],
    *,
    workers: int | None = None,
    presets: tuple[str, ...] = (),
    cache: TableCache | None = None,
) -> list[PlanTables]:
    """The design tables of every plan (solver.tables.build_tables on its node view), built together
    (solver.tables.build_many: a shard size the plans' node views evaluate alike is evaluated once)."""
    views = plan_specs(spec, catalog, providers)
    tables = build_many(
        [(node, provs) for _, node, provs in views], catalog, workers=workers, presets=presets, cache=cache
    )
    return [PlanTables(plan, node, provs, t) for (plan, node, provs), t in zip(views, tables, strict=True)]


@dataclass
class PlanFrontiers:
    """The plans' frontiers and their union (:func:`solve_plans`)."""

    merged: Frontier
    per_plan: list[tuple[PlanTables, Frontier]]
    stores: list[ReevalCache | None]

    def save(self) -> None:
        """Write back what each plan found since its frontier (the cheapest clusters' searches and
        their re-evaluations): its band cache and its re-evaluations (each a no-op without new entries)."""
        for (run, fr), store in zip(self.per_plan, self.stores, strict=True):
            if store is not None:
                store.save(run.spec)
            if fr.answers is not None:
                fr.answers.save(run.spec)

    def node_spec(self, plan: ReplicaPlan) -> Spec:
        """The node view a point of ``plan`` serves."""
        return next(pt.spec for pt, _ in self.per_plan if pt.plan == plan)

    def tables_of(self, plan: ReplicaPlan) -> PlanTables:
        return next(pt for pt, _ in self.per_plan if pt.plan == plan)


def solve_plans(
    spec: Spec,
    catalog: Catalog,
    runs: list[PlanTables],
    backend: Backend,
    *,
    out_dir: Path | None = None,
    cache: TableCache | None = None,
    **kw: Any,
) -> PlanFrontiers:
    """Every plan's frontier (solver.frontier.solve_frontier's settings in ``kw``), the robust
    floors set by the best plan, and their union: per provider and band the fastest plan's point.
    With a ``cache`` each plan's exact re-evaluations and band answers are read from and added to
    its directory (solver.reeval_cache, solver.band_cache: one file each per node view). The bands'
    solver logs go to ``out_dir``/solver/rfN."""
    started = []
    stores: list[ReevalCache | None] = []
    for run in runs:
        store = ReevalCache(cache.directory, notes=cache.notes) if cache is not None else None
        # without a cache, the answers are kept in this process only: the prefetch's workers hand
        # theirs back through it (solver.frontier._prefetch)
        answers = BandCache(cache.directory, notes=cache.notes) if cache is not None else BandCache(persist=False)
        stores.append(store)
        logdir = None if out_dir is None else out_dir / "solver" / f"rf{run.plan.rf}"
        provs = tuple(p for p in run.providers if p in run.tables.contexts)
        started.append(
            start_frontier(
                run.spec,
                catalog,
                run.tables,
                backend,
                providers=provs,
                out_dir=out_dir,
                logdir=logdir,
                reevals=store,
                answers=answers,
                **kw,
            )
        )
    # P*_p(b): each provider's best perturbed throughput at each band over every plan (kops)
    elsewhere: dict[str, np.ndarray] = {}
    for st in started:
        for p, pstar in st.pstar().items():
            elsewhere[p] = pstar if p not in elsewhere else np.maximum(elsewhere[p], pstar)
    done = [(run, finish_frontier(st, pstar_elsewhere=elsewhere)) for run, st in zip(runs, started, strict=True)]
    return PlanFrontiers(merge(spec, done), done, stores)


def _tag(pts: list[Point], plan: ReplicaPlan) -> list[Point]:
    for pt in pts:
        pt.plan = plan
    return pts


def _best_per_band(lists: list[list[Point]], key: str) -> list[Point]:
    """Per band, the point of ``lists`` fastest on ``key`` ("throughput" or "perturbed"), then the
    cheapest; an infeasible band keeps the first list's point."""
    out = []
    for col in zip(*lists, strict=True):
        live = [q for q in col if q.chosen is not None]
        out.append(max(live, key=lambda q: (getattr(q, key), -q.cost)) if live else col[0])
    return out


def merge(spec: Spec, done: list[tuple[PlanTables, Frontier]]) -> Frontier:
    """The union of the plans' frontiers: per provider and band the fastest plan's point of each
    objective (points carry their plan); counters summed, floors the highest."""
    first = done[0][1]
    for run, fr in done:
        for pts_of in (fr.nominal, fr.perturbed, fr.points, fr.headline):
            for pts in pts_of.values():
                _tag(pts, run.plan)
        if not np.array_equal(fr.budgets, first.budgets):
            raise AssertionError("the plans' frontiers are on different budget grids")

    floor_provs = sorted({p for _, fr in done for p in fr.floors})

    def union(attr: str, key: str = "throughput") -> dict[str, list[Point]]:
        provs = sorted({p for _, fr in done for p in getattr(fr, attr)})
        return {
            p: _best_per_band([getattr(fr, attr)[p] for _, fr in done if p in getattr(fr, attr)], key) for p in provs
        }

    merged = dataclasses.replace(
        first,
        spec=spec,
        nominal=union("nominal"),
        perturbed=union("perturbed", "perturbed"),
        points=union("points"),
        headline=union("headline"),
        floors={p: np.max([fr.floors[p] for _, fr in done if p in fr.floors], axis=0) for p in floor_provs},
        repaired=sum(fr.repaired for _, fr in done),
        robust_carried=sum(fr.robust_carried for _, fr in done),
        monotone=all(fr.monotone for _, fr in done),
        build_seconds=sum(fr.build_seconds for _, fr in done),
        solve_seconds=sum(fr.solve_seconds for _, fr in done),
        tables_seconds=sum(fr.tables_seconds for _, fr in done),
        n_solves=sum(fr.n_solves for _, fr in done),
        max_cluster=max(fr.max_cluster for _, fr in done),
    )
    merged.best = merged.best_of(merged.headline)
    return merged


def cheapest_of_plans(
    catalog: Catalog,
    runs: list[PlanTables],
    backend: Backend,
    *,
    min_throughput: float | None = None,
    providers: tuple[str, ...] | None = None,
    frontiers: PlanFrontiers | None = None,
) -> Point | None:
    """The cheapest configuration over every plan (solver.frontier.cheapest of each)."""
    best: Point | None = None
    for run in runs:
        provs = run.providers if providers is None else tuple(p for p in run.providers if p in providers)
        if not provs:
            continue
        # a plan's frontier lends its re-evaluations, column tables and band cache (its searches
        # for the same throughput are read back: the lowest bill is each provider's floor it found)
        fr = None if frontiers is None else next(f for r, f in frontiers.per_plan if r.plan == run.plan)
        pt = cheapest(
            run.spec,
            catalog,
            run.tables,
            backend,
            min_throughput=min_throughput,
            providers=provs,
            exact=None if fr is None else fr.exact,
            answers=None if fr is None else fr.answers,
            columns=None if fr is None else fr.tables,
        )
        if pt is not None and pt.chosen is not None:
            pt.plan = run.plan
            if best is None or pt.cost < best.cost:
                best = pt
    return best


def baselines_of_plans(
    catalog: Catalog, runs: list[PlanTables], budgets: np.ndarray
) -> dict[str, list[dict[str, Any]]]:
    """Each preset's best per band and provider over the plans (solver.frontier.baselines of each,
    the row naming its plan)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        for name, rows in baselines(run.spec, catalog, run.tables, budgets).items():
            out.setdefault(name, []).extend({**r, "replication": run.plan.label} for r in rows)
    for name, rows in out.items():
        best: dict[tuple[int, str], dict[str, Any]] = {}
        for r in rows:
            k = (r["band"], r["provider"])
            if k not in best or (r["throughput_ops"], -r["monthly_cost"]) > (
                best[k]["throughput_ops"],
                -best[k]["monthly_cost"],
            ):
                best[k] = r
        out[name] = [best[k] for k in sorted(best)]
    return out
