"""RunPod's GPU price list (`GET /v2/catalog/gpus`), read at most once per few minutes per execution environment.

RunPod allows 60 API requests a minute per account, so prices are cached for CATALOG_MAX_AGE_SECONDS in
the process (a warm function asks again only after that) and are asked for only when a request needs
them (a price ceiling, cheapest-first ordering, an owner budget). The driver bills at a pod's own
`cost`, which it checks after the create: the catalog only decides which types are worth trying.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

CATALOG_MAX_AGE_SECONDS = 300.0


class Prices(NamedTuple):
    """USD per GPU per hour (secure cloud, which the driver's pods run on), by GPU type id."""

    by_gpu: Mapping[str, float]

    def of(self, gpu_id: str) -> float | None:
        return self.by_gpu.get(gpu_id)

    def ordered(self, gpu_ids: Sequence[str], cheapest_first: bool) -> list[str]:
        """`gpu_ids` as listed, or cheapest first (types without a price last, in their listed order)."""
        if not cheapest_first:
            return list(gpu_ids)
        unknown = float("inf")
        return sorted(gpu_ids, key=lambda gpu_id: self.by_gpu.get(gpu_id, unknown))


def parse_prices(body: object) -> Prices | None:
    """The `secure` price of each GPU type in a listGpuTypes answer; None when it has no such list."""
    if not isinstance(body, dict) or not isinstance(body.get("gpus"), list):
        return None
    found: dict[str, float] = {}
    for gpu in body["gpus"]:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("id"), str):
            continue
        price = gpu.get("price")
        secure = price.get("secure") if isinstance(price, dict) else None
        if isinstance(secure, int | float) and not isinstance(secure, bool) and secure >= 0:
            found[gpu["id"]] = float(secure)
    return Prices(found)


class CatalogCache:
    """The last price list read, per API base URL, for this process; refreshed when older than `max_age`."""

    def __init__(self, max_age: float = CATALOG_MAX_AGE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Prices]] = {}

    def get(self, key: str, fetch: Callable[[], Prices | None]) -> Prices | None:
        """The cached prices, or `fetch()`'s (kept only when it returned some)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self._clock() - entry[0] < self._max_age:
                return entry[1]
        prices = fetch()
        if prices is not None:
            with self._lock:
                self._entries[key] = (self._clock(), prices)
        return prices if prices is not None else (entry[1] if entry is not None else None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# One per execution environment: every driver built in this process shares it.
CATALOG = CatalogCache()
