"""Query strings of the operations routes (`openapi.yaml`): a worker's logs, releasing an owner's leases."""

from __future__ import annotations

from typing import NamedTuple, Self

from scheduler.inputs import fields_of
from scheduler.models import MAX_LABEL_CHARS, MAX_TOKEN_CHARS, OWNER_ID
from scheduler.worker_logs import DEFAULT_TAIL, MAX_TAIL, LogQuery, parse_rfc3339_ns


class LogsQuery(NamedTuple):
    """Query of `GET /v1/lease/{lease_id}/logs`."""

    tail: int = DEFAULT_TAIL
    since: str | None = None
    timestamps: bool = False

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        query = fields_of(data, "query", ("tail", "since", "timestamps"))
        tail = query.whole_number(
            "tail", DEFAULT_TAIL, 1, MAX_TAIL, f"tail must be a whole number from 1 to {MAX_TAIL}", digits=9
        )
        since = query.text("since", max_length=64)
        if since is not None and parse_rfc3339_ns(since) is None:
            query.problem("since", "Value error, since must be an RFC 3339 date-time, e.g. 2026-11-30T17:00:00Z")
        found = cls(tail=tail, since=since, timestamps=query.flag("timestamps", False))
        query.check("query")
        return found

    def log_query(self) -> LogQuery:
        """The lines this query asks a provider for."""
        return LogQuery(tail=self.tail, since_ns=None if self.since is None else parse_rfc3339_ns(self.since))


class OwnerReleaseQuery(NamedTuple):
    """Query of `DELETE /v1/leases`: whose leases (required here, with a lease owner_id's rules), and
    where the previous answer stopped."""

    owner_id: str
    next_token: str | None = None

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        query = fields_of(data, "query", ("owner_id", "next_token"))
        owner_id = query.text("owner_id", max_length=MAX_LABEL_CHARS, pattern=OWNER_ID, required=True)
        next_token = query.text("next_token", max_length=MAX_TOKEN_CHARS)
        query.check("query")
        assert owner_id is not None  # noqa: S101 - check() refused a missing owner  # nosec B101
        return cls(owner_id=owner_id, next_token=next_token)
