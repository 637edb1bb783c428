"""`cosine pricing build`: the CSV sources under ``pricing/`` (one row per item, each with its
``source`` and ``as_of``) checked and turned into ``pricing.parquet``."""

from __future__ import annotations

import csv
import math
from dataclasses import fields
from pathlib import Path

from cost_models.pricing.catalog import clear_cache
from cost_models.pricing.rows import (
    PRICING_PARQUET,
    PRICING_SOURCE_DIR,
    STORAGE_RULES,
    CatalogError,
    CatalogRow,
)
from specs.io import check_output_file, write_rows
from specs.vocab import PRICE_SETS, PROVIDERS, SLA_FEATURES, CatalogKind, StorageRule


def _num(row: dict[str, str], key: str, path: Path, line: int) -> float | None:
    raw = (row.get(key) or "").strip()
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError as exc:
        raise CatalogError(f"{path.name}:{line}: column {key!r} is not a number: {raw!r}") from exc
    if not math.isfinite(value):
        raise CatalogError(f"{path.name}:{line}: column {key!r} is not finite: {raw!r}")
    if value < 0:
        raise CatalogError(f"{path.name}:{line}: column {key!r} is negative: {raw!r}")
    return value


#: The columns each pricing source must have (``notes`` may be left out).
SOURCE_COLUMNS = {
    "vms.csv": ("price_set", "provider", "name", "vcpu", "memory_gib", "usd_per_hour", "source", "as_of"),
    "storage.csv": (
        *("price_set", "provider", "name", "rule", "size_gib", "free_gib", "usd_per_gb_month"),
        *("usd_per_disk_month", "iops", "iops_per_gib", "max_iops", "usd_per_iops_month", "source", "as_of"),
    ),
    "vm_storage.csv": (
        *("price_set", "provider", "vm", "min_vcpu", "max_vcpu", "product", "max_iops", "max_mibps"),
        *("max_disks", "size_gib", "source", "as_of"),
    ),
    "regions.csv": (
        *("price_set", "provider", "name", "zones", "cross_zone_usd_per_gb", "object_usd_per_gb_month"),
        *("source", "as_of"),
    ),
    "slas.csv": (
        *("price_set", "provider", "feature", "name", "available", "usd_flat_month", "usd_per_node_month"),
        *("usd_per_gb_month", "percent_of_spend", "minimum_usd", "min_nodes", "source", "as_of"),
    ),
}


def _read_csv(path: Path) -> list[tuple[int, dict[str, str]]]:
    """Rows of a pricing source with their line numbers; its header and every row's width checked."""
    if not path.is_file():
        raise CatalogError(f"pricing source {path} is missing")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh, restval="")
            missing = [c for c in SOURCE_COLUMNS[path.name] if c not in (reader.fieldnames or [])]
            if missing:
                raise CatalogError(f"{path}: no column {', '.join(missing)}")
            rows = list(enumerate(reader, start=2))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CatalogError(f"{path}: not a readable CSV file ({type(exc).__name__})") from None
    for line, r in rows:
        if None in r:
            raise CatalogError(f"{path.name}:{line}: more fields than the header has")
    return rows


def _price_sets(row: dict[str, str]) -> list[str]:
    ps = row["price_set"].strip()
    return list(PRICE_SETS) if ps == "*" else [p.strip() for p in ps.split("|")]


def _tiers(text: str, path: Path, line: int) -> str:
    """``FROM:RATE;FROM:RATE`` (e.g. ``32000:0.0455;64000:0.032``), checked."""
    for part in filter(None, text.split(";")):
        try:
            lo, rate = (float(x) for x in part.split(":"))
        except ValueError:
            raise CatalogError(f"{path.name}:{line}: iops_price_tiers {text!r}: expected FROM:RATE;FROM:RATE") from None
        if lo < 0 or rate < 0:
            raise CatalogError(f"{path.name}:{line}: iops_price_tiers {text!r}: negative figure")
    return text


