"""The lease store: the only code that speaks DynamoDB."""

from scheduler.store.items import lease_from_item
from scheduler.store.leases import LIVE_INDEX, Claim, LeaseStateChanged, LeaseStore, ReadCounters

__all__ = ["LIVE_INDEX", "Claim", "LeaseStateChanged", "LeaseStore", "ReadCounters", "lease_from_item"]
