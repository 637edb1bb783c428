"""`cosine calibrate wal`: a write's engine CPU by its entry's bytes and by the WAL policy the model
prices (phi.yaml ``wal``; specs.vocab.MODELLED_WAL_SYNC, what `cosine render` writes).

The table's write CPU (``cpu_seconds`` of insert, update and rmw) is measured on the calibration's
presets: entries of :data:`~measure.grid.KEY` + :data:`~measure.grid.VALUE` bytes (116) and
``wal_sync = "none"`` (the WAL is written, never synced). A rendered engine runs
``group_commit``: each write group is written to the WAL by a system call and synced by the
engine's sync thread every millisecond. Measured on stop 61's host (cached update-only runs, one
client thread, a memtable holding every key): an update cost 0.42 / 1.29 us at 100 / 1,000-byte
values under ``none`` and 1.41 / 2.53 under ``group_commit`` (LSM preset; B-tree 0.39 / 1.18 and
1.27 / 2.44), the sync thread 0.11 / 0.28 us more; the table's 0.74 us at 116 bytes charged
ycsb_a's 1 KiB updates about a third of what they cost in process (docs/journal/s43-s51.md §33).

Each point (preset, policy, value size) is the median of :data:`REPEATS` runs: the driver thread's
CPU per update (foreground) and the other threads' (background). The fits, least squares, each
coefficient refused at or below 0 (:class:`~measure.calibrate.CalibrationError`) as every term of
the table is:

* foreground: ``c_preset + s x E + [policy] g``, E the entry's bytes: ``s`` the entry's copies and
  allocation (any policy), ``g`` the policy's WAL write per group;
* background: ``[policy] k`` beyond ``none``'s, the sync thread's per group.

In process every write is its own group; the model charges a write ``s (E - E0) + g`` on its thread
and ``k`` in the background (cost_models.cpu.wal_seconds). A served batch's consecutive SETs share
one group, which the serving table's write terms measure (it is calibrated under the same policy:
measure.served_calibration). Not modelled: in process the group's CPU also grows with the entry
(about 0.35 ns a byte in the foreground and 0.2 in the background at stop 61), which a served
batch's group does not show (the serving calibration's SETs at depth 1, a group each, cost less
beyond the engine at 4 KiB than at 64 bytes once it is charged): docs/journal/s43-s51.md §33.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models.phi import PHI_TABLE
from measure.calibrate import CalibrationError
from measure.calibrate.samples import machine, provenance
from measure.engine import TEMPLATE, WAL_BYTES_PER_POINT, build, config_text, run, workload_dict
from measure.grid import KEY, VALUE, designs
from specs.io import write_text
from specs.schema import Distribution, Workload
from specs.vocab import MODELLED_WAL_SYNC, Operation, WalSync

#: The presets measured: the LSM's and the B-tree's (the table's other classes write as one of them).
PRESETS = ("rocksdb", "wiredtiger")
#: The policies: the calibration's own and the one the model prices.
POLICIES = (WalSync.NONE, MODELLED_WAL_SYNC)
#: Value sizes (bytes) of the runs, keys of :data:`~measure.grid.KEY` bytes (``--quick``: the ends).
VALUES = (100, 1000, 4000)
QUICK_VALUES = (100, 4000)
#: Keys loaded and at most as many updates run per point (0.1-0.6 s each on stop 61's host); a
#: memtable of :data:`BUFFER_BYTES` holds every key (no flush, no block read).
RECORDS = 20_000
OPERATIONS = 200_000
BUFFER_BYTES = 1 << 30


def updates(entry_bytes: int) -> int:
    """Updates of one point: :data:`OPERATIONS`, bounded by the serving calibration's
    :data:`~measure.engine.WAL_BYTES_PER_POINT` of WAL (why: there; a point's first run
    of 200,000 4 KiB updates, 0.8 GB of WAL, charged a group 1.0 ns a byte, 0.33 when bounded)."""
    return min(OPERATIONS, WAL_BYTES_PER_POINT // entry_bytes)


#: Runs per point; the point is their median (one of three moved 18 % at stop 61).
REPEATS = 3


@dataclass(frozen=True)
class WalPoint:
    """One point: a preset's CPU per update (seconds) under a WAL policy at an entry size."""

    preset: str
    policy: str
    entry_bytes: int
    foreground_seconds: float
    background_seconds: float
    runs: tuple[float, ...]


@dataclass(frozen=True)
class WalFit:
    """The fitted terms (module docstring), seconds and seconds per entry byte."""

    seconds_per_byte: float
    group_seconds: float
    group_background_seconds: float


