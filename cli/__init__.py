"""The `cosine` command line: :mod:`cli.main` (the app and its commands), one module per sub-app
(:mod:`cli.calibrate`, :mod:`cli.validate`, :mod:`cli.pricing`) and :mod:`cli.common` (errors,
JSON output, progress). The top of the import layers: nothing imports it."""
