"""The merges a short run performs, from the state it starts in (docs/model.md, "Short runs").

The steady-state model amortizes each merge over its level's fill cycle at a fixed data size.
A measured run of a few cycles pays for the merges that actually happen in it, and when it
inserts, the tree grows under it: the last level fills, is pushed down whole, and the new level
above it is merged into while small. This replays the engine contract (docs/engine-contract.md;
engine `cosine-compaction`'s `TemplateStrategy::choose`) on entry counts, one flush at a time,
and prices each merge as the engine's simulator counts it: the blocks of every input file read
(the buffer is not read) and of every output file written, nothing for a relinked run.

Keys are not tracked. A merge's output is the union of its inputs: inputs that hold a share of
the store's N keys overlap by their product over N for the share of puts that overwrite
(uniform keys), not at all for inserts. A partial merge moves one file of f entries (the run
smaller than a file is one file) from the picked run plus the key range's share of every older
run (their overlapping files), and rewrites that share of the target run plus the file its edge
cuts.
"""

from __future__ import annotations

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
    blocks: float = 0.0

    def capacity(self, i: int) -> float:
        return float(round(self.buffer_entries * self.size_ratio**i))

    def depth(self) -> int:
        return max((j + 1 for j, runs in enumerate(self.levels) if sum(runs) > 0), default=0)

    def runs(self, i: int) -> list[float]:
        while len(self.levels) < i:
            self.levels.append([])
        return self.levels[i - 1]

    def last(self, i: int) -> bool:
        return i >= self.depth()

    def max_runs(self, i: int) -> int:
        return max(1, self.cold_runs if self.last(i) else self.hot_runs)

    def run_capacity(self, i: int) -> float:
        return max(1.0, -(-self.capacity(i) // self.max_runs(i)))

    def is_partial(self, source: int) -> bool:
        return source >= 1 and bool(self.partial[min(source, len(self.partial)) - 1])

    def union(self, a: float, b: float) -> float:
        return a + b - self.overwrite_share * a * b / max(self.n_keys, 1.0)

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

    def place(self, src: int, inputs: list[tuple[int, float]], n: float, share: float) -> None:
        """Merge ``n`` entries (``inputs``: (run index, entries taken) at level ``src``; the
        buffer when ``src`` is 0) into level ``src + 1``, a ``share`` of the key space."""
        t = src + 1
        target = self.runs(t)
        into = bool(target) and (target[0] + n <= self.run_capacity(t) or len(target) >= self.max_runs(t))
        replaced = 0.0
        if into:
            e = target[0]
            replaced = e if not self.is_partial(src) else min(e, share * e + min(self.file_entries, e))
        trivial = src > 0 and len(inputs) == 1 and replaced == 0.0
        if src > 0:
            source = self.runs(src)
            for j, taken in sorted(inputs, reverse=True):
                source[j] -= taken
                if source[j] <= 1e-9:
                    del source[j]
        out = self.union(n, replaced)
        if not trivial:
            read = (n if src > 0 else 0.0) + replaced
            self.blocks += (read + out) / self.block_entries
        if into:
            target[0] = target[0] - replaced + out
        else:
            target.insert(0, out)

    def compact_from(self, i: int) -> None:
        runs = self.runs(i)
        if not self.is_partial(i):
            inputs, n, share = list(enumerate(runs)), self.union_all(runs), 1.0
        else:
            pick = self.pick_run(i, runs)
            one = min(self.file_entries, runs[pick])
            share = one / max(runs[pick], 1.0)
            inputs = [(pick, one)] + [
                (j, min(runs[j], share * runs[j] + min(self.file_entries, runs[j]))) for j in range(pick + 1, len(runs))
            ]
            n = self.union_all([taken for _, taken in inputs])
        if not self.accepts(i + 1, n):
            self.compact_from(i + 1)
            return
        self.place(i, inputs, n, share)

    def union_all(self, parts: list[float]) -> float:
        out = 0.0
        for p in parts:
            out = self.union(out, p)
        return out

    def pick_run(self, i: int, runs: list[float]) -> int:
        """The run a partial merge starts from (newest first). ``fullest``: under inserts the full
        runs tie and the oldest wins; under overwrites their sizes differ by what merges into them
        dropped, so any of them may be the fullest, and the middle one stands for them (it takes
        (K + 1) / 2 runs' ranges along, their mean)."""
        oldest = len(runs) - 1
        if self.run_strategy == RunStrategy.FULLEST:
            return oldest - round(self.overwrite_share * oldest / 2)
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
                self.place(0, [], n, 1.0)
                pending = False
                continue
            busy = next((i for i in range(1, len(self.levels) + 1) if self.over(i)), 0)
            if not busy:
                return
            self.compact_from(busy)
        raise RuntimeError("transient replay: a flush's merges did not settle (a bug)")


def start_runs(entries: float, runs: int, run_capacity: float) -> list[float]:
    """An observed level (entries, runs) as runs, newest first: older runs full, the newest
    holding the rest (equal shares when that leaves it empty)."""
    if runs <= 0 or entries <= 0:
        return []
    older = (runs - 1) * run_capacity
    if runs > 1 and entries > older:
        return [entries - older] + [run_capacity] * (runs - 1)
    return [entries / runs] * runs
