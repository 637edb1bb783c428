"""`cosine calibrate`'s fit on synthetic samples: it recovers the terms it was given, and it
refuses (CalibrationError, a message naming the term) any value a fit would put at a bound."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from cli.main import app
from cost_models.cpu import MEMTABLE_DESCENTS, curve_at
from cost_models.phi import PHI_TABLE, load_phi
from measure.calibrate import CalibrationError
from measure.calibrate.fit import PHI_NOISE, fit
from measure.calibrate.operation import fit_operation
from measure.calibrate.plan import BLIND_WRITES, BLOCK_SIZE_STEPS, CLASS_DESIGNS
from measure.calibrate.samples import Sample
from measure.calibrate.table import merge_operation, write_table
from specs.vocab import OPERATIONS, WRITE_OPERATIONS, CalibrationRun, DesignClass, Operation

BLOCK = {"lsm": 4060.0, "btree": 32480.0, "lsh": 4060.0, "hybrid": 928.0}
#: the terms the synthetic engine runs with
CPU = 1e-6  # every cached operation
T_READ = 2e-6  # block read: T_READ at 4 KiB, x the curve SHAPE of the block's bytes
#: the LSM design's block sizes (its own and BLOCK_SIZE_STEPS'), and the synthetic engine's block
#: read at each over its value there, scaled below to 1 at 4 KiB (flat at the small end and past
#: 16 KiB, as measured)
KNOTS = sorted(BLOCK["lsm"] * f for f in (1.0, *BLOCK_SIZE_STEPS))
_RAW = [0.35, 0.37, 0.46, 0.68, 1.0, 1.55, 2.4, 2.4]
SHAPE = [v / float(curve_at(4096.0, KNOTS, _RAW)) for v in _RAW]
K_GROW = 3e-11  # block read: + K_GROW per byte per doubling of the keys past 100,000
M_BLOCK, M_BYTE = 1e-6, 5e-10  # merge block
PER_ENTRY, PER_KEY = 1e-7, 4e-8
BUFFER_GET = 3e-7  # a get the (empty) memtable answers
PER_DOUBLING = 5e-8  # each doubling of the memtable's entries, per search of it
INSERT_DOUBLING = 2e-8  # each doubling of the memtable's entries, per insert into it
#: the memtables of the cached write runs and of their small-memtable twins (the inserts' base;
#: the searches': 1,000)
WRITE_MEMTABLE, SMALL_MEMTABLE = 16_000.0, 2_000.0
INDEX_ENTRY = 3e-7  # a hash-log flush/GC's index update per entry
ENTRY = 116.0
#: each doubling of the keys past the smallest size: a get's search (a range's seek, an rmw's
#: read), and a search that finds nothing
LOOKUP = {"get": 1e-7, "empty_get": 6e-8}
GROWS = {"get": "get", "empty_get": "empty_get", "range": "get", "rmw": "get", "empty_range": "get"}
#: CPU per operation at 2 threads over 1 (the rest: 1): the synthetic engine's writes share data between cores
CONCURRENT = {"update": 1.25, "insert": 1.4}
#: share of a cached rmw run's reads its memtable answered, per data size (measured: docs/journal/s31-s42.md §33.1)
RMW_BUFFERED = {100_000: 0.57, 400_000: 0.21}
#: an empty range's seek on a tree (a hash log walks its index: PER_KEY x keys), and its speed-up at 2 threads
EMPTY_RANGE, EMPTY_RANGE_SPEEDUP = 2.5e-6, 1.5


def grown(op: str, n: int, cls: str = "lsm") -> float:
    """What a search of ``op`` costs at ``n`` keys beyond the 100,000-key reference (nothing for a
    hash log's empty get: cost_models.cpu.FLAT_SEARCHES)."""
    if op not in GROWS or (cls == "lsh" and GROWS[op] == "empty_get"):
        return 0.0
    return LOOKUP[GROWS[op]] * math.log2(n / 100_000)


def memtable(op: str, entries: float) -> float:
    """What ``op``'s memtable descents cost at ``entries``: a search's beyond a 1,000-entry
    memtable's, an insert's beyond the small-memtable runs' (writes are flat below it)."""
    searches, inserts = MEMTABLE_DESCENTS[Operation(op)]
    return searches * PER_DOUBLING * math.log2(max(entries, 1000.0) / 1000.0) + inserts * INSERT_DOUBLING * math.log2(
        max(entries, SMALL_MEMTABLE) / SMALL_MEMTABLE
    )


def sample(kind: str, cls: str, workload: str, records: int, threads: int, **kw: float) -> Sample:
    mix = {workload: 1.0} if workload in OPERATIONS else {"get": 0.5, "update": 0.5}
    if workload == "buffer_get":
        mix = {"get": 1.0}
    base = dict(
        kind=kind,
        cls=cls,
        workload=workload,
        records=records,
        threads=threads,
        operations=100000,
        scan_length=20,
        block_bytes=BLOCK[cls],
        mix=json.dumps(mix),
        throughput=1e5,
        runqueue_share=0.0,
        free_throughput=1e5 * (1.9 if threads == 2 else 1.0),
        fg_cpu=CPU,
        fg_blocks=0.0,
        bg_cpu=0.0,
        bg_blocks=0.0,
        get_buffered=0.0,
        memtable_entries=0.0,
    )
    return Sample(**{**base, **kw})


def block_read(block_bytes: float, n: int) -> float:
    """The synthetic engine's CPU per block read of ``block_bytes`` at ``n`` keys."""
    return T_READ * float(curve_at(block_bytes, KNOTS, SHAPE)) + K_GROW * block_bytes * math.log2(n / 100_000)


def synthetic() -> list[Sample]:
    out = []
    for n in (100_000, 400_000):
        for cls in CLASS_DESIGNS:
            for op in OPERATIONS:
                scans = (10, 100) if op == Operation.RANGE else (20,)
                for scan in scans:
                    cpu = CPU + grown(op, n, cls)
                    if op == Operation.RANGE:
                        cpu = (PER_KEY * n if cls == "lsh" else CPU) + scan * PER_ENTRY + grown(op, n, cls)
                    speedup = 1.9
                    if op == Operation.EMPTY_RANGE:
                        cpu = PER_KEY * n if cls == "lsh" else EMPTY_RANGE + grown(op, n, cls)
                        speedup = EMPTY_RANGE_SPEEDUP
                    mt = WRITE_MEMTABLE if op in WRITE_OPERATIONS else 0.0
                    # an rmw reads what the run's own rmws wrote: the memtable answers a share of its
                    # reads (as the engine's runs of 200,000 rmws at these sizes), each a buffered get
                    buffered = RMW_BUFFERED[n] if op == Operation.RMW else 0.0
                    cpu -= buffered * (CPU + grown(op, n, cls) - BUFFER_GET)
                    for th in (1, 2):
                        # a busy thread at 1; at 2 each is busy speedup / 2 of the time (Eq. 2), at r x the CPU
                        r = CONCURRENT.get(str(op), 1.0) if th == 2 else 1.0
                        free = (speedup if th == 2 else 1.0) / (r * (cpu + memtable(op, mt)))
                        out.append(
                            sample(
                                "cached",
                                cls,
                                str(op),
                                n,
                                th,
                                scan_length=scan,
                                fg_cpu=r * (cpu + memtable(op, mt)),
                                free_throughput=free,
                                memtable_entries=mt,
                                get_buffered=buffered,
                            )
                        )
                    if op in BLIND_WRITES:
                        small = cpu + memtable(op, SMALL_MEMTABLE)
                        out.append(
                            sample("small_memtable", cls, str(op), n, 1, fg_cpu=small, memtable_entries=SMALL_MEMTABLE)
                        )
            for entries in (1000, n):
                cpu = BUFFER_GET + PER_DOUBLING * math.log2(entries / 1000)
                out.append(sample("buffered", cls, "buffer_get", entries, 1, fg_cpu=cpu, memtable_entries=entries))
            for op, fg, buffered in (("get", 1.5, 0.0), ("empty_get", 2.0, 0.0), ("rmw", 1.0, 0.0), ("get", 0.8, 0.4)):
                blocks_cpu = fg * block_read(BLOCK[cls], n)
                cpu = CPU + grown(op, n, cls) - buffered * (CPU + grown(op, n, cls) - BUFFER_GET)
                out.append(
                    sample("loaded", cls, op, n, 1, fg_blocks=fg, fg_cpu=cpu + blocks_cpu, get_buffered=buffered)
                )
            if cls == "lsm":  # the LSM design at each of its other block sizes
                for bb in (BLOCK["lsm"] * f for f in BLOCK_SIZE_STEPS):
                    blocks_cpu = 1.9 * block_read(bb, n)
                    cpu = CPU + grown("get", n, cls) + blocks_cpu
                    out.append(sample("loaded", cls, "get", n, 1, fg_blocks=1.9, fg_cpu=cpu, block_bytes=bb))
            for op, bg in (("insert", 0.7), ("update", 1.2)):
                index = INDEX_ENTRY * BLOCK[cls] / ENTRY if cls == "lsh" else 0.0
                bg_cpu = bg * (M_BLOCK + M_BYTE * BLOCK[cls] + index)
                out.append(sample("loaded", cls, op, n, 1, bg_blocks=bg, bg_cpu=bg_cpu))
    return out


def test_fit_recovers_the_terms() -> None:
    res = fit(synthetic(), cores=2)
    assert res["block_read"]["per_class"] == pytest.approx(dict.fromkeys(CLASS_DESIGNS, T_READ), rel=1e-6)
    assert res["block_read"]["shape"]["block_bytes"] == pytest.approx(KNOTS, rel=1e-12)
    assert res["block_read"]["shape"]["ratio"] == pytest.approx(SHAPE, rel=1e-6)
    assert res["block_read"]["per_byte_doubling"] == pytest.approx(K_GROW, rel=1e-4)
    assert res["block_read"]["growth_max_keys"] == 400_000
    assert res["background"]["background_block_seconds"] == pytest.approx(M_BLOCK, rel=1e-6)
    assert res["background"]["background_block_seconds_per_byte"] == pytest.approx(M_BYTE, rel=1e-6)
    assert res["background"]["hash_index_entry_seconds"] == pytest.approx(INDEX_ENTRY, rel=1e-6)
    assert res["range"]["lsh"]["per_key"] == pytest.approx(PER_KEY, rel=1e-6)
    assert res["range"]["lsm"]["per_entry"] == pytest.approx(PER_ENTRY, rel=1e-6)
    # Eq. 2 on a 1.9x speed-up at 2 threads: phi = (1 - 1/1.9) / (1 - 1/2)
    assert res["phi"][("btree", "get")] == pytest.approx((1 - 1 / 1.9) / 0.5)
    assert res["phi"][("lsm", "update")] == pytest.approx((1 - 1 / 1.9) / 0.5)
    for cls in CLASS_DESIGNS:
        for op in OPERATIONS:
            assert res["concurrent_cpu"][(cls, op)] == pytest.approx(CONCURRENT.get(str(op), 1.0), rel=1e-12)
    assert res["cpu"][("hybrid", "update")] == pytest.approx(CPU)
    assert res["cpu"][("lsh", "buffer_get")] == pytest.approx(BUFFER_GET)
    m = res["memtable"]
    assert (m.search_slope, m.search_base) == pytest.approx((PER_DOUBLING, 1000.0))
    assert (m.insert_slope, m.insert_base) == pytest.approx((INSERT_DOUBLING, SMALL_MEMTABLE))
    assert res["cpu"][("lsm", "insert")] == pytest.approx(CPU) and res["cpu"][("lsh", "rmw")] == pytest.approx(CPU)
    assert res["lookup"]["reference_keys"] == 100_000
    for cls in CLASS_DESIGNS:
        want = {"get": LOOKUP["get"]} if cls == "lsh" else LOOKUP  # a hash log's empty get is flat
        assert res["lookup"]["per_doubling"][cls] == pytest.approx(want, rel=1e-6)
        assert res["cpu"][(cls, "get")] == pytest.approx(CPU) and res["cpu"][(cls, "rmw")] == pytest.approx(CPU)


def test_the_fit_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """`cosine calibrate` prints what it learned, a hash log's flat empty get included (it
    stopped with an internal error there, after writing the table)."""
    from report.measure import print_calibration

    print_calibration(fit(synthetic(), cores=2), [], [], (0, 0))
    out = capsys.readouterr().out
    assert "lsh get" in out and "empty_get flat" in out and "an insert past 2,000" in out


def test_the_table_is_written_from_measured_samples(tmp_path: Path) -> None:
    """A measured sample's kind and class are StrEnums (the parquet's are plain strings): the table
    is written from them and reads back as plain YAML (a whole calibration's 572 runs were lost to a
    RepresenterError at this step once; the samples were saved first)."""
    samples = [replace(s, kind=CalibrationRun(s.kind), cls=DesignClass(s.cls)) for s in synthetic()]
    table = write_table(fit(samples, cores=2), samples, tmp_path / "phi.yaml")
    doc = yaml.safe_load(table.read_text())
    assert {row["kind"] for row in doc["envelope"]} <= {str(k) for k in CalibrationRun}
    assert {row["class"] for row in doc["envelope"]} == set(CLASS_DESIGNS)
    # the model reads what the calibration wrote, every term included
    assert load_phi(table)["classes"]["lsm"]["concurrent_cpu_factor"]["insert"] == CONCURRENT["insert"]


def test_empty_range_is_fitted_from_its_own_runs() -> None:
    """An empty range's CPU and phi come from its cached runs, not from the range's; a hash log's
    empty range is its index walk (hash_scan_per_key_seconds), with no per-operation CPU."""
    res = fit(synthetic(), cores=2)
    for cls in ("lsm", "btree", "hybrid"):
        assert res["cpu"][(cls, "empty_range")] == pytest.approx(EMPTY_RANGE)
    assert ("lsh", "empty_range") not in res["cpu"]
    for cls in CLASS_DESIGNS:
        assert res["phi"][(cls, "empty_range")] == pytest.approx((1 - 1 / EMPTY_RANGE_SPEEDUP) / 0.5)


def test_one_operation_is_merged_into_the_table(tmp_path: Path) -> None:
    """`cosine calibrate operation empty_range`: its values replace the table's, every other
    entry stays, its not-measured note goes, its provenance is recorded."""
    table = tmp_path / "phi.yaml"
    table.write_text(PHI_TABLE.read_text())
    before = yaml.safe_load(table.read_text())
    before["empty_range_note"] = "not measured"
    table.write_text(yaml.safe_dump(before, sort_keys=False))
    samples = [s for s in synthetic() if s.kind == "cached" and s.workload == "empty_range"]
    res = fit_operation(samples, Operation.EMPTY_RANGE, before, cores=2)
    merge_operation(res, samples, table)
    after = yaml.safe_load(table.read_text())
    assert "empty_range_note" not in after
    assert after["operation_provenance"]["empty_range"]["load_average"]
    for cls in CLASS_DESIGNS:
        got, was = after["classes"][cls], before["classes"][cls]
        assert got["phi"]["empty_range"] == pytest.approx((1 - 1 / EMPTY_RANGE_SPEEDUP) / 0.5, abs=1e-4)
        assert {k: v for k, v in got["phi"].items() if k != "empty_range"} == {
            k: v for k, v in was["phi"].items() if k != "empty_range"
        }
        assert {k: v for k, v in got["cpu_seconds"].items() if k != "empty_range"} == {
            k: v for k, v in was["cpu_seconds"].items() if k != "empty_range"
        }
        if cls != "lsh":
            assert got["cpu_seconds"]["empty_range"] > 0
    rest = {k for k in before if k not in ("classes", "empty_range_note", "operation_provenance")}
    assert {k: after[k] for k in rest} == {k: before[k] for k in rest}


def test_an_rmw_is_the_cpu_of_one_that_walks_the_levels() -> None:
    """A cached rmw run's memtable answers the reads of keys the run already wrote (57 % at 100,000
    keys, 21 % at 400,000 here); the model charges the rmw of a workload as one that walks the
    levels less the buffer's share of that walk (cost_models.cpu.demands). So the fit adds the walk
    those reads skipped back — in the whole calibration from its own get and buffered get, in
    `--operation rmw` from the table's — and the table holds the walking rmw's CPU, not a blend of
    the calibration's buffer shares (which the model would then credit a second time)."""
    res = fit(synthetic(), cores=2)
    for cls in CLASS_DESIGNS:
        assert res["cpu"][(cls, "rmw")] == pytest.approx(CPU, rel=1e-9)
    table = yaml.safe_load(PHI_TABLE.read_text())
    for entry in table["classes"].values():
        entry["cpu_seconds"]["get"], entry["buffer_get_seconds"] = CPU, BUFFER_GET
    table["memtable_seconds_per_doubling"], table["memtable_base_entries"] = PER_DOUBLING, 1000.0
    table["memtable_insert_seconds_per_doubling"] = INSERT_DOUBLING
    table["memtable_insert_base_entries"] = SMALL_MEMTABLE
    table["lookup_reference_keys"] = 100_000
    for cls, entry in table["classes"].items():
        entry["lookup_seconds_per_doubling"] = {"get": LOOKUP["get"]} if cls == "lsh" else dict(LOOKUP)
    rmw = [s for s in synthetic() if s.kind == "cached" and s.workload == "rmw"]
    assert {s.get_buffered for s in rmw} == set(RMW_BUFFERED.values())
    one = fit_operation(rmw, Operation.RMW, table, cores=2)
    for cls in CLASS_DESIGNS:
        assert one["cpu"][(cls, "rmw")] == pytest.approx(CPU, rel=1e-9)


def test_one_operation_at_a_bound_is_refused() -> None:
    s = [
        replace(x, free_throughput=2.2 / x.fg_cpu)
        if (x.cls, x.workload, x.threads) == ("btree", "empty_range", 2)
        else x
        for x in synthetic()
        if x.kind == "cached" and x.workload == "empty_range"
    ]
    with pytest.raises(CalibrationError, match=r"phi of btree empty_range is 1\.09.*outside \(0, 1\]"):
        fit_operation(s, Operation.EMPTY_RANGE, yaml.safe_load(PHI_TABLE.read_text()), cores=2)


@pytest.mark.parametrize("op", ["range", "get", "empty_get"])
def test_operation_that_needs_the_whole_calibration_is_refused(runner, op: str) -> None:
    res = runner.invoke(app, ["calibrate", "operation", op, "--quick", "--no-write"])
    assert res.exit_code == 2
    assert "can be measured alone" in res.output and len(res.output.strip().splitlines()) == 1


def test_lookup_no_slower_on_more_data_is_refused() -> None:
    """Gets as fast at 400,000 keys as at 100,000: the slope per doubling would be 0, a bound."""
    s = [replace(x, fg_cpu=CPU) if x.kind == "cached" and x.workload == "get" else x for x in synthetic()]
    with pytest.raises(CalibrationError, match=r"lsm get CPU \(a \+ b log2.*per_doubling = .*must be positive"):
        fit(s, cores=2)


def test_super_linear_speedup_is_refused_not_clamped() -> None:
    s = synthetic()
    # each of the 2 threads on a CPU 110 % of the time: a measurement Eq. 2 cannot describe
    s = [
        replace(x, free_throughput=2.2 / x.fg_cpu) if (x.cls, x.workload, x.threads) == ("lsm", "get", 2) else x
        for x in s
    ]
    with pytest.raises(CalibrationError, match=r"phi of lsm get is 1\.09.*outside \(0, 1\]"):
        fit(s, cores=2)


def test_phi_within_the_busy_shares_noise_past_one_is_one() -> None:
    """A perfectly parallel read measured a little past 1 (busy 100.4 %: phi 1.004, within PHI_NOISE)
    is 1; a little further (PHI_NOISE + 0.004 past it) is refused as super-linear."""

    def at(busy: float) -> list[Sample]:
        return [
            replace(x, free_throughput=2 * busy / x.fg_cpu)
            if (x.cls, x.workload, x.threads) == ("lsh", "get", 2)
            else x
            for x in synthetic()
        ]

    assert fit(at(1.004), cores=2)["phi"][("lsh", "get")] == 1.0
    with pytest.raises(CalibrationError, match=r"phi of lsh get is 1\.0"):
        fit(at(1.0 + PHI_NOISE + 0.004), cores=2)


def test_slower_with_more_threads_is_refused() -> None:
    s = synthetic()
    s = [
        replace(x, free_throughput=0.8 / x.fg_cpu) if (x.cls, x.workload, x.threads) == ("lsh", "update", 2) else x
        for x in s
    ]
    with pytest.raises(CalibrationError, match="phi of lsh update.*ran slower"):
        fit(s, cores=2)


def test_block_read_fit_at_a_bound_is_refused() -> None:
    """Loaded runs no slower than cached ones: the block-read time would have to be <= 0."""
    s = [replace(x, fg_cpu=CPU * 0.9) if x.kind == "loaded" and x.fg_blocks > 0 else x for x in synthetic()]
    with pytest.raises(CalibrationError, match="block-read CPU"):
        fit(s, cores=2)


def test_background_fit_at_a_bound_is_refused() -> None:
    s = [
        replace(x, bg_cpu=x.bg_blocks * M_BLOCK * 0.1) if x.bg_blocks > 0 and x.cls == "btree" else x
        for x in synthetic()
    ]
    with pytest.raises(CalibrationError, match="background CPU"):
        fit(s, cores=2)


def test_memtable_slope_at_a_bound_is_refused() -> None:
    """Buffered gets no slower in a big memtable than in a small one: no positive slope."""
    s = [replace(x, fg_cpu=BUFFER_GET) if x.kind == "buffered" else x for x in synthetic()]
    with pytest.raises(CalibrationError, match="memtable CPU"):
        fit(s, cores=2)


def test_memtable_insert_slope_at_a_bound_is_refused() -> None:
    """Writes into a 16 k-entry memtable faster than into a 2 k-entry one: no positive slope."""
    faster = {"cached": 1.0, "small_memtable": 1.01}
    s = [
        replace(x, fg_cpu=CPU * faster[x.kind]) if x.workload in WRITE_OPERATIONS and x.kind in faster else x
        for x in synthetic()
    ]
    with pytest.raises(CalibrationError, match="memtable insert CPU"):
        fit(s, cores=2)


def test_a_block_read_of_any_size_costing_the_same_is_measured_so() -> None:
    """Every block costs the same whatever its size (and grows with the data as before): the curve
    the fit gives is flat (no bound)."""
    s = []
    for x in synthetic():
        if x.kind == "loaded" and x.fg_blocks > 0:
            flat = T_READ - T_READ * float(curve_at(x.block_bytes, KNOTS, SHAPE))
            x = replace(x, fg_cpu=x.fg_cpu + x.fg_blocks * flat)
        s.append(x)
    res = fit(s, cores=2)["block_read"]
    assert res["shape"]["ratio"] == pytest.approx([1.0] * len(KNOTS), rel=1e-6)
    assert res["per_class"]["btree"] == pytest.approx(T_READ, rel=1e-6)


def test_one_lsm_block_size_is_refused() -> None:
    """Without the LSM runs at other block sizes the curve over a block's bytes is not measured."""
    s = [x for x in synthetic() if not (x.kind == "loaded" and x.cls == "lsm" and x.block_bytes != BLOCK["lsm"])]
    with pytest.raises(CalibrationError, match="needs two or more"):
        fit(s, cores=2)


def test_block_read_growth_at_a_bound_is_refused() -> None:
    """Blocks cheaper on more data: the growth per byte and doubling the fit wants is negative."""
    s = []
    for x in synthetic():
        if x.kind == "loaded" and x.fg_blocks > 0:
            read = T_READ * float(curve_at(x.block_bytes, KNOTS, SHAPE))
            x = replace(x, fg_cpu=x.fg_cpu - 1.5 * x.fg_blocks * (block_read(x.block_bytes, x.records) - read))
        s.append(x)
    with pytest.raises(CalibrationError, match="block_read_seconds_per_byte_doubling"):
        fit(s, cores=2)
