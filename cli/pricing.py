"""`cosine pricing`: inspect and rebuild the pricing catalog."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import cli_errors
from specs.vocab import CatalogKind, PriceSet, Provider

app = typer.Typer(help="Inspect and rebuild the pricing catalog.", no_args_is_help=True)


@app.command("build")
def build() -> None:
    """Rebuild pricing.parquet from the CSV sources in pricing/."""
    with cli_errors():
        from cost_models.pricing.build import build_parquet
        from cost_models.pricing.rows import PRICING_SOURCE_DIR
        from report.solve import print_written

        path, rows = build_parquet()
        print_written(f"{path} ({rows} rows from {PRICING_SOURCE_DIR}/*.csv)")


@app.command("show")
def show(
    provider: Annotated[Provider | None, typer.Option(help="Only this provider.")] = None,
    price_set: Annotated[PriceSet, typer.Option("--set", help="Price set.")] = PriceSet.ONDEMAND,
    kind: Annotated[CatalogKind | None, typer.Option(help="Only this kind of row.")] = None,
) -> None:
    """Print the pricing catalog as a table."""
    with cli_errors():
        from cost_models.pricing.catalog import catalog_rows
        from report.pricing import print_catalog

        print_catalog(catalog_rows(price_set, provider), price_set, kind)
