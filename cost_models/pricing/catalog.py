"""The pricing catalog as the models read it: VM types, storage products, each VM's storage
limits and SLA prices of one price set, loaded from ``pricing.parquet`` (:func:`load_catalog`)."""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from cost_models.pricing.rows import PRICING_PARQUET, CatalogError, CatalogRow
from specs.errors import InputError
from specs.io import read_rows
from specs.limits import MAX_CLUSTER_SIZE
from specs.vocab import DEFAULT_PRICE_SET, PRICE_SETS, PROVIDERS, CatalogKind, Provider, StorageRule

#: Hours in a billing month, the convention all three providers use.
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class VmType:
    """One purchasable VM type."""

    provider: str
    name: str
    vcpu: int
    memory_gib: float
    usd_per_hour: float
    #: the VM's network (pricing/vms.csv): baseline and burst bandwidth in bytes per second (inf:
    #: the catalog has none), whether inbound traffic counts against it too, and the provider's
    #: intra-zone round trip (s; 0: none in the catalog)
    network_bytes_per_s: float = math.inf
    network_burst_bytes_per_s: float = math.inf
    network_ingress_limited: bool = False
    rtt_s: float = 0.0

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_hour * HOURS_PER_MONTH

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.name}"


#: Bytes per second in one Gbit/s (the providers quote decimal gigabits).
GBIT_BYTES = 1e9 / 8


def _vm_network(r: dict[str, Any]) -> tuple[float, float, bool, float]:
    """A VM row's network as :class:`VmType` takes it (no baseline: no bound)."""
    base = r.get("network_baseline_gbps")
    if base is None or (isinstance(base, float) and math.isnan(base)):
        return math.inf, math.inf, False, 0.0
    burst = r.get("network_burst_gbps")
    burst = base if burst is None or (isinstance(burst, float) and math.isnan(burst)) else burst
    rtt = r.get("rtt_us")
    rtt_s = 0.0 if rtt is None or (isinstance(rtt, float) and math.isnan(rtt)) else float(rtt) * 1e-6
    return float(base) * GBIT_BYTES, float(burst) * GBIT_BYTES, bool(r.get("network_ingress_limited")), rtt_s


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


@dataclass(frozen=True)
class Region:
    """A provider's region as the bill sees it (regions.csv): its availability zones, what a GB
    moved between two of them costs (both sides' charges), and what object storage costs."""

    provider: str
    name: str
    zones: int
    cross_zone_usd_per_gb: float
    object_usd_per_gb_month: float


@dataclass
class Catalog:
    """The prices of one price set, grouped by provider."""

    price_set: str
    vms: dict[str, list[VmType]] = field(default_factory=dict)
    storage: dict[str, list[StorageOption]] = field(default_factory=dict)
    slas: dict[str, dict[str, SlaPrice]] = field(default_factory=dict)
    vm_storage: dict[str, list[VmStorageLimit]] = field(default_factory=dict)
    regions: dict[str, Region] = field(default_factory=dict)
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

    def region(self, provider: str) -> Region:
        """The provider's region of this price set (regions.csv)."""
        if provider not in self.regions:
            raise CatalogError(f"no region of {provider} in price set {self.price_set} (pricing/regions.csv)")
        return self.regions[provider]

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
                VmType(p, r["name"], int(r["vcpu"]), float(r["memory_gib"]), float(r["usd_per_hour"]), *_vm_network(r))
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
        elif r["kind"] == CatalogKind.REGION:
            cat.regions[p] = Region(
                provider=p,
                name=r["name"],
                zones=int(r["zones"]),
                cross_zone_usd_per_gb=float(r["cross_zone_usd_per_gb"]),
                object_usd_per_gb_month=float(r["object_usd_per_gb_month"]),
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


def clear_cache() -> None:
    """Forget the loaded catalogs (after `cosine pricing build` rewrote the file)."""
    _load_catalog.cache_clear()
