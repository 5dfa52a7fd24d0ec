"""The lease store: the only code that speaks DynamoDB (client, conditions, writes, reads, counters, items).

Its members load when first used: a function that reads only the callers registry (the token authorizer)
imports `scheduler.store.callers` without the lease store's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.store.claims import Claim, LeaseStateChanged
    from scheduler.store.items import lease_from_item
    from scheduler.store.leases import LeaseStore
    from scheduler.store.queries import LIVE_INDEX, STARTING_INDEX

__all__ = ["LIVE_INDEX", "STARTING_INDEX", "Claim", "LeaseStateChanged", "LeaseStore", "lease_from_item"]
_HOMES = {
    "lease_from_item": "scheduler.store.items",
    "Claim": "scheduler.store.claims",
    "LeaseStateChanged": "scheduler.store.claims",
    "LeaseStore": "scheduler.store.leases",
    "LIVE_INDEX": "scheduler.store.queries",
    "STARTING_INDEX": "scheduler.store.queries",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'scheduler.store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
