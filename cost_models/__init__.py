"""Cosine cost models: pricing catalog, distribution-aware I/O model, CPU model, cloud bill.

Kept import-light so that ``cosine --help`` stays instant; import submodules directly.
"""

from pathlib import Path

#: The repository root (the package is used from an editable install).
REPO_ROOT = Path(__file__).resolve().parent.parent
