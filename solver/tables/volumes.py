"""The volumes a node may hold a shard on (cost_models.cloud.storage_choices per VM type, shared by
VM types of equal limits) and their size buckets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from cost_models import compression
from cost_models.cloud import GIB, StorageChoice, is_local, storage_choices, volume_table
from cost_models.pricing.catalog import Catalog, VmType
from cost_models.replication import backup_usd_per_node
from solver.space import Grid
from specs.schema import Spec

#: Volume sizes offered per node, as multiples of the shard's logical data: a design's fullest
#: (cost_models.layout ``disk_entries``: its levels full and its largest merge's output beside
#: them) is 1.0-1.3x the data for a hash log or file-by-file merges, about 2x for a wide leveled
#: tree and up to 3x for leveling at T = 2.
VOLUME_HEADROOM = (1.0, 1.15, 1.35, 1.6, 2.0, 2.6, 3.2)


class Menu(list[StorageChoice]):
    """A VM type's volumes for one shard (:func:`shard_volumes`), their :func:`volume_table` and
    :func:`volume_thresholds` made once: every memory size, design and preset of the shard reads them."""

    def __init__(self, choices: list[StorageChoice]) -> None:
        super().__init__(choices)
        self.table = volume_table(self)
        self.thresholds = volume_thresholds([self])


def menu_table(choices: list[StorageChoice]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`volume_table` of ``choices`` (a :class:`Menu`'s own)."""
    return choices.table if isinstance(choices, Menu) else volume_table(choices)


def shard_volumes(
    spec: Spec,
    catalog: Catalog,
    grid: Grid,
    vms: list[VmType],
    s: float,
    blocks: tuple[int, ...],
    backed: dict[StorageChoice, StorageChoice] | None = None,
) -> dict[str, list[StorageChoice]]:
    """Each VM type's volumes for a shard of ``s`` entries (``grid``: the design grid, whose
    cold codecs shrink the data). A VM type enters
    cost_models.cloud.storage_choices only through its provider and the limits
    the catalog sets it on each product, so VM types that share them share one list.
    ``backed``: :func:`with_backup`'s volumes of this shard so far (the menus of several block
    sets and VM types hold many of the same volumes), filled in."""
    base = s * spec.workload.entry_bytes / GIB
    # compressed data needs smaller volumes: the headroom ladder again at each cold codec's factor
    shrink = {compression.codec_factors(c, spec.workload.compressibility)[0] for _, c in grid.codecs}
    needs = sorted({base * h * f for h in VOLUME_HEADROOM for f in shrink | {1.0}})
    out: dict[str, list[StorageChoice]] = {}
    shared: dict[tuple[Any, ...], list[StorageChoice]] = {}
    for vm in vms:
        limits = (vm.provider, *(catalog.storage_limit(vm, o.name) for o in catalog.storage.get(vm.provider, [])))
        if limits not in shared:
            shared[limits] = Menu(with_backup(spec, catalog, storage_choices(catalog, vm, needs, blocks), s, backed))
        out[vm.key] = shared[limits]
    return out


def with_backup(
    spec: Spec,
    catalog: Catalog,
    choices: list[StorageChoice],
    s: float,
    backed: dict[StorageChoice, StorageChoice] | None = None,
) -> list[StorageChoice]:
    """``choices`` priced with the backup a node of ``s`` entries on each needs
    (cost_models.replication.backup_usd_per_node): a volume is bought with its backup.
    ``backed``: the volumes already priced so for ``s`` (by the volume), read and filled in."""
    out = []
    memo: dict[StorageChoice, StorageChoice] = {} if backed is None else backed
    extras: dict[tuple[str, str], float] = {}  # a product's backup is the same for each of its volumes
    for c in choices:
        hit = memo.get(c)
        if hit is None:
            key = (c.provider, c.product)
            extra = extras.get(key)
            if extra is None:
                extra = extras[key] = backup_usd_per_node(spec, catalog, c.provider, is_local(catalog, c), s)
            hit = memo[c] = replace(c, usd_month=c.usd_month + extra, backup_usd_month=extra) if extra > 0 else c
        out.append(hit)
    return out


def volume_thresholds(choices: list[list[StorageChoice]]) -> np.ndarray:
    """The volume sizes offered in ``choices`` (ascending): the size buckets of the designs' needs."""
    g = sorted({c.gib for cs in choices for c in cs})
    return np.array(g) if g else np.zeros(0)


def menu_thresholds(choices: list[StorageChoice]) -> np.ndarray:
    """``volume_thresholds([choices])`` (a :class:`Menu`'s own)."""
    return choices.thresholds if isinstance(choices, Menu) else volume_thresholds([choices])
