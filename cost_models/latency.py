"""Request latency at a node's operating point (issue 48.4): a named queueing model, its quantiles.

**The model: M/M/c (Erlang C) on pipelined batches.** A node of c cores (its vCPUs; on this
machine's core split, the server's cores) serves a client's batch of p pipelined requests as one
job: it parses every complete request it has received and writes the batch's replies together
(docs/deploy.md). Assumptions, written out in docs/model.md ("Request latency"):

* batches arrive as a Poisson process at rate lambda / p (many independent clients: an open system);
* a batch's service time is exponential with mean p x s (s = c / X_cap, the node's CPU seconds per
  request at its capacity X_cap from cost_models.cpu: every core busy at capacity), any free core
  serves the next batch (c servers, one queue, first come first served);
* a request's latency is its round trip on the network (the provider's intra-zone figure in the
  catalog; on this machine, loopback), plus the batch's wait for a core W and its service S, plus,
  for a write, the WAL policy's durability wait: group commit waits for the next sync, uniform on
  [0, interval] (every_write and none: no interval), plus the device's read latency for a read
  that reads blocks (0 in the solver, as in the CPU model).

Then P(W > t) = C(c, a) e^{-(c mu - lambda) t} with a = lambda / mu, mu = 1 / (p s), C the Erlang C
probability of waiting; T = W + S has the closed-form CCDF of :func:`ccdf`; the uniform commit wait
is integrated in closed form too, and a quantile is found by bisection on the CCDF
(:func:`quantile`). A node at or past capacity has no finite latency: the solver keeps every node
below the utilization its ``performance.max_latency_s`` allows (:func:`throughput_within`).

A closed system (the bench: C connections each with one batch outstanding) has a bounded queue:
its throughput is the finite-source queue's (:class:`ClosedLoop`), and each operation's latency
that of the same loop simulated on cosine-server's tokio runtime (:class:`RuntimeLoop`: its polls of
the sockets, its reply writers, its durability syncs; docs/model.md, measure/served.py).
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

import numpy as np

from specs.vocab import Operation, ReplyWait, SyncBy

#: Quantiles the solution reports.
P50, P99 = 0.5, 0.99
#: Bisection steps of a quantile (each halves the bracket: 2^-60 of it).
STEPS = 60
#: Bisection steps of the highest throughput a latency bound allows (2^-30 of the capacity).
THROUGHPUT_STEPS = 30


def erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Erlang C: the probability an arrival waits, c servers at offered load a (< c), by Erlang B's
    recursion B(k) = a B(k-1) / (k + a B(k-1)) and C = B / (1 - rho (1 - B)); elementwise."""
    c = np.asarray(c, dtype=float)
    a = np.asarray(a, dtype=float)
    c, a = np.broadcast_arrays(c, a)
    b = np.ones(a.shape)
    top = int(np.max(c)) if c.size else 0
    for k in range(1, top + 1):
        nb = a * b / (k + a * b)
        b = np.where(k <= c, nb, b)
    rho = a / c
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rho < 1, b / (1 - rho * (1 - b)), 1.0)


@dataclass(frozen=True)
class Queue:
    """An M/M/c queue of batches (arrays over designs): ``c`` cores, ``mu`` batches per second per
    core, ``lam`` batches per second arriving."""

    c: np.ndarray
    mu: np.ndarray
    lam: np.ndarray

    @property
    def rho(self) -> np.ndarray:
        return self.lam / (self.c * self.mu)

    def wait_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """(probability of waiting, rate of the waiting time's exponential tail)."""
        pw = erlang_c(self.c, self.lam / self.mu)
        return pw, np.maximum(self.c * self.mu - self.lam, 1e-300)

    def mean_in_system(self) -> np.ndarray:
        """Batches in the system on average (queued and in service)."""
        pw, gamma = self.wait_terms()
        return self.lam * pw / gamma + self.lam / self.mu


def _decay(rate: np.ndarray, x: np.ndarray, c: float | None = None) -> np.ndarray:
    """e^{-rate x} (rate, x >= 0), or (c + rate x) e^{-rate x} with ``c``: 0 where rate x overflows
    to infinity (a bound or a time of 1e308 s), the value both have in floating point, without
    numpy's overflow warning or the NaN of inf x 0."""
    with np.errstate(over="ignore"):
        rx = rate * x
    big = np.isinf(rx)
    rx = np.where(big, 0.0, rx)
    out = np.exp(-rx) if c is None else (c + rx) * np.exp(-rx)
    return np.where(big, 0.0, out)


