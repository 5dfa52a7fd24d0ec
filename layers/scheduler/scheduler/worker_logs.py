"""A worker's output as the logs route serves it: the query, the lines, and the bounds on both.

Times are nanoseconds since the epoch (`at_ns`): Docker stamps lines to the nanosecond, and a
follower that resumes from the last line it saw must compare them exactly. Pure Python.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from scheduler.wire import GET_LEASE_LOGS_QUERY

DEFAULT_TAIL = GET_LEASE_LOGS_QUERY["tail"]["default"]  # openapi.yaml's: what a logs query without `tail` reads
# Lambda answers at most 6 MB (JSON-escaped); a megabyte of text is what a terminal can use.
MAX_LOG_BYTES = 1_048_576
NANOS = 1_000_000_000

# Compiled on first use: most functions import this module for its types and never parse a time.
# ASCII digits (`[0-9]`, as in openapi.yaml's pattern for `since`): `\d` would take any script's.
RFC3339_PATTERN = (
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?"
    r"(?P<zone>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


@functools.cache
def _rfc3339() -> re.Pattern[str]:
    return re.compile(RFC3339_PATTERN)


class LogQuery(NamedTuple):
    """Which lines: the last `tail` of those stamped at or after `since_ns` (None: from the start)."""

    tail: int = DEFAULT_TAIL
    since_ns: int | None = None


class LogLine(NamedTuple):
    """One line a worker wrote (without its newline), when, and from where (`system`: the provider's own)."""

    at_ns: int
    text: str
    source: str | None = None


class LogLines(list[LogLine]):
    """Lines a provider read, oldest first, and whether it left part of the output out (`truncated`): older
    lines or a long line's head past MAX_LOG_BYTES, or the newest lines when its deadline came first."""

    def __init__(self, lines: Iterable[LogLine] = (), *, truncated: bool = False) -> None:
        super().__init__(lines)
        self.truncated = truncated


def parse_rfc3339_ns(text: str) -> int | None:
    """An RFC 3339 date-time (§5.6: `T` or `t`, `Z`, `z` or an offset, a fraction to the nanosecond) as nanoseconds
    since the epoch, else None. Only that form: not the other ISO 8601 forms `datetime.fromisoformat` reads
    (`20260101T000000Z`, `2026-W01-1T00:00:00Z`), nor the space §5.6's note allows in place of `T`, nor any
    surrounding space."""
    match = _rfc3339().fullmatch(text)
    if match is None:
        return None
    zone = match.group("zone").upper()
    try:
        moment = datetime.fromisoformat(
            f"{match.group('date')}T{match.group('time')}{'+00:00' if zone == 'Z' else zone}"
        )
    except ValueError:
        return None
    fraction = (match.group("fraction") or "").ljust(9, "0")
    return int(moment.timestamp()) * NANOS + int(fraction or 0)


def format_ns(at_ns: int) -> str:
    """RFC 3339 UTC to the nanosecond (`2026-11-30T17:00:00.123456789Z`; whole seconds without a fraction)."""
    seconds, nanos = divmod(at_ns, NANOS)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos:09d}Z" if nanos else f"{stamp}Z"


def select(lines: Iterable[LogLine], query: LogQuery) -> list[LogLine]:
    """The lines the query asks for, oldest first: at or after `since_ns`, the last `tail` of them."""
    chosen = [line for line in lines if query.since_ns is None or line.at_ns >= query.since_ns]
    return chosen[-query.tail :] if query.tail > 0 else []


class RenderedLogs(NamedTuple):
    """The text the route answers, and whether older lines were dropped to fit MAX_LOG_BYTES."""

    text: str
    lines: int
    truncated: bool


def render(lines: Sequence[LogLine], *, timestamps: bool, max_bytes: int = MAX_LOG_BYTES) -> RenderedLogs:
    """One line of text per log line (`<RFC 3339> <text>` with timestamps), the newest within `max_bytes`: the
    oldest line answered may be the end of one that does not fit whole. Truncated when anything was left out,
    here or by the provider (`LogLines.truncated`)."""
    kept: list[str] = []
    size = 0
    cut = isinstance(lines, LogLines) and lines.truncated
    for line in reversed(lines):
        prefix = f"{format_ns(line.at_ns)} " if timestamps else ""
        marker = "[system] " if line.source == "system" else ""
        text = f"{prefix}{marker}{line.text}\n"
        cost = _carried(text)
        if size + cost > max_bytes:
            end = _end_within(f"{prefix}{marker}", line.text, max_bytes - size)
            if end is not None:
                kept.append(end)
            cut = True
            break
        kept.append(text)
        size += cost
    kept.reverse()
    return RenderedLogs("".join(kept), len(kept), truncated=cut or len(kept) < len(lines))


def _carried(text: str) -> int:
    # As Lambda carries it: the body travels JSON-escaped (non-ASCII and control characters as \u escapes),
    # which is never shorter than its UTF-8.
    return len(json.dumps(text)) - 2


def _end_within(head: str, body: str, max_bytes: int) -> str | None:
    """`head`, as much of the end of `body` as fits in `max_bytes` with it, and a newline (None: none of it)."""
    keep = min(len(body), max_bytes)
    while keep > 0:
        text = f"{head}{body[len(body) - keep :]}\n"
        excess = _carried(text) - max_bytes
        if excess <= 0:
            return text
        keep -= excess  # every character carried costs at least one byte
    return None
