"""The pricing catalog: VMs, storage and SLA features per provider and price set.

The human-editable source is the four CSV files under ``pricing/`` (one row per
item, each with ``source`` and ``as_of``): ``vms.csv``, ``storage.csv`` (each
product's size/IOPS/throughput rule, :class:`~specs.vocab.StorageRule`),
``vm_storage.csv`` (what storage each VM can drive: its EBS / Persistent Disk /
uncached-disk limits, its data-disk count, its local instance store) and
``slas.csv``. A row's ``price_set`` is one set, several joined by ``|``, or
``*`` for all. ``cosine pricing build`` turns them into ``pricing.parquet`` (one
table, ``kind`` in :class:`~specs.vocab.CatalogKind`); the models only ever read
the parquet file, through :func:`load_catalog`.
"""

from __future__ import annotations

import csv
import fnmatch
import math
import re
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from cost_models import REPO_ROOT
from specs.errors import InputError
from specs.io import check_output_file, finite, read_rows, require, write_rows
from specs.limits import MAX_CLUSTER_SIZE
from specs.vocab import (
    DEFAULT_PRICE_SET,
    PRICE_SETS,
    PROVIDERS,
    SLA_FEATURES,
    CatalogKind,
    PriceSet,
    Provider,
    StorageRule,
)

PRICING_SOURCE_DIR = REPO_ROOT / "pricing"
PRICING_PARQUET = REPO_ROOT / "pricing.parquet"

#: Hours in a billing month, the convention all three providers use.
HOURS_PER_MONTH = 730.0

#: Price sets a spec may select, and what each is.
PRICE_SET_DESCRIPTIONS: dict[PriceSet, str] = {
    PriceSet.ONDEMAND: "current on-demand list prices (shared/reference, 2024-2026), realistic storage",
    PriceSet.PAPER2021: "the Cosine paper's 2021 VM prices (technical report Table 2), realistic storage",
    PriceSet.PAPER2021_FLAT_IOPS: "the paper exactly: its 2021 VM prices and its storage rule (every volume gets the "
    "product's maximum IOPS whatever its size, no VM limits; paper Sec. 7)",
    PriceSet.COMMITTED1Y: "1-year committed-use VM prices where the reference has them (GCP), realistic storage",
    PriceSet.SPOT: "spot/preemptible VM prices where the reference has them (GCP), realistic storage",
}


@dataclass
class CatalogRow:
    """One row of pricing.parquet: a VM type, a storage product or an SLA feature, in one price set.

    Columns a kind does not use are null; the parquet schema is derived from these fields.
    """

    price_set: str
    provider: str
    kind: str
    name: str
    vcpu: int | None = None
    memory_gib: float | None = None
    usd_per_hour: float | None = None
    storage_rule: str | None = None
    min_gib: float | None = None
    max_gib: float | None = None
    size_gib: float | None = None
    free_gib: float | None = None
    usd_per_gb_month: float | None = None
    usd_per_disk_month: float | None = None
    iops: float | None = None
    min_iops: float | None = None
    iops_per_gib: float | None = None
    max_iops: float | None = None
    max_iops_per_gib: float | None = None
    usd_per_iops_month: float | None = None
    iops_price_tiers: str | None = None
    mibps: float | None = None
    mibps_per_gib: float | None = None
    max_mibps: float | None = None
    max_mibps_per_iops: float | None = None
    usd_per_mibps_month: float | None = None
    small_volume_gib: float | None = None
    small_volume_mibps: float | None = None
    vm_pattern: str | None = None
    min_vcpu: int | None = None
    max_vcpu: int | None = None
    product_pattern: str | None = None
    max_disks: int | None = None
    feature: str | None = None
    available: bool | None = None
    usd_flat_month: float | None = None
    usd_per_node_month: float | None = None
    percent_of_spend: float | None = None
    minimum_usd: float | None = None
    min_nodes: int | None = None
    source: str | None = None
    as_of: str | None = None
    notes: str | None = None

    def check(self) -> None:
        """Values a catalog row may hold (read_rows calls this on every row of pricing.parquet)."""
        require(self.price_set in PRICE_SETS, f"unknown price set {self.price_set!r}")
        require(self.provider in PROVIDERS, f"unknown provider {self.provider!r}")
        require(self.kind in CATALOG_KINDS, f"unknown kind {self.kind!r}")
        require(bool(self.name), "a row needs a name")
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                require(finite(v), f"{f.name} {v} is not a finite non-negative number")
        if self.kind == CatalogKind.VM:
            require(VM_NAME.fullmatch(self.name) is not None, f"VM name {self.name!r}: letters, digits, ' ._-' only")
            require(
                self.vcpu is not None
                and self.vcpu >= 1
                and self.memory_gib is not None
                and self.memory_gib > 0
                and self.usd_per_hour is not None,
                f"VM {self.name}: needs vcpu >= 1, memory_gib > 0 and usd_per_hour",
            )
        elif self.kind == CatalogKind.STORAGE:
            require(self.storage_rule in STORAGE_RULES, f"storage {self.name}: unknown rule {self.storage_rule!r}")
            require(
                self.storage_rule in (StorageRule.LOCAL, StorageRule.PROVISIONED)
                or self.iops is not None
                or self.iops_per_gib is not None,
                f"storage {self.name}: no iops",
            )
            require(
                self.storage_rule != StorageRule.SLAB or (self.size_gib is not None and self.size_gib > 0),
                f"storage {self.name}: a slab needs size_gib",
            )
        elif self.kind == CatalogKind.VM_STORAGE:
            require(bool(self.vm_pattern) and bool(self.product_pattern), f"{self.name}: needs vm and product patterns")
        else:
            require(self.feature in SLA_FEATURES and self.available is not None, f"SLA {self.name}: bad feature")


