"""The lease store: the only code that speaks DynamoDB (client, conditions, writes, reads, counters, items)."""

from scheduler.store.items import lease_from_item
from scheduler.store.leases import Claim, LeaseStateChanged, LeaseStore
from scheduler.store.queries import LIVE_INDEX, STARTING_INDEX

__all__ = ["LIVE_INDEX", "STARTING_INDEX", "Claim", "LeaseStateChanged", "LeaseStore", "lease_from_item"]
