"""What `cosine pricing show` prints."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from specs.vocab import CatalogKind


def print_catalog(rows: list[dict[str, Any]], price_set: str, kind: CatalogKind | None) -> None:
    """One table per kind of row (VMs, storage, SLAs)."""
    from cost_models.pricing.catalog import price_summary

    con = Console()
    for k in CatalogKind:
        if kind is not None and k != kind:
            continue
        sel = [r for r in rows if r["kind"] == k]
        if not sel:
            continue
        t = Table(title=f"{k} prices ({price_set})")
        for c in ("provider", "name", "figures", "price", "as of"):
            t.add_column(c, overflow="fold")
        for r in sel:
            figures, price = price_summary(r)
            name = r["name"] if k != CatalogKind.SLA else f"{r['feature']}: {r['name']}"
            t.add_row(r["provider"], name, figures, price, r["as_of"] or "")
        con.print(t)
