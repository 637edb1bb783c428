"""Storage as each provider defines it (pricing/storage.csv, pricing/vm_storage.csv,
cost_models.cloud), against figures computed by hand from the cited rules, and
the menu of volumes against a brute-force search over sizes and IOPS."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_models import cloud
from cost_models.cloud import (
    GIB,
    IOPS_STEP,
    MIB,
    per_gb_figures,
    provisioned_iops_cost,
    storage_choices,
)
from cost_models.pricing.catalog import load_catalog

MBPS = 1e6 / MIB  # a published MB/s in MiB/s


def product(cat, provider, name):
    return next(o for o in cat.storage[provider] if o.name == name)


def find(choices, product_name, **figs):
    """The choices of a product matching every given figure (approximately)."""
    out = []
    for c in choices:
        if c.product != product_name:
            continue
        if all(getattr(c, k) == pytest.approx(v, rel=1e-6) for k, v in figs.items()):
            out.append(c)
    return out


@pytest.fixture(scope="module")
def od():
    return load_catalog("ondemand")


# ----------------------------------------------------------------------------- AWS


def test_gp3_baseline_and_provisioned(od):
    vm = od.vm("aws", "r5d.4xlarge")  # EBS limit 18,750 IOPS / 593.75 MB/s; 600 GB local (too small here)
    ch = storage_choices(od, vm, 1000.0, (4096, 32768))
    # 1,000 GiB at $0.08, 3,000 IOPS and 125 MiB/s included
    assert find(ch, "gp3", gib=1000.0, iops=3000.0, mibps=125.0, usd_month=80.0)
    # 16,000 IOPS (gp3's maximum): 13,000 bought at $0.005; for 32 KiB blocks
    # 16,000 x 32 KiB = 500 MiB/s, 375 bought at $0.04: 80 + 65 + 15 = $160
    top = find(ch, "gp3", iops=16000.0, mibps=500.0)
    assert top and top[0].usd_month == pytest.approx(160.0)
    assert float(top[0].effective_iops(32768)) == pytest.approx(16000.0)
    # with only the included 125 MiB/s a 32 KiB block is throughput-bound: 4,000 I/O per second
    base = find(ch, "gp3", gib=1000.0, iops=3000.0)[0]
    assert float(base.effective_iops(32768)) == pytest.approx(3000.0)
    assert float(base.effective_iops(65536)) == pytest.approx(125 * MIB / 65536)


def test_ebs_is_capped_by_the_instance(od):
    vm = od.vm("aws", "r5d.large")  # BaselineIops 3,600, 81.25 MB/s
    ch = storage_choices(od, vm, 100.0, (4096, 32768))  # 100 GiB: more than its 69.8 GiB instance store
    ebs = [c for c in ch if c.product in ("gp2", "gp3", "io2")]
    assert ebs and max(c.iops for c in ebs) == pytest.approx(3600.0)
    assert max(c.mibps for c in ebs) == pytest.approx(81.25 * MBPS)
    # 3,600 IOPS on gp3: 600 bought, $8 + $3
    assert find(ch, "gp3", gib=100.0, iops=3600.0)[0].usd_month == pytest.approx(11.0)


def test_gp2_per_gib_rule(od):
    gp2 = product(od, "aws", "gp2")
    assert per_gb_figures(gp2, 10.0) == (100.0, 128.0)  # 3/GiB, at least 100; 128 MiB/s under 334 GiB
    assert per_gb_figures(gp2, 100.0) == (300.0, 128.0)
    assert per_gb_figures(gp2, 334.0) == (1002.0, 250.0)
    assert per_gb_figures(gp2, 6000.0) == (16000.0, 250.0)  # the 16,000 maximum, from 5,334 GiB


def test_io2_tiers(od):
    io2 = product(od, "aws", "io2")
    assert provisioned_iops_cost(io2, 20_000) == pytest.approx(20_000 * 0.065)
    assert provisioned_iops_cost(io2, 50_000) == pytest.approx(32_000 * 0.065 + 18_000 * 0.0455)
    assert provisioned_iops_cost(io2, 70_000) == pytest.approx(32_000 * 0.065 + 32_000 * 0.0455 + 6_000 * 0.032)
    gp3 = product(od, "aws", "gp3")
    assert provisioned_iops_cost(gp3, 3000) == 0.0 and provisioned_iops_cost(gp3, 4000) == pytest.approx(5.0)


def test_r5d_instance_store(od):
    vm = od.vm("aws", "r5d.large")  # 1 x 75 GB NVMe, 15,000 write IOPS (4 KiB)
    ch = storage_choices(od, vm, 50.0, (4096, 32768))
    local = find(ch, "instance-store")
    assert len(local) == 1 and local[0].usd_month == 0.0
    assert local[0].gib == pytest.approx(75e9 / GIB) and local[0].iops == 15000.0
    assert local[0].mibps == pytest.approx(15000 * 4096 / MIB)  # no published throughput: IOPS x 4 KiB
    assert not find(storage_choices(od, vm, 80.0), "instance-store")  # 80 GiB do not fit in 69.8
    big = od.vm("aws", "r5d.24xlarge")  # 4 x 900 GB, 680,000 write IOPS
    assert find(storage_choices(od, big, 1000.0), "instance-store", iops=680_000.0)


# ----------------------------------------------------------------------------- GCP


def test_pd_ssd_and_balanced_per_gib(od):
    ssd, bal = product(od, "gcp", "pd-ssd"), product(od, "gcp", "pd-balanced")
    assert per_gb_figures(ssd, 100.0) == pytest.approx((6000 + 30 * 100, 240 + 0.48 * 100))
    assert per_gb_figures(bal, 100.0) == pytest.approx((3000 + 6 * 100, 140 + 0.28 * 100))


def test_pd_capped_per_vm_by_vcpu(od):
    small = od.vm("gcp", "n1-highmem-2")  # 2-7 vCPU: 15,000 IOPS, 240 MiB/s
    ch = storage_choices(od, small, 100.0, (4096,))
    assert find(ch, "pd-ssd", gib=100.0, iops=9000.0, mibps=240.0, usd_month=17.0)
    assert max(c.iops for c in ch) == 15000.0  # a 1 TB pd-ssd would give 36,000: the VM caps it
    big = od.vm("gcp", "n2-highmem-64")  # 64+ vCPU N2 pd-ssd: 100,000 read / 60,000 write -> 60,000
    assert max(c.iops for c in storage_choices(od, big, 100.0, (4096,)) if c.product == "pd-ssd") == 60000.0
    # a bigger disk is offered for its IOPS: 300 GiB reaches the 15,000 cap (6,000 + 30 x 300)
    assert find(ch, "pd-ssd", gib=300.0, iops=15000.0)


# ----------------------------------------------------------------------------- Azure


def test_premium_ssd_tiers_and_vm_cap(od):
    e2 = od.vm("azure", "E2 v3")  # 3,200 uncached IOPS, 48 MB/s, 4 data disks
    ch = storage_choices(od, e2, 200.0, (4096,))
    assert max(c.disks for c in ch) <= 4
    assert max(c.iops for c in ch) == 3200.0
    assert max(c.mibps for c in ch) == pytest.approx(48 * MBPS)
    assert find(ch, "P15", disks=1, gib=256.0, iops=1100.0, usd_month=38.02)
    e16 = od.vm("azure", "E16 v3")  # 25,600 IOPS, 384 MB/s, 32 disks
    ch = storage_choices(od, e16, 2000.0, (4096,))
    # striping P30s for IOPS: 3 x 5,000 IOPS, 3 x 200 MB/s capped by the VM's 384 MB/s
    assert find(ch, "P30", disks=3, iops=15000.0, usd_month=3 * 135.17, mibps=384 * MBPS)


# ----------------------------------------------------------------------------- the paper's rule


def test_paper_flat_iops_rule():
    cat = load_catalog("paper2021-flat-iops")
    aws = cat.vms["aws"][0]
    # AWS: $0.10/GB-month beyond a 75 GB free slab, 15K IOPS whatever the size, no MiB/s limit.
    ch = storage_choices(cat, aws, 100.0)
    assert ch[0].usd_month == pytest.approx(2.5) and ch[0].iops == 15000 and math.isinf(ch[0].mibps)
    assert storage_choices(cat, aws, 50.0)[0].usd_month == 0.0
    # GCP: $0.24/GB-month, 30K IOPS (even for 10 GiB).
    gcp = storage_choices(cat, cat.vms["gcp"][0], 10.0)[0]
    assert gcp.usd_month == pytest.approx(2.4) and gcp.iops == 30000
    # Azure: flat slabs from 32 GB/120 IOPS at $5.28 to 2 TB/7500 IOPS at $259.05, no VM limits.
    az = cat.vms["azure"][0]
    assert storage_choices(cat, az, 20.0)[0].usd_month == pytest.approx(5.28)
    assert storage_choices(cat, az, 20.0)[0].iops == 120
    assert find(storage_choices(cat, az, 2000.0), "P40", usd_month=259.05, iops=7500.0)


def test_every_price_set_but_the_papers_is_realistic():
    for ps in ("ondemand", "paper2021", "committed1y", "spot"):
        cat = load_catalog(ps)
        for p, vms in cat.vms.items():
            names = {o.name for o in cat.storage[p]}
            assert "ssd" not in names, (ps, p)
            assert all(cat.storage_limit(vm, next(iter(names - {"instance-store"}))) for vm in vms), (ps, p)


# ----------------------------------------------------------------------------- the menu against brute force


@pytest.mark.parametrize(
    ("provider", "vm_name", "name"),
    [
        ("aws", "r5d.2xlarge", "gp3"),
        ("aws", "r5d.8xlarge", "io2"),
        ("gcp", "n1-highmem-16", "pd-ssd"),
        ("gcp", "n2-highmem-32", "pd-balanced"),
        ("aws", "r5d.xlarge", "gp2"),
    ],
)
def test_menu_is_within_one_ladder_step_of_any_volume(od, provider, vm_name, name):
    """Any volume of the product (sizes and provisioned IOPS on a fine grid,
    throughput bought for the block) has a menu choice that costs no more and
    sustains at least 1/IOPS_STEP of its I/O rate at that block size."""
    vm = od.vm(provider, vm_name)
    opt = product(od, provider, name)
    lim = od.storage_limit(vm, name)
    need = 150.0
    for block in (4096, 32768):
        menu = storage_choices(od, vm, need, (block,))
        eff = np.array([float(c.effective_iops(block)) for c in menu])
        usd = np.array([c.usd_month for c in menu])
        for gib in np.geomspace(need, 8000, 25):
            if opt.rule == "per_gb":
                iops, mibps = per_gb_figures(opt, gib)
                cost = gib * opt.usd_per_gb_month
                trials = [(iops, mibps, cost)]
            else:
                trials = []
                top = min(opt.max_iops, opt.max_iops_per_gib * gib)
                for iops in np.geomspace(max(opt.iops or 0.0, opt.min_iops, 100.0), top, 30):
                    mib_top = min(opt.max_mibps, opt.max_mibps_per_iops * iops)
                    if opt.usd_per_mibps_month is None:
                        mibps, extra = mib_top, 0.0
                    else:
                        mibps = min(mib_top, max(opt.mibps or 0.0, iops * block / MIB))
                        extra = opt.usd_per_mibps_month * max(0.0, mibps - (opt.mibps or 0.0))
                    trials.append((iops, mibps, gib * opt.usd_per_gb_month + provisioned_iops_cost(opt, iops) + extra))
            for iops, mibps, cost in trials:
                rate = min(iops, lim.max_iops, min(mibps, lim.max_mibps) * MIB / block)
                ok = (usd <= cost * (1 + 1e-9)) & (eff >= rate / IOPS_STEP * (1 - 1e-9))
                assert ok.any(), (name, block, gib, iops, cost)


@pytest.mark.parametrize("price_set", ["ondemand", "paper2021", "paper2021-flat-iops"])
def test_shared_menus_equal_own(price_set, monkeypatch):
    """storage_choices shares one menu between need sets no volume is smaller than (the room
    every volume is credited with is then the same): the menus equal those of each need set's
    own largest need, on every VM type, for needs from far below any product's least size to
    above most volumes, as the design tables ask for them (a ladder of headrooms)."""
    cat = load_catalog(price_set)
    ladder = (1.0, 1.15, 1.35, 1.6, 2.0, 2.6)
    bases = [1e-4 * 1.7**i for i in range(40)]
    for blocks in ((4096,), (32768,), (4096, 16384, 65536)):
        for vms in cat.vms.values():
            for vm in vms:
                for base in bases:
                    needs = [base * h for h in ladder]
                    monkeypatch.setattr(cloud, "SHARE_MENUS", True)
                    shared = storage_choices(cat, vm, needs, blocks)
                    monkeypatch.setattr(cloud, "SHARE_MENUS", False)
                    assert storage_choices(cat, vm, needs, blocks) == shared, (vm.name, base, blocks)