def _exp_integral(rate: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The integral of e^{-rate s} over [lo, hi] (lo <= hi, both >= 0)."""
    return (_decay(rate, lo) - _decay(rate, hi)) / rate


def ccdf(
    t: np.ndarray,
    q: Queue,
    service: np.ndarray,
    shift: np.ndarray,
    window: np.ndarray,
    terms: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """P(latency > t): the batch's wait and service (``service``: mean seconds of this request's
    batch) after ``shift`` seconds (round trip, device), plus a uniform wait on [0, ``window``]
    (group commit; 0: none). Elementwise over arrays. ``terms``: ``q.wait_terms()``, when the
    caller has them (they do not depend on t)."""
    pw, gamma = q.wait_terms() if terms is None else terms
    ms = 1.0 / np.maximum(service, 1e-300)
    # T0 = W + S: CCDF = A e^{-ms t} + B e^{-gamma t} (B e^{-gamma t} -> C (1 + gamma t) e^{-gamma t} at ms = gamma)
    near = np.abs(ms - gamma) < 1e-9 * ms
    den = np.where(near, 1.0, ms - gamma)
    coef_s = np.where(near, 1.0 - pw, (1 - pw) - pw * gamma / den)
    coef_g = np.where(near, 0.0, pw * ms / den)
    u = np.asarray(t, dtype=float) - shift

    def base(x: np.ndarray) -> np.ndarray:
        x = np.maximum(x, 0.0)
        out = coef_s * _decay(ms, x) + coef_g * _decay(gamma, x)
        return np.where(near, out + pw * _decay(gamma, x, 1.0), out)

    def integral(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The integral of base over [lo, hi], 0 <= lo <= hi."""
        out = coef_s * _exp_integral(ms, lo, hi) + coef_g * _exp_integral(gamma, lo, hi)
        # (1 + g x) e^{-g x} integrates to -(2 + g x) e^{-g x} / g
        ex = pw * (_decay(gamma, lo, 2.0) - _decay(gamma, hi, 2.0)) / gamma
        return np.where(near, out + ex, out)

    win = np.asarray(window, dtype=float)
    has = win > 0
    w = np.where(has, win, 1.0)
    # with the uniform wait: (1/w) * [ (w - u)^+ + integral of base over [max(u - w, 0), u] ] for u > 0
    lo = np.maximum(u - w, 0.0)
    hi = np.maximum(u, 0.0)
    smooth = (np.maximum(w - u, 0.0) + integral(lo, hi)) / w
    smooth = np.minimum(smooth, 1.0)
    plain = np.where(u < 0, 1.0, base(u))
    return np.where(has, np.where(u < 0, 1.0, smooth), plain)


@dataclass(frozen=True)
class RequestClass:
    """Requests alike for latency: their share of the node's requests, the mean service of their
    batch (s), the fixed seconds they add (round trip, device wait) and the uniform wait (group
    commit interval; 0: none)."""

    share: float | np.ndarray
    service: np.ndarray
    shift: float | np.ndarray
    window: float | np.ndarray


