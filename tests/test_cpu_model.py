"""The CPU model's serial, background and device terms (docs/model.md, "CPU and throughput"):
against a brute-force solution of their defining equation, and against a discrete-event
simulation of the node they describe (tests/concurrency_sim.py)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from cost_models.cpu import Demands, throughput
from cost_models.phi import PHI_TABLE, load_phi
from cost_models.symbolic import compiled
from specs.vocab import DesignClass
from tests.concurrency_sim import Node, simulate


def model(n: Node) -> float:
    d = Demands(
        serial=np.array([n.serial]),
        parallel=np.array([n.parallel]),
        wait=np.array([n.wait]),
        background=np.array([n.background]),
        io=np.array([0.0]),
        io_bytes=np.array([0.0]),
    )
    return float(throughput(d, math.inf, n.threads, n.cores)[0])


def test_shared_core_throughput_solves_its_fixed_point_by_brute_force() -> None:
    """X = the root of 1/X = S + P/(eta - X G) in (0, eta/G), found by bisection."""
    rng = np.random.default_rng(7)
    f = compiled()["throughput_shared_cores"]
    for _ in range(300):
        S, P, G = rng.uniform(0, 2e-6, 3) * rng.integers(0, 2, 3)
        P += 1e-7
        eta = float(rng.integers(1, 64))
        x = float(f(S, P, G, eta))

        def g(X: float, S: float = S, P: float = P, G: float = G, eta: float = eta) -> float:
            return 1 / X - (S + P / (eta - X * G))

        lo, hi = 1e-3, (eta / G) * (1 - 1e-12) if G > 0 else 1e12
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
        assert x == pytest.approx(lo, rel=1e-6)


def test_reduces_to_eq2_without_background_and_device() -> None:
    """G = D = 0, n = eta: X = g(phi, eta) / (S + P) with phi = P / (S + P) (paper Eq. 2)."""
    c = compiled()
    for S, P, eta in ((1e-6, 3e-6, 4), (2e-7, 5e-6, 16), (0.0, 1e-6, 8)):
        x = model(Node(S, P, 0.0, 0.0, eta, eta))
        assert x == pytest.approx(float(c["amdahl"](P / (S + P), eta)) / (S + P), rel=1e-12)


@pytest.mark.parametrize(
    "node, rel",
    [
        (Node(serial=0.0, parallel=1.0, wait=0.0, background=0.0, threads=2, cores=2), 0.01),  # all parallel
        (Node(serial=1.0, parallel=0.0, wait=0.0, background=0.0, threads=4, cores=2), 0.01),  # one lock
        (Node(serial=0.0, parallel=0.1, wait=2.0, background=0.0, threads=3, cores=2), 0.01),  # device wait
        (Node(serial=0.0, parallel=1.0, wait=0.0, background=0.5, threads=2, cores=2), 0.02),  # cores shared
        (Node(serial=0.0, parallel=0.3, wait=0.0, background=1.0, threads=1, cores=2), 0.02),  # one worker
        (Node(serial=0.2, parallel=1.0, wait=0.0, background=0.0, threads=1, cores=2), 0.01),  # one thread
    ],
)
def test_matches_simulation_where_the_model_is_exact(node: Node, rel: float) -> None:
    assert model(node) == pytest.approx(simulate(node), rel=rel)


@pytest.mark.parametrize(
    "node",
    [
        Node(serial=0.5, parallel=1.0, wait=0.0, background=0.0, threads=2, cores=2),
        Node(serial=0.3, parallel=1.0, wait=0.5, background=0.2, threads=2, cores=2),
        Node(serial=0.2, parallel=1.0, wait=0.0, background=0.4, threads=2, cores=2),
        Node(serial=0.1, parallel=1.0, wait=0.0, background=0.3, threads=8, cores=8),
        Node(serial=1.0, parallel=1.0, wait=0.0, background=0.0, threads=2, cores=2),
    ],
)
def test_within_a_quarter_of_simulation_and_never_optimistic(node: Node) -> None:
    """Where critical sections of different threads overlap their parallel parts, Eq. 2 (which
    runs the serial part alone) is pessimistic: the model stays below the simulated node, by at
    most 25% (exponential service times, the queueing case)."""
    sim = simulate(node, exponential=True, ops=40000)
    x = model(node)
    assert x <= sim * 1.03
    assert x >= sim * 0.75


def test_lookup_cpu_grows_per_doubling_of_the_keys() -> None:
    """A node's cached CPU per operation, computed term by term from the table (docs/model.md (3)):
    a get, a range's seek and an rmw's read grow by s_get per doubling past the reference size, an
    empty get by s_empty, a write not at all; below the reference nothing changes."""
    from cost_models.cpu import op_cpu_seconds
    from specs.vocab import DESIGN_CLASSES, OPERATIONS, DesignClass

    t = load_phi()
    ref = float(t["lookup_reference_keys"])
    cls = np.array([c.code for c in DesignClass if c != DesignClass.LSH])
    e = float(t["wal"]["reference_entry_bytes"])
    small, large = op_cpu_seconds(t, cls, ref / 8, 20.0, e), op_cpu_seconds(t, cls, ref * 2**10, 20.0, e)
    assert np.allclose(small, op_cpu_seconds(t, cls, ref, 20.0, e))
    for i, code in enumerate(cls):
        slope = t["classes"][DESIGN_CLASSES[code]]["lookup_seconds_per_doubling"]
        want = {"get": 10 * slope["get"], "empty_get": 10 * slope["empty_get"], "range": 10 * slope["get"]}
        want |= {"rmw": 10 * slope["get"], "insert": 0.0, "update": 0.0, "empty_range": 10 * slope["get"]}
        got = dict(zip(OPERATIONS, large[i] - small[i], strict=True))
        assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_memtable_and_hash_index_terms_term_by_term() -> None:
    """docs/model.md: a search and an insert of the memtable grow by their own slopes per doubling
    past their own bases (an rmw pays both; below its base a write costs the flat cached CPU: every
    class measured the same CPU per write at 650, 2,600 and 12,000 entries); a hash log's
    background CPU per flushed block adds its entries' index updates, a tree's does not."""
    from cost_models.cpu import NodeShape, demands, wal_seconds
    from cost_models.io_model import IOCost
    from specs.vocab import OPERATIONS, DesignClass

    t = load_phi()
    base, search, insert, insert_base = (
        float(t["memtable_base_entries"]),
        float(t["memtable_seconds_per_doubling"]),
        float(t["memtable_insert_seconds_per_doubling"]),
        float(t["memtable_insert_base_entries"]),
    )
    assert insert_base > base
    cls = np.array([DesignClass.LSH.code, DesignClass.LSM.code])
    zero = {str(op): np.zeros(2) for op in OPERATIONS}
    io = IOCost(**{**zero, "update": np.array([0.1, 0.1])}, get_buffered=None)
    block, entry = 4096.0, 128.0

    def at(entries: float, op: str) -> Demands:
        shape = NodeShape(cls, np.array([block, block]), 1e5, entry, np.array([entries, entries]))
        return demands(load_phi(), io, shape, {op: 1.0}, 20.0)

    big = insert_base * 2**6
    searched, inserted = search * np.log2(big / base), insert * 6
    # an rmw's insert follows its search down the same nodes: only the search's growth (docs/journal/s31-s42.md §33.7)
    for op, want in (("get", searched), ("update", inserted), ("rmw", searched)):
        small, large = at(base / 2, op), at(big, op)
        grown = (large.serial + large.parallel) - (small.serial + small.parallel)
        assert grown == pytest.approx([want, want], rel=1e-9)
    flat = at(insert_base, "update").serial + at(insert_base, "update").parallel
    assert flat == pytest.approx((at(base / 2, "update").serial + at(base / 2, "update").parallel), rel=1e-12)
    from cost_models.design import model_constants

    g = at(base, "update").background
    merged = 0.1 - entry / model_constants()["wal_page_bytes"]  # the WAL pages are the writer's own
    tree = merged * (float(t["background_block_seconds"]) + block * float(t["background_block_seconds_per_byte"]))
    index = merged * block / entry * float(t["hash_index_entry_seconds"])
    sync = wal_seconds(t, entry)[1]  # the write's WAL group, synced by the sync thread
    assert g == pytest.approx([tree + index + sync, tree + sync], rel=1e-9)


def test_block_read_grows_with_the_data_up_to_the_largest_calibrated_size() -> None:
    """A block read costs the class's time at 4 KiB x (bytes / 4 KiB)^gamma, plus k x bytes per
    doubling of the keys past the reference size, held at ``block_read_growth_max_keys`` (no
    extrapolation past what the calibration measured); the same at and below the reference."""
    from cost_models.cpu import read_block_seconds

    t = load_phi()
    ref, top = float(t["lookup_reference_keys"]), float(t["block_read_growth_max_keys"])
    k = float(t["block_read_seconds_per_byte_doubling"])
    cls = np.array([DesignClass.BTREE.code])
    base = float(read_block_seconds(load_phi(), 32768.0, cls, ref)[0])
    assert float(read_block_seconds(load_phi(), 32768.0, cls, ref / 8)[0]) == pytest.approx(base)
    assert float(read_block_seconds(load_phi(), 32768.0, cls, 2 * ref)[0]) - base == pytest.approx(k * 32768.0)
    at_top = float(read_block_seconds(load_phi(), 32768.0, cls, top)[0])
    assert at_top - base == pytest.approx(k * 32768.0 * math.log2(top / ref))
    assert float(read_block_seconds(load_phi(), 32768.0, cls, 1000 * top)[0]) == pytest.approx(at_top)


def test_a_thread_among_others_pays_the_concurrent_cpu_and_one_alone_does_not() -> None:
    """``concurrent_cpu_factor`` r: with more than one client thread every operation's CPU is r x the
    single thread's, split by phi as the single thread's is (docs/model.md); one thread pays nothing
    more. Against a node built by hand with the scaled S and P, through the same throughput."""
    S, P, G = 2e-7, 1.5e-6, 4e-7
    r = 1.3
    d = Demands(
        serial=np.array([S]),
        parallel=np.array([P]),
        wait=np.array([0.0]),
        background=np.array([G]),
        io=np.array([0.0]),
        io_bytes=np.array([0.0]),
        serial_concurrent=np.array([S * (r - 1)]),
        parallel_concurrent=np.array([P * (r - 1)]),
    )
    assert float(throughput(d, math.inf, 1, 2)[0]) == pytest.approx(model(Node(S, P, 0.0, G, 1, 2)), rel=1e-12)
    for n, eta in ((2, 2), (4, 4), (16, 16)):
        want = model(Node(S * r, P * r, 0.0, G, n, eta))
        assert float(throughput(d, math.inf, n, eta)[0]) == pytest.approx(want, rel=1e-12)
    # without background or serial part, n threads on n cores: n / (r P), where one thread gets 1 / P
    d0 = Demands(
        *(np.array([v]) for v in (0.0, P, 0.0, 0.0, 0.0, 0.0)),
        serial_concurrent=np.array([0.0]),
        parallel_concurrent=np.array([P * (r - 1)]),
    )
    assert float(throughput(d0, math.inf, 8, 8)[0]) == pytest.approx(8 / (r * P), rel=1e-12)
    assert float(throughput(d0, math.inf, 1, 1)[0]) == pytest.approx(1 / P, rel=1e-12)


def test_demands_charge_each_operations_concurrent_cpu_by_its_own_factor() -> None:
    """demands(load_phi(), ): the concurrent seconds are sum_o theta_o c_o (r_o - 1) theta_kind(o), split
    (1 - phi_o) serial and phi_o parallel: c_o the cached CPU the single-thread S and P are made of (no
    block reads here, so S + P = sum_o theta_o c_o), theta_kind(o) the mix's share of operations of o's
    kind (writes for a write, reads for a read; the cached runs that measured r_o had only o's kind).
    Term by term against the table's factors, on a two-operation mix."""
    from cost_models.cpu import NodeShape, demands
    from cost_models.io_model import IOCost
    from specs.vocab import OPERATIONS

    t = load_phi()["classes"]
    cls = np.array([DesignClass.LSM.code, DesignClass.HYBRID.code])
    io = IOCost(**{str(op): np.zeros(2) for op in OPERATIONS}, get_buffered=None)
    shape = NodeShape(cls, np.array([4096.0, 4096.0]), 1e5, 128.0, np.array([1000.0, 1000.0]))
    mix = {"get": 0.3, "update": 0.7}
    d = demands(load_phi(), io, shape, mix, 20.0)
    for i, name in enumerate(("lsm", "hybrid")):
        one = {op: demands(load_phi(), io, shape, {op: 1.0}, 20.0) for op in mix}
        c = {op: float(one[op].serial[i] + one[op].parallel[i]) for op in mix}
        r = {op: float(t[name]["concurrent_cpu_factor"][op]) for op in mix}
        phi = {op: float(t[name]["phi"][op]) for op in mix}
        assert d.serial_concurrent is not None and d.parallel_concurrent is not None
        want_s = sum(w * (1 - phi[op]) * c[op] * (r[op] - 1) * w for op, w in mix.items())
        want_p = sum(w * phi[op] * c[op] * (r[op] - 1) * w for op, w in mix.items())
        assert float(d.serial_concurrent[i]) == pytest.approx(want_s, rel=1e-9, abs=1e-18)
        assert float(d.parallel_concurrent[i]) == pytest.approx(want_p, rel=1e-9, abs=1e-18)


@pytest.mark.parametrize("text", ["x: [\n", "\xff\xfe", "[1, 2]\n"])
def test_an_unreadable_phi_table_is_one_input_error(tmp_path, text: str) -> None:
    """A damaged phi table (bad YAML, bad bytes, not a mapping) is an InputError naming the file,
    never a YAML or decoding traceback."""
    from specs.errors import InputError

    path = tmp_path / "phi.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match="phi.yaml"):
        load_phi(path)


def test_block_read_follows_the_measured_curve_between_its_sizes() -> None:
    """A block read's CPU is the class's 4 KiB time times the table's measured curve: at a measured
    block size its ratio, between two a power law through both, below the first the first ratio,
    above the last the last two's power law continued (a larger block keeps costing more)."""
    from cost_models.cpu import block_read_shape, curve_at

    shape = load_phi()["block_read_shape"]
    knots, ratio = shape["block_bytes"], shape["ratio"]
    assert block_read_shape(load_phi(), np.array(knots)) == pytest.approx(ratio, rel=1e-12)
    a, b = knots[1], knots[2]
    mid = math.sqrt(a * b)  # halfway in log-log
    assert float(block_read_shape(load_phi(), mid)) == pytest.approx(math.sqrt(ratio[1] * ratio[2]), rel=1e-12)
    assert float(block_read_shape(load_phi(), knots[0] / 4)) == pytest.approx(ratio[0], rel=1e-12)
    per_doubling = max((ratio[-1] / ratio[-2]) ** (1 / math.log2(knots[-1] / knots[-2])), 1.0)
    above = float(block_read_shape(load_phi(), knots[-1] * 4))
    assert above == pytest.approx(ratio[-1] * per_doubling**2, rel=1e-12)
    assert above >= ratio[-1]
    # a curve whose last two knots grow continues to grow; one whose last two fall is held
    grow = curve_at(np.array([64.0]), [8.0, 16.0], [1.0, 1.5], extend_up=True)[0]
    assert grow == pytest.approx(1.5 * 1.5**2, rel=1e-12)
    fall = curve_at(np.array([64.0]), [8.0, 16.0], [1.5, 1.4], extend_up=True)[0]
    assert fall == pytest.approx(1.4, rel=1e-12)
    assert float(curve_at(4.0, [2.0, 8.0], [1.0, 4.0])) == pytest.approx(2.0, rel=1e-12)
    assert float(curve_at(32.0, [2.0, 8.0], [1.0, 4.0])) == pytest.approx(4.0, rel=1e-12)  # held
    assert float(curve_at(32.0, [2.0, 8.0], [1.0, 4.0], extend_up=True)) == pytest.approx(16.0, rel=1e-12)


@pytest.mark.parametrize(
    ("shape", "match"),
    [
        ("{block_bytes: [1024.0], ratio: [1.0]}", "at least 2"),
        ("{block_bytes: [4096.0, 1024.0], ratio: [1.0, 0.5]}", "ascend"),
        ("{block_bytes: [1024.0, 4096.0], ratio: [0.0, 1.0]}", "not a positive number"),
        ("[1, 2]", "must map"),
    ],
)
def test_a_bad_block_read_shape_is_one_input_error(tmp_path, shape: str, match: str) -> None:
    """The measured curve must be two or more ascending block sizes with positive ratios."""
    from specs.errors import InputError

    text = re.sub(r"^block_read_shape:\n(  .*\n)+", f"block_read_shape: {shape}\n", PHI_TABLE.read_text(), flags=re.M)
    path = tmp_path / "phi.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=f"block_read_shape.*{match}"):
        load_phi(path)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ("drop", "wal missing"),
        ("policy", "wal.policy is 'none'"),
        ("zero", "wal.group_seconds must be a positive"),
        ("bool", "wal.reference_entry_bytes must be a positive"),
    ],
)
def test_a_bad_wal_section_is_one_input_error(tmp_path, edit: str, match: str) -> None:
    """phi.yaml's wal (`cosine calibrate wal`) must be there, for the modelled policy, its terms positive."""
    import yaml

    from specs.errors import InputError

    doc = yaml.safe_load(PHI_TABLE.read_text())
    if edit == "drop":
        del doc["wal"]
    elif edit == "policy":
        doc["wal"]["policy"] = "none"
    elif edit == "zero":
        doc["wal"]["group_seconds"] = 0.0
    else:
        doc["wal"]["reference_entry_bytes"] = True
    path = tmp_path / "phi.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InputError, match=match):
        load_phi(path)


