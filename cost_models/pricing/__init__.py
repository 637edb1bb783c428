"""The pricing catalog: VMs, storage and SLA features per provider and price set.

The human-editable source is the four CSV files under ``pricing/`` (one row per
item, each with ``source`` and ``as_of``): ``vms.csv``, ``storage.csv`` (each
product's size/IOPS/throughput rule, :class:`~specs.vocab.StorageRule`),
``vm_storage.csv`` (what storage each VM can drive: its EBS / Persistent Disk /
uncached-disk limits, its data-disk count, its local instance store) and
``slas.csv``. A row's ``price_set`` is one set, several joined by ``|``, or
``*`` for all. ``cosine pricing build`` turns them into ``pricing.parquet`` (one
table, ``kind`` in :class:`~specs.vocab.CatalogKind`); the models only ever read
the parquet file, through :func:`cost_models.pricing.catalog.load_catalog`.

* :mod:`~cost_models.pricing.rows`: the parquet row (:class:`~cost_models.pricing.rows.CatalogRow`)
* :mod:`~cost_models.pricing.build`: the CSV sources -> ``pricing.parquet`` (`cosine pricing build`)
* :mod:`~cost_models.pricing.catalog`: ``pricing.parquet`` -> :class:`~cost_models.pricing.catalog.Catalog`
"""
