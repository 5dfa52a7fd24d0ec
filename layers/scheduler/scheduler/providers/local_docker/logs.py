"""A container's stdout and stderr from the Engine API (`GET /containers/{id}/logs`), bounded.

Asked with `timestamps=true`, so each line carries the engine's RFC 3339 nanosecond stamp: `since`
is applied exactly here (the engine's own `since` takes whole seconds through docker-py), and a
follower can resume from the last line it saw. Frames are read as they come and only the newest
`tail` lines within MAX_LOG_BYTES are kept, so a chatty worker cannot exhaust the function's memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from scheduler.worker_logs import MAX_LOG_BYTES, NANOS, LogLine, LogQuery, parse_rfc3339_ns, select


def read_container_logs(client: object, reference: str, query: LogQuery) -> list[LogLine]:
    """The container's last `query.tail` lines at or after `query.since_ns`, oldest first.

    `client` is a docker-py APIClient; docker.errors.NotFound when the container does not exist.
    """
    since_seconds = None if query.since_ns is None else max(1, query.since_ns // NANOS)  # docker-py: > 0
    frames = client.logs(  # type: ignore[attr-defined]
        reference,
        stdout=True,
        stderr=True,
        stream=True,
        follow=False,
        timestamps=True,
        tail=query.tail,
        since=since_seconds,
    )
    try:
        return select(_lines(frames, query.tail), query)
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            close()


def _lines(frames: Iterable[bytes], tail: int) -> list[LogLine]:
    kept: deque[LogLine] = deque(maxlen=tail)
    size = 0
    pending = b""
    for frame in frames:
        pending += frame
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            line = _parse(raw)
            if line is not None:
                if len(kept) == kept.maxlen:
                    size -= len(kept[0].text)
                kept.append(line)
                size += len(line.text)
                while size > MAX_LOG_BYTES and len(kept) > 1:
                    size -= len(kept.popleft().text)
    if pending:
        line = _parse(pending)
        if line is not None:
            kept.append(line)
    return list(kept)


def _parse(raw: bytes) -> LogLine | None:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    stamp, _, rest = text.partition(" ")
    at_ns = parse_rfc3339_ns(stamp)
    if at_ns is None:  # not stamped (should not happen with timestamps=true): keep the text, time unknown
        return LogLine(0, text) if text else None
    return LogLine(at_ns, rest)
