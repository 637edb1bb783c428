"""The model's device terms (docs/model.md, "The engine's device mode") against a discrete-event
simulation of client threads on the engine's volume (tests/volume_sim.py): a GCRA token bucket
that every read and write pays, a latency each foreground read waits after its token, dependent
reads one after another. The closed form min(n / (P + f L), IOPS / (f + w), MiB/s / bytes) is
exact for deterministic service: the bucket's spacing overlaps the latency, it does not add to it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_models.cpu import Demands, throughput
from tests.volume_sim import Clients, Volume, simulate

MIB = 2**20


def model(v: Volume, c: Clients) -> float:
    io = c.reads + c.writes
    d = Demands(
        serial=np.array([0.0]),
        parallel=np.array([c.cpu]),
        wait=np.array([c.reads * v.latency]),
        background=np.array([0.0]),
        io=np.array([io]),
        io_bytes=np.array([io * c.block_bytes]),
    )
    return float(throughput(d, v.iops, c.threads, c.threads, v.bytes_per_s)[0])


def gp3(iops: float) -> Volume:
    """A gp3-like volume at ``iops``, 125 MiB/s, 250 us reads and the engine's 5 ms burst tolerance."""
    return Volume(iops, 125 * MIB, 250e-6, max(1.0, iops * 0.005))


@pytest.mark.parametrize(
    ("v", "c"),
    [
        (gp3(3000), Clients(1, 20e-6, 2, 0.0, 32768)),  # bucket-bound: 2 reads/op at 3,000 IOPS
        (gp3(3000), Clients(2, 20e-6, 2, 0.5, 4096)),  # reads and writes share the bucket
        (gp3(16000), Clients(1, 20e-6, 2, 0.0, 4096)),  # latency-bound: one thread, 2 x 250 us
        (gp3(16000), Clients(2, 30e-6, 1, 0.3, 4096)),  # two threads, still latency-bound
        (gp3(16000), Clients(8, 20e-6, 1, 0.0, 32768)),  # bytes-bound: 125 MiB/s of 32 KiB blocks
        (gp3(8000), Clients(2, 20e-6, 1, 0.0, 4096)),  # at the knee: 2/(270 us) = 7,407 vs 8,000
        (gp3(16000), Clients(8, 20e-6, 2, 0.5, 4096)),  # many threads: the bucket again
    ],
)
def test_closed_form_matches_the_simulated_volume(v: Volume, c: Clients) -> None:
    assert model(v, c) == pytest.approx(simulate(v, c), rel=0.01)


def test_latency_and_token_overlap_rather_than_add() -> None:
    """One thread, one read per operation, 3,000 IOPS and 250 us: the token spacing (333 us)
    hides the latency; adding them would give 1 / 583 us = 1,715 ops/s."""
    v, c = gp3(3000), Clients(1, 1e-6, 1, 0.0, 4096)
    assert simulate(v, c) == pytest.approx(3000, rel=0.01)
    assert model(v, c) == pytest.approx(3000, rel=1e-9)
    assert not math.isclose(model(v, c), 1 / (1 / 3000 + 250e-6), rel_tol=0.1)
