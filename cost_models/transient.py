"""The merges a short run performs, from the state it starts in (docs/model.md, "Short runs").

The steady-state model amortizes each merge over its level's fill cycle at a fixed data size.
A measured run of a few cycles pays for the merges that actually happen in it, and when it
inserts, the tree grows under it: the last level fills, is pushed down whole, and the new level
above it is merged into while small. This replays the engine contract (docs/engine-contract.md;
engine `cosine-compaction`'s `TemplateStrategy::choose`) on entry counts, one flush at a time,
and prices each merge as the engine's simulator counts it: the blocks of every input file read
(the buffer is not read) and of every output file written, nothing for a relinked run.

Keys are not tracked, only how many entries of each run may shadow an older version of their
key (an overwrite's entry, or one merged from such). A merge's output is the union of its
inputs: a newer input's shadowing entries find their key in an older input of e entries with
probability e / N (uniform keys), its other entries never do (a key's first version is its
oldest). A loaded store is a partition of its keys (no run shadows another); a run of
overwrites makes its flushes shadowing, and the tree turns shadowing from the top down.

A partial merge moves one file of f entries (the run smaller than a file is one file) from the
picked run plus the key range's share of every older run (their overlapping files), and
rewrites that share of the target run plus the file its edge cuts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specs.vocab import RunStrategy

#: Steps after one flush before the replay gives up (a loop would be a bug; the engine's
#: worker finishes a flush's cascade in at most two steps per level).
MAX_STEPS_PER_FLUSH = 1000


@dataclass
class Tree:
    """Entry counts of the engine's levels (``levels[0]`` is disk level 1; runs newest first)
    and the rules that move them (engine.toml's layout and algorithms)."""

    buffer_entries: float
    size_ratio: float
    hot_runs: int  # K: runs of a level above the last
    cold_runs: int  # Z: runs of the last level
    threshold: float  # merge_threshold: share of a level's capacity that triggers a merge
    partial: list[bool]  # merges out of disk level i+1 move a file at a time
    file_entries: float
    run_strategy: RunStrategy
    block_entries: float
    overwrite_share: float  # share of puts that overwrite a key (1 - iota)
    n_keys: float
    levels: list[list[float]] = field(default_factory=list)
    #: per run (parallel to ``levels``), the entries that may shadow an older version of their key
    shadowing: list[list[float]] = field(default_factory=list)
    blocks: float = 0.0
    #: per level, the running remainder of the ``fullest`` picks between two runs (pick_run)
    dither: dict[int, float] = field(default_factory=dict)
    #: blocks of each merge into the deepest level, in order (the engine's ``deep_merges``: a
    #: rewriting merge whose target is at least the depth the tree had)
    deep: list[float] = field(default_factory=list)

    def capacity(self, i: int) -> float:
        return float(round(self.buffer_entries * self.size_ratio**i))

    def depth(self) -> int:
        return max((j + 1 for j, runs in enumerate(self.levels) if sum(runs) > 0), default=0)

    def runs(self, i: int) -> list[float]:
        while len(self.levels) < i:
            self.levels.append([])
        return self.levels[i - 1]

    def shadows(self, i: int) -> list[float]:
        """The shadowing entries of level ``i``'s runs (parallel to :meth:`runs`)."""
        while len(self.shadowing) < i:
            self.shadowing.append([])
        return self.shadowing[i - 1]

    def start(self, i: int, runs: list[float], shadowing: float) -> None:
        """Level ``i`` as observed: ``runs`` (newest first), of which the first ``shadowing``
        entries (newest first) may shadow older versions."""
        self.runs(i)[:] = runs
        left, out = shadowing, []
        for e in runs:
            out.append(min(e, max(left, 0.0)))
            left -= e
        self.shadows(i)[:] = out

    def last(self, i: int) -> bool:
        return i >= self.depth()

    def max_runs(self, i: int) -> int:
        return max(1, self.cold_runs if self.last(i) else self.hot_runs)

    def run_capacity(self, i: int) -> float:
        return max(1.0, -(-self.capacity(i) // self.max_runs(i)))

    def is_partial(self, source: int) -> bool:
        return source >= 1 and bool(self.partial[min(source, len(self.partial)) - 1])

    def union(self, parts: list[tuple[float, float]]) -> tuple[float, float]:
        """Entries and shadowing entries of the union of runs given newest first as
        (entries, shadowing entries): a newer part's shadowing entries find their key in an
        older part of e entries with probability e / N, and replace that version."""
        out, shadow = 0.0, 0.0
        for e, s in parts:
            lap = min(shadow * e / max(self.n_keys, 1.0), e)
            out += e - lap
            shadow += s * (1.0 - lap / e) if e > 0 else 0.0
        return out, shadow

    def accepts(self, i: int, n: float) -> bool:
        runs = self.runs(i)
        if not runs:
            return True
        last = self.last(i)
        fits_newest = runs[0] + n <= self.run_capacity(i)
        into_newest = fits_newest or len(runs) >= self.max_runs(i)
        if last and into_newest and runs[0] <= self.threshold * self.capacity(i):
            return True
        fits_level = sum(runs) + n <= self.threshold * self.capacity(i)
        return fits_level and (fits_newest or len(runs) < self.max_runs(i))

    def over(self, i: int) -> bool:
        runs = self.runs(i)
        return sum(runs) > self.threshold * self.capacity(i) or len(runs) > self.max_runs(i)

    def place(self, src: int, inputs: list[tuple[int, float]], n: tuple[float, float], share: float) -> None:
        """Merge ``n`` = (entries, shadowing entries) (``inputs``: (run index, entries taken) at
        level ``src``; the buffer when ``src`` is 0) into level ``src + 1``, a ``share`` of the
        key space."""
        t = src + 1
        deepest = src > 0 and t >= self.depth()
        target, target_s = self.runs(t), self.shadows(t)
        into = bool(target) and (target[0] + n[0] <= self.run_capacity(t) or len(target) >= self.max_runs(t))
        replaced = (0.0, 0.0)
        if into:
            e = target[0]
            r = e if not self.is_partial(src) else min(e, share * e + min(self.file_entries, e))
            replaced = (r, target_s[0] * r / e if e > 0 else 0.0)
        trivial = src > 0 and len(inputs) == 1 and replaced[0] == 0.0
        if src > 0:
            source, source_s = self.runs(src), self.shadows(src)
            for j, taken in sorted(inputs, reverse=True):
                source_s[j] -= source_s[j] * taken / source[j] if source[j] > 0 else 0.0
                source[j] -= taken
                if source[j] <= 1e-9:
                    del source[j], source_s[j]
        out = self.union([n, replaced])
        if not trivial:
            read = (n[0] if src > 0 else 0.0) + replaced[0]
            self.blocks += (read + out[0]) / self.block_entries
            if deepest:
                self.deep.append((read + out[0]) / self.block_entries)
        if into:
            target[0] += out[0] - replaced[0]
            target_s[0] += out[1] - replaced[1]
        else:
            target.insert(0, out[0])
            target_s.insert(0, out[1])

    def compact_from(self, i: int) -> None:
        runs, shadows = self.runs(i), self.shadows(i)
        if not self.is_partial(i):
            inputs, share = list(enumerate(runs)), 1.0
        else:
            pick = self.pick_run(i, runs)
            one = min(self.file_entries, runs[pick])
            share = one / max(runs[pick], 1.0)
            inputs = [(pick, one)] + [
                (j, min(runs[j], share * runs[j] + min(self.file_entries, runs[j]))) for j in range(pick + 1, len(runs))
            ]
        n = self.union([(taken, shadows[j] * taken / runs[j] if runs[j] > 0 else 0.0) for j, taken in inputs])
        if not self.accepts(i + 1, n[0]):
            self.compact_from(i + 1)
            return
        self.place(i, inputs, n, share)

    def pick_run(self, i: int, runs: list[float]) -> int:
        """The run a partial merge starts from (newest first). ``fullest``: under inserts the full
        runs tie and the oldest wins; under overwrites their sizes differ by what merges into them
        dropped, so any of them may be the fullest, and the middle one stands for them (it takes
        (K + 1) / 2 runs' ranges along, their mean). Between two runs (an even count), the picks
        alternate so that their mean is the middle (a running remainder per level)."""
        oldest = len(runs) - 1
        if self.run_strategy == RunStrategy.FULLEST:
            back = self.overwrite_share * oldest / 2
            whole = math.floor(back)
            self.dither[i] = self.dither.get(i, 0.0) + back - whole
            if self.dither[i] >= 0.5:
                self.dither[i] -= 1.0
                whole += 1
            return oldest - whole
        if self.run_strategy == RunStrategy.LAST_FULL:
            full = self.threshold * self.run_capacity(i)
            return next((j for j, r in enumerate(runs) if r >= full), oldest)
        return oldest

    def flush(self, n: float) -> None:
        """One frozen buffer of ``n`` entries, and every merge the worker runs after it."""
        pending = True
        for _ in range(MAX_STEPS_PER_FLUSH):
            if pending:
                if not self.accepts(1, n):
                    self.compact_from(1)
                    continue
                self.place(0, [], (n, n * self.overwrite_share), 1.0)
                pending = False
                continue
            busy = next((i for i in range(1, len(self.levels) + 1) if self.over(i)), 0)
            if not busy:
                return
            self.compact_from(busy)
        raise RuntimeError("transient replay: a flush's merges did not settle (a bug)")


@dataclass(frozen=True)
class RunMerges:
    """What a measured run says of its merges (a cosine-bench report's ``run`` and ``warmup``)."""

    #: merges into the deepest level the run completed in its measured phase
    deep: int
    #: operations between two of them in the engine, as the warm-up's search found them (None:
    #: not searched). The engine's spacing is not the model's cycle (docs/journal/s22-s30.md §26.1): the
    #: hybrid merges into its last level run by run, some 3.5x as often as the model's cycle,
    #: each merge smaller, at the same amortized cost per put.
    deep_spacing_operations: float | None = None
    #: flushes the run completed in its measured phase (None: not reported). A run of a few
    #: thousand puts fills its buffer once or not at all by its keys, and a flush that falls at
    #: its end is paid in the settle after it (docs/journal/s22-s30.md §27.2).
    flushes: int | None = None


def with_deep_merges(blocks: float, deep: list[float], observed: int, per_merge: float) -> float:
    """A replay's ``blocks`` given that the run made ``observed`` merges into the deepest level
    where the replay made ``deep`` (their blocks, in order): the replay's last ones beyond the
    observed count are taken out, and the observed ones beyond the replay's are added at the
    mean of the replay's (``per_merge``, the steady model's, when it made none). When a run
    starts close to a deep merge, whether it makes it is decided by the background worker's
    timing and the exact key overlaps, which the replay does not know (docs/journal/s22-s30.md §26)."""
    if observed < len(deep):
        return blocks - sum(deep[observed:])
    mean = sum(deep) / len(deep) if deep else per_merge
    return blocks + (observed - len(deep)) * mean


def start_runs(entries: float, runs: int, run_capacity: float) -> list[float]:
    """An observed level (entries, runs) as runs, newest first: older runs full, the newest
    holding the rest (equal shares when that leaves it empty)."""
    if runs <= 0 or entries <= 0:
        return []
    older = (runs - 1) * run_capacity
    if runs > 1 and entries > older:
        return [entries - older] + [run_capacity] * (runs - 1)
    return [entries / runs] * runs
