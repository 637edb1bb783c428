"""Number formats shared by every table."""

from __future__ import annotations

from specs.vocab import Operation

#: How tables name each operation.
OP_LABELS: dict[Operation, str] = {
    Operation.GET: "get (single-result lookup)",
    Operation.EMPTY_GET: "empty get (no-result lookup)",
    Operation.RANGE: "range scan",
    Operation.INSERT: "insert",
    Operation.UPDATE: "blind update",
    Operation.RMW: "read-modify-write",
    Operation.EMPTY_RANGE: "empty range (no key in the range)",
}


def money(x: float) -> str:
    return f"${x:,.2f}"


def si(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f}{unit}"
    return f"{x:,.2f}"


def gib(x: float) -> str:
    return f"{x / 2**30:,.2f} GiB"
