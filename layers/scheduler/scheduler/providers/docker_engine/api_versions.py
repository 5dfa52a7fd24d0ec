"""Which Docker Engine API version to speak: the highest one both the engine and this driver support.

An engine's unversioned `GET /version` answers with its range (`MinAPIVersion` .. `ApiVersion`).
Engine 20.10 speaks 1.12–1.41; Engine 29 speaks 1.44–1.52 and refuses anything older with 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# The oldest API this driver's requests are written for: Engine 20.10 (GPU device requests need 1.40).
OLDEST_SUPPORTED = "1.41"
# Whole (fullmatch) and ASCII digits: `$` matches before a final newline, `\d` takes any script's digits.
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)")


class ApiVersionMismatch(Exception):
    """The engine and this driver have no API version in common; the message says what to do."""


def parse(version: str) -> tuple[int, int]:
    """`"1.41"` → `(1, 41)`; ValueError for anything else."""
    match = _VERSION.fullmatch(version.strip())
    if not match:
        raise ValueError(f"{version!r} is not an API version like 1.41")
    return int(match[1]), int(match[2])


def is_version(value: str) -> bool:
    """Whether `value` reads as an API version (`1.41`)."""
    return bool(_VERSION.fullmatch(value.strip()))


def choose(engine: Mapping[str, object], newest_supported: str, oldest_supported: str = OLDEST_SUPPORTED) -> str:
    """The highest version in both the engine's range (from its /version answer) and ours."""
    engine_newest = str(engine.get("ApiVersion") or "")
    if not is_version(engine_newest):
        raise ApiVersionMismatch(f"the engine's /version answer carries no ApiVersion ({engine_newest!r})")
    engine_oldest = str(engine.get("MinAPIVersion") or engine_newest)
    if not is_version(engine_oldest):
        engine_oldest = engine_newest
    chosen = min(engine_newest, newest_supported, key=parse)
    floor = max(engine_oldest, oldest_supported, key=parse)
    if parse(chosen) >= parse(floor):
        return chosen
    engine_range = f"{engine_oldest}–{engine_newest}"
    ours = f"{oldest_supported}–{newest_supported}"
    if parse(engine_newest) < parse(oldest_supported):
        raise ApiVersionMismatch(
            f"the engine (Docker {engine.get('Version', '?')}) speaks API {engine_range}, older than this driver's"
            f" {ours}: upgrade the Docker engine to 20.10 or newer"
        )
    raise ApiVersionMismatch(
        f"the engine (Docker {engine.get('Version', '?')}) speaks API {engine_range} and this driver {ours}:"
        f" upgrade openalice-scheduler's Docker SDK, or set DOCKER_API_VERSION={engine_oldest} to try anyway"
    )
