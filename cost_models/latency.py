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
that of the same loop simulated with cosine-server's commit point (:class:`PassLoop`: a batch that
wrote is answered at the end of the worker's pass; docs/model.md, measure/served.py).
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from specs.vocab import CommitPoint

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


def _exp_integral(rate: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The integral of e^{-rate s} over [lo, hi] (lo <= hi, both >= 0)."""
    return (np.exp(-rate * lo) - np.exp(-rate * hi)) / rate


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
        out = coef_s * np.exp(-ms * x) + coef_g * np.exp(-gamma * x)
        return np.where(near, out + pw * (1 + gamma * x) * np.exp(-gamma * x), out)

    def integral(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The integral of base over [lo, hi], 0 <= lo <= hi."""
        out = coef_s * _exp_integral(ms, lo, hi) + coef_g * _exp_integral(gamma, lo, hi)
        # (1 + g x) e^{-g x} integrates to -(2 + g x) e^{-g x} / g
        ex = pw * ((2 + gamma * lo) * np.exp(-gamma * lo) - (2 + gamma * hi) * np.exp(-gamma * hi)) / gamma
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
    throughput is the bench's prediction; its quantiles are what :class:`PassLoop` gives without a
    write to commit (tests/test_served_model.py checks the simulation against them)."""

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


#: Batches a :class:`PassLoop` simulates before it records (the loop starts with every client's first
#: batch at once), as a multiple of its clients.
PASS_WARMUP_TURNS = 20


@dataclass(frozen=True)
class PassLoop:
    """The bench's closed loop with cosine-server's commit point (journal §41.5), evaluated by
    simulation: ``clients`` connections each keep one batch of ``pipeline`` operations, drawn from
    ``mix`` one by one (as cosine-resp-bench draws them), at the node or on its way; the node's
    ``cores`` workers serve batches for an exponential time of mean ``service_s`` each (the finite-
    source queue's, :class:`ClosedLoop`), in passes: a worker that finds its pass done takes every
    batch that has arrived (one poll of the sockets). A batch that wrote (an insert or an update in
    it; an rmw's writes are a second batch, sent once the first is answered) is answered after a
    sync: made when a worker ends a pass (:attr:`CommitPoint.PASS`; ``IDLE``: only when no batch is
    left anywhere) or at the durability waiter's tick, every ``tick_s``, and lasting ``sync_s``
    (``durable`` False: ``wal_sync = none``, writes answered at once). A reply and a request each
    take half the round trip ``rtt_s``; a request's latency is from its client's send to its reply
    (an rmw's to its write's reply)."""

    cores: int
    service_s: float
    clients: int
    pipeline: int
    rtt_s: float
    sync_s: float
    tick_s: float
    mix: tuple[tuple[str, float], ...]
    durable: bool = True
    commit: CommitPoint = CommitPoint.PASS

    def simulate(self, requests: int, seed: int = 1) -> PassResult:
        """``requests`` recorded requests' latencies (after the warm-up) and the throughput."""
        return _simulate_passes(self, requests, seed)


@dataclass
class PassResult:
    """What a :class:`PassLoop` simulation recorded: each operation's latencies (seconds) and the
    requests answered per second."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    throughput: float = 0.0

    def quantile(self, prob: float, op: str | None = None) -> float:
        """The ``prob``-quantile of ``op``'s latency (None: of every request's)."""
        xs = [x for v in self.latencies.values() for x in v] if op is None else self.latencies.get(op, [])
        return float(np.quantile(np.asarray(xs), prob)) if xs else math.nan


#: A batch in a :class:`PassLoop`: its client, its operations, whether it is an rmw's write batch,
#: and when its client's turn began.
_Batch = tuple[int, list[str], bool, float]


def _simulate_passes(loop: PassLoop, requests: int, seed: int) -> PassResult:  # noqa: C901 - one event loop
    rng = random.Random(seed)
    ops = [op for op, _ in loop.mix]
    weights = [w for _, w in loop.mix]
    writes = {"insert", "update"}
    events: list[tuple[float, int, str, _Batch | None]] = []
    seq = 0

    def push(at: float, kind: str, data: _Batch | None) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, kind, data))

    def send(c: int, at: float) -> None:
        batch = rng.choices(ops, weights, k=loop.pipeline)
        push(at + loop.rtt_s / 2, "arrive", (c, batch, False, at))

    for c in range(loop.clients):
        send(c, rng.random() * loop.rtt_s)
    if loop.tick_s > 0:
        push(loop.tick_s, "tick", None)
    arrived: deque[_Batch] = deque()
    current: deque[_Batch] = deque()
    waiting: list[_Batch] = []
    idle = loop.cores
    out = PassResult({op: [] for op in ops})
    warm = PASS_WARMUP_TURNS * loop.clients
    answered = recorded = 0
    t0 = now = 0.0

    def sync(at: float) -> None:
        for b in waiting:
            push(at + loop.sync_s, "reply", b)
        waiting.clear()

    def next_batch(at: float) -> _Batch | None:
        if loop.commit == CommitPoint.PASS:
            if not current:
                if waiting:  # the pass is done: the worker parks, the waiter syncs
                    sync(at)
                current.extend(arrived)
                arrived.clear()
            return current.popleft() if current else None
        if arrived:
            return arrived.popleft()
        if waiting and idle == loop.cores - 1:  # (this worker is the last busy one) nothing left
            sync(at)
        return None

    def serve(at: float) -> None:
        nonlocal idle
        b = next_batch(at)
        if b is None:
            idle += 1
            return
        push(at + rng.expovariate(1.0 / loop.service_s), "done", b)

    while recorded < requests:
        now, _, kind, data = heapq.heappop(events)
        if kind == "tick":
            if waiting:
                sync(now)
            push(now + loop.tick_s, "tick", None)
            continue
        assert data is not None
        c, batch, second, began = data
        if kind == "arrive":
            arrived.append(data)
            if idle:
                idle -= 1
                serve(now)
        elif kind == "done":
            if (second or any(op in writes for op in batch)) and loop.durable:
                waiting.append(data)
            else:
                push(now, "reply", data)
            serve(now)
        else:  # a reply leaves the node
            back = now + loop.rtt_s / 2
            rmws = [op for op in batch if op == "rmw"] if not second else []
            answered += 1
            if answered == warm:
                t0, recorded = now, 0
            if answered > warm:
                for op in batch:
                    if op != "rmw" or second:
                        out.latencies[op].append(back - began)
                        recorded += 1
            if rmws:  # its writes go once its reads are answered: a second batch of this turn
                push(back + loop.rtt_s / 2, "arrive", (c, rmws, True, began))
            else:
                send(c, back)
    out.throughput = recorded / max(now - t0, 1e-300)
    return out