CATALOG_KINDS = tuple(CatalogKind)
#: What a VM type's name may look like (it names a rendered engine file, render.workspace).
VM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}")
#: How a storage product turns size into IOPS, MiB/s and dollars (specs.vocab.StorageRule).
STORAGE_RULES = tuple(StorageRule)


class CatalogError(InputError):
    """The pricing source or parquet file is malformed."""


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


def build_parquet(source_dir: Path | None = None, out: Path | None = None) -> tuple[Path, int]:
    """Build ``pricing.parquet`` (default :data:`PRICING_PARQUET`) from the CSV sources; returns (path, rows)."""
    out = PRICING_PARQUET if out is None else out
    check_output_file(out, "pricing build:")
    rows = build_rows(source_dir)
    for r in rows:
        try:
            CatalogRow(**r).check()  # type: ignore[arg-type]
        except ValueError as exc:
            raise CatalogError(f"{r['provider']} {r['kind']} {r['name']!r}: {exc}") from None
    write_rows(out, rows, CatalogRow)
    _load_catalog.cache_clear()
    return out, len(rows)


@dataclass(frozen=True)
class VmType:
    """One purchasable VM type."""

    provider: str
    name: str
    vcpu: int
    memory_gib: float
    usd_per_hour: float

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_hour * HOURS_PER_MONTH

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.name}"


@dataclass(frozen=True)
class StorageOption:
    """A storage product and its rule (:class:`~specs.vocab.StorageRule`; cost_models.cloud applies it).

    ``iops`` / ``mibps`` are the included baseline (provisioned, per_gb), the
    fixed figures (slab, flat) or None; ``None`` limits are unlimited.
    """

    provider: str
    name: str
    rule: StorageRule
    min_gib: float = 1.0
    max_gib: float = math.inf
    size_gib: float | None = None
    free_gib: float = 0.0
    usd_per_gb_month: float = 0.0
    usd_per_disk_month: float = 0.0
    iops: float | None = None
    min_iops: float = 0.0
    iops_per_gib: float = 0.0
    max_iops: float = math.inf
    max_iops_per_gib: float = math.inf
    usd_per_iops_month: float = 0.0
    iops_price_tiers: tuple[tuple[float, float], ...] = ()  # (from IOPS, $/IOPS-month beyond it)
    mibps: float | None = None
    mibps_per_gib: float = 0.0
    max_mibps: float = math.inf
    max_mibps_per_iops: float = math.inf
    usd_per_mibps_month: float | None = None  # None: throughput comes with the IOPS, not bought
    small_volume_gib: float = 0.0
    small_volume_mibps: float = math.inf


