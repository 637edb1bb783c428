"""An exclusive lock on an output file: one process writes it at a time.

Two `cosine sweep` runs on one ``--out`` would each merge their own rows into
the file and the last merge would win (the other run's rows lost, both
reporting success). The first run holds the lock until it ends; a second one
is refused at once, before any work, naming the holder.

Like RocksDB's ``LOCK`` file, the lock is an ``fcntl.flock`` on a lock file
beside the output (``.NAME.lock``), not the lock file's existence: the kernel
drops a flock when its holder's process ends, however it ends (a crash,
SIGKILL, the machine's reboot), so a dead holder never blocks the next run. The
lock file stays after a run. It holds one line of JSON naming its holder (PID,
host, start time), written in place into the locked file: not atomically
through specs.io, since a rename would give the name to another, unlocked file.

A run refused after taking the lock (the output is not one it may write)
leaves nothing behind: :meth:`OutputLock.discard` removes the lock file if this
lock created it. Removing a lock file could let two processes each lock a
different file of that name, so every lock, once taken, checks that the name
still names the file it locked, and starts again if not.

A flock belongs to an open file, not to a process: a second lock of the same
output in the same process is refused too. The lock's descriptor is not
inherited by child processes (Python opens files non-inheritable), so a worker
process cannot keep it after its parent has ended.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from specs.errors import InputError

#: How many times a lock is tried again when its file was removed between opening and locking it.
LOCK_TRIES = 100
#: How long a refused run waits for the holder's line when the holder has just locked the file
#: and not yet written it (seconds).
HOLDER_WAIT_S = 1.0


def lock_path(path: Path) -> Path:
    """The lock file of an output: ``.NAME.lock`` beside it."""
    return path.with_name(f".{path.name}.lock")


class OutputLock:
    """The exclusive lock of ``path`` (an :class:`InputError` naming the holder if another open
    file holds it); released by :meth:`release`, on leaving a ``with`` block, or when the process ends."""

    def __init__(self, path: Path, flag: str = "--out") -> None:
        self.path = lock_path(path)
        for _ in range(LOCK_TRIES):
            fd, self.created = self._open(path, flag)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise InputError(
                    f"{flag} {path}: another process is writing it ({holder}; lock {self.path}): "
                    f"wait for it to end or choose another {flag}"
                ) from None
            except OSError as exc:
                os.close(fd)
                raise InputError(f"{flag} {path}: cannot lock {self.path} ({exc.strerror})") from None
            if self._names(fd):
                break
            os.close(fd)  # a refused run discarded the file between our open and our lock: again
        else:
            raise InputError(f"{flag} {path}: its lock file {self.path} keeps being removed; try again")
        self._fd: int | None = fd
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        line = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, line.encode(), 0)

    def _open(self, path: Path, flag: str) -> tuple[int, bool]:
        """The lock file's descriptor, and whether this call created the file."""
        try:
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), True
            except FileExistsError:
                try:
                    return os.open(self.path, os.O_RDWR | os.O_NOFOLLOW), False
                except FileNotFoundError:  # removed since: create it
                    return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), True
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError(f"{flag} {path}: its lock file {self.path} is a symbolic link") from None
            raise InputError(f"{flag} {path}: cannot open its lock file {self.path} ({exc.strerror})") from None

    def _names(self, fd: int) -> bool:
        """Whether the lock file's name still names the open file ``fd``."""
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def discard(self) -> None:
        """Drop the lock, and remove the lock file if this lock created it (a refused run leaves
        nothing behind); removed while still locked, so no other process holds it then."""
        if self._fd is not None and self.created:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self.release()

    def release(self) -> None:
        """Drop the lock (once; the lock file stays, see the module docstring)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the open file drops its flock
            self._fd = None

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _holder(fd: int) -> str:
    """The holder's line in words, as the holder wrote it (waiting :data:`HOLDER_WAIT_S` for a
    holder that has locked the file and not yet written it)."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        text = os.pread(fd, 4096, 0).decode(errors="replace")
        try:
            who = json.loads(text)
            return f"PID {int(who['pid'])} on host {who['host']}, started {who['started']}"
        except (ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                return "holder unknown: its lock file names none"
            time.sleep(0.05)
