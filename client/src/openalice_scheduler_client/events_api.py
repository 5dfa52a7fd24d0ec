"""The client's lifecycle events and webhooks methods (`SchedulerClient` has them)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from .errors import InvalidResponse
from .events import CreatedWebhook, LeaseEvent, Webhook
from .transport import Transport

MAX_EVENTS_PAGE = 1000


class EventsApi(Transport):
    """`GET /v1/lease/{id}/events` and the `/v1/webhooks` routes."""

    def events_page(
        self, lease_id: str, *, after: int = 0, limit: int | None = None
    ) -> tuple[list[LeaseEvent], int | None]:
        """One page of the lease's events numbered after `after`, and the number to continue after (None: done)."""
        params = {"after": str(after), **({"limit": str(limit)} if limit is not None else {})}
        body = self._expect(self._send("GET", f"/v1/lease/{quote(lease_id, safe='')}/events", params=params), dict)
        try:
            events = [LeaseEvent.from_wire(item) for item in body["events"]]
        except (KeyError, TypeError, ValueError) as bad:
            raise InvalidResponse(f"events answer is malformed: {bad}", status=200, body=body) from None
        following = body.get("next_after")
        return events, following if isinstance(following, int) else None

    def events(self, lease_id: str, *, after: int = 0) -> builtins.list[LeaseEvent]:
        """Every event of the lease numbered after `after` (0: all), in order: its history, with each event's actor
        and reason. Raises NotFound when the lease is not readable (unknown, past its retention, another owner's)."""
        found: builtins.list[LeaseEvent] = []
        following: int | None = after
        while following is not None:
            page, following = self.events_page(lease_id, after=following, limit=MAX_EVENTS_PAGE)
            found += page
        return found

    def add_webhook(
        self, url: str, *, events: Sequence[str] | None = None, owner_id: str | None = None
    ) -> CreatedWebhook:
        """`POST /v1/webhooks`: send the owner's lease events (those of `events`; None: every type) to `url`. The
        answer's `secret` is shown this once: keep it to verify deliveries. In secret mode `owner_id` is required
        (and sent as `X-Lease-Owner` too). A URL that is no safe target raises InvalidRequest naming why."""
        body: dict[str, Any] = {"url": url}
        if events is not None:
            body["events"] = builtins.list(events)
        if owner_id is not None:
            body["owner_id"] = owner_id
        headers = {"X-Lease-Owner": owner_id} if owner_id is not None else {}
        answer = self._expect(self._send("POST", "/v1/webhooks", body=body, headers=headers), dict)
        try:
            return CreatedWebhook(Webhook.from_wire(answer["webhook"]), str(answer["secret"]))
        except (KeyError, ValueError) as bad:
            raise InvalidResponse(f"webhook answer is malformed: {bad}", status=201, body=answer) from None

    def webhooks(self, *, owner_id: str | None = None) -> builtins.list[Webhook]:
        """`GET /v1/webhooks`: the webhooks this caller may see (of `owner_id`, when given)."""
        params = {"owner_id": owner_id} if owner_id is not None else {}
        body = self._expect(self._send("GET", "/v1/webhooks", params=params), dict)
        try:
            return [Webhook.from_wire(item) for item in body["webhooks"]]
        except (KeyError, TypeError, ValueError) as bad:
            raise InvalidResponse(f"webhooks answer is malformed: {bad}", status=200, body=body) from None

    def remove_webhook(self, webhook_id: str, *, owner_id: str | None = None) -> None:
        """`DELETE /v1/webhooks/{id}` (in secret mode `owner_id`, the webhook's owner, as `X-Lease-Owner`)."""
        headers = {"X-Lease-Owner": owner_id} if owner_id is not None else {}
        self._send("DELETE", f"/v1/webhooks/{quote(webhook_id, safe='')}", headers=headers)