@dataclass(frozen=True)
class VmStorageLimit:
    """What one VM (matched by name glob and vCPU range) can drive on some storage products:
    the VM's cap on attached volumes, or (``size_gib`` set) its local instance store."""

    provider: str
    vm_pattern: str
    product_pattern: str
    min_vcpu: int = 0
    max_vcpu: int = 1 << 30
    max_iops: float = math.inf
    max_mibps: float = math.inf
    max_disks: int | None = None
    size_gib: float | None = None

    def applies(self, vm: VmType, product: str) -> bool:
        return (
            fnmatch.fnmatchcase(vm.name, self.vm_pattern)
            and self.min_vcpu <= vm.vcpu <= self.max_vcpu
            and any(fnmatch.fnmatchcase(product, p) for p in self.product_pattern.split("|"))
        )


@dataclass(frozen=True)
class SlaPrice:
    """Price model of one SLA feature on one provider (linear + a minimum)."""

    provider: str
    feature: str
    name: str
    available: bool
    usd_flat_month: float = 0.0
    usd_per_node_month: float = 0.0
    usd_per_gb_month: float = 0.0
    percent_of_spend: float = 0.0
    minimum_usd: float = 0.0
    min_nodes: int = 1
    notes: str = ""


@dataclass
class Catalog:
    """The prices of one price set, grouped by provider."""

    price_set: str
    vms: dict[str, list[VmType]] = field(default_factory=dict)
    storage: dict[str, list[StorageOption]] = field(default_factory=dict)
    slas: dict[str, dict[str, SlaPrice]] = field(default_factory=dict)
    vm_storage: dict[str, list[VmStorageLimit]] = field(default_factory=dict)
    #: :meth:`storage_limit`'s answers (a catalog is not changed once loaded; the design tables
    #: ask for every VM type's limits once per shard size and block-size set)
    _limits: dict[tuple[VmType, str], VmStorageLimit | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def storage_limit(self, vm: VmType, product: str) -> VmStorageLimit | None:
        """The row of ``vm_storage.csv`` for this VM and product (the first that matches), if any."""
        key = (vm, product)
        if key not in self._limits:
            self._limits[key] = next(
                (lim for lim in self.vm_storage.get(vm.provider, []) if lim.applies(vm, product)), None
            )
        return self._limits[key]

    def vm(self, provider: str, name: str) -> VmType:
        for v in self.vms.get(provider, []):
            if v.name == name:
                return v
        names = ", ".join(v.name for v in self.vms.get(provider, []))
        raise CatalogError(f"unknown VM {provider}:{name} in price set {self.price_set} (known: {names})")


_VM_REF = re.compile(r"^(?P<prov>[a-z]+):(?P<name>[^\[\]]+?)(?:\[x(?P<count>\d+)\])?$")


def parse_vm_ref(text: str) -> tuple[Provider, str, int]:
    """``PROVIDER:TYPE[xCOUNT]`` (e.g. ``aws:r5d.xlarge[x3]``) -> (provider, type, count)."""
    m = _VM_REF.match(text.strip())
    if not m:
        raise CatalogError(f"--vm {text!r}: expected PROVIDER:TYPE[xCOUNT], e.g. aws:r5d.xlarge[x3]")
    if m.group("prov") not in PROVIDERS:
        raise CatalogError(f"--vm: unknown provider {m.group('prov')!r} (valid: {', '.join(PROVIDERS)})")
    count = 1 if m.group("count") is None else int(m.group("count"))
    if not 1 <= count <= MAX_CLUSTER_SIZE:
        raise CatalogError(f"--vm {text!r}: the count must be between 1 and {MAX_CLUSTER_SIZE:,}")
    return Provider(m.group("prov")), m.group("name").strip(), count


def _f(x: object, default: float = 0.0) -> float:
    return default if x is None else float(x)  # type: ignore[arg-type]


def _parse_tiers(text: str | None) -> tuple[tuple[float, float], ...]:
    out = []
    for part in filter(None, (text or "").split(";")):
        lo, rate = part.split(":")
        out.append((float(lo), float(rate)))
    return tuple(sorted(out))


def _storage_option(p: str, r: dict[str, Any]) -> StorageOption:
    return StorageOption(
        provider=p,
        name=r["name"],
        rule=StorageRule(r["storage_rule"]),
        min_gib=_f(r["min_gib"], 1.0),
        max_gib=_f(r["max_gib"], math.inf),
        size_gib=r["size_gib"],
        free_gib=_f(r["free_gib"]),
        usd_per_gb_month=_f(r["usd_per_gb_month"]),
        usd_per_disk_month=_f(r["usd_per_disk_month"]),
        iops=r["iops"],
        min_iops=_f(r["min_iops"]),
        iops_per_gib=_f(r["iops_per_gib"]),
        max_iops=_f(r["max_iops"], math.inf),
        max_iops_per_gib=_f(r["max_iops_per_gib"], math.inf),
        usd_per_iops_month=_f(r["usd_per_iops_month"]),
        iops_price_tiers=_parse_tiers(r["iops_price_tiers"]),
        mibps=r["mibps"],
        mibps_per_gib=_f(r["mibps_per_gib"]),
        max_mibps=_f(r["max_mibps"], math.inf),
        max_mibps_per_iops=_f(r["max_mibps_per_iops"], math.inf),
        usd_per_mibps_month=r["usd_per_mibps_month"],
        small_volume_gib=_f(r["small_volume_gib"]),
        small_volume_mibps=_f(r["small_volume_mibps"], math.inf),
    )


def load_catalog(price_set: str = DEFAULT_PRICE_SET, path: Path | None = None) -> Catalog:
    """Load one price set from ``pricing.parquet`` (default :data:`PRICING_PARQUET`)."""
    return _load_catalog(price_set, PRICING_PARQUET if path is None else path)


@lru_cache(maxsize=8)
def _load_catalog(price_set: str, path: Path) -> Catalog:
    if price_set not in PRICE_SETS:
        raise CatalogError(f"unknown price set {price_set!r} (known: {', '.join(PRICE_SETS)})")
    if not path.is_file():
        raise CatalogError(f"{path} is missing; run `cosine pricing build`")
    try:
        # a shallow dict per row (its fields are scalars and strings): asdict's deep copy took 29 ms
        rows = [dict(vars(r)) for r in read_rows(path, CatalogRow, "pricing catalog")]
    except InputError as exc:
        raise CatalogError(f"{exc}; rebuild it with `cosine pricing build`") from None
    cat = Catalog(price_set=price_set)
    for r in rows:
        if r["price_set"] != price_set:
            continue
        p = r["provider"]
        if r["kind"] == CatalogKind.VM:
            cat.vms.setdefault(p, []).append(
                VmType(p, r["name"], int(r["vcpu"]), float(r["memory_gib"]), float(r["usd_per_hour"]))
            )
        elif r["kind"] == CatalogKind.STORAGE:
            cat.storage.setdefault(p, []).append(_storage_option(p, r))
        elif r["kind"] == CatalogKind.VM_STORAGE:
            cat.vm_storage.setdefault(p, []).append(
                VmStorageLimit(
                    provider=p,
                    vm_pattern=r["vm_pattern"],
                    product_pattern=r["product_pattern"],
                    min_vcpu=int(r["min_vcpu"]) if r["min_vcpu"] is not None else 0,
                    max_vcpu=int(r["max_vcpu"]) if r["max_vcpu"] is not None else 1 << 30,
                    max_iops=_f(r["max_iops"], math.inf),
                    max_mibps=_f(r["max_mibps"], math.inf),
                    max_disks=int(r["max_disks"]) if r["max_disks"] is not None else None,
                    size_gib=r["size_gib"],
                )
            )
        elif r["kind"] == CatalogKind.SLA:
            cat.slas.setdefault(p, {})[r["feature"]] = SlaPrice(
                provider=p,
                feature=r["feature"],
                name=r["name"],
                available=bool(r["available"]),
                usd_flat_month=_f(r["usd_flat_month"]),
                usd_per_node_month=_f(r["usd_per_node_month"]),
                usd_per_gb_month=_f(r["usd_per_gb_month"]),
                percent_of_spend=_f(r["percent_of_spend"]),
                minimum_usd=_f(r["minimum_usd"]),
                min_nodes=int(r["min_nodes"]) if r["min_nodes"] is not None else 1,
                notes=r["notes"] or "",
            )
    for p in cat.vms:
        cat.vms[p].sort(key=lambda v: (v.memory_gib, v.usd_per_hour))
    return cat


def catalog_rows(price_set: str | None = None, provider: str | None = None) -> list[dict]:
    """Raw catalog rows (for ``cosine pricing show``)."""
    try:
        rows = read_rows(PRICING_PARQUET, CatalogRow, "pricing catalog")
    except InputError as exc:
        raise CatalogError(f"{exc}; rebuild it with `cosine pricing build`") from None
    out = []
    for r in (asdict(x) for x in rows):
        if price_set and r["price_set"] != price_set:
            continue
        if provider and r["provider"] != provider:
            continue
        out.append(r)
    return out


def price_summary(r: dict) -> tuple[str, str]:
    """(figures, price) of a catalog row as short human-readable strings."""

    def usd(x: float) -> str:
        return f"${x:,.4g}"

    def fig(x: float | None, unit: str) -> str:
        return "" if x is None else f"{x:,.6g} {unit}"

    if r["kind"] == CatalogKind.VM:
        return f"{r['vcpu']} vCPU, {r['memory_gib']:g} GiB", f"{usd(r['usd_per_hour'])}/h"
    if r["kind"] == CatalogKind.VM_STORAGE:
        lims = ", ".join(
            x
            for x in (
                fig(r["size_gib"], "GiB local"),
                fig(r["max_iops"], "IOPS"),
                fig(r["max_mibps"], "MiB/s"),
                fig(r["max_disks"], "disks"),
            )
            if x
        )
        vcpu = f" ({r['min_vcpu']}-{r['max_vcpu']} vCPU)" if r["min_vcpu"] is not None else ""
        return f"{r['vm_pattern']}{vcpu} on {r['product_pattern']}: {lims}", "included" if r["size_gib"] else "limit"
    if r["kind"] == CatalogKind.STORAGE:
        rule = r["storage_rule"]
        if rule == StorageRule.SLAB:
            mib = f", {r['mibps']:g} MiB/s" if r["mibps"] is not None else ""
            return f"{r['size_gib']:g} GiB, {r['iops']:g} IOPS{mib}", f"{usd(r['usd_per_disk_month'])}/month"
        if rule == StorageRule.LOCAL:
            return "the VM's instance store (see vm_storage)", "included in the VM price"
        parts = []
        if r["iops"] is not None:
            parts.append(f"{r['iops']:g} IOPS" + (" included" if rule == StorageRule.PROVISIONED else ""))
        if r["iops_per_gib"]:
            parts.append(f"{r['iops_per_gib']:g} IOPS/GiB")
        if r["max_iops"] is not None:
            parts.append(f"max {r['max_iops']:g}")
        if r["mibps"] is not None:
            parts.append(f"{r['mibps']:g} MiB/s" + (f" + {r['mibps_per_gib']:g}/GiB" if r["mibps_per_gib"] else ""))
        free = f" beyond {r['free_gib']:g} GB free" if r["free_gib"] else ""
        extra = f" + {usd(r['usd_per_iops_month'])}/IOPS-month" if r["usd_per_iops_month"] else ""
        extra += f" + {usd(r['usd_per_mibps_month'])}/MiBps-month" if r["usd_per_mibps_month"] else ""
        return ", ".join(parts), f"{usd(r['usd_per_gb_month'])}/GB-month{free}{extra}"
    if not r["available"]:
        return "", "no price: " + (r["notes"] or "GAP")
    parts = []
    if r["usd_flat_month"]:
        parts.append(f"{usd(r['usd_flat_month'])}/month")
    if r["usd_per_node_month"]:
        parts.append(f"{usd(r['usd_per_node_month'])}/node-month")
    if r["usd_per_gb_month"]:
        parts.append(f"{usd(r['usd_per_gb_month'])}/GB-month")
    if r["percent_of_spend"]:
        parts.append(f"max({usd(r['minimum_usd'] or 0)}, {r['percent_of_spend']:.0%} of spend)")
    if r["min_nodes"] and r["min_nodes"] > 1:
        parts.append(f"needs >= {r['min_nodes']} VMs")
    return "", " + ".join(parts) or "free"
