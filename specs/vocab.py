"""The project's vocabulary: every name a spec, a flag, a file or a status can
hold, as one StrEnum each. This is the one copy; every other module imports
from here. A StrEnum member *is* its string (``Operation.GET == "get"``), so
members go into JSON, parquet and TOML unchanged.
"""

from __future__ import annotations

from enum import StrEnum as _StrEnum


class StrEnum(_StrEnum):
    """A StrEnum whose repr is its string's: every message that quotes a member (``{x!r}``, a
    "did you mean" hint) shows ``'migration'``, not ``<SlaFeature.MIGRATION: 'migration'>``."""

    def __repr__(self) -> str:
        return repr(self.value)


class Operation(StrEnum):
    """The operation types of the paper's Eq. 1 (and of YCSB's mixes)."""

    GET = "get"  # single-result point lookup
    EMPTY_GET = "empty_get"  # lookup of an absent key
    RANGE = "range"  # short range scan
    INSERT = "insert"
    UPDATE = "update"  # blind update
    RMW = "rmw"  # read-modify-write
    EMPTY_RANGE = "empty_range"  # a range that holds no key (paper Fig. 5H): what range filters answer


#: Operations in the order every table, vector and file uses.
OPERATIONS: tuple[Operation, ...] = tuple(Operation)
#: Operations that write (and pay flushes and merges).
WRITE_OPERATIONS: tuple[Operation, ...] = (Operation.INSERT, Operation.UPDATE, Operation.RMW)
#: Operations a lookup-style read makes block reads for (decompressed when stored compressed).
READ_OPERATIONS: tuple[Operation, ...] = (
    Operation.GET,
    Operation.EMPTY_GET,
    Operation.RANGE,
    Operation.RMW,
    Operation.EMPTY_RANGE,
)
#: The paper's six operation types (Table 2): the columns of workload traces (SOPHIA's
#: studies) and what the robustness noise (Sec. 5) spreads its uniform share over; an
#: empty-range share in the spec is kept (scaled by 1 - noise).
PAPER_OPERATIONS: tuple[Operation, ...] = OPERATIONS[:6]
NOISE_OPERATIONS: tuple[Operation, ...] = PAPER_OPERATIONS


class CodecName(StrEnum):
    """Block compression (engine-template cosine-compress): a codec is spelled
    ``none``, ``lz4`` or ``zstd:LEVEL`` (cost_models.compression.Codec)."""

    NONE = "none"
    LZ4 = "lz4"
    ZSTD = "zstd"


class DesignClass(StrEnum):
    """The layout classes of Algorithm 3 (codes 0..3 in vectorized tables, in this order)."""

    LSM = "lsm"
    BTREE = "btree"
    LSH = "lsh"
    HYBRID = "hybrid"

    @property
    def code(self) -> int:
        """The class's integer code in the model's arrays."""
        return DESIGN_CLASSES.index(self)

    @classmethod
    def of_code(cls, code: int) -> DesignClass:
        return DESIGN_CLASSES[int(code)]


DESIGN_CLASSES: tuple[DesignClass, ...] = tuple(DesignClass)


class Compaction(StrEnum):
    """How an engine's merges move data down (engine.toml ``algorithms.compaction``, Table 1 row 11)."""

    FULL = "full"  # a whole level at a time, rewriting the whole target run
    PARTIAL = "partial"  # one file (plus its overlaps in older runs), rewriting only the overlapping target files
    HYBRID = "hybrid"  # full from levels 1..=full_compaction_levels, partial below


class FilePicking(StrEnum):
    """Which file a partial merge moves (engine.toml ``algorithms.file_picking``, Table 1 row 13;
    engine-template cosine-config ``FilePicking``)."""

    OLDEST_MERGED = "oldest_merged"  # the file least recently produced by a merge
    OLDEST_FLUSHED = "oldest_flushed"  # the file holding the oldest flushed data
    DENSE_FP = "dense_fp"  # the densest fence pointers (most entries per unit of key range)
    SPARSE_FP = "sparse_fp"  # the sparsest fence pointers
    CHOOSE_FIRST = "choose_first"  # the first file in key order


class BloomAllocation(StrEnum):
    """How filter memory is spread over levels (a design's ``bloom_allocation``)."""

    MONKEY = "monkey"  # optimal per-level false-positive rates (Dayan et al. 2017)
    UNIFORM = "uniform"  # the same bits per key at every level, as RocksDB


BLOOM_ALLOCATIONS: tuple[BloomAllocation, ...] = tuple(BloomAllocation)


class RunStrategy(StrEnum):
    """Which run of a level a partial merge takes a file from (engine.toml ``algorithms.run_strategy``,
    Table 1 row 12); the overlapping files of every older run come along."""

    FIRST = "first"  # the oldest run
    LAST_FULL = "last_full"  # the newest full run
    FULLEST = "fullest"  # the run with the most entries


