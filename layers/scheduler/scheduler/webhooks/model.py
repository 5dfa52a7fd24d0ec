"""A webhook as the registry keeps it and `GET /v1/webhooks` shows it (never its secret), and the request that
adds one (`POST /v1/webhooks`), validated by openapi.yaml's rules (`scheduler.wire`)."""

from __future__ import annotations

import secrets
from typing import NamedTuple, Self

from scheduler import wire
from scheduler.events.model import EventType, format_epoch
from scheduler.inputs import fields_of

# How many webhooks one owner may have: each event of the owner's is sent to each of them.
MAX_PER_OWNER = 20


def new_webhook_id() -> str:
    return "wh_" + secrets.token_hex(16)


class WebhookRecord(NamedTuple):
    """One webhook: where an owner's events go (`events`: the types it takes)."""

    webhook_id: str
    url: str
    events: tuple[str, ...]
    owner_id: str
    created_at: int  # epoch seconds
    created_by: str

    def takes(self, event_type: str) -> bool:
        return event_type in self.events

    def wire(self) -> dict[str, object]:
        """As openapi.yaml's Webhook shows it."""
        return {
            "id": self.webhook_id,
            "url": self.url,
            "events": list(self.events),
            "owner_id": self.owner_id,
            "created_at": format_epoch(self.created_at),
            "created_by": self.created_by,
        }


class WebhookRequest(NamedTuple):
    """Body of `POST /v1/webhooks` (`events` absent: every type)."""

    url: str
    events: tuple[str, ...]
    owner_id: str | None = None

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise."""
        rules = wire.WEBHOOK_REQUEST
        body = fields_of(data, "request body", rules)
        url = body.text("url", rules["url"])
        events = body.text_list("events", rules["events"])
        known = {kind.value for kind in EventType}
        for index, name in enumerate(events or ()):
            if name not in known:
                choices = " or ".join(f"'{kind.value}'" for kind in EventType)
                body.problem(f"events.{index}", f"Input should be {choices}")
        owner_id = body.text("owner_id", rules["owner_id"])
        body.check("request body")
        assert url is not None  # noqa: S101 - check() refused a missing one  # nosec B101
        chosen = tuple(kind.value for kind in EventType if events is None or kind.value in events)
        return cls(url=url, events=chosen, owner_id=owner_id)


class WebhooksQuery(NamedTuple):
    """Query of `GET /v1/webhooks`."""

    owner_id: str | None = None

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        rules = wire.LIST_WEBHOOKS_QUERY
        query = fields_of(data, "query", rules)
        owner_id = query.text("owner_id", rules["owner_id"])
        query.check("query")
        return cls(owner_id=owner_id)


def webhook_id(value: str) -> str | None:
    """A `{webhook_id}` path parameter, if it can name a webhook (None: it names none)."""
    return value if len(value) == 35 and value.startswith("wh_") and _hex(value[3:]) else None


def _hex(text: str) -> bool:
    return all(char in "0123456789abcdef" for char in text)
