"""Monthly cloud bill: compute, block storage (by each provider's rule) and SLAs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, overload

import numpy as np

from cost_models.pareto import pareto_mask
from cost_models.pricing.catalog import HOURS_PER_MONTH, Catalog, SlaPrice, StorageOption, VmStorageLimit, VmType
from specs.vocab import SlaFeature, StorageRule

GIB = float(2**30)
MIB = float(2**20)


def usable_bytes(memory_gib: Any, headroom: float) -> Any:
    """Bytes of a VM of ``memory_gib`` GiB (a number or an array of them) a node's design may
    use: the spec's ``design.memory_headroom`` share taken off."""
    return memory_gib * GIB * (1 - headroom)


#: IOPS levels a node may buy or size its volume for: a geometric ladder of
#: this ratio between a product's floor and the node's ceiling (the product's
#: and the VM's limit, both always on the ladder). Like the buffer's memory
#: hopping, a discretization of a continuous choice: 1.25 keeps any IOPS
#: figure within 25% of a level (the bench measures what a finer ladder buys).
IOPS_STEP = 1.25
#: Most identical disks striped on one node when the catalog gives the VM no
#: data-disk limit (the paper's price set).
MAX_SLABS_PER_NODE = 64


@dataclass(frozen=True)
class StorageChoice:
    """A concrete volume (or striped set, or instance store) for one node:
    its size, what it sustains (IOPS, and MiB/s; ``inf`` when unlimited) on this
    VM, and its monthly price."""

    provider: str
    product: str
    disks: int
    gib: float
    iops: float
    usd_month: float
    mibps: float = math.inf
    backup_usd_month: float = 0.0  # of usd_month: the node's backup (cost_models.replication)

    def effective_iops(self, block_bytes: float | np.ndarray) -> np.ndarray:
        """I/Os per second for blocks of ``block_bytes`` (:func:`effective_iops`)."""
        return effective_iops(self.iops, self.mibps, block_bytes)

    @property
    def label(self) -> str:
        d = f"{self.disks}x" if self.disks > 1 else ""
        mib = f" / {self.mibps:,.0f} MiB/s" if math.isfinite(self.mibps) else ""
        return f"{d}{self.product} {self.gib:,.0f} GiB / {self.iops:,.0f} IOPS{mib}"


#: The fields of a StorageChoice :func:`volume_table` reads.
_TABLE_FIELDS = ("usd_month", "gib", "iops", "mibps")


def effective_iops(iops: float | np.ndarray, mibps: float | np.ndarray, block_bytes: float | np.ndarray) -> np.ndarray:
    """I/Os per second of a volume sustaining ``iops`` and ``mibps`` for blocks of ``block_bytes``:
    the IOPS limit or the throughput limit, whichever binds (every model I/O moves one block).
    Arrays broadcast: e.g. volumes as a column against block sizes as a row."""
    return np.minimum(iops, mibps * MIB / np.asarray(block_bytes, dtype=float))