def test_a_write_costs_its_entry_s_bytes_and_its_wal_group() -> None:
    """A write's CPU is the table's plus, per write (one WAL group each, in process): its entry's
    bytes past the reference entry and the modelled policy's group write on its thread, the group's
    sync in the background; a read's does not move (docs/model.md, "CPU and throughput")."""
    from cost_models.cpu import NodeShape, demands, op_cpu_seconds, wal_seconds
    from cost_models.io_model import IOCost
    from specs.vocab import OPERATIONS, WRITE_OPERATIONS, DesignClass, WalSync

    t = load_phi()
    w = t["wal"]
    e0 = float(w["reference_entry_bytes"])
    fg0, bg0 = wal_seconds(t, e0)
    assert fg0 == pytest.approx(w["group_seconds"], rel=1e-12)
    assert bg0 == pytest.approx(w["group_background_seconds"], rel=1e-12)
    # an engine configured without syncing (the calibration's presets, measure.grid) pays its bytes only
    assert wal_seconds(t, e0, WalSync.NONE) == (0.0, 0.0)
    assert wal_seconds(t, e0 + 1000.0, WalSync.NONE)[0] == pytest.approx(1000.0 * w["seconds_per_byte"], rel=1e-9)
    fg1, bg1 = wal_seconds(t, e0 + 1000.0)
    assert fg1 - fg0 == pytest.approx(1000.0 * w["seconds_per_byte"], rel=1e-9)
    assert bg1 == bg0
    cls = np.array([c.code for c in DesignClass])
    base, big = op_cpu_seconds(t, cls, 1e5, 20.0, e0), op_cpu_seconds(t, cls, 1e5, 20.0, e0 + 1000.0)
    for j, op in enumerate(OPERATIONS):
        want = fg1 - fg0 if op in WRITE_OPERATIONS else 0.0
        assert np.allclose(big[:, j] - base[:, j], want, rtol=1e-12, atol=1e-18), op
    # the sync thread's share: each write's group in the background, none for a read
    n = 1
    io = IOCost(**{op: np.zeros(n) for op in OPERATIONS})
    shape = NodeShape(np.array([DesignClass.LSM.code]), np.array([4096.0]), 1e5, e0, np.array([0.0]))
    wr = demands(t, io, shape, {"update": 1.0}, 1.0)
    rd = demands(t, io, shape, {"get": 1.0}, 1.0)
    assert float(wr.background[0] - rd.background[0]) == pytest.approx(bg0, rel=1e-9)


