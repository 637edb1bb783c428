"""The worst-case I/O model: the design continuum's view of a design.

The Cosine paper (seeds/000, Sec. 7.1) and its technical report (seeds/001,
Sec. 3) compare the distribution-aware model with "the worst case models we
introduced [73]" — the design continuum of Idreos et al. (CIDR 2019), whose
closed forms come from Monkey and Dostoevsky (Dayan et al. 2017, 2018). Those
models cost a design by its structure alone, as if every level were full and
every key lived at the bottom of the tree:

* a lookup never stops early and never hits the buffer or the block cache: it
  probes every run of every level above the key's (a Bloom false positive per
  run at a hot level, an index block and a data block at a cold one) and reads
  the key's block in the last level — at least one I/O per lookup;
* a run count is its bound (K above the last level, Z at it), not its
  expected value;
* no put overwrites a key still in the tree, so nothing is deduplicated: a
  merge moves a full buffer or a full level, and a hash log's GC finds only
  the threshold share g of a segment dead.

Everything else is the distribution-aware model's own (one layout derivation,
one set of formulas): the same levels, hot/cold split and per-level filters
(``cost_models.layout``), the same merge, range and WAL expressions
(``cost_models.symbolic``), and merges that read and write, as the engine's do.
Where this differs from the report's stated figures is in docs/model.md.
"""

from __future__ import annotations

import numpy as np

from cost_models.design import model_constants
from cost_models.distributions import Partitions
from cost_models.io_model import IOCost, hash_log_scan, insert_fraction, merge_terms
from cost_models.layout import Layout
from cost_models.range_filter import layout_fpr
from cost_models.symbolic import compiled


class AllDistinct:
    """Puts when no put repeats a key (a PutStream, cost_models.layout): ``distinct`` distinct keys
    take as many puts, and a count of puts brings as many distinct keys."""

    def __call__(self, distinct: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(distinct, dtype=float), 1.0)

    def distinct(self, puts: np.ndarray) -> np.ndarray:
        return np.asarray(puts, dtype=float)


all_distinct = AllDistinct()


def io_costs(
    lay: Layout, parts: Partitions, mix: dict[str, float], scan_length: float, empty_range_width: int = 64
) -> IOCost:
    """Worst-case block I/O per operation for every design of ``lay``.

    ``parts`` is only passed through to the shared merge terms (whose hash-log
    GC share this model replaces by its worst case); no term here depends on
    the key distribution.
    """
    c = compiled()
    n, lm = lay.cap.shape
    exists = lay.exists
    runs = np.where(exists, lay.max_runs, 0.0)  # every level full: its run bound
    cold = (exists & ~lay.hot).astype(float)
    # one run passed for nothing: a filter false positive (hot) or an index + a data block (cold)
    probe = np.where(exists, np.where(lay.hot, lay.fpr, 1.0) + cold, 0.0)
    empty_get = (runs * probe).sum(axis=1)
    last = np.arange(1, lm + 1)[None, :] == lay.L[:, None]
    # the key is in the last level's oldest run: every other run is passed, its own
    # costs its data block (and its index block when cold)
    own = (np.where(last, 1.0 + cold - probe, 0.0)).sum(axis=1)
    get = empty_get + own

    sel = scan_length / lay.n_keys
    full_run = np.where(exists, lay.cap / np.maximum(runs, 1.0), 0.0)
    sorted_scan = np.where(exists, runs * (c["range_run"](sel, full_run, lay.B[:, None]) + cold), 0.0).sum(axis=1)

    iota = insert_fraction(mix)
    mt = merge_terms(lay, parts, iota, all_distinct)
    g = model_constants()["lsh_gc_dead_fraction"]
    log_put = c["log_append"](1.0 - iota, g, lay.B)  # GC finds the least dead victim it may collect
    put = np.where(lay.lsh, log_put, mt.per_put.sum(axis=1)) + mt.wal

    get = np.where(lay.lsh, 1.0, get)  # the hash index is exact: the key's block, once
    empty_get = np.where(lay.lsh, 0.0, empty_get)
    scan = np.where(lay.lsh, hash_log_scan(lay, sel), sorted_scan)
    # an empty range passes every run: a hot one through its range filter (rate 1 without one)
    rf = layout_fpr(lay.range_bits, empty_range_width, lay.range_per_height)[:, None]
    seek = np.where(exists, runs * c["empty_range_run"](np.where(lay.hot, rf, 1.0), cold, lay.B[:, None]), 0.0)
    empty_range = np.where(lay.lsh, 0.0, seek.sum(axis=1))
    return IOCost(
        get=get,
        empty_get=empty_get,
        range=scan,
        insert=put,
        update=put.copy(),
        rmw=get + put,
        empty_range=empty_range,
    )
