"""The monthly bill of a cluster, as an architect signs it (docs/model.md, "Replication").

:func:`bill_terms` is what the bill adds to a spec's nodes on a provider (cost_models.cloud.SlaTerms):
the SLA bundle's fees, per GB of one copy of the data, support plans, and a replicated cluster's
cross-zone transfer. :func:`itemize` splits a cluster's bill into the lines ``solution.json`` shows:
one copy's compute and storage, the other copies' share, transfer, backup, the SLAs, support.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cost_models.cloud import SlaTerms, sla_terms
from cost_models.pricing.catalog import Catalog
from cost_models.replication import logical_data_gib, transfer_usd_month
from specs.schema import Spec


def bill_terms(spec: Spec, catalog: Catalog, provider: str) -> SlaTerms:
    """The spec's SLA bundle on ``provider`` (pricing/slas.csv), its per-GB fees on one copy of the
    data the answer provisions for, and the cross-zone transfer of the spec's replication plan (a
    node view's; none for a spec as written)."""
    terms = sla_terms(catalog, provider, spec.slas)
    view = spec.node_view
    transfer = 0.0 if view is None else transfer_usd_month(spec, catalog, provider, view.plan)
    return dataclasses.replace(terms, data_gib=logical_data_gib(spec), transfer=transfer)


@dataclass(frozen=True)
class BillLines:
    """A month's bill, line by line (USD); the lines add up to ``total``."""

    compute: float  # one copy's share of the VMs
    storage: float  # one copy's share of the volumes (their backup apart)
    replicas: float  # the other RF - 1 copies' share of the VMs and volumes
    transfer: float  # cross-zone transfer
    backup: float  # snapshots of block volumes, object storage for an instance store
    sla: float  # the SLA bundle's fees
    support: float  # percent-of-spend support plans
    total: float


def itemize(terms: SlaTerms, rf: int, nodes: int, compute: float, storage: float, backup: float) -> BillLines:
    """The lines of a cluster of ``nodes`` keeping ``rf`` copies, whose VMs cost ``compute`` and
    volumes ``storage`` (their ``backup`` included) a month."""
    volumes = storage - backup
    one = 1.0 / rf
    support = float(terms.support(compute + storage))
    sla = terms.flat + terms.per_gb * terms.data_gib + terms.per_node * nodes
    return BillLines(
        compute=compute * one,
        storage=volumes * one,
        replicas=(compute + volumes) * (1.0 - one),
        transfer=terms.transfer,
        backup=backup,
        sla=sla,
        support=support,
        total=compute + storage + sla + support + terms.transfer,
    )
