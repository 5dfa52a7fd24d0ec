"""A pod's logs from RunPod's `GET /v2/pods/{id}/logs` (getPodLogs), which streams Server-Sent Events.

The stream sends the backfill at once and then stays open for new lines, so the backfill is taken as
complete when `tail` lines have arrived, or when the stream has been quiet for IDLE_SECONDS. RunPod's
`since` is whole seconds and makes it ignore `tail`: both are applied again here, exactly.
Each event's `data` is `{"ts", "source", "line"}`; `source` is `container` or `system` (the host's).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import requests

from scheduler.deadline import Deadline
from scheduler.models import format_time
from scheduler.providers.base import ProviderRequestFailed, WorkerGone
from scheduler.worker_logs import MAX_LOG_BYTES, NANOS, LogLine, LogQuery, parse_rfc3339_ns, select

IDLE_SECONDS = 1.0
CONNECT_SECONDS = 3.05
FIRST_BYTE_SECONDS = 10.0
# At most this much of the stream is read in one call, whatever RunPod sends.
MAX_STREAM_BYTES = 8 * MAX_LOG_BYTES


def pod_log_request(pod_id: str, query: LogQuery) -> tuple[str, dict[str, str]]:
    """The path and query parameters of getPodLogs for this query."""
    params = {"tail": str(query.tail)}
    if query.since_ns is not None:
        params = {"since": format_time_seconds(query.since_ns)}
    return f"/v2/pods/{pod_id}/logs", params


def format_time_seconds(at_ns: int) -> str:
    """RFC 3339 to the whole second at or before `at_ns` (RunPod's `since` is inclusive)."""
    return format_time(datetime.fromtimestamp(max(0, at_ns // NANOS), UTC))


def busy_for(response: requests.Response, attempt: int, backoff: Callable[[int], float]) -> float | None:
    """Seconds to wait before asking again (429: its Retry-After; 5xx: `backoff`), else None: read this answer."""
    if response.status_code != 429 and response.status_code < 500:
        return None
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return backoff(attempt)


def read_pod_logs(response: requests.Response, pod_id: str, query: LogQuery, deadline: Deadline) -> list[LogLine]:
    """The lines of an answer to getPodLogs (which the caller closes), per the query."""
    if response.status_code == 404:
        raise WorkerGone(f"RunPod no longer knows pod {pod_id}")
    if response.status_code != 200:
        raise ProviderRequestFailed(f"RunPod would not serve the logs of pod {pod_id}: HTTP {response.status_code}")
    _quiet_after(response, IDLE_SECONDS)
    wanted = query.tail if query.since_ns is None else None
    kept: deque[LogLine] = deque(maxlen=query.tail)
    for line in _events(response, deadline):
        kept.append(line)
        if wanted is not None and len(kept) >= wanted:
            break
    return select(kept, query)


def _events(response: requests.Response, deadline: Deadline) -> Iterator[LogLine]:
    buffer = b""
    read = 0
    chunks = response.iter_content(chunk_size=None)
    while read < MAX_STREAM_BYTES and not deadline.expired:
        try:
            chunk = next(chunks, None)
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError):
            return  # quiet for IDLE_SECONDS (a read timeout) or closed: the backfill is complete
        if chunk is None:
            return
        read += len(chunk)
        buffer += chunk.replace(b"\r\n", b"\n")
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            line = _parse_event(event)
            if line is not None:
                yield line


def _parse_event(event: bytes) -> LogLine | None:
    data = b"\n".join(field[5:].lstrip(b" ") for field in event.split(b"\n") if field.startswith(b"data:"))
    if not data:
        return None
    try:
        payload: Any = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    at_ns = parse_rfc3339_ns(str(payload.get("ts", ""))) or 0
    source = payload.get("source")
    return LogLine(at_ns, str(payload.get("line", "")), str(source) if source is not None else None)


def _quiet_after(response: requests.Response, seconds: float) -> None:
    # The backfill comes at once; after it the stream only waits. A shorter read timeout on this
    # connection (urllib3 2 exposes it while the body is unread) ends the read after a quiet spell.
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def first_byte_timeout(deadline: Deadline) -> tuple[float, float]:
    """Connect and first-answer timeouts for getPodLogs, within the caller's deadline."""
    left = max(0.05, deadline.remaining())
    return min(CONNECT_SECONDS, left), min(FIRST_BYTE_SECONDS, left)
