"""`cosine`: the command-line front end (typer). Commands parse options and call
into ``cost_models``/``solver``; no model logic lives here. Heavy packages are
imported inside commands so that ``cosine --help`` stays instant."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from solver.errors import InputError, cli_errors

app = typer.Typer(
    help="Cosine: co-design a key-value storage engine and its cloud deployment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
pricing_app = typer.Typer(help="Inspect and rebuild the pricing catalog.", no_args_is_help=True)
app.add_typer(pricing_app, name="pricing")

_VM = re.compile(r"^(?P<prov>[a-z]+):(?P<name>[^\[\]]+?)(?:\[x(?P<count>\d+)\])?$")


def _parse_vm(text: str) -> tuple[str, str, int]:
    m = _VM.match(text.strip())
    if not m:
        raise InputError(f"--vm {text!r}: expected PROVIDER:TYPE[xCOUNT], e.g. aws:r5d.xlarge[x3]")
    count = int(m.group("count") or 1)
    if count < 1:
        raise InputError(f"--vm {text!r}: the count must be at least 1")
    return m.group("prov"), m.group("name").strip(), count


@app.command()
def evaluate(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML).")],
    design: Annotated[str, typer.Option(help="rocksdb | wiredtiger | faster | T=8,K=3,Z=1,buffer=1GiB,bloom_bits=10")] = "rocksdb",
    vm: Annotated[str, typer.Option(help="PROVIDER:TYPE[xCOUNT], e.g. aws:r5d.xlarge[x3]")] = "aws:r5d.xlarge[x3]",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Predict I/O per operation, latency, throughput and the monthly bill of one design on given VMs."""
    with cli_errors(str(spec)):
        from cost_models.design import parse_design
        from cost_models.evaluate import evaluate_config
        from cost_models.pricing import PROVIDERS, load_catalog
        from specs.schema import load_spec

        s = load_spec(spec)
        provider, name, count = _parse_vm(vm)
        if provider not in PROVIDERS:
            raise InputError(f"--vm: unknown provider {provider!r} (valid: {', '.join(PROVIDERS)})")
        cat = load_catalog(s.pricing)
        ev = evaluate_config(s, parse_design(design), cat.vm(provider, name), count, catalog=cat)
        out = ev.as_dict()
        out["spec"] = s.name
        out["pricing"] = s.pricing
        if as_json:
            typer.echo(json.dumps(out, indent=2, default=float))
        else:
            from solver.report import print_evaluation

            print_evaluation(out, s.workload.operations)


@pricing_app.command("build")
def pricing_build() -> None:
    """Rebuild pricing.parquet from the CSV sources in pricing/."""
    with cli_errors():
        from cost_models.pricing import PRICING_SOURCE_DIR, build_parquet

        path, rows = build_parquet()
        typer.echo(f"wrote {path} ({rows} rows from {PRICING_SOURCE_DIR}/*.csv)")


@pricing_app.command("show")
def pricing_show(
    provider: Annotated[str | None, typer.Option(help="aws | gcp | azure")] = None,
    price_set: Annotated[str, typer.Option("--set", help="paper2021 | ondemand | committed1y | spot")] = "paper2021",
    kind: Annotated[str | None, typer.Option(help="vm | storage | sla")] = None,
) -> None:
    """Print the pricing catalog as a table."""
    with cli_errors():
        from rich.console import Console
        from rich.table import Table

        from cost_models.pricing import PRICE_SETS, PROVIDERS, catalog_rows, price_summary

        if price_set not in PRICE_SETS:
            raise InputError(f"--set: unknown price set {price_set!r} (valid: {', '.join(PRICE_SETS)})")
        if provider is not None and provider not in PROVIDERS:
            raise InputError(f"--provider: unknown provider {provider!r} (valid: {', '.join(PROVIDERS)})")
        if kind is not None and kind not in ("vm", "storage", "sla"):
            raise InputError(f"--kind: must be vm, storage or sla, got {kind!r}")
        rows = catalog_rows(price_set, provider)
        con = Console()
        for k in ("vm", "storage", "sla"):
            if kind and k != kind:
                continue
            sel = [r for r in rows if r["kind"] == k]
            if not sel:
                continue
            t = Table(title=f"{k} prices ({price_set})")
            for c in ("provider", "name", "figures", "price", "as of"):
                t.add_column(c, overflow="fold")
            for r in sel:
                figures, price = price_summary(r)
                t.add_row(r["provider"], r["name"] if k != "sla" else f"{r['feature']}: {r['name']}",
                          figures, price, r["as_of"] or "")
            con.print(t)


if __name__ == "__main__":
    app()
