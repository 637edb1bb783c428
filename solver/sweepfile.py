"""The sweep file on disk: ``FILE.parquet`` plus a journal of finished tasks.

``FILE.parquet``
  one :class:`~solver.rundir.SweepRow` per (spec, budget, provider), sorted by
  spec, provider and budget; what other tools read.
``.FILE.parquet.parts/``
  one part file per task finished since the last merge; gone after a sweep ends.
``.FILE.parquet.lock``
  the lock a running sweep holds on the file (solver.output_lock: a flock, so a
  crashed sweep's is gone with it); a second sweep on one file is refused at once.
  A sweep that refuses the file (not a sweep file, a content hash that fails)
  removes the lock file it made: a refused command leaves nothing behind.

The file and every part are sealed (specs.io): each carries a SHA-256 of its
rows, checked whenever it is read. A part that fails it (or any other check) is
reported, removed and its rows solved again; a sweep file that fails it is
refused (exit 2; it is the user's, and may hold other specs' rows), before any
work.

A finished task's rows are written at once as a new part file (an atomic write
of that task's rows only), so once a task is reported finished nothing can
lose it, whatever dies next (a worker, the client, the machine). A merge
rewrites ``FILE.parquet`` atomically with every part's rows and then deletes
the parts; a crash between the two leaves parts whose rows are already in the
file, and every merge keeps one row per (spec, budget, provider), so they count
once. Opening the file merges whatever parts an interrupted sweep left.

Why a journal and not one atomic rewrite per finished task: a rewrite costs the
whole file every time, quadratic over a sweep of thousands of specs, in the one
client process; a part costs only its task's rows. Merges are paced
(:data:`MERGE_PACE`) so that rewriting the file stays a small share of the
client's time however large it grows, while a small sweep's file is rewritten
after every task.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from solver.output_lock import OutputLock
from solver.rundir import SweepRow
from specs.errors import InputError
from specs.io import check_output_file, read_rows, write_rows

#: Merge again only after MERGE_PACE times the last merge's duration has passed: merging then takes at
#: most 1 / (1 + MERGE_PACE) of the client's time (here 10%). A design choice, not a measured constant.
MERGE_PACE = 9.0

Key = tuple[str, float, str]


def row_key(spec: str, budget: float, provider: str) -> Key:
    """A row's identity: budgets compare to 6 decimals (a grid re-parsed from the same flag is the same)."""
    return (spec, round(float(budget), 6), provider)


def _key(r: SweepRow) -> Key:
    return row_key(r.spec, r.budget, r.provider)


def _order(k: Key) -> tuple[str, str, float]:
    return (k[0], k[2], k[1])


class SweepFile:
    """The rows of a sweep so far; :meth:`add` journals a finished task, :meth:`merge` folds the journal in.
    Holds the file's lock from opening until :meth:`close` (or the end of a ``with`` block);
    ``notes`` collects one-line reports of refused journal parts."""

    def __init__(self, path: Path) -> None:
        if path.suffix != ".parquet":
            raise InputError(f"--out {path}: the sweep file must end in .parquet")
        check_output_file(path, "--out")
        self.path = path
        self.parts_dir = path.with_name(f".{path.name}.parts")
        self.rows: dict[Key, SweepRow] = {}
        self.notes: list[str] = []
        self._parts: list[Path] = []
        self._last_merge_end = 0.0
        self._last_merge_seconds = 0.0
        self._lock = OutputLock(path)
        try:
            self._open()
        except BaseException:
            self._lock.discard()  # refused: no lock file left beside the file a new lock made
            raise
        self.on_disk = len(self.rows)  # rows found before this sweep (file and leftover parts)

    def _open(self) -> None:
        """Read the file and the parts an interrupted sweep left (a bad part: reported, removed)."""
        if self.path.exists():
            try:
                self._take(read_rows(self.path, SweepRow, "sweep file", sealed=True))
            except InputError as exc:
                raise InputError(f"--out {exc}: move it away to sweep into a new file") from None
        if self.parts_dir.is_dir():
            for tmp in self.parts_dir.glob(".*.tmp"):  # a part whose write a crash cut short: never reported done
                tmp.unlink()
            for part in sorted(self.parts_dir.glob("*.parquet")):
                try:
                    rows = read_rows(part, SweepRow, "sweep file part", sealed=True)
                except InputError as exc:
                    self.notes.append(f"sweep journal part refused and removed, its rows are solved again: {exc}")
                    part.unlink(missing_ok=True)
                    continue
                self._take(rows)
                self._parts.append(part)

    def close(self) -> None:
        """Release the file's lock (rows not merged yet stay in the journal)."""
        self._lock.release()

    def __enter__(self) -> SweepFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self, rows: Iterable[SweepRow]) -> list[SweepRow]:
        """Keep the rows not seen yet (first one wins); returns them."""
        new = []
        for r in rows:
            k = _key(r)
            if k not in self.rows:
                self.rows[k] = r
                new.append(r)
        return new

    def done(self) -> set[Key]:
        return set(self.rows)

    def add(self, rows: Iterable[SweepRow]) -> int:
        """Journal one finished task's rows (durable on return); merge if the pace allows. Returns rows added."""
        new = self._take(rows)
        if new:
            self.parts_dir.mkdir(exist_ok=True)
            part = self.parts_dir / f"{uuid.uuid4().hex}.parquet"
            write_rows(part, new, SweepRow, sealed=True)
            self._parts.append(part)
        if time.monotonic() - self._last_merge_end >= MERGE_PACE * self._last_merge_seconds:
            self.merge()
        return len(new)

    def merge(self) -> None:
        """Rewrite FILE.parquet with every row (atomically), then drop the merged parts."""
        t0 = time.monotonic()
        if self._parts:
            write_rows(self.path, [self.rows[k] for k in sorted(self.rows, key=_order)], SweepRow, sealed=True)
            for part in self._parts:
                part.unlink(missing_ok=True)
            self._parts = []
        if self.parts_dir.is_dir() and not any(self.parts_dir.iterdir()):
            self.parts_dir.rmdir()
        self._last_merge_end = time.monotonic()
        self._last_merge_seconds = self._last_merge_end - t0

    def finish(self) -> None:
        """The sweep's end: every row in FILE.parquet, no journal left (an empty sweep still writes its file)."""
        self.merge()
        if not self.path.exists():
            write_rows(self.path, [], SweepRow, sealed=True)