class Provider(StrEnum):
    AWS = "aws"
    GCP = "gcp"
    AZURE = "azure"


PROVIDERS: tuple[Provider, ...] = tuple(Provider)


class SlaFeature(StrEnum):
    MIGRATION = "migration"
    SUPPORT = "support"
    BACKUP = "backup"
    RELIABILITY = "reliability"
    AVAILABILITY = "availability"


SLA_FEATURES: tuple[SlaFeature, ...] = tuple(SlaFeature)


class PriceSet(StrEnum):
    """Named price sets of the catalog (pricing/*.csv)."""

    ONDEMAND = "ondemand"  # the default
    PAPER2021 = "paper2021"
    PAPER2021_FLAT_IOPS = "paper2021-flat-iops"  # the paper's own storage rule, to reproduce it
    COMMITTED1Y = "committed1y"
    SPOT = "spot"


PRICE_SETS: tuple[PriceSet, ...] = tuple(PriceSet)
#: The price set a spec gets when it names none: today's list prices, realistic storage.
DEFAULT_PRICE_SET = PriceSet.ONDEMAND


class StorageRule(StrEnum):
    """How a storage product turns size (and provisioned figures) into IOPS, MiB/s and dollars."""

    PER_GB = "per_gb"  # IOPS and MiB/s grow with the size (gp2, pd-ssd, pd-balanced)
    PROVISIONED = "provisioned"  # IOPS and MiB/s bought beyond an included baseline (gp3, io2)
    SLAB = "slab"  # fixed tiers, striped (Azure Premium SSD P-tiers)
    LOCAL = "local"  # the VM's own instance store, included in its price (r5d NVMe)
    FLAT = "flat"  # the paper's rule: every volume gets the product's maximum IOPS


class BindingResource(StrEnum):
    """What stops a solve's answer from being faster (solution.json ``binding.resource``)."""

    BUDGET = "budget"
    ROBUST_RULE = "robust_rule"  # dearer configurations are not within the tolerance of the best perturbed one
    CLUSTER_CAP = "cluster_cap"
    ENGINE_LAYOUT = "engine_layout"  # more nodes would each hold fewer keys, in a slower layout (fewer levels)
    NODE_IOPS = "node_iops"
    NETWORK = "network"  # every node runs at its VM's network bandwidth (issue 48)
    OPERATIONS_PER_MONTH = "operations_per_month"
    NONE = "none"


class CatalogKind(StrEnum):
    """What a catalog row prices."""

    VM = "vm"
    STORAGE = "storage"
    SLA = "sla"
    VM_STORAGE = "vm_storage"  # a VM's limits on attached storage, or its local instance store
    REGION = "region"  # a provider's region: its zones, cross-zone transfer and object-storage prices


class DistributionKind(StrEnum):
    """A key distribution of a spec (``workload.distribution.get|put.kind``)."""

    UNIFORM = "uniform"
    ZIPFIAN = "zipfian"
    SKEW = "skew"
    NORMAL = "normal"
    LATEST = "latest"


class CostModel(StrEnum):
    """The I/O model that scores designs: the paper's distribution-aware model,
    or the worst-case model of the design continuum (Idreos et al., CIDR 2019,
    the paper's [73]), which the technical report's Sec. 3 compares it with.
    Specs may spell them with underscores (``worst_case``)."""

    DISTRIBUTION_AWARE = "distribution-aware"
    WORST_CASE = "worst-case"


COST_MODELS: tuple[CostModel, ...] = tuple(CostModel)


class Preset(StrEnum):
    """The paper's fixed baselines (Table 1, Sec. 7). The engine's own presets
    (engine-template/presets/*.toml) add ``hybrid``."""

    ROCKSDB = "rocksdb"
    WIREDTIGER = "wiredtiger"
    FASTER = "faster"


PRESETS: tuple[Preset, ...] = tuple(Preset)


class SolverStatus(StrEnum):
    """How one solve ended (every back end maps its own codes onto these)."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # a solution, not proven optimal
    INFEASIBLE = "infeasible"  # nothing fits the budget
    EXCLUDED = "excluded"  # configurations fit, but a rule of the spec excludes every one (the row names it)
    TIMEOUT = "timeout"  # the time limit, without a solution
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE)


class Objective(StrEnum):
    """What one solve maximizes."""

    EXPECTED = "expected"  # X: the expected workload's throughput
    PERTURBED = "perturbed"  # P: the perturbed workload's throughput
    ROBUST = "robust"  # X, subject to P >= (1 - tolerance) x the best P at this budget


class WorkloadKind(StrEnum):
    """Which workloads' throughputs a solve values (a column's scan fan-out matters only on those)."""

    EXPECTED = "expected"
    PERTURBED = "perturbed"
    BOTH = "both"

    @classmethod
    def of(cls, objective: Objective, floor_on_p: bool, floor_on_x: bool) -> WorkloadKind:
        """The workloads whose throughputs a solve of ``objective`` values: its own (the robust
        rule maximizes X), and the other one's when a floor holds it (the robust rule's P, a
        latency target's X)."""
        x = objective != Objective.PERTURBED or floor_on_x
        p = objective == Objective.PERTURBED or floor_on_p
        return cls.BOTH if x and p else (cls.PERTURBED if p else cls.EXPECTED)


