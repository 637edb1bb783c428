"""The persistent cache of band answers: a band's threshold search, kept between solves.

A band's answer (solver.bottleneck.best_within: the fastest cluster within the band's budget, the
cheapest of equally fast ones, its certificate) is a pure function of its inputs: the provider's
column table (every column's bill, throughput per copy on both workloads, share of the data, VM
type, scan reach; the cluster cap, the unit, the SLA terms), the objective, the band's mask of
columns, its budget, the floor on the other throughput, the incumbent it starts from and the
search's code. A what-if that changes the budget keeps the geometric band grid and adds its own
budget (solver.frontier.band_grid), one that drops a provider keeps the others' tables: their bands
meet the same inputs again and read the answers back: the same clusters, the same certificates,
not an approximation of them. ``cosine sweep`` over budgets meets them in every solve. Each
provider's floor (solver.bottleneck.cheapest_reaching: the cheapest cluster that holds the data, or
reaches the latency target's throughput), which every solve and what-if asks for before its bands,
is kept the same way (:meth:`BandCache.cheapest_reaching`, keyed by :func:`floor_key`): ycsb_a's
six took ~0.1 s of a 0.55 s `cosine whatif` (stop 65).

**Key.** One file per spec key, named by a SHA-256 of the code version (every file of
``cost_models/`` and :data:`CODE_FILES`: the search, its knapsacks, the model's scale and this
module, as solver.table_cache hashes them) and the spec's parts (solver.reeval_cache.spec_key's).
Within it, one entry per band, keyed by a SHA-256 of every input above (:func:`band_key`: the table
by :meth:`~solver.bottleneck.ColumnTable.digest`, the arrays by their bytes, numbers exactly).
Any change to any of them is another key.

**Content.** JSON data only, no code: ``{"version", "key", "sha256", "bands": {band key:
{"nodes", "status", "objective", "bound", "gap", "visited", "open_bound", "note"}}}``; the cluster
as (column, count) pairs, from which the answer's bill and throughputs are recomputed by
solver.bottleneck.chosen_of, as the search computes them. ``sha256`` is the content hash of the
rest (solver.sealed_json.payload_digest), checked on every read. A file that cannot be read, fails
its hash or has another shape is reported in one line and ignored (then overwritten); an entry is
used only whole. A band read back says so in its solver log.

**Where.** The table cache's directory (solver.sealed_json.default_dir), files
``bands-<key>.json``. ``cosine solve --no-cache`` neither reads nor writes it.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from solver.backends import Result
from solver.bottleneck import BandAnswer, ColumnTable, Floor, Nodes, best_within, cheapest_reaching, chosen_of
from solver.reeval_cache import spec_key
from solver.sealed_json import SealedCache, read_sections, write_sections
from solver.table_cache import code_version
from specs.errors import TERMINATING, InputError
from specs.io import to_json
from specs.schema import Spec
from specs.vocab import Objective, SolverStatus

VERSION = 1
#: The modules besides cost_models/ whose code decides a band's answer: the search and its
#: knapsacks (tests/test_band_cache.py checks best_within's module is named), the model's scale
#: and Chosen, the backends' Result, and this module.
CODE_FILES = (
    "solver/bottleneck.py",
    "solver/knapsack.py",
    "solver/knapsack_numba.py",
    "solver/model.py",
    "solver/space.py",
    "solver/backends/base.py",
    "solver/band_cache.py",
)
#: What a solver log line adds to an answer read back.
READ_BACK = " (read back from the band cache)"
#: What it adds to an answer a :func:`prefetch` worker of this solve found.
PREFETCHED = " (searched by a worker of this solve)"
_FIELDS = ("nodes", "status", "objective", "bound", "gap", "visited", "open_bound", "note")


def _array_part(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a)
    return f"{a.dtype.str}{a.shape}".encode() + b"\0" + a.tobytes() + b"\0"


def band_key(
    tab: ColumnTable,
    objective: Objective,
    mask: np.ndarray,
    budget: float,
    floor: Floor | None,
    start: Nodes | None,
    backend: str,
) -> str:
    """The key of one band's search: every input of :func:`~solver.bottleneck.best_within`."""
    h = hashlib.sha256()
    h.update(f"band v{VERSION}\0{tab.digest()}\0{objective}\0{float(budget).hex()}\0{backend}\0".encode())
    h.update(_array_part(np.asarray(mask, dtype=bool)))
    if floor is None:
        h.update(b"no floor\0")
    else:
        h.update(f"floor {float(floor.at_least).hex()}\0".encode() + _array_part(floor.per_copy))
    h.update(to_json(None if start is None else [[int(i), int(k)] for i, k in start], indent=None).encode())
    return h.hexdigest()


def floor_key(tab: ColumnTable, at_least: float) -> str:
    """The key of one cheapest-cluster search (a provider's floor): every input of
    :func:`~solver.bottleneck.cheapest_reaching` over all of ``tab``'s columns."""
    h = hashlib.sha256(f"cheapest v{VERSION}\0{tab.digest()}\0{float(at_least).hex()}\0".encode())
    return h.hexdigest()


