"""A column of the MIP (:class:`Context`) and all of a spec's columns (:class:`Tables`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cost_models.cloud import StorageChoice
from cost_models.design import Design
from cost_models.pricing.catalog import VmType

#: The design name (and table-cache row kind) of Cosine's own columns; a preset's carry its name.
COSINE = "cosine"


@dataclass
class Context:
    """One MIP column: a node of ``vm`` holding ``entries`` on ``storage`` running ``design``."""

    provider: str
    vm: VmType
    entries: float
    storage: StorageChoice
    cost_month: float
    throughput: float  # the node's ops/s, expected workload (a replica's: node operations / A)
    io_total: float
    design: Design
    design_class: str
    levels: int
    cold_levels: int
    perturbed: float = 0.0  # the same under the perturbed workload (= throughput without robustness)


@dataclass
class Tables:
    """All contexts of a spec, per provider, for Cosine and for the presets."""

    spec_name: str
    entries: int
    grid_size: dict[str, int]
    max_cluster: int = 1
    contexts: dict[str, list[Context]] = field(default_factory=dict)  # provider -> columns
    presets: dict[str, dict[str, list[Context]]] = field(default_factory=dict)  # preset -> provider -> columns
    seconds: float = 0.0