class BackendName(StrEnum):
    HIGHS = "highs"
    ORTOOLS = "ortools"
    PYOMO = "pyomo"


class Method(StrEnum):
    """How each band's MIP is solved: by its bottleneck (the threshold algorithm of
    solver.bottleneck, exact, the back end solving only covering subproblems the
    closed form does not cover), as one MIP by the back end, or by enumeration
    (small instances, cross-checks)."""

    THRESHOLD = "threshold"
    MIP = "mip"
    EXHAUSTIVE = "exhaustive"


class WalSync(StrEnum):
    """The engine's WAL policy (engine-template cosine-config ``WalSync``)."""

    EVERY_WRITE = "every_write"
    GROUP_COMMIT = "group_commit"
    NONE = "none"


#: The WAL policy the cost model prices (cost_models/data/phi.yaml ``wal``, `cosine calibrate wal`)
#: and `cosine render` writes unless told otherwise: a write is acknowledged after its group's sync.
MODELLED_WAL_SYNC = WalSync.GROUP_COMMIT


class ReplyWait(StrEnum):
    """How cosine-server's reply to a batch waits between the batch's execution and its write
    (cosine-server stats.rs ``ReplyWait``, `INFO server`'s ``reply_wait_*``; the served latency model
    simulates each: cost_models.latency.RuntimeLoop)."""

    DURABLE = "durable"  # the batch wrote: its replies wait for the durability waiter's sync
    PIPELINED = "pipelined"  # several replies, nothing to sync: the writer yields once
    SINGLE = "single"  # one reply, nothing to sync: written at once


class SyncBy(StrEnum):
    """Who made a durability sync that answered waiting writes (cosine-server stats.rs ``SyncBy``)."""

    IDLE = "idle"  # a runtime worker about to park (its run queue and deferred tasks empty)
    TICK = "tick"  # the waiter's own thread, every group-commit interval


class WalRecovery(StrEnum):
    """What the engine's WAL replay does with a damaged record (engine-template cosine-config ``WalRecovery``,
    modelled on RocksDB's ``WALRecoveryMode``; docs/engine-contract.md section 4)."""

    TOLERATE_CORRUPTED_TAIL = "tolerate_corrupted_tail"
    ABSOLUTE_CONSISTENCY = "absolute_consistency"
    POINT_IN_TIME = "point_in_time"
    SKIP_ANY_CORRUPTED = "skip_any_corrupted"


class CalibrationRun(StrEnum):
    """Kinds of `cosine calibrate` run (measure/calibrate/)."""

    CACHED = "cached"  # a warm engine whose block cache holds the data: no block reads
    LOADED = "loaded"  # the design as it is: blocks read, flushes and merges
    BUFFERED = "buffered"  # all the data in the buffer: lookups that walk no level
    SMALL_MEMTABLE = "small_memtable"  # cached writes into a smaller memtable: an insert's growth with it


class ServingDriver(StrEnum):
    """The RESP client `cosine calibrate serving` drives cosine-server with."""

    RESP_BENCH = "cosine-resp-bench"  # the engine template's driver, as `cosine validate --served` runs it
    REDIS_BENCHMARK = "redis-benchmark"  # redis-tools' benchmark


class DeviceKind(StrEnum):
    """engine.toml's ``[device] kind`` (engine-template cosine-config ``DeviceKind``)."""

    LOCAL = "local"  # the local file system as it is
    VOLUME = "volume"  # an emulated provisioned volume (IOPS, MiB/s, read latency)


class EnginePeer(StrEnum):
    """Which engine `cosine bench` drives through the same workload driver."""

    COSINE = "cosine"
    ROCKSDB = "rocksdb"
    FJALL = "fjall"


class Consistency(StrEnum):
    """How many replicas a read asks (spec ``replication.consistency``): one replica (the leader, or a
    follower where it may serve), or a majority of them."""

    ONE = "one"
    QUORUM = "quorum"


class DeploymentStatus(StrEnum):
    """A local deployment's state (`cosine deploy --status`)."""

    RUNNING = "running"  # every process is up and answers
    DEGRADED = "degraded"  # started, but a process is down or does not answer
    STOPPED = "stopped"


class PlanStart(StrEnum):
    """Whether a reconfiguration plan may choose its first configuration."""

    FREE = "free"
    DEFAULT = "default"