def mixture_ccdf(
    t: np.ndarray, q: Queue, classes: list[RequestClass], terms: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """P(latency > t) of a request drawn from ``classes`` by their shares (``terms`` as :func:`ccdf`'s)."""
    total = sum(np.asarray(c.share, dtype=float) for c in classes)
    total = np.where(total > 0, total, 1.0)
    wt = q.wait_terms() if terms is None else terms
    out = np.zeros(np.broadcast_shapes(np.shape(t), np.shape(q.lam)))
    for c in classes:
        share = np.asarray(c.share, dtype=float)
        if np.any(share > 0):
            # a class no request of some node is in adds 0 x (a finite CCDF) there: exactly nothing
            part = ccdf(t, q, c.service, np.asarray(c.shift), np.asarray(c.window), wt)
            out = out + np.where(share > 0, share / total * part, 0.0)
    return out


def quantile(prob: float, q: Queue, classes: list[RequestClass]) -> np.ndarray:
    """The ``prob``-quantile of the latency of a request of ``classes`` (inf at or past capacity)."""
    shape = np.shape(q.lam)
    wt = q.wait_terms()
    pw, gamma = wt
    lo = np.zeros(shape)
    span = np.zeros(shape)
    for c in classes:
        span = np.maximum(span, np.asarray(c.shift, dtype=float) + np.asarray(c.window, dtype=float))
    service = np.max(np.stack([np.broadcast_to(c.service, shape) for c in classes]), axis=0)
    hi = span + 50.0 * (service + 1.0 / gamma)
    for _ in range(STEPS):
        mid = (lo + hi) / 2
        over = mixture_ccdf(mid, q, classes, wt) > 1 - prob
        lo = np.where(over, mid, lo)
        hi = np.where(over, hi, mid)
    return np.where(q.rho < 1, hi, math.inf)


@dataclass(frozen=True)
class Operating:
    """A node's operating point as the latency model needs it (arrays over designs)."""

    throughput: np.ndarray  # requests (operations) per second arriving
    capacity: np.ndarray  # the node's throughput at full use (cost_models.cpu and caps)
    cores: float | np.ndarray  # per node (an array: nodes of several VM types at once)
    pipeline: int

    def queue(self) -> Queue:
        p = float(max(self.pipeline, 1))
        cap = np.maximum(np.asarray(self.capacity, dtype=float), 1e-300)
        cores = np.broadcast_to(np.asarray(self.cores, dtype=float), np.shape(cap))
        mu = cap / cores / p  # batches per second per core
        return Queue(np.array(cores), mu, np.asarray(self.throughput, dtype=float) / p)

    def batch_service(self) -> np.ndarray:
        """Mean seconds of one batch's service."""
        cores = np.asarray(self.cores, dtype=float)
        return float(max(self.pipeline, 1)) * cores / np.maximum(np.asarray(self.capacity, dtype=float), 1e-300)


@dataclass(frozen=True)
class LatencyTerms:
    """What a node's requests add to its queue's latency: the round trip, the writes' share and
    their group-commit interval (0: none)."""

    rtt_s: float | np.ndarray
    write_share: float | np.ndarray
    commit_window_s: float | np.ndarray

    @classmethod
    def stacked(cls, terms: list[LatencyTerms]) -> LatencyTerms:
        """The terms of several nodes as one (arrays over the nodes, in order): one
        :func:`latency_at` of them all costs what one node's does."""
        return cls(
            np.array([t.rtt_s for t in terms], dtype=float),
            np.array([t.write_share for t in terms], dtype=float),
            np.array([t.commit_window_s for t in terms], dtype=float),
        )

    def classes(self, service: np.ndarray) -> list[RequestClass]:
        return [
            RequestClass(1.0 - self.write_share, service, self.rtt_s, 0.0),
            RequestClass(self.write_share, service, self.rtt_s, self.commit_window_s),
        ]


def latency_at(
    throughput: np.ndarray,
    capacity: np.ndarray,
    cores: float | np.ndarray,
    pipeline: int,
    terms: LatencyTerms,
    prob: float,
) -> np.ndarray:
    """The ``prob``-quantile of a node's request latency at ``throughput`` (module docstring);
    elementwise over nodes (``cores`` and ``terms`` may be arrays over them: LatencyTerms.stacked)."""
    op = Operating(np.asarray(throughput, dtype=float), np.asarray(capacity, dtype=float), cores, pipeline)
    return quantile(prob, op.queue(), terms.classes(op.batch_service()))


def throughput_within(
    capacity: np.ndarray,
    cores: float,
    pipeline: int,
    terms: LatencyTerms,
    max_p99: float | None,
    max_p50: float | None = None,
) -> np.ndarray:
    """The highest throughput at most ``capacity`` at which the latency's p99 (and p50) meet their
    bounds (0 where even an idle node misses one): the utilization the solver may hold a node at."""
    cap = np.asarray(capacity, dtype=float)
    if max_p99 is None and max_p50 is None:
        return cap
    bounds = [(P99, max_p99), (P50, max_p50)]

    def meets(x: np.ndarray) -> np.ndarray:
        # the q-quantile is at most the bound exactly where P(latency > bound) <= 1 - q (one CCDF
        # evaluation, no quantile search)
        op = Operating(x, cap, cores, pipeline)
        q = op.queue()
        classes = terms.classes(op.batch_service())
        ok = q.rho < 1
        for prob, bound in bounds:
            if bound is not None:
                ok &= mixture_ccdf(np.full(cap.shape, bound), q, classes) <= 1 - prob
        return ok

    lo = np.zeros(cap.shape)
    hi = cap * (1 - 1e-9)
    feasible = meets(np.zeros(cap.shape)) & (cap > 0)
    for _ in range(THROUGHPUT_STEPS):
        mid = (lo + hi) / 2
        good = meets(mid)
        lo = np.where(good, mid, lo)
        hi = np.where(good, hi, mid)
    return np.where(feasible, lo, 0.0)


#: Points of the uniform commit wait averaged over in a closed loop's write latency (midpoints).
WINDOW_POINTS = 16


def _erlang_cdf(k: int, rate: float, t: float) -> float:
    """P(Erlang(k, rate) <= t): 1 - the Poisson(rate t) probability of fewer than k events (its terms
    summed from their logarithms: e^-x alone underflows past x ~ 745, a queue of ~750 batches)."""
    x = rate * t
    if k <= 0:
        return 1.0
    if x <= 0:
        return 0.0
    logs = [-x]
    step = math.log(x)
    for i in range(1, k):
        logs.append(logs[-1] + step - math.log(i))
    top = max(logs)
    below = math.exp(top) * sum(math.exp(v - top) for v in logs)
    return min(max(1.0 - below, 0.0), 1.0)


@dataclass(frozen=True)
class ClosedLoop:
    """A closed system: ``clients`` connections, each with one batch at the node or thinking for
    ``think_s`` (exponential) before it sends the next; the node's ``cores`` serve batches first
    come first served, each for an exponential time of mean ``service_s`` on one core. The
    finite-source M/M/c//C queue (the machine-repairman model): the number of batches at the node
    is a birth-death chain (births (C - n) / think, deaths min(n, c) / service), and by the
    arrival theorem a batch arriving finds the chain of C - 1 clients in its stationary state.
    A batch finding n ahead waits for n - c + 1 departures (rate c / service each) when n >= c,
    then its own service: its sojourn is Erlang(n - c + 1, c / service) + Exp(1 / service).

    What the bench runs (measure/served.py): at saturation, with C clients and one core, the
    sojourn is the sum of about C services, narrow around C x service; the open system's M/M/c
    (:class:`Queue`) gives it an exponential spread (p50 0.69 of the mean, p99 4.6 times it). Its
    throughput is the bench's prediction; its quantiles are what :class:`RuntimeLoop` gives without a
    write to sync at depth 1, within the runtime's order (tests/test_runtime_loop.py)."""

    cores: int
    service_s: float
    clients: int
    think_s: float

    def occupancy(self, clients: int) -> np.ndarray:
        """The stationary probability of 0..``clients`` batches at the node with ``clients`` clients."""
        mu = 1.0 / max(self.service_s, 1e-300)
        z = max(self.think_s, 1e-300)
        logp = np.zeros(clients + 1)
        for n in range(1, clients + 1):
            logp[n] = logp[n - 1] + math.log((clients - n + 1) / z) - math.log(min(n, self.cores) * mu)
        p = np.exp(logp - logp.max())
        return p / p.sum()

    @functools.cached_property
    def arrival(self) -> np.ndarray:
        """What an arriving batch finds at the node (the arrival theorem: the chain of C - 1 clients),
        made once: a quantile's bisection asks for it at every step."""
        return self.occupancy(self.clients - 1)

    def throughput(self) -> float:
        """Batches per second the node completes."""
        pi = self.occupancy(self.clients)
        busy = np.minimum(np.arange(self.clients + 1), self.cores)
        return float((pi * busy).sum()) / max(self.service_s, 1e-300)

    def sojourn_cdf(self, t: float) -> float:
        """P(an arriving batch's wait and service <= ``t``)."""
        if t <= 0:
            return 0.0
        mu = 1.0 / max(self.service_s, 1e-300)
        c = self.cores
        out = 0.0
        for n, p in enumerate(self.arrival):
            if p < 1e-15:
                continue
            if n < c:
                out += p * -math.expm1(-mu * t)
                continue
            k = n - c + 1
            if c == 1:
                out += p * _erlang_cdf(k + 1, mu, t)
                continue
            # W + S with W ~ Erlang(k, c mu), S ~ Exp(mu): G_k(t; c mu) - e^{-mu t} (c / (c-1))^k G_k(t; (c-1) mu)
            g = _erlang_cdf(k, (c - 1) * mu, t)
            tail = math.exp(-mu * t + k * math.log(c / (c - 1))) * g if g > 0 else 0.0
            out += p * min(max(_erlang_cdf(k, c * mu, t) - tail, 0.0), 1.0)
        return min(out, 1.0)

    def cdf(self, t: float, route: Route) -> float:
        """P(a request of ``route`` is answered within ``t``): its sojourns, then its fixed seconds and
        the uniform wait (averaged over :data:`WINDOW_POINTS` midpoints of it)."""
        w = route.window_s
        ws = [(i + 0.5) / WINDOW_POINTS * w for i in range(WINDOW_POINTS)] if w > 0 else [0.0]
        return sum(self.sojourn_cdf((t - route.shift_s - u) / route.visits) for u in ws) / len(ws)

    def quantile(self, prob: float, routes: list[tuple[float, Route]]) -> float:
        """The ``prob``-quantile of the latency of a request drawn from ``routes`` (share, route)."""
        total = sum(share for share, _ in routes)
        if not total > 0:
            raise ValueError("a latency quantile of routes without a positive share")
        # a sojourn is at most C services (Erlang): C + 10 sqrt(C) + 50 of them is past any quantile asked
        most = self.clients + 10.0 * math.sqrt(self.clients) + 50.0
        lo = 0.0
        hi = max(p.shift_s + p.window_s + p.visits * self.service_s * most for _, p in routes)
        for _ in range(STEPS):
            mid = (lo + hi) / 2
            if sum(share * self.cdf(mid, p) for share, p in routes) / total < prob:
                lo = mid
            else:
                hi = mid
        return hi


@dataclass(frozen=True)
class Route:
    """A request's way through a :class:`ClosedLoop`: its ``visits`` to the node (an rmw's read,
    then its write: the sojourn's quantile ``visits`` times over; the sojourn is narrow at
    saturation), the fixed seconds it adds (round trips, its sync) and its uniform wait on
    [0, ``window_s``] (group commit; 0: none)."""

    shift_s: float
    window_s: float = 0.0
    visits: int = 1


#: Batches a :class:`RuntimeLoop` simulates before it records (the loop starts with every client's
#: first batch at once), as a multiple of its clients.
LOOP_WARMUP_TURNS = 20
#: tokio's multi-thread scheduler (1.54, the engine template's; runtime/builder.rs and
#: runtime/scheduler/multi_thread/{worker,stats}.rs): a worker polls its I/O driver and wakes its
#: deferred tasks every ``EVENT_INTERVAL`` ticks (``new_multi_thread``'s event_interval)...
TOKIO_EVENT_INTERVAL = 61
#: ... and takes a task from the global (inject) queue first every so many ticks: 200 us over its
#: moving average of a task's poll time (alpha 0.1), at least 2 and at most 127 (stats.rs
#: TARGET_GLOBAL_QUEUE_INTERVAL, MAX_TASKS_POLLED_PER_GLOBAL_QUEUE_INTERVAL, TASK_POLL_TIME_EWMA_ALPHA);
#: the average starts at 200 us / 61 (TARGET_TASKS_POLLED_PER_GLOBAL_QUEUE_INTERVAL).
TOKIO_GLOBAL_QUEUE_TARGET_S = 200e-6
TOKIO_GLOBAL_QUEUE_MAX = 127
TOKIO_GLOBAL_QUEUE_MIN = 2
TOKIO_POLL_EWMA_ALPHA = 0.1
TOKIO_TASKS_PER_INTERVAL = 61


@dataclass(frozen=True)
class Visit:
    """A worker's mean seconds for one request on one visit to the node: executing it (the
    connection task's poll) and writing its reply (the reply writer's)."""

    execute_s: float
    reply_s: float = 0.0


@dataclass(frozen=True)
class RuntimeLoop:
    """The bench's closed loop served by cosine-server's runtime (journal §42), evaluated by
    simulation.

    **Clients.** ``clients`` clients each keep one turn of ``pipeline`` operations, drawn from
    ``mix`` one by one (as cosine-resp-bench draws them), at the node or on its way. A turn's point
    requests go as one batch on the client's connection and, when ``scans_apart``, its scans as
    another on a connection of their own (cosine-resp-bench and deploy/scatter.py); an rmw's writes
    are one more batch, sent once the batch with its reads is answered; the turn ends when every
    batch of it is answered. A request and a reply each take half the round trip ``rtt_s``; a
    request's latency is from its turn's start to its batch's reply (an rmw's to its write's).

    **The node** is tokio's multi-thread scheduler as the server uses it (1.54; the constants
    above): ``cores`` workers, each with a tick, a LIFO slot, deferred tasks and a moving average of
    its polls, sharing one run queue (tokio's are per worker, balanced by stealing) and the global
    queue. A batch that arrives waits in its socket until a worker polls the I/O driver: when it
    has run out of tasks, and every :data:`TOKIO_EVENT_INTERVAL` ticks; the connection's task is
    then woken into the LIFO slot (the slot's task before it goes to the back of the run queue). Its
    poll executes the batch (an exponential time of mean the batch's visits' seconds, ``costs``:
    per operation one :class:`Visit` per visit, an rmw two) and wakes the reply writer into the LIFO
    slot, which runs in the same tick: a batch that wrote (``durable``) waits for a sync; a
    pipelined one (more than one request) yields, deferred until the worker next polls its driver;
    a single reply is written at once. A writer writing takes its batch's reply seconds (its share
    of the same exponential draw). Syncs: a worker that finds nothing to run and nothing deferred
    parks, and its park hook syncs every waiting write (``sync_s`` of its own time; the woken
    writers go to the global queue); the durability waiter's thread does the same every ``tick_s``
    on its own time. A worker takes a task from the global queue when its local ones are gone, and
    first every few ticks (its tuned interval)."""

    cores: int
    clients: int
    pipeline: int
    rtt_s: float
    sync_s: float
    tick_s: float
    mix: tuple[tuple[str, float], ...]
    costs: tuple[tuple[str, tuple[Visit, ...]], ...]
    durable: bool = True
    scans_apart: bool = True

    def simulate(self, requests: int, seed: int = 1) -> RuntimeResult:
        """``requests`` recorded requests' latencies (after the warm-up), the throughput, and how
        the batches' replies waited."""
        return _Runtime(self, seed).run(requests)


@dataclass
class RuntimeResult:
    """What a :class:`RuntimeLoop` simulation recorded after its warm-up: each operation's
    latencies (seconds), the requests answered per second, each batch's reply wait (seconds, from
    the end of its execution to the end of its reply's write; cosine-server's ``INFO``
    ``reply_wait_*``) by kind, and the syncs that answered writes, by who made them."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    throughput: float = 0.0
    waits: dict[ReplyWait, list[float]] = field(default_factory=lambda: {k: [] for k in ReplyWait})
    syncs: dict[SyncBy, int] = field(default_factory=lambda: {k: 0 for k in SyncBy})

    def quantile(self, prob: float, op: str | None = None) -> float:
        """The ``prob``-quantile of ``op``'s latency (None: of every request's)."""
        xs = [x for v in self.latencies.values() for x in v] if op is None else self.latencies.get(op, [])
        return float(np.quantile(np.asarray(xs), prob)) if xs else math.nan


class _Event(Enum):
    """What happens next in a :class:`RuntimeLoop` simulation."""

    ARRIVE = auto()  # a batch reaches the node's socket
    FREE = auto()  # a parked worker is woken
    EXECUTED = auto()  # a connection's poll has executed its batch
    WRITTEN = auto()  # a reply writer has written its batch's replies
    SYNCED = auto()  # a worker's park hook has synced the waiting writes
    TICK = auto()  # the durability waiter's thread wakes
    ANSWERED = auto()  # the waiter's thread has synced the waiting writes
    CLIENT = auto()  # a batch's replies reach its client


class _Task(Enum):
    """A task in a runtime worker's queues: a connection's (it executes a batch) or its reply writer's."""

    CONN = auto()
    WRITER = auto()


