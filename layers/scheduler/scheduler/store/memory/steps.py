"""The memory store's atomic step: one transition of `scheduler.lifecycle` applied to a lease item under the store's
lock, with the counter changes of the same step (what DynamoDB does in one conditional write or transaction).

`_write` applies a transition to one lease; `_transact` with counter changes, all or nothing; `_claim` takes a
release claim as `LeaseStore._claim` does. `_Lost` carries the lease as found when a condition did not hold.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler.lifecycle import Transition
from scheduler.models import Lease
from scheduler.store.claims import CLAIM_TTL_SECONDS, Claim, claim_of
from scheduler.store.conditions import Inputs
from scheduler.store.items import Item, epoch, lease_from_item
from scheduler.store.memory.books import MemoryBooks
from scheduler.store.memory.rules import applied, holds
from scheduler.store.memory.tables import Change


class Lost(Exception):
    """A transition's condition did not hold: the lease as it was found ({} if absent)."""

    def __init__(self, item: Item) -> None:
        super().__init__("the condition did not hold")
        self.item = item


class MemorySteps(MemoryBooks):
    """The lease items changed only by transitions, each one step under the lock."""

    def __init__(
        self,
        *,
        shards: int = 1,
        retention_seconds: int = 7 * 24 * 3600,
        release_claim_seconds: int = 120,
        counters_table: bool = True,
        usage_table: bool = True,
    ) -> None:
        super().__init__(shards=shards, counters_table=counters_table, usage_table=usage_table)
        self._retention = retention_seconds
        self._claim_seconds = release_claim_seconds

    def _write(self, transition: Transition, lease_id: str, inputs: Inputs) -> Item:
        """The transition on the lease alone: the item written; Lost when the lease's condition fails."""
        with self._lock:
            new = self._checked(transition, lease_id, inputs)
            self._items[lease_id] = new
            return new

    def _transact(
        self, transition: Transition, lease_id: str, inputs: Inputs, changes: Sequence[Change], others: int = 1
    ) -> Item | int:
        """The transition and `changes` to the counters in one step: the item written, or the position of the
        change refused (nothing written); Lost when the lease's condition fails. `others`: the step's items
        besides the counters (the lease, a usage row), as DynamoDB counts a transaction's."""
        with self._lock:
            book = self._book() if changes else None
            new = self._checked(transition, lease_id, inputs)
            full = book.transact(changes, others) if book else None
            if full is not None:
                return full
            self._items[lease_id] = new
            return new

    def _checked(self, transition: Transition, lease_id: str, inputs: Inputs) -> Item:
        """The lease's item after the transition, once its condition holds (the caller holds the lock)."""
        old = self._items.get(lease_id, {})
        new = applied(transition, inputs, old)  # before the condition: LeaseStore renders before it sends
        if not holds(transition, inputs, old):
            raise Lost(old)
        return new

    def _claim(self, transition: Transition, lease_id: str, now: datetime, inputs: Inputs) -> Claim:
        claim_id = uuid.uuid4().hex
        bound = inputs._replace(
            now=epoch(now), claim_id=claim_id, claim_due=epoch(now) + self._claim_seconds, claim_ttl=claim_ttl(now)
        )
        item = self._write(transition, lease_id, bound)
        return claim_of(item, claim_id)

    def _claim_or_none(self, transition: Transition, lease_id: str, now: datetime, inputs: Inputs) -> Claim | None:
        try:
            return self._claim(transition, lease_id, now, inputs)
        except Lost:
            return None

    def _lease_or_none(self, transition: Transition, lease_id: str, inputs: Inputs) -> Lease | None:
        try:
            item = self._write(transition, lease_id, inputs)
        except Lost:
            return None
        return lease_from_item(item)


def claim_ttl(now: datetime) -> int:
    """The TTL while a release claim is held: pushed out, so TTL never deletes a lease being released."""
    return epoch(now) + CLAIM_TTL_SECONDS
