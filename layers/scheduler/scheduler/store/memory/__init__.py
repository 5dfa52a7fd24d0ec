"""The lease store in memory: `MemoryLeaseStore` (the `LeaseStorePort` of `store/port.py`) and `MemoryApiBudget`.

For tests: no product code imports it (the functions keep to DynamoDB's `store.LeaseStore`).
"""

from scheduler.store.memory.api_budget import MemoryApiBudget
from scheduler.store.memory.store import MemoryLeaseStore

__all__ = ["MemoryApiBudget", "MemoryLeaseStore"]