def _vm_network(row: dict[str, str], path: Path, line: int) -> dict[str, object]:
    """A VM row's network columns (issue 48), checked: a baseline needs its source and date, a burst
    is at least the baseline. A row without a baseline has no network bound (None everywhere)."""
    base = _num(row, "network_baseline_gbps", path, line)
    if base is None:
        return {}
    if base <= 0:
        raise CatalogError(f"{path.name}:{line}: network_baseline_gbps must be positive")
    burst = _num(row, "network_burst_gbps", path, line)
    burst = base if burst is None else burst
    if burst < base:
        raise CatalogError(f"{path.name}:{line}: network_burst_gbps {burst:g} is below the baseline {base:g}")
    if not (row.get("network_source") or "").strip() or not (row.get("network_as_of") or "").strip():
        raise CatalogError(f"{path.name}:{line}: a network bandwidth needs network_source and network_as_of")
    ingress = (row.get("network_ingress_limited") or "0").strip()
    if ingress not in ("0", "1"):
        raise CatalogError(f"{path.name}:{line}: network_ingress_limited must be 0 or 1, got {ingress!r}")
    return {
        "network_baseline_gbps": base,
        "network_burst_gbps": burst,
        "network_pps": _num(row, "network_pps", path, line),
        "network_ingress_limited": ingress == "1",
        "rtt_us": _num(row, "rtt_us", path, line),
        "network_source": row["network_source"].strip(),
        "network_as_of": row["network_as_of"].strip(),
    }


def build_rows(source_dir: Path | None = None) -> list[dict[str, object]]:
    """Read the CSV sources (default :data:`PRICING_SOURCE_DIR`) into catalog rows (validated, typed)."""
    source_dir = PRICING_SOURCE_DIR if source_dir is None else source_dir
    rows: list[dict[str, object]] = []
    empty = {f.name: None for f in fields(CatalogRow)}

    def check_common(row: dict[str, str], path: Path, line: int) -> None:
        if row["provider"] not in PROVIDERS:
            raise CatalogError(f"{path.name}:{line}: unknown provider {row['provider']!r}")
        bad = [p for p in _price_sets(row) if p not in PRICE_SETS]
        if bad:
            raise CatalogError(f"{path.name}:{line}: unknown price set {bad[0]!r}")
        if not row.get("source", "").strip():
            raise CatalogError(f"{path.name}:{line}: every row needs a source")

    path = source_dir / "vms.csv"
    for line, r in _read_csv(path):
        check_common(r, path, line)
        hourly = _num(r, "usd_per_hour", path, line)
        mem = _num(r, "memory_gib", path, line)
        vcpu = _num(r, "vcpu", path, line)
        if hourly is None or mem is None or vcpu is None or mem <= 0 or vcpu <= 0:
            raise CatalogError(f"{path.name}:{line}: a VM needs vcpu, memory_gib, usd_per_hour")
        net = _vm_network(r, path, line)
        for ps in _price_sets(r):
            rows.append(
                {
                    **empty,
                    "price_set": ps,
                    "provider": r["provider"],
                    "kind": CatalogKind.VM,
                    "name": r["name"],
                    "vcpu": int(vcpu),
                    "memory_gib": mem,
                    "usd_per_hour": hourly,
                    "source": r["source"],
                    "as_of": r["as_of"],
                    "notes": r.get("notes", ""),
                    **net,
                }
            )

    path = source_dir / "storage.csv"
    numeric = (
        "min_gib max_gib size_gib free_gib usd_per_gb_month usd_per_disk_month iops min_iops iops_per_gib max_iops "
        "max_iops_per_gib usd_per_iops_month mibps mibps_per_gib max_mibps max_mibps_per_iops usd_per_mibps_month "
        "small_volume_gib small_volume_mibps"
    ).split()
    for line, r in _read_csv(path):
        check_common(r, path, line)
        rule = r["rule"].strip()
        if rule not in STORAGE_RULES:
            raise CatalogError(f"{path.name}:{line}: storage rule must be one of {', '.join(StorageRule)}")
        rec = {
            **empty,
            "provider": r["provider"],
            "kind": CatalogKind.STORAGE,
            "name": r["name"],
            "storage_rule": rule,
            **{k: _num(r, k, path, line) for k in numeric},
            "iops_price_tiers": _tiers(r.get("iops_price_tiers", "") or "", path, line) or None,
            "source": r["source"],
            "as_of": r["as_of"],
            "notes": r.get("notes", ""),
        }
        need = {
            StorageRule.FLAT: ("usd_per_gb_month", "iops"),
            StorageRule.PER_GB: ("usd_per_gb_month",),
            StorageRule.PROVISIONED: ("usd_per_gb_month", "max_iops"),
            StorageRule.SLAB: ("size_gib", "usd_per_disk_month", "iops"),
            StorageRule.LOCAL: (),
        }[StorageRule(rule)]
        missing = [k for k in need if rec[k] is None]
        if missing:
            raise CatalogError(f"{path.name}:{line}: {rule} storage needs {', '.join(missing)}")
        if rule == StorageRule.PER_GB and rec["iops"] is None and rec["iops_per_gib"] is None:
            raise CatalogError(f"{path.name}:{line}: per_gb storage needs iops or iops_per_gib")
        for ps in _price_sets(r):
            rows.append({**rec, "price_set": ps})

    path = source_dir / "vm_storage.csv"
    for line, r in _read_csv(path):
        check_common(r, path, line)
        if not r["vm"].strip() or not r["product"].strip():
            raise CatalogError(f"{path.name}:{line}: a VM storage row needs vm and product patterns")
        lo, hi, disks = (_num(r, k, path, line) for k in ("min_vcpu", "max_vcpu", "max_disks"))
        rec = {
            **empty,
            "provider": r["provider"],
            "kind": CatalogKind.VM_STORAGE,
            "name": f"{r['vm']} / {r['product']}",
            "vm_pattern": r["vm"].strip(),
            "product_pattern": r["product"].strip(),
            "min_vcpu": None if lo is None else int(lo),
            "max_vcpu": None if hi is None else int(hi),
            "max_iops": _num(r, "max_iops", path, line),
            "max_mibps": _num(r, "max_mibps", path, line),
            "max_disks": None if disks is None else int(disks),
            "size_gib": _num(r, "size_gib", path, line),
            "source": r["source"],
            "as_of": r["as_of"],
            "notes": r.get("notes", ""),
        }
        for ps in _price_sets(r):
            rows.append({**rec, "price_set": ps})

    path = source_dir / "regions.csv"
    for line, r in _read_csv(path):
        check_common(r, path, line)
        zones = _num(r, "zones", path, line)
        rec = {
            **empty,
            "provider": r["provider"],
            "kind": CatalogKind.REGION,
            "name": r["name"],
            "zones": int(zones) if zones is not None else None,
            "cross_zone_usd_per_gb": _num(r, "cross_zone_usd_per_gb", path, line),
            "object_usd_per_gb_month": _num(r, "object_usd_per_gb_month", path, line),
            "source": r["source"],
            "as_of": r["as_of"],
            "notes": r.get("notes", ""),
        }
        for ps in _price_sets(r):
            rows.append({**rec, "price_set": ps})

    path = source_dir / "slas.csv"
    for line, r in _read_csv(path):
        check_common(r, path, line)
        if r["feature"] not in SLA_FEATURES:
            raise CatalogError(f"{path.name}:{line}: unknown SLA feature {r['feature']!r}")
        available = r["available"].strip().lower() == "true"
        min_nodes = _num(r, "min_nodes", path, line)
        rec = {
            **empty,
            "provider": r["provider"],
            "kind": CatalogKind.SLA,
            "name": r["name"],
            "feature": r["feature"],
            "available": available,
            "usd_flat_month": _num(r, "usd_flat_month", path, line),
            "usd_per_node_month": _num(r, "usd_per_node_month", path, line),
            "usd_per_gb_month": _num(r, "usd_per_gb_month", path, line),
            "percent_of_spend": _num(r, "percent_of_spend", path, line),
            "minimum_usd": _num(r, "minimum_usd", path, line),
            "min_nodes": int(min_nodes) if min_nodes is not None else None,
            "source": r["source"],
            "as_of": r["as_of"],
            "notes": r.get("notes", ""),
        }
        for ps in _price_sets(r):
            rows.append({**rec, "price_set": ps})
    return rows


