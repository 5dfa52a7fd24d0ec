"""Query strings of the operations routes (`openapi.yaml`): a worker's logs, releasing an owner's leases, the queue."""

from __future__ import annotations

from typing import NamedTuple, Self

from scheduler import wire
from scheduler.inputs import fields_of
from scheduler.worker_logs import DEFAULT_TAIL, LogQuery, parse_rfc3339_ns

_NOT_RFC3339 = "Value error, since must be an RFC 3339 date-time, e.g. 2026-11-30T17:00:00Z"


class LogsQuery(NamedTuple):
    """Query of `GET /v1/lease/{lease_id}/logs`."""

    tail: int = DEFAULT_TAIL
    since: str | None = None
    timestamps: bool = wire.GET_LEASE_LOGS_QUERY["timestamps"]["default"] == "true"

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        rules = wire.GET_LEASE_LOGS_QUERY
        query = fields_of(data, "query", rules)
        tail = query.whole_number("tail", rules["tail"], digits=9)
        # The pattern is RFC 3339's grammar; `format: date-time` (a day and time that exist) is the reader's.
        since = query.text("since", rules["since"], mismatch=_NOT_RFC3339)
        if since is not None and parse_rfc3339_ns(since) is None:
            query.problem("since", _NOT_RFC3339)
        found = cls(tail=tail, since=since, timestamps=query.flag("timestamps", rules["timestamps"]))
        query.check("query")
        return found

    def log_query(self) -> LogQuery:
        """The lines this query asks a provider for."""
        return LogQuery(tail=self.tail, since_ns=None if self.since is None else parse_rfc3339_ns(self.since))


class OwnerReleaseQuery(NamedTuple):
    """Query of `DELETE /v1/leases`: whose leases (with a lease owner_id's rules; None: the caller's own), and
    where the previous answer stopped."""

    owner_id: str | None = None
    next_token: str | None = None

    @classmethod
    def parse(cls, data: object, *, owner_required: bool = False) -> Self:
        """From the query string's parameters, as openapi.yaml says; InvalidRequest naming each problem otherwise.
        `owner_required`: `secret` mode's rule besides (no caller has owners of its own there), one more problem."""
        rules = wire.RELEASE_OWNER_LEASES_QUERY
        query = fields_of(data, "query", rules)
        owner_rule = rules["owner_id"].copy()
        owner_rule["required"] = owner_required
        owner_id = query.text("owner_id", owner_rule)
        next_token = query.text("next_token", rules["next_token"])
        query.check("query")
        return cls(owner_id=owner_id, next_token=next_token)


class QueueQuery(NamedTuple):
    """Query of `GET /v1/queue`: one owner's queued leases (None: every owner the caller reads), the first `limit`."""

    owner_id: str | None = None
    limit: int = wire.GET_QUEUE_QUERY["limit"]["default"]

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        rules = wire.GET_QUEUE_QUERY
        query = fields_of(data, "query", rules)
        found = cls(
            owner_id=query.text("owner_id", rules["owner_id"]),
            limit=query.whole_number("limit", rules["limit"], digits=10),
        )
        query.check("query")
        return found
