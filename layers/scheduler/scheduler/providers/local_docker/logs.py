"""A container's stdout and stderr from the Engine API (`GET /containers/{id}/logs`), in bounded memory and time.

What the engine sends (seen on Engine 20.10; the framing is the API's since 1.13):

- Asked with `timestamps=true`, every log *message* starts with its stamp (RFC 3339 to the nanosecond, fixed
  width, UTC) and a space: `since` is applied exactly here (the engine's own takes whole seconds).
- The engine's log copier cuts a line longer than 16 KiB into messages of 16 KiB, each stamped (with the first
  piece's time) and only the last ending in `\\n`; a line still open when the output ends has no `\\n` either.
  The pieces of one stream are joined again here, so a long line comes back as the worker wrote it.
- Without a TTY the body is multiplexed: an 8-byte header per message (stream 1 stdout, 2 stderr, 3 the
  engine's own error; then the length) — pieces of stdout and stderr lines may interleave. With a TTY the
  messages come back to back, one stream, lines ending in `\\r\\n`. With stamps on, the first byte tells
  which: a stream number, or a year's first digit.
- `tail=N` counts messages, not lines.

Read one message at a time: only the newest `tail` lines within MAX_LOG_BYTES are kept (the last MAX_LOG_BYTES
of the output: the oldest line kept may be its end, as is a line longer than that), and the reading stops at
the deadline with what it has (`truncated`).
"""

from __future__ import annotations

import io
import math
import struct
from collections import deque
from collections.abc import Iterator
from typing import Any

from urllib3.exceptions import HTTPError

from scheduler.deadline import Deadline
from scheduler.providers.base import ProviderRequestFailed
from scheduler.worker_logs import MAX_LOG_BYTES, NANOS, LogLine, LogLines, LogQuery, parse_rfc3339_ns, select

# The engine's log copier cuts lines at its buffer's size (`defaultBufSize`, 16 KiB).
ENGINE_CHUNK_BYTES = 16 * 1024
# `2026-12-01T14:02:51.649453857Z ` (Go's RFC3339NanoFixed, UTC, and the space).
STAMP_BYTES = 31
# The engine's tail counts messages: a line's pieces take one message each, so the last `tail` lines within
# MAX_LOG_BYTES take at most `tail` messages plus the full-size pieces that MAX_LOG_BYTES can hold (and one more,
# the piece the bound falls in). Asking for that many never leaves out a line this reader would keep.
EXTRA_MESSAGES = math.ceil(MAX_LOG_BYTES / ENGINE_CHUNK_BYTES) + 1
_HEADER = struct.Struct(">BxxxL")
_SYSTEM_STREAM = 3
_READ_BUFFER_BYTES = 64 * 1024


