"""Cosine cost models: pricing catalog, distribution-aware I/O model, CPU model, cloud bill.

Kept import-light so that ``cosine --help`` stays instant; import submodules directly.
"""

import os
from pathlib import Path

#: The repository root (the package is used from an editable install).
REPO_ROOT = Path(__file__).resolve().parent.parent


def cpu_count() -> int:
    """CPUs this process may run on (os.cpu_count() is None when unknown: then 1)."""
    n = os.cpu_count()
    return 1 if n is None else n