@dataclass
class BandCache(SealedCache):
    """A directory of cached band answers; ``notes`` collects one-line reports of refused files.
    ``persist`` False: answers kept in this process only (``--no-cache``: no file read or written),
    for :func:`prefetch`'s workers to hand theirs back."""

    persist: bool = True
    #: answers read from the file (0: a cold solve's cache, which :func:`prefetch` fills)
    read_back: int = 0
    #: the keys of the answers :func:`prefetch`'s workers found
    _prefetched: set[str] = field(default_factory=set)

    def path(self, spec: Spec) -> Path:
        if not self._key:
            self._key = "bands " + spec_key(spec, code_version(CODE_FILES))
            self._key = hashlib.sha256(self._key.encode()).hexdigest()
        return self.directory / f"bands-{self._key[:32]}.json"

    def load(self, spec: Spec) -> None:
        """Read the spec's file (nothing when there is none; a bad one is reported and ignored)."""
        if not self.persist:
            return
        path = self.path(spec)
        if not path.exists():
            return
        try:
            bands = read_sections(path, "band cache", VERSION, self._key, {"bands": _valid})["bands"]
        except InputError as exc:
            self.notes.append(f"band cache ignored and rebuilt: {exc}")
            return
        self.read_back = len(bands)
        self._entries = bands

    def save(self, spec: Spec) -> None:
        """Write the file when this solve added entries (atomically; a failed write is reported)."""
        if not self._new or not self.persist:
            return
        path = self.path(spec)
        note = write_sections(path, "band cache", VERSION, self._key, {"bands": self._entries})
        if note is not None:
            self.notes.append(note)
        self._new = 0

    def entries(self) -> dict[str, dict[str, Any]]:
        """Every answer held, by band key."""
        return self._entries

    def add(self, found: dict[str, dict[str, Any]]) -> None:
        """Answers found elsewhere (:func:`prefetch`'s workers), each checked as a file's are."""
        for k, e in found.items():
            if _valid(e) and k not in self._entries:
                self._entries[k] = e
                self._prefetched.add(k)
                self._new += 1

    def best_within(
        self,
        spec: Spec,
        tab: ColumnTable,
        objective: Objective,
        mask: np.ndarray,
        budget: float,
        *,
        floor: Floor | None,
        start: Nodes | None,
        backend: str,
    ) -> BandAnswer:
        """:func:`~solver.bottleneck.best_within`'s answer, read back when this band was searched
        before (its seconds then the read's), else searched and kept."""
        t0 = time.perf_counter()
        key = band_key(tab, objective, mask, budget, floor, start, backend)
        e = self._entries.get(key)
        top = -1 if e is None or e["nodes"] is None else max(i for i, _ in e["nodes"])
        if top >= len(tab.contexts):
            self.notes.append(f"band cache: an entry names column {top} of {len(tab.contexts)}: searched again")
            del self._entries[key]
            e = None
        if e is not None:
            self.hits += 1
            mark = PREFETCHED if key in self._prefetched else READ_BACK
            return _answer(spec, tab, e, backend, time.perf_counter() - t0, mark)
        self.misses += 1
        ans = best_within(spec, tab, objective, mask, budget, floor=floor, start=start, backend=backend)
        entry = _entry(ans)
        if entry is not None:
            self._entries[key] = entry
            self._new += 1
        return ans

    def cheapest_reaching(self, tab: ColumnTable, at_least: float) -> tuple[Nodes | None, float, bool]:
        """:func:`~solver.bottleneck.cheapest_reaching` over every column of ``tab`` (a provider's
        floor, which each solve and what-if of the spec asks for again), read back when it was
        searched before: an entry of the same shape as a band's (``objective`` and ``bound`` the
        bill, ``status`` optimal when proven, else feasible)."""
        key = floor_key(tab, at_least)
        e = self._entries.get(key)
        if e is not None and (e["nodes"] is None or max(i for i, _ in e["nodes"]) < len(tab.contexts)):
            self.hits += 1
            nodes: Nodes | None = None if e["nodes"] is None else [(int(i), int(k)) for i, k in e["nodes"]]
            bill = math.inf if e["objective"] is None else float(e["objective"])
            return nodes, bill, e["status"] == SolverStatus.OPTIMAL
        self.misses += 1
        nodes, bill, proven = cheapest_reaching(tab, np.ones(len(tab.contexts), dtype=bool), at_least)
        if (nodes is None) != math.isfinite(bill):  # (an answer JSON holds: a cluster and its finite bill, or none)
            b = None if nodes is None else float(bill)
            self._entries[key] = {
                "nodes": None if nodes is None else [[int(i), int(k)] for i, k in nodes],
                "status": str(SolverStatus.OPTIMAL if proven else SolverStatus.FEASIBLE),
                "objective": b,
                "bound": b,
                "gap": None if b is None else 0.0,
                "visited": 0,
                "open_bound": None,
                "note": "",
            }
            self._new += 1
        return nodes, bill, proven