def measure(quick: bool, progress: Callable[[int, int, str], None] | None = None) -> list[WalPoint]:
    """Every (preset, policy, value size) point, each the median of :data:`REPEATS` runs."""
    exe = build(TEMPLATE)
    values = QUICK_VALUES if quick else VALUES
    total = len(PRESETS) * len(POLICIES) * len(values) * REPEATS
    out: list[WalPoint] = []
    done = 0
    for preset in PRESETS:
        base = designs(RECORDS, quick=True, optima=False)[preset]
        for policy in POLICIES:
            secs = {**base, "durability": {**base["durability"], "wal_sync": str(policy)}}
            for v in values:
                wl = Workload(
                    entries=RECORDS,
                    key_bytes=KEY,
                    value_bytes=v,
                    operations={Operation.UPDATE: 1.0},
                    scan_length=1.0,
                    get_distribution=Distribution(),
                    put_distribution=Distribution(),
                    operations_per_month=None,
                )
                cfg = config_text(secs, 1, key_bytes=KEY, value_bytes=v, buffer_bytes=BUFFER_BYTES)
                fg, bg = [], []
                n = updates(KEY + v)
                for _ in range(REPEATS):
                    rep = run(TEMPLATE, cfg, workload_dict(wl, RECORDS, n, threads=1), exe=exe)
                    fg.append(float(rep["cpu"]["foreground_seconds"]) / n)
                    bg.append(float(rep["cpu"]["background_seconds"]) / n)
                    done += 1
                    if progress:
                        progress(done, total, f"{preset} {policy} value {v} B")
                out.append(
                    WalPoint(preset, str(policy), KEY + v, statistics.median(fg), statistics.median(bg), tuple(fg))
                )
    return out


def fit(points: list[WalPoint]) -> WalFit:
    """:class:`WalFit` by least squares (module docstring); refuses a term at or below 0."""
    presets = sorted({p.preset for p in points})
    for name in presets:
        for policy in POLICIES:
            if len({p.entry_bytes for p in points if p.preset == name and p.policy == policy}) < 2:
                raise CalibrationError(f"wal: {name} under {policy} needs two entry sizes or more")
    gc = np.array([1.0 if p.policy == MODELLED_WAL_SYNC else 0.0 for p in points])
    e = np.array([float(p.entry_bytes) for p in points])
    dummies = [[1.0 if p.preset == name else 0.0 for p in points] for name in presets]
    a = np.column_stack([e, gc, *dummies])
    fg, *_ = np.linalg.lstsq(a, np.array([p.foreground_seconds for p in points]), rcond=None)
    # the sync thread's CPU beyond `none`'s (a few ns per update there), per preset's `none` level
    bg_a = np.column_stack([gc, *dummies])
    bg, *_ = np.linalg.lstsq(bg_a, np.array([p.background_seconds for p in points]), rcond=None)
    out = WalFit(float(fg[0]), float(fg[1]), float(bg[0]))
    bad = [f"{k} = {v:.3g}" for k, v in asdict(out).items() if not v > 0]
    if bad:
        raise CalibrationError(f"wal: the fit wants a term at or below 0 ({'; '.join(bad)}): not a measurement")
    return out


def section(points: list[WalPoint], f: WalFit, quick: bool) -> dict[str, Any]:
    """phi.yaml's ``wal`` section: the terms, the reference entry and policy, how they were measured."""
    return {
        "policy": str(MODELLED_WAL_SYNC),
        "reference_entry_bytes": KEY + VALUE,
        **{k: float(f"{v:.4g}") for k, v in asdict(f).items()},
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "provenance": provenance(),
        "method": (
            f"cosine calibrate wal{' --quick' if quick else ''} (measure/calibrate/wal.py): update-only cached "
            f"runs of the presets {list(PRESETS)} under wal_sync {[str(p) for p in POLICIES]}, {RECORDS} keys of "
            f"{KEY} bytes in a memtable of {BUFFER_BYTES} bytes (no flush), {OPERATIONS} updates or "
            f"{WAL_BYTES_PER_POINT} bytes of WAL, one thread, "
            f"values {list(QUICK_VALUES if quick else VALUES)} bytes; each point the median of {REPEATS} runs' "
            "CPU per update, the driver thread's (foreground) and the others' (background); least squares "
            "of the foreground against entry bytes E with an intercept per preset, plus g under the "
            "policy; of the background, k under the policy. A write costs s (E - reference) + g "
            "on its thread and k in the background, one group per write."
        ),
        "points": [{**asdict(p), "runs": list(p.runs)} for p in points],
    }


def merge(sec: dict[str, Any], path: Path = PHI_TABLE) -> Path:
    """Write the ``wal`` section into the table at ``path``, every other entry as it was."""
    from measure.calibrate.table import TABLE_HEADER

    doc = yaml.safe_load(path.read_text())
    doc["wal"] = sec
    write_text(path, TABLE_HEADER + yaml.safe_dump(doc, sort_keys=False))
    return path
