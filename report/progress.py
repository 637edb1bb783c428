"""The progress bars long commands show (on stderr, gone when done)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text


def _transient(*columns: ProgressColumn) -> Progress:
    """A bar on stderr, gone when done; only on a terminal, so that stderr redirected to a file or a pipe
    holds nothing but the command's messages."""
    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *columns,
        transient=True,
        console=console,
        disable=not console.is_terminal,
    )


def progress_bar() -> Progress:
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


def counting_bar(unit: str) -> Progress:
    """A transient bar that counts items: description, bar, done / total, rate, elapsed time, ETA."""
    return _transient(MofNCompleteColumn(), RateColumn(unit), TimeElapsedColumn(), EtaColumn())