#: A search of bands through a cache: one chain of a frontier (solver.frontier's prefetch).
Job = Callable[[], object]
#: What a forked worker of :func:`prefetch` runs: the jobs and the cache they search through (its
#: copy in the worker). Set only while a prefetch runs.
_WORK: tuple[list[Job], BandCache | None] = ([], None)


def prefetch(cache: BandCache, jobs: Sequence[Job], workers: int) -> None:
    """Run ``jobs`` (each searching bands through ``cache``) in up to ``workers`` forked processes,
    in the order given (the longest first keeps the workers busy), and keep the answers they found
    in ``cache``: the caller's own run of the same jobs then reads every band back. Answers are
    pure functions of their keys (:func:`band_key`), so a band found in a worker is the one the
    caller would find. The workers are forked from this process, so the jobs' tables are theirs
    without a copy; each hands back only its new entries (plain JSON values). Nothing with fewer
    than two workers or jobs (the caller's run searches them)."""
    global _WORK
    n = min(workers, len(jobs))
    if n < 2:
        return
    _WORK = (list(jobs), cache)
    pool = multiprocessing.get_context("fork").Pool(n, initializer=_quiet_worker)
    try:
        for found in pool.imap_unordered(_prefetched, range(len(jobs))):
            cache.add(found)
        pool.close()  # the workers end on their own once the jobs are done
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        _WORK = ([], None)


def _quiet_worker() -> None:
    """A :func:`prefetch` worker ends on SIGTERM and ignores Ctrl-C, as multiprocessing's own
    workers do: the solving process's handlers (specs.errors.unwind_on_termination) would turn a
    terminated worker into a traceback on stderr; the solving process cleans up for both."""
    for sig in TERMINATING:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _prefetched(i: int) -> dict[str, dict[str, Any]]:
    """In a worker of :func:`prefetch`: run job ``i``, return the entries it added to the cache."""
    jobs, cache = _WORK
    assert cache is not None
    before = set(cache.entries())
    jobs[i]()
    return {k: e for k, e in cache.entries().items() if k not in before}


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _entry(ans: BandAnswer) -> dict[str, Any] | None:
    """``ans`` as plain JSON values (None: one JSON would not give back unchanged)."""
    r = ans.result
    if ans.open_bound == math.inf or (ans.nodes is None) != (ans.chosen is None):
        return None
    e: dict[str, Any] = {
        "nodes": None if ans.nodes is None else [[int(i), int(k)] for i, k in ans.nodes],
        "status": str(r.status),
        "objective": _finite_or_none(r.objective),
        "bound": _finite_or_none(r.bound),
        "gap": _finite_or_none(r.gap),
        "visited": int(r.nodes),
        "open_bound": _finite_or_none(ans.open_bound),
        "note": ans.note,
    }
    if ans.nodes is not None and not all(math.isfinite(v) for v in (r.objective, r.bound, r.gap)):
        return None
    if ans.nodes is None and math.isfinite(r.objective):
        return None
    return e


def _answer(spec: Spec, tab: ColumnTable, e: dict[str, Any], backend: str, seconds: float, mark: str) -> BandAnswer:
    """The :class:`~solver.bottleneck.BandAnswer` an entry holds: its cluster's bill and throughputs
    recomputed from ``tab`` (:func:`~solver.bottleneck.chosen_of`); ``mark`` ends its note (where
    the answer came from)."""
    open_bound = -math.inf if e["open_bound"] is None else float(e["open_bound"])
    note = e["note"] + mark if e["note"] else ""
    if e["nodes"] is None:
        res = Result(SolverStatus(e["status"]), math.inf, math.inf, math.inf, e["visited"], seconds, None, backend)
        return BandAnswer(None, res, note, open_bound=open_bound)
    nodes: Nodes = [(int(i), int(k)) for i, k in e["nodes"]]
    res = Result(
        SolverStatus(e["status"]),
        float(e["objective"]),
        float(e["bound"]),
        float(e["gap"]),
        e["visited"],
        seconds,
        None,
        backend,
        0.0,
    )
    return BandAnswer(chosen_of(spec, tab, nodes), res, note, 0, nodes, open_bound)


def _number(x: Any, *, optional: bool = False) -> bool:
    if x is None:
        return optional
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _valid(e: Any) -> bool:
    """An entry of this version: every field, of its type."""
    if not isinstance(e, dict) or set(e) != set(_FIELDS):
        return False
    nodes = e["nodes"]
    if nodes is not None and not (
        isinstance(nodes, list)
        and nodes
        and all(
            isinstance(n, list) and len(n) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in n)
            for n in nodes
        )
        and all(n[0] >= 0 and n[1] >= 1 for n in nodes)
    ):
        return False
    if e["status"] not in {str(s) for s in SolverStatus}:
        return False
    solved = nodes is not None
    nums = all(_number(e[f], optional=not solved) for f in ("objective", "bound", "gap"))
    return (
        nums
        and isinstance(e["visited"], int)
        and not isinstance(e["visited"], bool)
        and e["visited"] >= 0
        and _number(e["open_bound"], optional=True)
        and isinstance(e["note"], str)
    )
