"""The Dask cluster a sweep runs on: an embedded LocalCluster sized to this
machine (no configuration), or an existing cluster's scheduler.

The local cluster is worker *processes* (the solves are CPU-bound Python and
HiGHS: threads would share one GIL), one thread each, one per core this process
may run on, all listening on loopback only, with no dashboard. Dask retries a
task whose worker died on another worker (``distributed.scheduler.allowed-failures``
times, 3 by default), and the local cluster's nannies restart dead workers.
Workers of an existing cluster need this package installed (same version).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from specs.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

#: How long to wait for an existing scheduler to answer, and then for it to have a worker (seconds).
#: Long enough for a loaded machine or a remote network, short enough to fail fast on a typo.
CONNECT_TIMEOUT_S = 10.0

#: The local cluster's host: loopback only, never reachable from another machine.
LOOPBACK = "127.0.0.1"

#: Dask starts worker processes with MALLOC_TRIM_THRESHOLD_=65536 (give freed memory back to the OS at once).
#: Setting it turns off glibc's adaptive mmap threshold, so every temporary numpy array of the design tables
#: above 128 KiB becomes a fresh mmap, page-faulted in and unmapped again: one ycsb_b task (tables + 5 budgets
#: x 2 providers) took 14.8 s of CPU with it, 7.3 s without (`python -m bench.sweep --malloc-trim`). The local cluster's
#: workers keep glibc's default; OMP/MKL/OpenBLAS stay at one thread (one worker process per core).
LOCAL_WORKER_ENV = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def parse_scheduler(address: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` -> (HOST, PORT); anything else is an :class:`InputError`."""
    hint = "expected tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786"
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        raise InputError(f"--scheduler {address!r}: {hint}") from None
    if parts.scheme != "tcp" or not parts.hostname or port is None or parts.path or parts.query or parts.fragment:
        raise InputError(f"--scheduler {address!r}: {hint}")
    if not 1 <= port <= 65535:
        raise InputError(f"--scheduler {address!r}: port must be between 1 and 65535")
    return parts.hostname, port


def machine_workers() -> int:
    """The local cluster's default size: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client``: on ``scheduler`` (checked to answer and to have a worker), else on a
    new local cluster of ``workers`` processes (default :func:`machine_workers`). Closed on exit."""
    import dask
    from distributed import Client, LocalCluster

    with ExitStack() as stack:
        if scheduler is not None:
            address = scheduler
            try:  # fails at once on a refused port or an unknown host (Dask's own connect retries until timeout)
                socket.create_connection(parse_scheduler(address), timeout=CONNECT_TIMEOUT_S).close()
            except OSError as exc:
                raise InputError(f"--scheduler {address}: cannot connect ({exc.strerror or exc})") from None
            try:
                client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise InputError(f"--scheduler {address}: no Dask scheduler answered ({exc})") from None
            stack.callback(client.close)
            try:
                client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
            except TimeoutError:
                raise InputError(
                    f"--scheduler {address}: the scheduler has no workers after {CONNECT_TIMEOUT_S:g} s"
                ) from None
        else:
            stack.enter_context(dask.config.set(LOCAL_WORKER_ENV))
            cluster = LocalCluster(
                n_workers=workers if workers is not None else machine_workers(),
                threads_per_worker=1,
                processes=True,
                host=LOOPBACK,
                scheduler_port=0,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            stack.callback(cluster.close)
            client = Client(cluster, set_as_default=False)
            stack.callback(client.close)
        yield client


def as_finished(
    client: Any, fn: Callable[..., R], items: Iterable[T], *args: Any
) -> Generator[tuple[T, R], None, None]:
    """Submit ``fn(item, *args)`` for every item; yield (item, result) in the order they finish.
    A task's error is raised here; leaving early cancels the tasks not finished yet."""
    from distributed import as_completed

    futures = {client.submit(fn, item, *args, pure=False): item for item in items}
    try:
        for fut in as_completed(list(futures), loop=client.loop):
            item = futures.pop(fut)
            result = fut.result()
            fut.release()  # the result is here now: a worker that dies later must not have it recomputed
            yield item, result
    finally:
        client.cancel(list(futures))
