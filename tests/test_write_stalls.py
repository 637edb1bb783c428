"""Write stalls (docs/model.md, "Write stalls"): the closed form of ``cost_models.cpu.stalled``
against a discrete-event simulation of one client thread and the engine's one background
worker with its frozen buffers, written without the cost model; and the I/O model's cascades."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.cpu import Demands, stalled
from cost_models.design import Design, DesignBatch
from cost_models.distributions import partitions
from cost_models.io_model import io_costs
from cost_models.layout import level_shape, split_memory
from specs.schema import Distribution


def simulate(u0: float, put_every: int, q0: int, every: list[int], seconds: list[float], frozen: int) -> float:
    """Operations per second of one client thread (``u0`` seconds per operation, a put every
    ``put_every`` operations) over a buffer of ``q0`` puts; the background worker flushes the
    frozen buffers in order, and the f-th flush first runs the merge into level i (``seconds[i]``)
    whenever f is a multiple of ``every[i]`` (level 1: every flush). A client that fills the
    active buffer while ``frozen`` buffers wait stalls until the oldest is flushed."""
    t = 0.0  # the client's clock
    queue: list[float] = []  # finish times of the frozen buffers' flushes, oldest first
    bg_free = 0.0  # when the worker is next idle
    flushes = 0
    ops = 0
    active = 0
    start_ops, start_t = 0, 0.0
    total_flushes = 40 * max(every)
    while flushes < total_flushes:
        t += u0
        ops += 1
        if ops % put_every:
            continue
        active += 1
        if active < q0:
            continue
        queue = [f for f in queue if f > t]  # flushes already installed
        if len(queue) >= frozen:  # rotate stalls until the oldest frozen buffer is flushed
            t = queue.pop(0)
        flushes += 1
        work = sum(s for s, k in zip(seconds, every, strict=True) if flushes % k == 0)
        bg_free = max(bg_free, t) + work
        queue.append(bg_free)
        active = 0
        if flushes == 4 * max(every):  # measure whole cycles of the deepest merge
            start_ops, start_t = ops, t
    return (ops - start_ops) / (t - start_t)


def model(u0: float, put_every: int, q0: int, every: list[int], seconds: list[float], frozen: int) -> float:
    """The same node through ``stalled``: cascades ending at level i and their seconds."""
    put_share = 1.0 / put_every
    into = np.array([1.0 / (q0 * k) for k in every])  # merges into level i per put
    rate = into - np.append(into[1:], 0.0)
    d = _demands(u0, (rate * put_share)[None, :], np.cumsum(seconds)[None, :], np.array([frozen * q0 / put_share]))
    return float(stalled(np.array([1.0 / u0]), d)[0])


def _demands(u0: float, rate: np.ndarray, seconds: np.ndarray, slack: np.ndarray) -> Demands:
    """One design's demands: ``u0`` seconds of parallel CPU per operation and the cascades'
    stall terms (rate per operation, seconds, slack in operations), nothing else."""
    one = np.zeros(1)
    return Demands(
        serial=one,
        parallel=one + u0,
        wait=one,
        background=one,
        io=one,
        io_bytes=one,
        stall_rate=rate,
        stall_seconds=seconds,
        stall_slack=slack,
    )


@pytest.mark.parametrize(
    ("u0", "put_every", "q0", "every", "seconds", "tolerance"),
    [
        (1e-6, 2, 1000, [1, 6, 36], [2e-4, 1.5e-3, 0.06], 0.02),  # one long merge at the bottom
        (2e-6, 4, 500, [1, 10], [5e-5, 0.02], 0.02),  # a read-mostly mix
        (1e-6, 2, 1000, [1, 6, 36], [2e-4, 5e-4, 2e-3], 1e-3),  # every merge shorter than the slack
        (1e-6, 2, 1000, [1, 3, 9, 27], [1e-4, 2e-3, 6e-3, 0.02], 0.02),  # several cascades stall
        # writes only, the worker busier than the client (1.3 us of merges per put against 1 us):
        # cascades queue behind each other, so the slack is shorter than the model assumes
        (1e-6, 1, 2000, [1, 4, 16], [1e-4, 2e-3, 0.03], 0.06),
    ],
)
def test_stalls_match_a_simulated_engine(
    u0: float, put_every: int, q0: int, every: list[int], seconds: list[float], tolerance: float
) -> None:
    sim = simulate(u0, put_every, q0, every, seconds, frozen=2)
    pred = model(u0, put_every, q0, every, seconds, frozen=2)
    assert pred == pytest.approx(sim, rel=tolerance), (pred, sim)


def test_no_stall_when_every_cascade_fits_the_slack() -> None:
    # 2 buffers of 1,000 puts at one put per 2 us: 4 ms of slack, every cascade 3 ms at most
    assert model(1e-6, 2, 1000, [1, 6], [1e-3, 2e-3], frozen=2) == pytest.approx(1e6)
    assert simulate(1e-6, 2, 1000, [1, 6], [1e-3, 2e-3], frozen=2) == pytest.approx(1e6, rel=1e-3)


def test_stalls_take_whole_merges_off_a_write_only_client() -> None:
    # cascades far longer than the slack: the client waits out nearly all of each one
    pred = model(1e-6, 1, 100, [1, 10], [1e-5, 0.5], frozen=2)
    # one cascade into level 2 per 1,000 puts, 0.50001 s, of which the 200 puts of slack hide 200 us
    assert 1 / pred == pytest.approx(1e-6 + (0.50001 - 200e-6) / 1000, rel=1e-9)
    assert pred == pytest.approx(simulate(1e-6, 1, 100, [1, 10], [1e-5, 0.5], frozen=2), rel=0.02)


def _io(design: Design, n: float):  # type: ignore[no-untyped-def]
    batch = DesignBatch.of([design])
    lay = split_memory(level_shape(batch, n, 16, 100, overwrites=True), batch, 1e9)
    parts = partitions(Distribution(kind="uniform"), Distribution(kind="uniform"), n)
    return io_costs(lay, parts, {"get": 0.5, "update": 0.5}, 1.0)


def test_cascades_of_the_io_model() -> None:
    """A leveled LSM's cascades: one per flush in all, the deeper ones rarer and longer; a hash
    log has none."""
    n = 1e6
    lsm = _io(Design(T=6, K=1, Z=1, buffer_bytes=2**20, bloom_bits=8.0, block_bytes=4096), n).cascades
    assert lsm is not None
    rate, blocks = lsm.rate[0], lsm.blocks[0]
    live = rate > 0
    assert live.sum() >= 2
    # every flush starts exactly one cascade: the rates add up to the flushes per put
    assert rate.sum() == pytest.approx(2.0 / lsm.slack_puts[0])
    assert np.all(np.diff(blocks) >= 0) and blocks[live][-1] > 5 * blocks[0]
    lsh = _io(Design(T=6, K=1, Z=1, buffer_bytes=2**20, bloom_bits=0.0, block_bytes=4096, lsh=True), n).cascades
    assert lsh is not None and not lsh.rate.any()


def test_frozen_buffers_is_the_engines() -> None:
    """The model's ``frozen_buffers`` is the engine's MAX_IMMUTABLE (one fact, two languages)."""
    import re
    from pathlib import Path

    from cost_models.design import model_constants

    src = (Path(__file__).resolve().parent.parent / "engine-template/crates/cosine-engine/src/lib.rs").read_text()
    found = re.search(r"const MAX_IMMUTABLE: usize = (\d+);", src)
    assert found, "MAX_IMMUTABLE not found in cosine-engine"
    assert model_constants()["frozen_buffers"] == float(found.group(1))


def test_a_nearly_stopped_node_stalls_nothing_more_and_warns_nothing() -> None:
    """A throughput so small that slack / x overflows (found by CI's property test, stop 45) has
    no stall left to add: max(0, seconds - inf) = 0, the limit, with no RuntimeWarning."""
    import warnings

    d = _demands(1e-6, np.array([[1e-3]]), np.array([[0.01]]), np.array([1e300]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = stalled(np.array([1e-300, 0.0, 5.0]), d)
    assert out[0] == pytest.approx(1e-300) and out[1] == 0.0 and out[2] == pytest.approx(5.0)
