"""The webhooks registry in memory (`store/webhooks.py`'s, for the use cases' fast tests)."""

from __future__ import annotations

import threading

from scheduler.webhooks.model import WebhookRecord


class MemoryWebhooks:
    """Webhooks by id with their secrets, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._webhooks: dict[str, tuple[WebhookRecord, str]] = {}

    def create(self, record: WebhookRecord, secret: str) -> None:
        with self._lock:
            if record.webhook_id in self._webhooks:
                raise KeyError(record.webhook_id)
            self._webhooks[record.webhook_id] = (record, secret)

    def get(self, webhook_id: str) -> tuple[WebhookRecord, str] | None:
        with self._lock:
            return self._webhooks.get(webhook_id)

    def find(self, webhook_id: str) -> WebhookRecord | None:
        with self._lock:
            found = self._webhooks.get(webhook_id)
        return None if found is None else found[0]

    def by_owner(self, owner_id: str) -> list[WebhookRecord]:
        with self._lock:
            found = [record for record, _ in self._webhooks.values() if record.owner_id == owner_id]
        return sorted(found, key=lambda record: record.webhook_id)

    def every(self) -> list[WebhookRecord]:
        with self._lock:
            found = [record for record, _ in self._webhooks.values()]
        return sorted(found, key=lambda record: (record.owner_id, record.created_at))

    def delete(self, webhook_id: str) -> None:
        with self._lock:
            self._webhooks.pop(webhook_id, None)
