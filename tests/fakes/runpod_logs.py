"""Pod logs as RunPod's `GET /v2/pods/{id}/logs` (getPodLogs) serves them: Server-Sent Events. Stdlib only.

Each event is `id: <ts>/<sequence>` then `data: {"ts", "source", "line"}` and a blank line; `ts` is
RFC 3339 to the second (as in RunPod's example) and the 12-digit sequence orders lines within a second, so
an `id` is a resume cursor (`Last-Event-ID`). Backfill: `Last-Event-ID` over `since` over `tail`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

LOG_SOURCES: Final = ("container", "system")
LOG_PARAMETERS: Final = ("source", "tail", "since", "Last-Event-ID")  # getPodLogs' (the last is a header)
TAIL_DEFAULT: Final = 100
TAIL_MAX: Final = 5000
SSE_HEADERS: Final[Mapping[str, str]] = {
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
_EVENT_ID: Final = re.compile(r"(?P<ts>[^/]+)/(?P<seq>\d{1,18})", re.ASCII)
_INTEGER: Final = re.compile(r"[+-]?\d+", re.ASCII)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime | None:
    """An RFC 3339 date-time with its offset, else None (a date alone or a naive time is not one)."""
    if "T" not in text.upper():
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


@dataclass(frozen=True)
class LogEvent:
    """One line a pod printed (`container`) or its host wrote about it (`system`)."""

    at: datetime  # whole seconds, UTC
    seq: int
    source: str
    line: str

    @property
    def id(self) -> str:
        return f"{rfc3339(self.at)}/{self.seq:012d}"

    def sse(self) -> bytes:
        data = json.dumps({"ts": rfc3339(self.at), "source": self.source, "line": self.line}, separators=(",", ":"))
        return f"id: {self.id}\ndata: {data}\n\n".encode()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "ts": rfc3339(self.at), "source": self.source, "line": self.line}


@dataclass
class PodLog:
    """A pod's lines, oldest first; sequence numbers only grow and timestamps never go back."""

    events: list[LogEvent] = field(default_factory=list)

    def append(self, source: str, text: str, at: datetime) -> list[LogEvent]:
        """`text` as one event per line (a multi-line string is several lines, as a log collector sees it)."""
        moment = at.astimezone(UTC).replace(microsecond=0)
        if self.events and moment < self.events[-1].at:
            moment = self.events[-1].at
        added = []
        for line in text.splitlines() or [""]:
            event = LogEvent(moment, (self.events[-1].seq + 1) if self.events else 1, source, line)
            self.events.append(event)
            added.append(event)
        return added

    def shift(self, delta: timedelta) -> None:
        """Every event `delta` earlier (the pod is aged)."""
        self.events = [LogEvent(event.at - delta, event.seq, event.source, event.line) for event in self.events]

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else 0

    def after(self, seq: int, source: str | None) -> list[LogEvent]:
        return [event for event in self.events if event.seq > seq and source in (None, event.source)]

    def backfill(self, query: LogQuery) -> list[LogEvent]:
        """The events a request with this query gets before it streams live ones."""
        chosen = [event for event in self.events if query.source in (None, event.source)]
        if query.after_seq is not None:
            return [event for event in chosen if event.seq > query.after_seq]
        if query.since is not None:
            return [event for event in chosen if event.at >= query.since]
        return chosen[-query.tail :] if query.tail else []


@dataclass(frozen=True)
class LogQuery:
    source: str | None = None
    tail: int = TAIL_DEFAULT
    since: datetime | None = None  # inclusive
    after_seq: int | None = None  # from a `ts/seq` Last-Event-ID: strictly after that event


def parse_log_query(values: Mapping[str, list[str]], last_event_id: str | None) -> LogQuery | list[str]:
    """The query of a logs request, or its violations (RunPod answers those with 422)."""
    errors: list[str] = []
    source: str | None = None
    tail = TAIL_DEFAULT
    since: datetime | None = None
    after_seq: int | None = None
    if "source" in values:
        source = values["source"][-1]
        if source not in LOG_SOURCES:
            errors.append("query.source: value must be one of 'container', 'system'")
    if "tail" in values:
        raw = values["tail"][-1]
        if not _INTEGER.fullmatch(raw):
            errors.append(f"query.tail: got '{raw}', want integer")
        elif int(raw) < 0:
            errors.append(f"query.tail: minimum: got {int(raw)}, want 0")
        elif int(raw) > TAIL_MAX:
            errors.append(f"query.tail: maximum: got {int(raw)}, want {TAIL_MAX}")
        else:
            tail = int(raw)
    if "since" in values:
        since = parse_rfc3339(values["since"][-1])
        if since is None:
            errors.append(f"query.since: '{values['since'][-1]}' is not an RFC 3339 date-time")
    if last_event_id is not None and last_event_id.strip():
        cursor = last_event_id.strip()
        match = _EVENT_ID.fullmatch(cursor)
        if match is not None and parse_rfc3339(match.group("ts")) is not None:
            after_seq = int(match.group("seq"))
        elif parse_rfc3339(cursor) is not None:
            since = parse_rfc3339(cursor)
        else:
            errors.append(f"header.Last-Event-ID: '{cursor}' is neither an event id nor an RFC 3339 date-time")
    if errors:
        return errors
    if after_seq is not None:
        since = None
    return LogQuery(source=source, tail=tail, since=since, after_seq=after_seq)
