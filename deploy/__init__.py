"""`cosine deploy`: the recommended cluster on this machine.

``plan`` scales the solution's cluster to this machine (node count, memory by S)
and renders each node's engine.toml; ``twemproxy`` writes nutcracker's config
(ketama consistent hashing, auto-eject); ``cluster`` starts, inspects and stops
the processes and keeps their state in the deployment directory; ``resp`` is the
small Redis-protocol client the status, the tests and the scatter-gather scan
use; ``scatter`` is the scan that twemproxy cannot route (client -> every shard).
"""
