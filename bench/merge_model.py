"""The model's merge blocks per put against the engine's own compaction strategy (docs/journal/s17-s21.md §20).

    .venv/bin/python -u -m bench.merge_model [--universe 100000] [--records 50000] [--section 1|2|3 ...]

`cosine-sim` runs the engine's TemplateStrategy over in-memory keys and counts the data blocks
each merge reads and writes (measure.simulate): no device, no timing, so any machine gives the
same figures. Printed:

1. Steady state (docs/model.md, "Partial compaction"): small trees under random overwrites of a
   ``--universe``-key space, every merge policy; beside the model, what the model said before it
   knew the policy (every merge priced as a full one).
2. Short runs (docs/model.md, "Short runs"): every tree design of the `cosine validate` grid at
   ``--records`` loaded, then a run of 3x as many inserts (the tree grows under it) or uniform
   overwrites of the loaded keys (``cosine-sim --updates``), modelled from the state the run
   starts in, as `cosine validate` models it.
3. Tiered last levels under overwrites (docs/model.md, "L" and "occ_i"; docs/journal/s22-s30.md §30,
   docs/journal/s31-s42.md §38): the
   depth a tree settles at after 20 uniform or zipfian overwrites per key, against the model's
   with the room rule (``layout.last_level_room``) counting the overwrites' runs as the distinct
   keys of their batches, counting them as whole batches, and with capacities alone; and the
   steady merge blocks per overwrite of the same trees at 0.3-1.0 of level 2. Not a test.
"""

from __future__ import annotations

import argparse
import copy
import statistics

import numpy as np

from cost_models.distributions import Marginal
from cost_models.engine_model import engine_layout
from cost_models.layout import PutStream
from cost_models.windows import ExactWindow
from measure.grid import designs
from measure.simulate import (
    TREE_BUFFER,
    depth,
    short_run,
    sim_puts,
    simulate,
    simulator,
    steady_state,
    study_config,
    tree_config,
)
from specs.vocab import Compaction, FilePicking, Operation

STUDY = [
    (Compaction.FULL, 1, 10, 512, FilePicking.DENSE_FP),
    (Compaction.FULL, 2, 10, 512, FilePicking.DENSE_FP),
    (Compaction.FULL, 1, 32, 512, FilePicking.DENSE_FP),
    (Compaction.PARTIAL, 1, 10, 512, FilePicking.DENSE_FP),
    (Compaction.PARTIAL, 1, 32, 512, FilePicking.DENSE_FP),
    (Compaction.PARTIAL, 1, 10, 2048, FilePicking.DENSE_FP),
    (Compaction.PARTIAL, 2, 10, 512, FilePicking.DENSE_FP),
    (Compaction.PARTIAL, 3, 8, 512, FilePicking.DENSE_FP),
    (Compaction.PARTIAL, 1, 10, 512, FilePicking.CHOOSE_FIRST),
    (Compaction.PARTIAL, 1, 10, 512, FilePicking.OLDEST_MERGED),
]