def read_container_logs(client: Any, reference: str, query: LogQuery, deadline: Deadline) -> LogLines:
    """The container's last `query.tail` lines at or after `query.since_ns`, oldest first.

    `client` is a docker-py APIClient (the driver's EngineClient, bounded by `deadline`); docker.errors.NotFound
    when the container does not exist, APIError for any other refusal. The request is made as docker-py's own
    `logs()` makes it, but the body is read here: docker-py's reader drops which stream a message came from
    (so a line's pieces could not be joined) and turns the socket's timeout off.
    """
    params: dict[str, Any] = {
        "stdout": 1,
        "stderr": 1,
        "timestamps": 1,
        "follow": 0,
        "tail": str(query.tail + EXTRA_MESSAGES),
    }
    if query.since_ns is not None:
        params["since"] = max(1, query.since_ns // NANOS)  # whole seconds at or before; exact below
    response = client._get(client._url("/containers/{0}/logs", reference), params=params, stream=True)
    try:
        client._raise_for_status(response)
        socket = _socket_of(response)
        response.raw.auto_close = False  # urllib3 would close it at its end, under the buffered reader's feet
        collected = collect(response.raw, query.tail, deadline, before_read=lambda: _bound(socket, deadline))
    finally:
        response.close()  # unread output is dropped with the connection
    return LogLines(select(collected, query), truncated=collected.truncated)


def collect(body: Any, tail: int, deadline: Deadline, before_read: Any = None) -> LogLines:
    """Every line of a logs body (a raw, unbuffered stream: multiplexed or TTY) as `Lines` keeps them; stops
    early at `deadline`. `before_read` runs before each message is read (to bound the socket's wait)."""
    lines = Lines(tail)
    reader = io.BufferedReader(body, _READ_BUFFER_BYTES)
    try:
        first = reader.peek(1)[:1]
        lines.tty = bool(first) and first not in (b"\x00", b"\x01", b"\x02", b"\x03")
        for stream, message in messages(reader, deadline, tty=lines.tty, before_read=before_read):
            lines.add(stream, message)
    except (OSError, HTTPError) as error:
        if not deadline.expired:
            raise ProviderRequestFailed(f"the Docker host broke off the logs: {error}") from error
        lines.truncated = True
    if deadline.expired:
        lines.truncated = True
    return lines.finish()


def messages(
    reader: io.BufferedReader, deadline: Deadline, *, tty: bool, before_read: Any = None
) -> Iterator[tuple[int, bytes]]:
    """(stream, message) as the engine sent them, until the body ends or the deadline passes."""
    while not deadline.expired:
        if before_read is not None:
            before_read()
        if tty:
            stamp = reader.read(STAMP_BYTES)
            if not stamp:
                return
            text = b"" if stamp.endswith(b"\n") else reader.readline(ENGINE_CHUNK_BYTES)
            yield 1, stamp + text
            continue
        header = reader.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        stream, length = _HEADER.unpack(header)
        message = reader.read(length)
        if len(message) < length:
            return  # cut off mid-message: what came before stands
        yield stream, message


class _Open:
    """A line whose pieces are still coming: its time (the first piece's), and its newest MAX_LOG_BYTES."""

    __slots__ = ("at_ns", "cut", "text")

    def __init__(self, at_ns: int) -> None:
        self.at_ns = at_ns
        self.text = bytearray()
        self.cut = False

    def extend(self, piece: bytes) -> None:
        self.text += piece
        if len(self.text) > 2 * MAX_LOG_BYTES:  # trimmed now and then, so each byte is copied a bounded number of times
            self._trim()

    def _trim(self) -> None:
        if len(self.text) > MAX_LOG_BYTES:
            del self.text[: len(self.text) - MAX_LOG_BYTES]
            self.cut = True

    def line(self, *, tty: bool, source: str | None = None) -> LogLine:
        if self.text.endswith(b"\n"):
            del self.text[-1:]
            if tty and self.text.endswith(b"\r"):  # the terminal's line end, not the worker's
                del self.text[-1:]
        self._trim()
        start = 0
        if self.cut:  # the head was left out, maybe mid-character: start at the next whole one
            while start < min(4, len(self.text)) and 0x80 <= self.text[start] < 0xC0:
                start += 1
        return LogLine(self.at_ns, self.text[start:].decode("utf-8", "replace"), source)


class Lines:
    """The newest `tail` lines within MAX_LOG_BYTES, from stamped messages, a long line's pieces joined."""

    def __init__(self, tail: int) -> None:
        self._kept: deque[LogLine] = deque()
        self._tail = max(0, tail)
        self._size = 0
        self._open: dict[int, _Open] = {}
        self._last_ns = 0
        self.tty = False
        self.truncated = False

    def add(self, stream: int, message: bytes) -> None:
        if stream == _SYSTEM_STREAM:  # the engine's own complaint, unstamped ("Error grabbing logs: ...")
            text = message.decode("utf-8", "replace").rstrip("\n")
            self._keep(LogLine(self._last_ns, text, "system"), cut=False)
            return
        at_ns, piece = _unstamp(message)
        self._last_ns = at_ns or self._last_ns
        line = self._open.get(stream)
        if line is None:
            line = self._open[stream] = _Open(at_ns)
        line.extend(piece)
        if piece.endswith(b"\n"):
            del self._open[stream]
            self._keep(line.line(tty=self.tty), cut=line.cut)

    def finish(self) -> LogLines:
        """What was kept, oldest first by when each line began (lines still open included)."""
        for line in self._open.values():
            self._keep(line.line(tty=self.tty), cut=line.cut)
        self._open.clear()
        return LogLines(sorted(self._kept, key=lambda line: line.at_ns), truncated=self.truncated)

    def _keep(self, line: LogLine, *, cut: bool) -> None:
        self.truncated = self.truncated or cut
        self._kept.append(line)
        self._size += len(line.text)
        while len(self._kept) > self._tail:  # older than `tail` asks for: not a truncation
            self._size -= len(self._kept.popleft().text)
        while self._size > MAX_LOG_BYTES:  # the last MAX_LOG_BYTES of the output: the oldest line kept is cut
            self.truncated = True
            oldest, excess = self._kept[0], self._size - MAX_LOG_BYTES
            if len(oldest.text) > excess:
                self._kept[0] = oldest._replace(text=oldest.text[excess:])
                self._size -= excess
            else:
                self._size -= len(self._kept.popleft().text)


def _unstamp(message: bytes) -> tuple[int, bytes]:
    """(time, text) of a stamped message; (0, message) when it carries no stamp."""
    stamp, space, _ = message[:STAMP_BYTES].partition(b" ")
    at_ns = parse_rfc3339_ns(stamp.decode("ascii", "replace")) if space else None
    if at_ns is None:
        return 0, message
    return at_ns, message[len(stamp) + 1 :]


def _socket_of(response: Any) -> Any:
    """The socket under a streamed answer, to bound each read by the deadline (None if it cannot be reached)."""
    sock = getattr(getattr(getattr(getattr(response.raw, "_fp", None), "fp", None), "raw", None), "_sock", None)
    return sock if hasattr(sock, "settimeout") else None


def _bound(socket: Any, deadline: Deadline) -> None:
    left = deadline.remaining()
    if socket is not None and math.isfinite(left):
        socket.settimeout(max(0.01, left))