def test_the_wal_fit_refuses_a_term_at_its_bound() -> None:
    """`cosine calibrate wal` fits one set of terms over the presets; a term at or below 0 is refused."""
    from measure.calibrate import CalibrationError
    from measure.calibrate.wal import WalPoint, fit

    def pts(group: float) -> list[WalPoint]:
        out = []
        for p, a in (("lsm", 3e-7), ("btree", 2e-7)):
            for policy in ("none", "group_commit"):
                gc = policy == "group_commit"
                for e in (116, 1016, 4016):
                    fg = a + 6e-10 * e + (group if gc else 0.0)
                    bg = 1e-9 + (5e-8 if gc else 0.0)
                    out.append(WalPoint(p, policy, e, fg, bg, ()))
        return out

    f = fit(pts(5e-7))
    assert f.seconds_per_byte == pytest.approx(6e-10, rel=1e-6)
    assert f.group_seconds == pytest.approx(5e-7, rel=1e-6)
    assert f.group_background_seconds == pytest.approx(5e-8, rel=1e-6)
    with pytest.raises(CalibrationError, match="group_seconds"):
        fit(pts(-1e-7))
    with pytest.raises(CalibrationError, match="two entry sizes"):
        fit([p for p in pts(5e-7) if not (p.preset == "lsm" and p.policy == "group_commit" and p.entry_bytes > 116)])


def test_a_configured_engine_is_priced_under_its_own_wal_policy() -> None:
    """An engine.toml's wal_sync reaches the CPU model (cost_models.engine_model.engine_shape): the
    validation's presets run `none`, a rendered engine the modelled policy."""
    from cost_models.engine_model import engine_shape
    from specs.vocab import MODELLED_WAL_SYNC, WalSync

    cfg = {
        "design": {"class": "lsm"},
        "layout": {"key_bytes": 16, "value_bytes": 100, "buffer_bytes": 1 << 20, "block_entries": 32},
        "algorithms": {"file_entries": 65536},
        "durability": {"wal_sync": "none"},
    }
    assert engine_shape(cfg, 1e4, {"buffered": 10.0}).wal_sync == WalSync.NONE
    del cfg["durability"]
    assert engine_shape(cfg, 1e4, {"buffered": 10.0}).wal_sync == MODELLED_WAL_SYNC
