"""The catalog's row: one line of ``pricing.parquet`` (a VM type, a storage product, a VM's
storage limits or an SLA feature, in one price set), shared by the builder
(:mod:`cost_models.pricing.build`) and the reader (:mod:`cost_models.pricing.catalog`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from cost_models import REPO_ROOT
from specs.errors import InputError
from specs.io import finite, require
from specs.vocab import PRICE_SETS, PROVIDERS, SLA_FEATURES, CatalogKind, StorageRule

PRICING_SOURCE_DIR = REPO_ROOT / "pricing"
PRICING_PARQUET = REPO_ROOT / "pricing.parquet"


@dataclass
class CatalogRow:
    """One row of pricing.parquet: a VM type, a storage product, an SLA feature or a region's facts
    (zones, cross-zone transfer, object storage), in one price set.

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
    zones: int | None = None
    cross_zone_usd_per_gb: float | None = None
    object_usd_per_gb_month: float | None = None
    source: str | None = None
    as_of: str | None = None
    notes: str | None = None
    #: a VM's network (pricing/vms.csv, issue 48): baseline and burst bandwidth (Gbit/s), packets per
    #: second where documented, whether inbound traffic is limited too, the intra-zone round trip (us)
    network_baseline_gbps: float | None = None
    network_burst_gbps: float | None = None
    network_pps: float | None = None
    network_ingress_limited: bool | None = None
    rtt_us: float | None = None
    network_source: str | None = None
    network_as_of: str | None = None

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
        elif self.kind == CatalogKind.REGION:
            require(
                self.zones is not None
                and self.zones >= 1
                and self.cross_zone_usd_per_gb is not None
                and self.object_usd_per_gb_month is not None,
                f"region {self.name}: needs zones >= 1, cross_zone_usd_per_gb and object_usd_per_gb_month",
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
