"""The model's flush window under the engine's buffer put limit (layout.flush_window; the engine's
side: engine-template crates/cosine-tests/tests/buffer_put_limit.rs): a buffer flushes at E_B
distinct keys or at buffer_put_limit x E_B puts, and a capped flush moves the distinct keys of its
puts. Before the limit a buffer that held every key of an update workload never flushed (W infinite:
no flush priced) and the engine's log grew without bound."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.design import model_constants
from cost_models.layout import flush_window, uniform_puts
from cost_models.worst_case import all_distinct

LIMIT = model_constants()["buffer_put_limit"]


def test_a_buffer_that_fills_first_flushes_at_its_distinct_keys() -> None:
    puts = uniform_puts(1000.0)
    q0, moved = flush_window(np.array([100.0]), puts)
    assert q0[0] == pytest.approx(float(puts(np.array([100.0]))[0])) and q0[0] < LIMIT * 100
    assert moved[0] == 100.0
    q0, moved = flush_window(np.array([64.0]), all_distinct)  # new keys: E_B puts
    assert (q0[0], moved[0]) == (64.0, 64.0)


@pytest.mark.parametrize("e_b", [900.0, 1000.0, 5000.0])
def test_a_buffer_that_holds_the_keys_flushes_at_the_put_limit(e_b: float) -> None:
    """A buffer of 900 of 1,000 keys needs 2,300 uniform updates to fill (past the limit, 1,800);
    one of every key never fills (W infinite): both flush at the limit, moving the distinct keys
    of those puts, at most the buffer and the keys there are."""
    puts = uniform_puts(1000.0)
    q0, moved = flush_window(np.array([e_b]), puts)
    assert q0[0] == np.floor(LIMIT * e_b)
    assert moved[0] == pytest.approx(float(puts.distinct(q0)[0]))
    assert 0 < moved[0] <= min(e_b, 1000.0)