def volume_table(choices: list[StorageChoice]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(monthly dollars, GiB, IOPS, MiB/s) of ``choices`` as arrays."""
    usd, gib, iops, mibps = (np.array([getattr(s, f) for s in choices], dtype=float) for f in _TABLE_FIELDS)
    return usd, gib, iops, mibps


def _given(x: float | None) -> float:
    """A catalog figure the row may leave empty (then 0: nothing included)."""
    return 0.0 if x is None else float(x)


def iops_ladder(floor: float, ceiling: float) -> list[float]:
    """Levels from ``floor`` to ``ceiling`` by :data:`IOPS_STEP` (both ends included)."""
    if not math.isfinite(ceiling) or ceiling <= floor:
        return [floor]
    out, x = [], floor
    while x < ceiling * (1 - 1e-9):
        out.append(x)
        x *= IOPS_STEP
    return [*out, ceiling]


def provisioned_iops_cost(opt: StorageOption, iops: float) -> float:
    """Monthly price of ``iops`` on a provisioned volume: the IOPS beyond the
    included ones at the product's rate, tier by tier (io2's volume discounts)."""
    included = _given(opt.iops)
    edges = [(included, opt.usd_per_iops_month), *[(lo, rate) for lo, rate in opt.iops_price_tiers if lo > included]]
    cost = 0.0
    for k, (lo, rate) in enumerate(edges):
        hi = edges[k + 1][0] if k + 1 < len(edges) else math.inf
        cost += rate * max(0.0, min(iops, hi) - lo)
    return cost


def per_gb_figures(opt: StorageOption, gib: float) -> tuple[float, float]:
    """(IOPS, MiB/s) of a per-GB volume of ``gib``: baseline plus a rate per GiB,
    within the product's floor and ceilings (gp2: 3/GiB, at least 100, at most
    16,000, 128 MiB/s below 334 GiB; pd-ssd: 6,000 + 30/GiB, 240 + 0.48/GiB)."""
    iops = min(opt.max_iops, max(opt.min_iops, _given(opt.iops) + opt.iops_per_gib * gib))
    mibps = min(opt.max_mibps, (opt.mibps if opt.mibps is not None else math.inf) + opt.mibps_per_gib * gib)
    if gib < opt.small_volume_gib:
        mibps = min(mibps, opt.small_volume_mibps)
    return iops, mibps


def _gb_cost(opt: StorageOption, gib: float) -> float:
    return max(0.0, gib - opt.free_gib) * opt.usd_per_gb_month


def _flat(opt: StorageOption, needs: list[float], cap: Cap) -> list[StorageChoice]:
    """The paper's rule: any size gets the product's IOPS, no throughput limit."""
    return [
        StorageChoice(opt.provider, opt.name, 1, g, cap.iops(_given(opt.iops)), _gb_cost(opt, g), cap.mibps(math.inf))
        for g in {max(n, opt.min_gib) for n in needs}
    ]


def _per_gb(opt: StorageOption, needs: list[float], cap: Cap) -> list[StorageChoice]:
    """Sizes that hold the data, and larger sizes bought for their IOPS or their
    MiB/s: one per level of each ladder, up to where the node's cap (or the
    product's) stops the growth. For any larger volume the menu then holds one
    no larger whose IOPS and MiB/s are both within one ladder step of its own."""
    sizes = {max(n, opt.min_gib) for n in needs}
    lo = min(sizes)
    if opt.iops_per_gib > 0:
        for t in iops_ladder(per_gb_figures(opt, lo)[0], min(opt.max_iops, cap.max_iops)):
            sizes.add(max(lo, (t - _given(opt.iops)) / opt.iops_per_gib))
    if opt.mibps_per_gib > 0:
        for t in iops_ladder(per_gb_figures(opt, lo)[1], min(opt.max_mibps, cap.max_mibps)):
            sizes.add(max(lo, (t - _given(opt.mibps)) / opt.mibps_per_gib))
    if lo < opt.small_volume_gib:
        sizes.add(opt.small_volume_gib)
    out = []
    for g in sorted(sizes):
        if g > opt.max_gib:
            continue
        iops, mibps = per_gb_figures(opt, g)
        out.append(StorageChoice(opt.provider, opt.name, 1, g, cap.iops(iops), _gb_cost(opt, g), cap.mibps(mibps)))
    return out


#: One IOPS level of a provisioned product on a VM: (IOPS bought, IOPS delivered, their monthly
#: price, and each throughput level with its extra price; None: throughput comes with the IOPS).
_Level = tuple[float, float, float, tuple[tuple[float, float | None], ...]]


@lru_cache(maxsize=1024)
def _provisioned_ladder(opt: StorageOption, cap: Cap, blocks: tuple[int, ...]) -> tuple[_Level, ...]:
    """The IOPS levels of a provisioned product (the same for every need; cached: the design
    tables ask for every shard's needs)."""
    floor = max(_given(opt.iops), opt.min_iops)
    top = min(opt.max_iops, cap.max_iops, opt.max_iops_per_gib * opt.max_gib)
    ladder: list[_Level] = []
    for t in iops_ladder(floor, top):
        mib_top = min(opt.max_mibps, opt.max_mibps_per_iops * t)
        if opt.usd_per_mibps_month is None:  # throughput comes with the IOPS
            levels = [mib_top]
        else:
            base = _given(opt.mibps)
            levels = sorted({base, *[min(mib_top, max(base, t * b / MIB)) for b in blocks]})
        mibs: list[tuple[float, float | None]] = []
        for mib in levels:
            mib = min(mib, cap.max_mibps) if mib > _given(opt.mibps) else mib
            extra: float | None = None
            if opt.usd_per_mibps_month is not None:
                extra = opt.usd_per_mibps_month * max(0.0, mib - _given(opt.mibps))
            mibs.append((cap.mibps(mib), extra))
        ladder.append((t, cap.iops(t), provisioned_iops_cost(opt, t), tuple(mibs)))
    return tuple(ladder)


def _provisioned(opt: StorageOption, needs: list[float], cap: Cap, blocks: list[int]) -> list[StorageChoice]:
    """gp3 / io2: IOPS bought on the ladder (the volume grown when the product's
    IOPS-per-GiB ratio asks for it); throughput, where it is sold separately,
    bought to match the IOPS at each block size the design grid uses."""
    ladder = _provisioned_ladder(opt, cap, tuple(blocks))
    out = []
    for need in {max(n, opt.min_gib) for n in needs}:
        for t, iops, iops_cost, mibs in ladder:
            g = max(need, t / opt.max_iops_per_gib)
            if g > opt.max_gib:
                continue
            for mibps, extra in mibs:
                cost = g * opt.usd_per_gb_month + iops_cost
                if extra is not None:
                    cost += extra
                out.append(StorageChoice(opt.provider, opt.name, 1, g, iops, cost, mibps))
    return out


def _slab(opt: StorageOption, needs: list[float], cap: Cap) -> list[StorageChoice]:
    """Azure tiers: the fewest disks of this tier that hold the data, and, on a
    VM whose data-disk count the catalog knows, more disks striped for their
    IOPS up to that count or the VM's cap. Without a VM limit (the paper's
    price set) only the fewest disks, as the paper prices them."""
    size, per_iops = _given(opt.size_gib), _given(opt.iops)
    per_mib = opt.mibps if opt.mibps is not None else math.inf
    out = []
    for need in set(needs):
        k = max(1, math.ceil(need / size - 1e-9))
        most = cap.max_disks if cap.max_disks is not None else min(k, MAX_SLABS_PER_NODE)
        counts = set()
        while k <= most:
            counts.add(k)
            if k * per_iops >= cap.max_iops and k * per_mib >= cap.max_mibps:
                break  # more disks buy nothing on this VM
            k = max(k + 1, math.ceil(k * IOPS_STEP))
        for k in sorted(counts):
            out.append(
                StorageChoice(
                    opt.provider,
                    opt.name,
                    k,
                    k * size,
                    cap.iops(k * per_iops),
                    k * opt.usd_per_disk_month,
                    cap.mibps(k * per_mib),
                )
            )
    return out


@dataclass(frozen=True)
class Cap:
    """What a VM lets a product deliver (vm_storage.csv): IOPS, MiB/s, data disks."""

    max_iops: float = math.inf
    max_mibps: float = math.inf
    max_disks: int | None = None

    def iops(self, x: float) -> float:
        return min(x, self.max_iops)

    def mibps(self, x: float) -> float:
        return min(x, self.max_mibps)


def _rule_needs(opt: StorageOption, needs: tuple[float, ...]) -> tuple[float, ...]:
    """The needs as ``opt``'s rule sees them. The flat, per-GB and provisioned rules see a need
    only as at least the product's least size, so the needs are raised to it first (in order:
    the rules then build the same sets in the same order), and the slab rule's to whole disks;
    the small shards of the design tables, whose needs all fall below one disk or the least
    size, share one answer."""
    if opt.rule in (StorageRule.FLAT, StorageRule.PER_GB, StorageRule.PROVISIONED):
        return tuple(max(n, opt.min_gib) for n in needs)
    if opt.rule == StorageRule.SLAB and (opt.usd_per_disk_month or 0.0) > 0:
        # A slab rule sees a need only as the fewest disks holding it: each need becomes that
        # many disks' size. Its volumes then come in another order, which changes nothing:
        # volumes of other disk counts differ in price (storage_choices sorts by price), and
        # those of one count are equal.
        size = _given(opt.size_gib)
        return tuple(sorted({max(1, math.ceil(n / size - 1e-9)) * size for n in needs}))
    return needs


def _least_gib(opt: StorageOption, needs: tuple[float, ...]) -> float:
    """No volume of ``opt``'s rule for the :func:`_rule_needs` ``needs`` is smaller than this:
    every rule's sizes are at least the least need (a per-GB or provisioned volume grows from
    it), the slab rule's at least the fewest whole disks holding it."""
    if opt.rule == StorageRule.SLAB:
        size = _given(opt.size_gib)
        return max(1, math.ceil(min(needs) / size - 1e-9)) * size
    return min(needs)


@lru_cache(maxsize=4096)
def _product_choices_of(
    opt: StorageOption, needs: tuple[float, ...], cap: Cap, blocks: tuple[int, ...]
) -> tuple[tuple[StorageChoice, ...], np.ndarray]:
    """The volumes of one product under its rule for the needs as the rule sees them
    (:func:`_rule_needs`; ``blocks``: a provisioned product's only), and their
    :func:`volume_table` as the columns of one array; cached: the design tables ask for the same
    needs once per block-size set (Cosine's grid, each preset's) and VM types of equal limits
    share them."""
    if opt.rule == StorageRule.FLAT:
        out = _flat(opt, list(needs), cap)
    elif opt.rule == StorageRule.PER_GB:
        out = _per_gb(opt, list(needs), cap)
    elif opt.rule == StorageRule.PROVISIONED:
        out = _provisioned(opt, list(needs), cap, list(blocks))
    else:
        out = _slab(opt, list(needs), cap)
    return tuple(out), np.column_stack(volume_table(out)) if out else np.zeros((0, len(_TABLE_FIELDS)))


#: Whether :func:`storage_choices` shares one menu between needs no volume is smaller than; off
#: only to check that it changes no menu (tests/test_storage.py).
SHARE_MENUS = True

#: What :func:`storage_choices` builds a menu from, per product of the VM's provider: the
#: product, the VM's limit on it (None: none) and the needs as its rule sees them (a local
#: store: none, and only when it holds the data).
_MenuItem = tuple[StorageOption, VmStorageLimit | None, tuple[float, ...]]


def storage_choices(
    catalog: Catalog, vm: VmType, need_gib: float | list[float], blocks: tuple[int, ...] | list[int] = (4096,)
) -> list[StorageChoice]:
    """Every volume a node of ``vm`` may use to hold ``need_gib`` (one size or
    several), under each product's rule and the VM's limits, without the
    dominated ones (no cheaper-or-equal choice is at least as large, fast in
    IOPS and fast in MiB/s). ``blocks``: the block sizes whose throughput a
    provisioned volume may be bought to match.

    The menu depends on the needs only through what each product's rule sees of them
    (:func:`_rule_needs`) and the largest need, which caps the room a volume is credited
    with; when no volume is smaller than it (:func:`_least_gib`), every volume is credited
    with the same room, which then orders none of them: such calls share one menu (the small
    shards of the design tables)."""
    needs = [float(need_gib)] if isinstance(need_gib, int | float) else [float(n) for n in need_gib]
    top = max(needs)
    items: list[_MenuItem] = []
    least = math.inf
    for opt in catalog.storage.get(vm.provider, []):
        lim = catalog.storage_limit(vm, opt.name)
        if opt.rule == StorageRule.LOCAL:
            if lim is None or lim.size_gib is None or lim.size_gib < top * (1 - 1e-9):
                continue
            items.append((opt, lim, ()))
            least = min(least, float(lim.size_gib))
            continue
        rule_needs = _rule_needs(opt, tuple(needs))
        items.append((opt, lim, rule_needs))
        least = min(least, _least_gib(opt, rule_needs))
    return list(_menu(vm.provider, tuple(items), tuple(blocks), top if top > least or not SHARE_MENUS else None))


@lru_cache(maxsize=4096)
def _menu(
    provider: str, items: tuple[_MenuItem, ...], blocks: tuple[int, ...], top: float | None
) -> tuple[StorageChoice, ...]:
    """:func:`storage_choices` of the products ``items``; ``top``: the largest need, None when
    no volume is smaller (every volume's room is then the same)."""
    raw: list[StorageChoice] = []
    tables: list[np.ndarray] = []
    for opt, lim, rule_needs in items:
        if opt.rule == StorageRule.LOCAL:
            assert lim is not None and lim.size_gib is not None
            local = StorageChoice(provider, opt.name, 1, float(lim.size_gib), lim.max_iops, 0.0, lim.max_mibps)
            raw.append(local)
            tables.append(np.column_stack(volume_table([local])))
            continue
        cap = Cap() if lim is None else Cap(lim.max_iops, lim.max_mibps, lim.max_disks)
        used = blocks if opt.rule == StorageRule.PROVISIONED else ()
        choices, table = _product_choices_of(opt, rule_needs, cap, used)
        raw += choices
        tables.append(table)
    if not raw:
        return ()
    # Only what a design can use counts: room up to the largest need, and the
    # I/Os per second at each block size (IOPS and MiB/s together).
    usd, gib, iops, mibps = np.concatenate(tables).T
    room = np.minimum(gib, top) if top is not None else np.zeros_like(gib)
    eff = effective_iops(iops[:, None], mibps[:, None], np.asarray(blocks, dtype=float)[None, :])
    keep = pareto_mask(np.column_stack([usd, -room, -eff]))
    return tuple(sorted((s for s, k in zip(raw, keep, strict=True) if k), key=lambda s: (s.usd_month, -s.iops)))


def is_local(catalog: Catalog, choice: StorageChoice) -> bool:
    """Whether a volume is the VM's own instance store (lost when the VM stops or fails)."""
    opts = catalog.storage.get(choice.provider, [])
    return any(o.name == choice.product and o.rule == StorageRule.LOCAL for o in opts)


def compute_cost(usd_per_hour: float, count: int) -> float:
    """Monthly compute cost of ``count`` VMs."""
    return usd_per_hour * HOURS_PER_MONTH * count


@dataclass(frozen=True)
class SlaTerms:
    """What the bill adds to a cluster's nodes, in linear form: the SLA bundle's fees (flat,
    per node, per GB of the data), support plans (a percent of the spend, with a minimum) and the
    cross-zone transfer of a replicated cluster (fixed by the stated traffic, cost_models.bill)."""

    flat: float
    per_node: float
    per_gb: float
    percent_terms: tuple[tuple[float, float], ...]  # (percent, minimum)
    min_nodes: int
    unavailable: tuple[str, ...]
    data_gib: float = 0.0  # the GiB the per-GB fees price: one copy of the data
    transfer: float = 0.0  # USD a month of cross-zone transfer

    @property
    def fixed(self) -> float:
        """What does not depend on the cluster: flat fees, per-GB fees, transfer."""
        return self.flat + self.per_gb * self.data_gib + self.transfer

    @overload
    def support(self, spend: float) -> float: ...
    @overload
    def support(self, spend: np.ndarray) -> np.ndarray: ...
    def support(self, spend: Any) -> Any:
        """The percent-of-spend terms on ``spend`` (the nodes' compute and storage) and the transfer:
        a support plan is a percent of the provider's whole bill."""
        return sum(np.maximum(m, p * (spend + self.transfer)) for p, m in self.percent_terms)


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
        if f != SlaFeature.BACKUP:  # a backup's GB are priced per node, by its storage (replication.py)
            per_gb += s.usd_per_gb_month
        if s.percent_of_spend > 0 or s.minimum_usd > 0:
            pct.append((s.percent_of_spend, s.minimum_usd))
        min_nodes = max(min_nodes, s.min_nodes)
    return SlaTerms(flat, per_node, per_gb, tuple(pct), min_nodes, tuple(missing))


@overload
def sla_cost(terms: SlaTerms, nodes: int, spend: float) -> float: ...
@overload
def sla_cost(terms: SlaTerms, nodes: np.ndarray, spend: np.ndarray) -> np.ndarray: ...
def sla_cost(terms: SlaTerms, nodes: Any, spend: Any) -> Any:
    """What the bill adds to a cluster of ``nodes`` whose compute and storage cost ``spend`` a month
    (:class:`SlaTerms`); elementwise over arrays of clusters (solver.bottleneck bills every
    homogeneous cluster at once)."""
    return terms.fixed + terms.per_node * nodes + terms.support(spend)
