"""Slots on one Docker host of a fleet, held by a `pending` lease like its provider slot (`counters.py`).

The fleet driver takes the chosen host's slot (`host#<provider>#<name>`) in one transaction with the
lease's `held_counters`, moves it when it falls over to the next host, and gives it back when no host
served; whatever ends the lease later gives back every counter it holds, this one included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduler.store.counters import Limit

if TYPE_CHECKING:
    from scheduler.store.port import LeaseStorePort


class StoreHostSlots:
    """The fleet driver's view of the counters: read them, move a pending lease's host slot (on either store)."""

    def __init__(self, store: LeaseStorePort) -> None:
        self._store = store

    def counts(self, counters: Sequence[str]) -> dict[str, int]:
        """Live leases on each host (one BatchGetItem)."""
        return self._store.counters(list(counters))

    def move(self, lease_id: str, give_back: str | None, take: tuple[str, int | None] | None) -> bool:
        """Give back one host slot and/or take another for a pending lease; False when the new host is full.

        LeaseStateChanged when the lease is no longer pending (the caller stops there).
        """
        held = self._store.held_counters(lease_id)
        limit = Limit(take[0], take[1]) if take else None
        moved = self._store.move_slot(lease_id, held, give_back if give_back in held else None, limit)
        return not isinstance(moved, Limit)
