"""The progress long commands show on stderr: a transient rich bar on a terminal, and plain lines
(done/total, rate, elapsed, ETA) at least every :data:`LINE_INTERVAL_S` seconds off one, so that a
run whose output goes to a file or a pipe still says how far it is."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

#: Off a terminal, the longest a running command stays silent (seconds).
LINE_INTERVAL_S = 10.0


@dataclass
class _LineTask:
    description: str
    total: float | None
    completed: float = 0.0
    started: float = 0.0


class LineProgress:
    """The bars' interface (``add_task``, ``update``, a context manager) printing plain lines: one
    every ``interval`` seconds while the command runs (from a background thread, so a step that
    reports nothing for minutes is still announced), and, once a line was printed, one when a task's
    description changes or it completes. A command done within ``interval`` prints none: its output
    (one ``error:`` line for bad input) is unchanged. ``unit`` names what is counted (None:
    percentages)."""

    def __init__(
        self,
        unit: str | None = None,
        interval: float = LINE_INTERVAL_S,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.unit, self.interval, self.clock = unit, interval, clock
        self.stream = stream if stream is not None else sys.stderr
        self.tasks: list[_LineTask] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last = clock()  # the silence starts now
        self._printed = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LineProgress:
        self._thread = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def add_task(self, description: str, total: float | None = None, **_: Any) -> TaskID:
        with self._lock:
            self.tasks.append(_LineTask(description, total, 0.0, self.clock()))
            if self._printed:
                self._print(self.tasks[-1])
            return TaskID(len(self.tasks) - 1)

    def update(
        self,
        task: TaskID,
        *,
        description: str | None = None,
        completed: float | None = None,
        total: float | None = None,
        **_: Any,
    ) -> None:
        with self._lock:
            t = self.tasks[task]
            changed = description is not None and description != t.description
            if description is not None:
                t.description = description
            if total is not None:
                t.total = total
            if completed is not None:
                t.completed = completed
            done = t.total is not None and t.completed >= t.total > 0
            if (self._printed and (changed or done)) or self.clock() - self._last >= self.interval:
                self._print(t)

    def line(self, t: _LineTask) -> str:
        """``description: done/total (pct), rate, elapsed, ETA``."""
        elapsed = max(self.clock() - t.started, 0.0)
        parts = [t.description]
        if t.total:
            count = f"{t.completed:,.0f}/{t.total:,.0f}" if self.unit else f"{t.completed / t.total:.0%}"
            parts.append(count if self.unit is None else f"{count} {self.unit}")
            if t.completed and elapsed > 0:
                rate = t.completed / elapsed
                if self.unit:
                    parts.append(f"{rate:.2f} {self.unit}/s")
                parts.append(f"ETA {_clock_text(max(t.total - t.completed, 0.0) / rate)}")
        parts.append(f"elapsed {_clock_text(elapsed)}")
        return ": ".join(parts[:1]) + (" " + ", ".join(parts[1:]) if len(parts) > 1 else "")

    def _print(self, t: _LineTask) -> None:
        self._last = self.clock()
        self._printed = True
        print(self.line(t), file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.interval)):
            with self._lock:
                if self.tasks and self.clock() - self._last >= self.interval:
                    self._print(self.tasks[-1])


def _clock_text(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _transient(*columns: ProgressColumn, unit: str | None = None) -> Progress | LineProgress:
    """A bar on stderr, gone when done, on a terminal; plain progress lines on stderr off one
    (:class:`LineProgress`), so that a redirected run still shows how far it is."""
    console = Console(stderr=True)
    if not console.is_terminal:
        return LineProgress(unit)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *columns,
        transient=True,
        console=console,
    )


def progress_bar() -> Progress | LineProgress:
    """A transient bar: description, bar, percentage, elapsed time."""
    return _transient(TaskProgressColumn(), TimeElapsedColumn())


def _rate(task: Task) -> float | None:
    """Items per second since the task started: the whole run's average, steady when results arrive in
    large chunks (rich's own speed estimate divides by the time between the first and last chunk)."""
    elapsed = task.elapsed
    if not elapsed or not task.completed:
        return None
    return task.completed / elapsed


class RateColumn(ProgressColumn):
    """'12.3 solves/s'."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        rate = _rate(task)
        shown = f"{rate:.1f}" if rate is not None else "?"
        return Text(f"{shown} {self.unit}/s", style="progress.data.speed")


class EtaColumn(ProgressColumn):
    """'ETA 0:01:05' from the average rate."""

    def render(self, task: Task) -> Text:
        rate = _rate(task)
        if rate is None or task.total is None:
            return Text("ETA -:--:--", style="progress.remaining")
        left = int(max(task.total - task.completed, 0.0) / rate)
        return Text(f"ETA {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}", style="progress.remaining")


def counting_bar(unit: str) -> Progress | LineProgress:
    """A transient bar that counts items: description, bar, done / total, rate, elapsed time, ETA."""
    return _transient(MofNCompleteColumn(), RateColumn(unit), TimeElapsedColumn(), EtaColumn(), unit=unit)
