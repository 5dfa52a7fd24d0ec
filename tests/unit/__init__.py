"""Unit tests of the `scheduler` domain package (no Docker, no network beyond a loopback moto server).

Importing this package puts the repository root and the layer on `sys.path`, so
`pytest tests/unit` works with or without `PYTHONPATH=layers/scheduler:.`.
"""

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
for _path in (_REPO / "layers" / "scheduler", _REPO):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))
