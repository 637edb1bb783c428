"""The persistent cache of exact re-evaluations: a cluster's exact throughput, kept between solves.

Every answer of a solve is re-evaluated with the exact model (solver.frontier.reevaluate:
real shard sizes, exact window bisection); the result is part of the certificate. It is a
pure function of the cluster (each node's VM type, volume, design, entries and count) and of
what the model reads from the spec and the code, so a solve that changes only the budget,
the providers, the SLAs or the price set meets the same clusters again and reads their
re-evaluations back: the same numbers, not an approximation of them.

**Key.** One file per spec key, named by a SHA-256 of the code version (every file of
``cost_models/``, ``data/phi.yaml`` and another phi table named by the environment included, as
solver.table_cache hashes it, plus :data:`CODE_FILES`: solver/exact.py, which holds ``reevaluate``,
solver/model.py, whose scale it reports in, and this module), the workload, the design space
(without the cluster cap), robustness and the cost model. Within it, one entry per cluster, keyed by
a SHA-256 of every field of every node: the VM type (name, vCPUs, memory, price), the volume, the
design, the entries it holds and the node count. Any change to any of them is another key.

**Content.** JSON data only, no code: ``{"version", "key", "sha256", "clusters": {cluster key:
{"throughput", "perturbed", "io_per_op", "per_node"}}, "nodes": {node key: [throughput,
perturbed, L, Y]}}`` (one node of a column at a key count: solver.grid's count check reads them
back; :class:`CachedReevaluation`, plain
values: solver.exact converts its ``Exact`` from and to it, and this module imports neither
solver.exact nor solver.frontier), written atomically by specs.io. ``sha256`` is the content
hash of the rest (solver.sealed_json.payload_digest: its canonical JSON), checked on every read, so a
number edited in the file (by hand, a tool or a bad disk) is never served as a re-evaluation.
A file that cannot be read, fails its hash or has another shape is reported in one line and
ignored (then overwritten); an entry is used only whole.

**Where.** The table cache's directory (solver.sealed_json.default_dir), files
``reeval-<key>.json``. ``cosine solve --no-cache`` neither reads nor writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver.sealed_json import SealedCache, read_sections, write_sections
from solver.table_cache import code_version, spec_parts
from specs.errors import InputError
from specs.io import to_json
from specs.schema import Spec

if TYPE_CHECKING:
    from solver.tables.context import Context

VERSION = 4  # 2: a content hash ("sha256"); 3: per_node is NodeGroup records (design, storage); 4: "nodes"
#: The modules besides cost_models/ whose code decides a re-evaluation: the one defining
#: solver.exact.reevaluate (tests/test_reeval_cache.py checks it is named), the model's scale
#: (X_SCALE) it reports in, and this module.
CODE_FILES = ("solver/exact.py", "solver/model.py", "solver/reeval_cache.py", "solver/rundir.py")


@dataclass(frozen=True)
class CachedReevaluation:
    """One cluster's re-evaluation as the cache stores it: plain JSON values. The caller
    (solver.exact) converts it from and to its own ``Exact``, so this module imports neither
    solver.exact nor solver.frontier."""

    throughput: float  # expected workload, ops/s
    perturbed: float  # perturbed workload, ops/s (= throughput without robustness)
    io_per_op: dict[str, float]
    per_node: list[dict[str, Any]]


_FIELDS = tuple(f.name for f in dataclasses.fields(CachedReevaluation))


def spec_key(spec: Spec, code: str) -> str:
    """The key of a spec's re-evaluations (module docstring): all but the cluster."""
    parts = [f"reevaluations v{VERSION}", code, *spec_parts(spec)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _fields(obj: Any) -> dict[str, Any]:
    """A flat dataclass's fields by name, in order: what ``dataclasses.asdict`` gives for the VM
    type, volume and design (scalar and enum fields only), at 1/8 of its cost (1.4 against 10.8 us
    a design; stop 65)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def cluster_key(nodes: list[tuple[Context, int]]) -> str:
    """The key of one cluster: every field of every node's VM type, volume and design, its
    entries and its count (Python values, so a column read back from the table cache and the
    same column built from numpy arrays have one key)."""
    rows = [[_fields(c.vm), _fields(c.storage), _fields(c.design), c.entries, k] for c, k in nodes]
    return hashlib.sha256(to_json(rows, indent=None).encode()).hexdigest()


def node_key(c: Context, keys: float) -> str:
    """The key of one node of a column holding ``keys`` entries (:func:`cluster_key`'s fields)."""
    row = [_fields(c.vm), _fields(c.storage), _fields(c.design), c.entries, keys]
    return hashlib.sha256(to_json(["node", row], indent=None).encode()).hexdigest()


@dataclass
class ReevalCache(SealedCache):
    """A directory of cached re-evaluations; ``notes`` collects one-line reports of refused files."""

    _nodes: dict[str, list[float]] = field(default_factory=dict)

    def path(self, spec: Spec) -> Path:
        if not self._key:
            self._key = spec_key(spec, code_version(CODE_FILES))
        return self.directory / f"reeval-{self._key[:32]}.json"

    def load(self, spec: Spec) -> None:
        """Read the spec's file (nothing when there is none; a bad one is reported and ignored)."""
        path = self.path(spec)
        if not path.exists():
            return
        try:
            sections = read_sections(
                path, "re-evaluation cache", VERSION, self._key, {"clusters": _valid, "nodes": _valid_node}
            )
        except InputError as exc:
            self.notes.append(f"re-evaluation cache ignored and rebuilt: {exc}")
            return
        self._entries, self._nodes = sections["clusters"], sections["nodes"]

    def get(self, nodes: list[tuple[Context, int]]) -> CachedReevaluation | None:
        e = self._entries.get(cluster_key(nodes))
        if e is None:
            self.misses += 1
            return None
        self.hits += 1
        return CachedReevaluation(**{f: e[f] for f in _FIELDS})

    def put(self, nodes: list[tuple[Context, int]], row: CachedReevaluation) -> None:
        fields = {f: getattr(row, f) for f in _FIELDS}
        entry = json.loads(to_json(fields, indent=None))
        if entry == fields:  # only what JSON gives back unchanged
            self._entries[cluster_key(nodes)] = entry
            self._new += 1

    def get_node(self, c: Context, keys: float) -> list[float] | None:
        """One node of column ``c`` holding ``keys`` entries: [throughput, perturbed, L, Y] or None."""
        e = self._nodes.get(node_key(c, keys))
        if e is None:
            self.misses += 1
            return None
        self.hits += 1
        return list(e)

    def put_node(self, c: Context, keys: float, figures: list[float]) -> None:
        entry = json.loads(to_json(figures, indent=None))
        if entry == figures:
            self._nodes[node_key(c, keys)] = entry
            self._new += 1

    def save(self, spec: Spec) -> None:
        """Write the file when this solve added entries (atomically; a failed write is reported)."""
        if not self._new:
            return
        path = self.path(spec)
        sections = {"clusters": self._entries, "nodes": self._nodes}
        note = write_sections(path, "re-evaluation cache", VERSION, self._key, sections)
        if note is not None:
            self.notes.append(note)
        self._new = 0


def _valid_node(e: Any) -> bool:
    """[throughput, perturbed, L, Y]: non-negative numbers, the last two whole."""
    return (
        isinstance(e, list)
        and len(e) == 4
        and all(isinstance(x, int | float) and not isinstance(x, bool) and x >= 0 for x in e)
        and all(float(x).is_integer() for x in e[2:])
    )


def _valid(e: Any) -> bool:
    if not isinstance(e, dict) or set(e) != set(_FIELDS):
        return False
    nums = (e["throughput"], e["perturbed"])
    if not all(isinstance(x, int | float) and not isinstance(x, bool) and x >= 0 for x in nums):
        return False
    io = e["io_per_op"]
    ok_io = isinstance(io, dict) and all(isinstance(v, int | float) for v in io.values())
    return ok_io and isinstance(e["per_node"], list) and all(isinstance(n, dict) for n in e["per_node"])
