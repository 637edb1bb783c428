"""SOPHIA (USENIX ATC 2019): when to reconfigure, and to what, for a time-varying workload."""