#: Operations a client sends on its scan connection (:attr:`RuntimeLoop.scans_apart`).
_SCANS = frozenset({Operation.RANGE.value, Operation.EMPTY_RANGE.value})
#: Operations whose batch waits for a sync (an rmw's write batch too).
_WRITES = frozenset({Operation.INSERT.value, Operation.UPDATE.value})


@dataclass
class _Batch:
    """A batch in a :class:`RuntimeLoop`: its client, operations, visit (0, or 1 for an rmw's
    writes), its turn's start, its mean seconds executing and writing, and, once drawn, its reply's
    own seconds, when it was executed and whether its writer has been polled."""

    client: int
    ops: list[str]
    visit: int
    began: float
    execute_mean: float
    reply_mean: float
    reply_s: float = 0.0
    done_at: float = 0.0
    writer_polled: bool = False

    def kind(self, durable: bool) -> ReplyWait:
        if durable and (self.visit == 1 or any(op in _WRITES for op in self.ops)):
            return ReplyWait.DURABLE
        return ReplyWait.PIPELINED if len(self.ops) > 1 else ReplyWait.SINGLE


@dataclass
class _Worker:
    """One runtime worker: its tick, LIFO slot, deferred tasks, poll-time average and global-queue
    interval, and whether it is busy (polling, or syncing in its park hook) or parked."""

    tick: int = 0
    lifo: tuple[_Task, _Batch] | None = None
    deferred: list[_Batch] = field(default_factory=list)
    ewma: float = TOKIO_GLOBAL_QUEUE_TARGET_S / TOKIO_TASKS_PER_INTERVAL
    interval: int = TOKIO_TASKS_PER_INTERVAL
    parked: bool = True


