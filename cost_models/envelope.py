"""The calibrated envelope: what the engine was ever measured to do.

`cosine calibrate` stores, with the phi table, the highest throughput per core
the engine reached for each design class on each calibration workload (cached
and loaded runs, single operations and YCSB mixes; over the time the engine
had a CPU, i.e. another program's load on a shared machine left out). The
envelope of a class on a mix is the larger of

* the highest per-core throughput measured on a comparable mix (total-variation
  distance of the operation mixes at most :data:`COMPARABLE_MIX`), and
* what the mix's operations reach alone: ``1 / sum_o theta_o / X_o`` with X_o
  the highest per-core throughput measured for operation o by itself (a mix
  spends at least each operation's own time on it),

and a prediction for a node is *inside* when its throughput per core is at most
that. Outside, the model extrapolates past every measurement: the certificate
says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from specs.vocab import OPERATIONS, DesignClass

if TYPE_CHECKING:
    from cost_models.phi import PhiTable

#: Largest total-variation distance between two mixes that counts as comparable
#: (0.3: e.g. YCSB A's 50/50 and a 65/35 read/update mix are, YCSB A and C are not).
COMPARABLE_MIX = 0.3


def mix_distance(a: dict[str, float], b: dict[str, float]) -> float:
    """Total-variation distance between two operation mixes (0: equal, 1: disjoint)."""
    sa, sb = sum(a.values()) or 1.0, sum(b.values()) or 1.0
    return 0.5 * sum(abs(a.get(op, 0.0) / sa - b.get(op, 0.0) / sb) for op in OPERATIONS)


@dataclass(frozen=True)
class Bound:
    """The envelope of one class on one mix: the best measured throughput per core, and where."""

    per_core_ops: float | None
    workload: str | None

    def admits(self, per_core_ops: float) -> bool:
        return self.per_core_ops is not None and per_core_ops <= self.per_core_ops * (1 + 1e-9)


def bound(design_class: str, mix: dict[str, float], phi: PhiTable | None = None) -> Bound:
    """The envelope of ``design_class`` on ``mix`` (module docstring) in ``phi`` (None: the shipped table)."""
    from cost_models.cpu import envelope_rows  # the checks' only use of the CPU model (readers do not load it)
    from cost_models.phi import shipped_or

    rows = [r for r in envelope_rows(shipped_or(phi)) if r["class"] == design_class]
    best: Bound = Bound(None, None)
    for row in rows:
        if mix_distance(row["mix"], mix) <= COMPARABLE_MIX and (
            best.per_core_ops is None or row["per_core_ops"] > best.per_core_ops
        ):
            best = Bound(float(row["per_core_ops"]), str(row["workload"]))
    total = sum(v for v in mix.values() if v > 0) or 1.0
    alone: dict[str, float] = {}
    for row in rows:
        if len(row["mix"]) == 1:
            (op,) = row["mix"]
            alone[op] = max(alone.get(op, 0.0), float(row["per_core_ops"]))
    used = [op for op, v in mix.items() if v > 0]
    if used and all(alone.get(op, 0.0) > 0 for op in used):
        x = 1.0 / sum(mix[op] / total / alone[op] for op in used)
        if best.per_core_ops is None or x > best.per_core_ops:
            best = Bound(x, "its operations alone (" + ", ".join(used) + ")")
    return best


def served_bound(design_class: str, mix: dict[str, float], phi: PhiTable | None = None) -> Bound:
    """The envelope of a served node (issue 48): the in-process one (:func:`bound`), or what
    cosine-server was measured to serve per core over RESP for the mix's kinds of request
    (cost_models.serving.served_envelope, its calibration's points), whichever is lower: a served
    node does at most what the engine does in process and at most what the server was measured
    to do."""
    from cost_models.serving import served_envelope

    b = bound(design_class, mix, phi)
    if phi is not None or b.per_core_ops is None:
        return b  # serving.yaml belongs to the shipped table's calibration; no envelope stays none
    s = served_envelope(mix)
    if s is not None and s < b.per_core_ops:
        return Bound(s, "cosine-server's calibration over RESP (serving.yaml)")
    return b


@dataclass
class NodeEnvelope:
    """One chosen node group's prediction per core against the envelope of its class on the mix."""

    vm_type: str
    design_class: str = field(metadata={"column": "class"})
    predicted_per_core_ops: float = 0.0
    envelope_per_core_ops: float | None = None  # None: no calibration run had a comparable mix
    calibration_workload: str | None = None
    inside: bool = False


@dataclass
class EnvelopeCheck:
    """Whether every chosen node's prediction lies inside what the engine was measured to do."""

    inside: bool
    nodes: list[NodeEnvelope]


class ChosenNode(Protocol):
    """What the check needs of a chosen node group (solver.rundir.NodeDesign is one)."""

    vm_type: str
    design_class: DesignClass
    threads: int
    node_throughput_ops: float


def check_nodes(nodes_in: Sequence[ChosenNode], mix: dict[str, float], phi: PhiTable | None = None) -> EnvelopeCheck:
    """Whether each chosen node's predicted throughput per core lies inside the envelope (of ``phi``)."""
    nodes = []
    for n in nodes_in:
        threads = max(n.threads, 1)
        per_core = float(n.node_throughput_ops) / threads
        b = served_bound(n.design_class, mix, phi)
        nodes.append(
            NodeEnvelope(
                vm_type=n.vm_type,
                design_class=n.design_class,
                predicted_per_core_ops=per_core,
                envelope_per_core_ops=b.per_core_ops,
                calibration_workload=b.workload,
                inside=b.admits(per_core),
            )
        )
    return EnvelopeCheck(all(n.inside for n in nodes), nodes)


def describe_outside(nodes: list[NodeEnvelope]) -> list[str]:
    """One sentence per node outside the envelope."""
    out = []
    for n in nodes:
        if n.inside:
            continue
        if n.envelope_per_core_ops is None:
            out.append(
                f"{n.vm_type} ({n.design_class}): {n.predicted_per_core_ops:,.0f} ops/s per core predicted, and "
                "no calibration run of this class had a comparable mix"
            )
        else:
            out.append(
                f"{n.vm_type} ({n.design_class}): {n.predicted_per_core_ops:,.0f} ops/s per core predicted, above "
                f"the {n.envelope_per_core_ops:,.0f} the engine reached on {n.calibration_workload}"
            )
    return out
