"""Developer tooling for the local stack and the tests (not deployed).

The dev tools connect to Docker hosts through the service's own client (the shared layer's
`scheduler.providers.docker_engine`), so the layer is importable from here even when a script was
started without `make`'s PYTHONPATH (appended: a PYTHONPATH entry still wins).
"""

import sys
from pathlib import Path

_LAYER = str(Path(__file__).resolve().parent.parent / "layers" / "scheduler")
if _LAYER not in sys.path:
    sys.path.append(_LAYER)