class _Runtime:
    """The event loop of one :class:`RuntimeLoop` simulation."""

    def __init__(self, loop: RuntimeLoop, seed: int) -> None:
        self.loop = loop
        self.rng = random.Random(seed)
        self.ops = [op for op, _ in loop.mix]
        self.weights = [w for _, w in loop.mix]
        costs = dict(loop.costs)
        missing = [op for op in self.ops if not costs.get(op)]
        if missing:
            raise ValueError(f"a RuntimeLoop without the visits of {', '.join(missing)}")
        self.visits = {op: costs[op] for op in self.ops}
        self.events: list[tuple[float, int, _Event, Any]] = []
        self.seq = 0
        self.parts = [0] * loop.clients  # each client's batches not yet answered
        self.socket: list[_Batch] = []  # arrived, not yet seen by a driver poll
        self.queue: deque[tuple[_Task, _Batch]] = deque()  # the run queue
        self.inject: deque[tuple[_Task, _Batch]] = deque()  # woken from off the runtime
        self.waiting: list[_Batch] = []  # writers waiting for a sync
        self.workers = [_Worker() for _ in range(loop.cores)]
        self.out = RuntimeResult({op: [] for op in self.ops})
        self.answered = 0
        self.warm = LOOP_WARMUP_TURNS * loop.clients

    # --- events
    def push(self, at: float, kind: _Event, data: Any) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, data))

    def batch(self, c: int, ops: list[str], visit: int, began: float) -> _Batch:
        vs = [self.visits[op][min(visit, len(self.visits[op]) - 1)] for op in ops]
        return _Batch(c, ops, visit, began, sum(v.execute_s for v in vs), sum(v.reply_s for v in vs))

    def send(self, c: int, at: float) -> None:
        drawn = self.rng.choices(self.ops, self.weights, k=self.loop.pipeline)
        scans = [op for op in drawn if op in _SCANS] if self.loop.scans_apart else []
        point = [op for op in drawn if op not in _SCANS] if scans else drawn
        for group in (point, scans):
            if group:
                self.parts[c] += 1
                self.push(at + self.loop.rtt_s / 2, _Event.ARRIVE, self.batch(c, group, 0, at))

    # --- the scheduler
    def schedule_local(self, w: _Worker, task: tuple[_Task, _Batch]) -> None:
        if w.lifo is not None:
            self.queue.append(w.lifo)
        w.lifo = task

    def poll_driver(self, w: _Worker) -> None:
        """The I/O driver's events wake their connections' tasks, then the deferred tasks wake."""
        for b in self.socket:
            self.schedule_local(w, (_Task.CONN, b))
        self.socket.clear()
        for b in w.deferred:
            self.schedule_local(w, (_Task.WRITER, b))
        w.deferred.clear()

    def next_task(self, w: _Worker) -> tuple[_Task, _Batch] | None:
        if w.tick % w.interval == 0:
            tuned = int(TOKIO_GLOBAL_QUEUE_TARGET_S / max(w.ewma, 1e-12))
            w.interval = min(max(tuned, TOKIO_GLOBAL_QUEUE_MIN), TOKIO_GLOBAL_QUEUE_MAX)
            if self.inject:
                return self.inject.popleft()
        if w.lifo is not None:
            task, w.lifo = w.lifo, None
            return task
        if self.queue:
            return self.queue.popleft()
        return self.inject.popleft() if self.inject else None

    def poll_writer(self, w: _Worker, b: _Batch, at: float) -> bool:
        """A reply writer's poll: True when it writes (the worker is busy until it has)."""
        if not b.writer_polled:
            b.writer_polled = True
            kind = b.kind(self.loop.durable)
            if kind == ReplyWait.DURABLE:
                self.waiting.append(b)
                return False
            if kind == ReplyWait.PIPELINED:
                w.deferred.append(b)
                return False
        self.push(at + b.reply_s, _Event.WRITTEN, (w, b))
        return True

    def unpark_one(self, at: float) -> None:
        for w in self.workers:
            if w.parked:
                w.parked = False
                self.push(at, _Event.FREE, w)
                return

    def step(self, w: _Worker, at: float) -> None:
        """The worker's loop from ``at`` until it polls a connection, writes a reply, syncs or parks."""
        while True:
            w.tick += 1
            if w.tick % TOKIO_EVENT_INTERVAL == 0:
                self.poll_driver(w)  # maintenance
            task = self.next_task(w)
            if task is None:
                if w.deferred:  # park_yield: the driver polled without sleeping
                    self.poll_driver(w)
                    continue
                if self.waiting:  # park: the park hook syncs first
                    taken, self.waiting = self.waiting, []
                    self.push(at + self.loop.sync_s, _Event.SYNCED, (w, taken))
                    return
                if self.socket:  # the driver's poll on parking finds them
                    self.poll_driver(w)
                    continue
                w.parked = True
                return
            kind, b = task
            if kind is _Task.WRITER:
                w.ewma += TOKIO_POLL_EWMA_ALPHA * (b.reply_s - w.ewma)
                if self.poll_writer(w, b, at):
                    return
                continue
            mean = b.execute_mean + b.reply_mean
            total = self.rng.expovariate(1.0 / mean) if mean > 0 else 0.0
            b.reply_s = total * b.reply_mean / mean if mean > 0 else 0.0
            execute = total - b.reply_s
            w.ewma += TOKIO_POLL_EWMA_ALPHA * (execute - w.ewma)
            self.push(at + execute, _Event.EXECUTED, (w, b))
            return

    def reply(self, b: _Batch, at: float) -> None:
        """``b``'s replies are written at ``at``: counted, and on their way to the client."""
        if self.answered >= self.warm:
            self.out.waits[b.kind(self.loop.durable)].append(at - b.done_at)
        self.push(at + self.loop.rtt_s / 2, _Event.CLIENT, b)

    def run(self, requests: int) -> RuntimeResult:
        loop, out = self.loop, self.out
        for c in range(loop.clients):
            self.send(c, self.rng.random() * loop.rtt_s)
        if loop.tick_s > 0:
            self.push(loop.tick_s, _Event.TICK, None)
        recorded = 0
        t0 = now = 0.0
        while recorded < requests:
            now, _, kind, data = heapq.heappop(self.events)
            if kind is _Event.ARRIVE:
                self.socket.append(data)
                self.unpark_one(now)
            elif kind is _Event.FREE:
                self.step(data, now)
            elif kind is _Event.EXECUTED:  # the poll ends: its writer, woken into the LIFO slot, runs next
                w, b = data
                b.done_at = now
                if w.lifo is not None:  # (the slot's task goes to the back of the run queue)
                    self.queue.append(w.lifo)
                    w.lifo = None
                if not self.poll_writer(w, b, now):
                    self.step(w, now)
            elif kind is _Event.WRITTEN:
                w, b = data
                self.reply(b, now)
                self.step(w, now)
            elif kind is _Event.SYNCED:  # a worker's park hook synced: the writers are woken remotely
                w, taken = data
                self.inject.extend((_Task.WRITER, b) for b in taken)
                if self.answered >= self.warm:
                    out.syncs[SyncBy.IDLE] += 1
                self.step(w, now)
            elif kind is _Event.TICK:  # the waiter's thread: a sync on its own time, then the next tick
                if self.waiting:
                    taken, self.waiting = self.waiting, []
                    self.push(now + loop.sync_s, _Event.ANSWERED, taken)
                    self.push(now + loop.sync_s + loop.tick_s, _Event.TICK, None)
                else:
                    self.push(now + loop.tick_s, _Event.TICK, None)
            elif kind is _Event.ANSWERED:
                self.inject.extend((_Task.WRITER, b) for b in data)
                if self.answered >= self.warm:
                    out.syncs[SyncBy.TICK] += 1
                self.unpark_one(now)
            else:  # _Event.CLIENT: the reply reached its client
                b = data
                c = b.client
                self.answered += 1
                if self.answered == self.warm:
                    t0, recorded = now, 0
                if self.answered > self.warm:
                    for op in b.ops:
                        if op != Operation.RMW or b.visit == 1:
                            out.latencies[op].append(now - b.began)
                            recorded += 1
                rmws = [op for op in b.ops if op == Operation.RMW] if b.visit == 0 else []
                if rmws:  # its writes go once its reads are answered: a batch of this turn
                    self.push(now + loop.rtt_s / 2, _Event.ARRIVE, self.batch(c, rmws, 1, b.began))
                    continue
                self.parts[c] -= 1
                if self.parts[c] == 0:
                    self.send(c, now)
        out.throughput = recorded / max(now - t0, 1e-300)
        return out
