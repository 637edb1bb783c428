"""Scans across shards: scatter-gather.

twemproxy routes a command by hashing its key, so it cannot route a multi-key
range: each shard holds the keys ketama gave it, in no global order. A scan
therefore goes from the client to every shard (``RANGE start count`` on each,
bypassing the proxy) and the client merges: every shard returns its first
``count`` keys ``>= start``, so the first ``count`` of the merged, sorted union
are the cluster's. The YCSB binding (bench/ycsb) does the same in Java.
"""

from __future__ import annotations

import heapq

from measure.resp import Connection


def range_scan(shards: list[Connection], start: bytes, count: int) -> list[tuple[bytes, bytes]]:
    """The first ``count`` (key, value) pairs with key ``>= start`` across ``shards``, in key order."""
    per_shard = []
    for c in shards:
        flat = c.call("RANGE", start, count)
        if not isinstance(flat, list):
            raise ConnectionError(f"RANGE answered {flat!r}")
        per_shard.append(list(zip(flat[0::2], flat[1::2], strict=True)))
    return list(heapq.merge(*per_shard))[:count]