def accuracy(predicted: float, measured: float) -> float:
    return max(0.0, 1 - abs(predicted - measured) / measured) if measured > 0 else float(predicted == 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--universe", type=int, default=100_000, help="keys overwritten in the steady-state study")
    ap.add_argument("--records", type=int, default=50_000, help="records of the grid's short runs")
    ap.add_argument("--section", type=int, choices=(1, 2, 3), action="append", help="only these sections (repeatable)")
    a = ap.parse_args()
    if a.universe < 1_000 or a.records < 1_000:
        ap.exit(2, f"{ap.prog}: --universe and --records must be at least 1,000\n")
    sections = set(a.section or (1, 2, 3))
    simulator()
    if 1 in sections:
        steady(a.universe)
    if 2 in sections:
        short_runs(a.records)
    if 3 in sections:
        tiered_last()


def steady(u: int) -> None:
    """Section 1: steady merge blocks per overwrite of :data:`STUDY` on a ``u``-key universe."""
    print(f"1. steady state: {u:,}-key universe, 3 universes of overwrites, then 4 measured")
    head = (
        "| compaction | K | T | file entries | file picking | simulated | model | accuracy | model, every merge full |"
    )
    print(head)
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for comp, K, T, files, pick in STUDY:
        cfg = study_config(comp, K, T, files, pick)
        meas, pred = steady_state(cfg, u, 3 * u, 4 * u)
        _, blind = steady_state(study_config(Compaction.FULL, K, T, files, pick), u, 3 * u, 4 * u)
        cells = [comp, K, T, files, pick, f"{meas:.3f}", f"{pred:.3f}", f"{accuracy(pred, meas):.1%}", f"{blind:.3f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


def short_runs(n: int) -> None:
    """Section 2: the validate grid's tree designs at ``n`` records, then 3 n puts."""
    ops = 3 * n
    grid = {k: v for k, v in designs(n, quick=False, optima=False).items() if v["design"]["class"] != "lsh"}
    print(f"\n2. short runs: the validate grid's {len(grid)} tree designs, {n:,} records, {ops:,} puts")
    print("| design | inserts simulated | model | accuracy | overwrites simulated | model | accuracy |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    acc: dict[Operation, list[float]] = {Operation.INSERT: [], Operation.UPDATE: []}
    for name, secs in grid.items():
        row: list[str] = []
        for op in acc:
            meas, pred = short_run(copy.deepcopy(secs), op, n, ops)
            acc[op].append(accuracy(pred, meas))
            row += [f"{meas:.3f}", f"{pred:.3f}", f"{acc[op][-1]:.1%}"]
        print(f"| {name} | " + " | ".join(row) + " |")
    print(
        f"\nmean accuracy: inserts {statistics.mean(acc[Operation.INSERT]):.1%}, "
        f"overwrites {statistics.mean(acc[Operation.UPDATE]):.1%}"
    )


#: (T, K, Z) of section 3: tiered last levels of 2, 3, 4, 5, 7 and 9 runs, and a leveled one.
TREES = [(5, 1, 4), (10, 1, 4), (10, 3, 3), (4, 1, 2), (10, 9, 9), (20, 9, 9), (6, 1, 5), (8, 3, 7), (10, 1, 1)]
#: Shares of a level's capacity the keys fill (section 3).
SHARES = (0.1, 0.15, 0.25, 0.4, 0.6, 0.9, 1.0)
#: The overwrites of section 3: uniform, and zipfian of YCSB's skew (cosine-sim ``--zipf``).
SKEWS: tuple[float | None, ...] = (None, 0.99)


def _streams(n: int, zipf: float | None) -> dict[str, PutStream | None]:
    """The put streams section 3 compares on a tree of ``n`` keys: the overwrites' own (a run holds
    the distinct keys of its batches), and one of new keys only (every batch counted whole: the
    rule before docs/journal/s31-s42.md §38)."""
    return {"distinct runs": sim_puts(n, zipf), "whole batches": ExactWindow(Marginal(np.ones(1), np.ones(1)), n, 1.0)}


def tiered_last() -> None:
    """Section 3: depth and merge blocks of :data:`TREES` under overwrites."""
    print(f"\n3. tiered last levels under overwrites: {TREE_BUFFER}-entry buffer, 20 overwrites per key")
    for zipf in SKEWS:
        right = {"distinct runs": 0, "whole batches": 0, "capacity": 0}
        cases = 0
        missed: list[str] = []
        for T, K, Z in TREES:
            cfg = tree_config(T, K, Z)
            for level in (1, 2):
                for share in SHARES:
                    n = int(share * TREE_BUFFER * T**level)
                    settled = depth(simulate(cfg, n, 0, updates=20 * n, zipf=zipf).report)
                    if settled == 0:  # all in the buffer
                        continue
                    cases += 1
                    for rule, puts in _streams(n, zipf).items():
                        got = int(engine_layout(cfg, n, overwrites=True, puts=puts).L[0])
                        right[rule] += got == settled
                        if rule == "distinct runs" and got != settled:
                            missed.append(f"T {T}, K {K}, Z {Z} at {share} of level {level}: {got} for {settled}")
                    right["capacity"] += int(engine_layout(cfg, n, overwrites=False).L[0]) == settled
        name = "uniform" if zipf is None else f"zipfian {zipf}"
        print(f"{name}: depth right of {cases}: " + ", ".join(f"{k} {v}" for k, v in right.items()))
        for m in missed:
            print(f"  distinct runs missed {m}")
    print("| T | K | Z | share of level 2 | simulated merge blocks / overwrite | model | model / simulated |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for T, K, Z in TREES:
        for share in (0.3, 0.6, 1.0):
            u = int(share * TREE_BUFFER * T**2)
            meas, pred = steady_state(tree_config(T, K, Z), u, 6 * u, 8 * u)
            print(f"| {T} | {K} | {Z} | {share} | {meas:.3f} | {pred:.3f} | {pred / meas:.3f} |")


if __name__ == "__main__":
    main()
