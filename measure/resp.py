"""A small blocking Redis-protocol (RESP2) client: enough for PING, INFO, the
integration tests and the scatter-gather scan (no dependency on a Redis library).
"""

from __future__ import annotations

import socket
from typing import Any

#: Seconds a connection waits for a reply before giving up.
DEFAULT_TIMEOUT_S = 5.0


class RespError(Exception):
    """An error reply (``-ERR ...``) from the server or the proxy."""


Reply = bytes | int | str | list[Any] | None | RespError


def encode(*args: bytes | str | int) -> bytes:
    """One request as an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += [b"$%d\r\n" % len(b), b, b"\r\n"]
    return b"".join(out)


class Connection:
    """One TCP connection to a RESP server (cosine-server, nutcracker, redis-server)."""

    def __init__(self, host: str, port: int, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def read(self) -> Reply:
        """The next reply; an error reply is returned as a :class:`RespError` (not raised)."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2 :]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ConnectionError(f"not a RESP reply: {line[:40]!r}")

    def call(self, *args: bytes | str | int) -> Reply:
        """Send one request and return its reply; raises :class:`RespError` for an error reply."""
        self.sock.sendall(encode(*args))
        r = self.read()
        if isinstance(r, RespError):
            raise r
        return r

    def pipeline(self, requests: list[tuple[bytes | str | int, ...]]) -> list[Reply]:
        """Send every request, then read every reply (errors are returned in place)."""
        self.sock.sendall(b"".join(encode(*r) for r in requests))
        return [self.read() for _ in requests]


def info(host: str, port: int, section: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, str]:
    """``INFO [section]`` parsed into ``{name: value}``."""
    with Connection(host, port, timeout) as c:
        raw = c.call("INFO", section) if section else c.call("INFO")
    if not isinstance(raw, bytes):
        raise ConnectionError(f"INFO answered {raw!r}")
    out = {}
    for line in raw.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if the server answers PING with PONG."""
    try:
        with Connection(host, port, timeout) as c:
            return c.call("PING") == "PONG"
    except (OSError, RespError):
        return False
