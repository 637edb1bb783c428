"""Monthly cloud bill: compute, block storage (by each provider's rule) and SLAs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cost_models.pricing import HOURS_PER_MONTH, Catalog, SlaPrice, StorageOption

GIB = float(2**30)
#: Provisioned-IOPS levels offered for a gp3-style volume (baseline and the
#: product's maximum come from the catalog row; these are the steps between).
PROVISIONED_IOPS_STEPS = (3000, 6000, 10000, 16000, 32000, 64000)
#: IOPS levels a per-GB volume may be over-sized to reach (GCP pd-ssd style).
PER_GB_IOPS_STEPS = (3000, 6000, 15000, 30000, 60000, 100000)
#: Largest number of identical slabs striped on one node.
MAX_SLABS_PER_NODE = 64


@dataclass(frozen=True)
class StorageChoice:
    """A concrete volume for one node: what it costs and what IOPS it gives."""

    provider: str
    product: str
    disks: int
    gib: float
    iops: float
    usd_month: float

    @property
    def label(self) -> str:
        d = f"{self.disks}x" if self.disks > 1 else ""
        return f"{d}{self.product} {self.gib:,.0f} GiB / {self.iops:,.0f} IOPS"


def _per_gb(opt: StorageOption, need_gib: float) -> list[StorageChoice]:
    sizes = {max(need_gib, 1.0)}
    if opt.iops is None and opt.iops_per_gib:
        for target in PER_GB_IOPS_STEPS:
            if opt.max_iops is None or target <= opt.max_iops:
                sizes.add(max(need_gib, target / opt.iops_per_gib))
    out = []
    for gib in sorted(sizes):
        if opt.iops is not None:
            iops = opt.iops
        else:
            assert opt.iops_per_gib is not None  # the catalog row check: iops or iops_per_gib
            iops = opt.iops_per_gib * gib
            if opt.max_iops is not None:
                iops = min(iops, opt.max_iops)
        cost = max(0.0, gib - opt.free_gib) * opt.usd_per_gb_month
        out.append(StorageChoice(opt.provider, opt.name, 1, gib, iops, cost))
    return out


def _provisioned(opt: StorageOption, need_gib: float) -> list[StorageChoice]:
    base = 0.0 if opt.iops is None else opt.iops
    cap = base if opt.max_iops is None else opt.max_iops
    out = []
    for iops in sorted({base, *[s for s in PROVISIONED_IOPS_STEPS if base <= s <= cap]}):
        gib = max(need_gib, 1.0)
        cost = gib * opt.usd_per_gb_month + max(0.0, iops - base) * opt.usd_per_iops_month
        out.append(StorageChoice(opt.provider, opt.name, 1, gib, iops, cost))
    return out


def _slab(opt: StorageOption, need_gib: float) -> list[StorageChoice]:
    assert opt.size_gib is not None and opt.size_gib > 0  # the catalog row check: a slab has a size
    size = float(opt.size_gib)
    disks = max(1, math.ceil(need_gib / size))
    if disks > MAX_SLABS_PER_NODE:
        return []
    return [
        StorageChoice(
            opt.provider,
            opt.name,
            disks,
            disks * size,
            disks * (0.0 if opt.iops is None else opt.iops),
            disks * opt.usd_per_disk_month,
        )
    ]


def storage_choices(catalog: Catalog, provider: str, need_gib: float) -> list[StorageChoice]:
    """Volumes that hold ``need_gib`` on one node, without dominated ones."""
    raw: list[StorageChoice] = []
    for opt in catalog.storage.get(provider, []):
        if opt.rule == "per_gb":
            raw += _per_gb(opt, need_gib)
        elif opt.rule == "provisioned":
            raw += _provisioned(opt, need_gib)
        else:
            raw += _slab(opt, need_gib)
    raw.sort(key=lambda s: (s.usd_month, -s.iops))
    kept: list[StorageChoice] = []
    for s in raw:  # keep only options that buy more IOPS than every cheaper one
        if not kept or s.iops > kept[-1].iops + 1e-9:
            kept.append(s)
    return kept


def compute_cost(usd_per_hour: float, count: int) -> float:
    """Monthly compute cost of ``count`` VMs."""
    return usd_per_hour * HOURS_PER_MONTH * count


@dataclass(frozen=True)
class SlaTerms:
    """The linear form of a provider's SLA bundle: cost = flat + per_node * nodes
    + per_gb * data + max over percent-of-spend terms with their minimums."""

    flat: float
    per_node: float
    per_gb: float
    percent_terms: tuple[tuple[float, float], ...]  # (percent, minimum)
    min_nodes: int
    unavailable: tuple[str, ...]


def sla_terms(catalog: Catalog, provider: str, features: tuple[str, ...] | list[str]) -> SlaTerms:
    """Price model of a bundle of SLA features on a provider."""
    flat = per_node = per_gb = 0.0
    pct: list[tuple[float, float]] = []
    min_nodes = 1
    missing: list[str] = []
    prices: dict[str, SlaPrice] = catalog.slas.get(provider, {})
    for f in features:
        s = prices.get(f)
        if s is None or not s.available:
            missing.append(f)
            continue
        flat += s.usd_flat_month
        per_node += s.usd_per_node_month
        per_gb += s.usd_per_gb_month
        if s.percent_of_spend > 0 or s.minimum_usd > 0:
            pct.append((s.percent_of_spend, s.minimum_usd))
        min_nodes = max(min_nodes, s.min_nodes)
    return SlaTerms(flat, per_node, per_gb, tuple(pct), min_nodes, tuple(missing))


def sla_cost(terms: SlaTerms, nodes: int, data_gib: float, spend: float) -> float:
    """Monthly SLA cost for a cluster (spend = compute + storage)."""
    return (
        terms.flat
        + terms.per_node * nodes
        + terms.per_gb * data_gib
        + sum(max(m, p * spend) for p, m in terms.percent_terms)
    )
