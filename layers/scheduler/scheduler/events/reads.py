"""`GET /v1/lease/{lease_id}/events`: the lease's history, read as the lease is (a read of the lease, under the
caller rules of `scheduler.callers.access`), as long as the lease is readable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from scheduler import wire
from scheduler.callers.access import LeaseAction, lease_access
from scheduler.inputs import fields_of
from scheduler.models import _Value

if TYPE_CHECKING:
    from scheduler.callers.model import Caller
    from scheduler.store.port import HistoryPort, LeaseStorePort


class EventsQuery(_Value):
    """Query of `GET /v1/lease/{lease_id}/events`."""

    __slots__ = ("after", "limit")

    def __init__(self, after: int = 0, limit: int = wire.LIST_LEASE_EVENTS_QUERY["limit"]["default"]) -> None:
        self.after = after
        self.limit = limit

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        rules = wire.LIST_LEASE_EVENTS_QUERY
        query = fields_of(data, "query", rules)
        after = query.whole_number("after", rules["after"], digits=10)
        limit = query.whole_number("limit", rules["limit"], digits=4)
        query.check("query")
        return cls(after=after, limit=limit)


def lease_events(
    store: LeaseStorePort, history: HistoryPort, caller: Caller, lease_id: str, header: str | None, query: EventsQuery
) -> tuple[list[dict[str, Any]], int | None]:
    """The lease's events after `query.after` and the number to go on after (LeaseNotFound when the lease is not
    readable, to this caller or at all)."""
    lease = store.get(lease_id)
    lease_access(caller, LeaseAction.READ, lease_id, lease.owner_id, header)
    return history.page(lease_id, query.after, query.limit)
