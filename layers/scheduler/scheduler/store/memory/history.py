"""Each lease's history in memory: `store/history.py`'s numbering on a dict, for the use cases' fast tests.
It passes the same tests as the DynamoDB history (tests/unit/events/test_history.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from scheduler.store.history import HistoryBook
from scheduler.store.items import Item


class MemoryHistory(HistoryBook):
    """Event items by lease and number, under one lock."""

    def __init__(self, *, retention_seconds: int = 7 * 24 * 3600) -> None:
        super().__init__(retention_seconds)
        self._lock = threading.Lock()
        self._items: dict[str, dict[int, Item]] = {}

    def page(self, lease_id: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        with self._lock:
            numbers = sorted(number for number in self._items.get(lease_id, {}) if number > after)
            chosen = [self._items[lease_id][number] for number in numbers[:limit]]
        documents = [json.loads(item["document"]["S"]) for item in chosen]
        more = len(numbers) > limit
        return documents, documents[-1]["data"]["sequence"] if more else None

    def purge(self, lease_id: str) -> int:
        with self._lock:
            return len(self._items.pop(lease_id, {}))

    def _newest(self, lease_id: str) -> Iterator[Item]:
        with self._lock:
            items = sorted(self._items.get(lease_id, {}).items(), reverse=True)
        for _, item in items:
            yield item

    def _put(self, item: Item, event_id: str) -> bool:
        lease_id, number = item["lease_id"]["S"], int(item["sequence"]["N"])
        with self._lock:
            held = self._items.setdefault(lease_id, {}).get(number)
            if held is not None and held["event_id"]["S"] != event_id:
                return False
            self._items[lease_id][number] = dict(item)
        return True
