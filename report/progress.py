"""The progress bar every long command shows (on stderr, gone when done)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn


def progress_bar() -> Progress:
    """A transient bar: description, bar, percentage, elapsed time; only on a terminal, so that
    stderr redirected to a file or a pipe holds nothing but the command's messages."""
    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=console,
        disable=not console.is_terminal,
    )