#: What identifies a catalog row: an item appears once per price set (a VM's storage limits once per
#: vCPU range).
ROW_KEY = ("price_set", "provider", "kind", "name", "min_vcpu", "max_vcpu")


def build_parquet(source_dir: Path | None = None, out: Path | None = None) -> tuple[Path, int]:
    """Build ``pricing.parquet`` (default :data:`PRICING_PARQUET`) from the CSV sources; returns (path, rows)."""
    out = PRICING_PARQUET if out is None else out
    check_output_file(out, "pricing build:")
    rows = build_rows(source_dir)
    seen: dict[tuple[object, ...], dict[str, object]] = {}
    for r in rows:
        try:
            CatalogRow(**r).check()  # type: ignore[arg-type]
        except ValueError as exc:
            raise CatalogError(f"{r['provider']} {r['kind']} {r['name']!r}: {exc}") from None
        key = tuple(r.get(k) for k in ROW_KEY)
        if key in seen:
            raise CatalogError(
                f"{r['provider']} {r['kind']} {r['name']!r} is priced twice in price set {r['price_set']!r} "
                "(a duplicated row in the pricing sources): each item must appear once per price set"
            )
        seen[key] = r
    write_rows(out, rows, CatalogRow)
    clear_cache()
    return out, len(rows)
