"""Docker's logs body, crafted as the engine sends it (Engine 20.10, checked against a real one in
tests/providers/test_local_docker_logs.py): stamped messages, lines over 16 KiB cut into stamped pieces,
multiplexed frames without a TTY and back-to-back messages with one; read in bounded memory and time."""

from __future__ import annotations

import io
import struct
import time
import tracemalloc
from typing import Any

import pytest
import requests
from docker.errors import APIError

from scheduler.deadline import Deadline
from scheduler.models import WorkerKind
from scheduler.providers.base import ProviderRequestFailed, WorkerGone
from scheduler.providers.local_docker.driver import LocalDockerProvider
from scheduler.providers.local_docker.logs import ENGINE_CHUNK_BYTES, collect
from scheduler.worker_logs import MAX_LOG_BYTES, LogQuery, parse_rfc3339_ns, render

STAMP = "2026-12-01T14:02:51.649453857Z"
LATER = "2026-12-01T14:02:52.000000001Z"
AT = parse_rfc3339_ns(STAMP) or 0
STDOUT, STDERR = 1, 2


def frame(stream: int, stamp: str, text: bytes) -> bytes:
    message = f"{stamp} ".encode() + text
    return struct.pack(">BxxxL", stream, len(message)) + message


def pieces(text: bytes, stream: int = STDOUT, stamp: str = STAMP, tty: bool = False) -> bytes:
    """What the engine sends for one line as its log copier cut it: 16 KiB pieces, each stamped."""
    cut = [text[start : start + ENGINE_CHUNK_BYTES] for start in range(0, len(text), ENGINE_CHUNK_BYTES)] or [b""]
    if tty:
        return b"".join(f"{stamp} ".encode() + piece for piece in cut)
    return b"".join(frame(stream, stamp, piece) for piece in cut)


class Trickle(io.RawIOBase):
    """A socket's worth of body: at most `step` bytes a read, each read taking `pause` seconds."""

    def __init__(self, data: bytes, step: int = 7, pause: float = 0.0) -> None:
        self._data, self._at, self._step, self._pause = data, 0, step, pause

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        time.sleep(self._pause)
        chunk = self._data[self._at : self._at + min(self._step, len(buffer))]
        buffer[: len(chunk)] = chunk
        self._at += len(chunk)
        return len(chunk)


def read(body: bytes, tail: int = 200, deadline: Deadline | None = None, step: int = 7) -> Any:
    return collect(Trickle(body, step), tail, deadline or Deadline.within(30))


def test_a_line_docker_cut_into_stamped_pieces_comes_back_as_the_worker_wrote_it() -> None:
    written = b"progress 10%\r" * 4000 + b"done"  # 52 KiB, carriage returns inside
    body = pieces(written + b"\n") + frame(STDOUT, LATER, b"next\n")

    lines = read(body)

    assert [line.text for line in lines] == [written.decode(), "next"]
    assert lines[0].at_ns == AT and not lines.truncated


def test_pieces_of_stdout_and_stderr_lines_that_interleave_are_joined_per_stream() -> None:
    out, err = b"o" * (ENGINE_CHUNK_BYTES + 10), b"e" * (ENGINE_CHUNK_BYTES + 20)
    body = (
        frame(STDOUT, STAMP, out[:ENGINE_CHUNK_BYTES])
        + frame(STDERR, LATER, err[:ENGINE_CHUNK_BYTES])
        + frame(STDOUT, STAMP, out[ENGINE_CHUNK_BYTES:] + b"\n")
        + frame(STDERR, LATER, err[ENGINE_CHUNK_BYTES:] + b"\n")
    )

    assert [line.text for line in read(body)] == [out.decode(), err.decode()]


def test_a_tty_body_of_back_to_back_messages_is_read_the_same_its_terminal_line_ends_dropped() -> None:
    written = b"x" * 40000 + b"\ry"
    body = pieces(written + b"\r\n", tty=True) + f"{LATER} short\r\n".encode()

    assert [line.text for line in read(body)] == [written.decode(), "short"]


def test_a_line_without_a_newline_at_the_end_is_kept() -> None:
    body = frame(STDOUT, STAMP, b"first\n") + pieces(b"z" * 20000)

    assert [line.text for line in read(body)] == ["first", "z" * 20000]


def test_a_line_longer_than_the_bound_keeps_its_end_and_is_marked_truncated() -> None:
    written = b"a" * (3 * MAX_LOG_BYTES) + b"the end"

    lines = read(pieces(written), step=1 << 20)

    assert len(lines) == 1 and lines.truncated
    assert lines[0].text == written[-MAX_LOG_BYTES:].decode()


def test_a_cut_head_never_starts_mid_character() -> None:
    written = "é".encode() * MAX_LOG_BYTES  # two bytes each: the bound falls inside one of them, or not

    (line,) = read(pieces(written + b"!"), step=1 << 20)

    assert "\ufffd" not in line.text and line.text.endswith("é!")


def test_older_lines_past_the_byte_bound_are_left_out_and_that_is_said() -> None:
    line = b"b" * (MAX_LOG_BYTES // 4)
    lines = read(b"".join(pieces(line + b"\n") for _ in range(6)), step=1 << 20)

    assert len(lines) == 4 and lines.truncated


def test_lines_beyond_tail_are_left_out_without_calling_it_truncated() -> None:
    body = b"".join(frame(STDOUT, STAMP, f"line {number}\n".encode()) for number in range(10))

    lines = read(body, tail=3)

    assert [line.text for line in lines] == ["line 7", "line 8", "line 9"] and not lines.truncated


def test_the_engines_own_complaint_is_a_system_line() -> None:
    body = frame(STDOUT, STAMP, b"work\n") + struct.pack(">BxxxL", 3, 23) + b"Error grabbing logs: x\n"

    lines = read(body)

    assert [(line.text, line.source) for line in lines] == [("work", None), ("Error grabbing logs: x", "system")]


def test_reading_30_mb_in_one_line_takes_bounded_memory() -> None:
    body = pieces(b"y" * 30_000_000)  # built before measuring: the socket's bytes are not ours to count
    tracemalloc.start()
    try:
        lines = read(body, tail=5000, step=1 << 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert len(lines[0].text) == MAX_LOG_BYTES and lines.truncated
    assert peak < 8 * MAX_LOG_BYTES, f"peak {peak / 1e6:.1f} MB"


def test_reading_stops_at_the_deadline_and_answers_what_it_has_as_truncated() -> None:
    body = b"".join(frame(STDOUT, STAMP, f"line {number}\n".encode()) for number in range(1000))
    started = time.monotonic()

    lines = collect(Trickle(body, step=64, pause=0.01), 200, Deadline.within(0.3))

    assert time.monotonic() - started < 1.0
    assert 0 < len(lines) < 1000 and lines.truncated and lines[0].text == "line 0"


def test_a_body_broken_off_before_the_deadline_is_a_failed_request() -> None:
    class Broken(Trickle):
        def readinto(self, buffer: Any) -> int:
            if self._at > 100:
                raise ConnectionResetError("reset by peer")
            return super().readinto(buffer)

    body = b"".join(frame(STDOUT, STAMP, f"line {number}\n".encode()) for number in range(100))
    with pytest.raises(ProviderRequestFailed, match="broke off"):
        collect(Broken(body, step=64), 200, Deadline.within(30))


# --- rendering what was read ----------------------------------------------------------------------------------------


def test_a_newest_line_over_the_bound_is_answered_as_its_end_not_as_nothing() -> None:
    rendered = render(read(pieces(b"x" * 300 + b"END")), timestamps=False, max_bytes=100)

    assert rendered.text.endswith("xEND\n") and 90 <= len(rendered.text) <= 100
    assert rendered.truncated and rendered.lines == 1


def test_a_readers_truncation_shows_in_the_answer() -> None:
    lines = read(pieces(b"a" * (2 * MAX_LOG_BYTES)), step=1 << 20)

    assert render(lines, timestamps=False).truncated


# --- the driver: a container being removed -------------------------------------------------------------------------


class _Refusing:
    """An engine client whose logs request is refused with `status` (as the engine refuses a container
    marked for removal: 409 "can not get logs from container which is dead or marked for removal")."""

    host = "tcp://127.0.0.1:2376"
    cert_dir = None
    version_settled = True

    def __init__(self, status: int) -> None:
        self.status = status

    def within(self, deadline: Deadline) -> Any:
        import contextlib

        return contextlib.nullcontext(self)

    def _url(self, path: str, *args: str) -> str:
        return path.format(*args)

    def _get(self, url: str, **kwargs: Any) -> Any:
        response = requests.Response()
        response.status_code = self.status
        response._content = b'{"message": "can not get logs from container which is dead or marked for removal"}'
        return response

    def _raise_for_status(self, response: requests.Response) -> None:
        raise APIError("refused", response=response, explanation=response.json()["message"])


def _driver(status: int) -> LocalDockerProvider:
    images = {WorkerKind.RENDERER: "r", WorkerKind.ANIM: "a"}
    return LocalDockerProvider(connect=lambda: _Refusing(status), images=images, network="none", worker_port=1)  # type: ignore[arg-type,return-value]


def test_the_logs_of_a_container_being_removed_are_gone() -> None:
    with pytest.raises(WorkerGone, match="being removed"):
        _driver(409).logs("lease-1", "c0ffee", LogQuery())


def test_any_other_refusal_of_the_logs_is_a_failed_request() -> None:
    with pytest.raises(ProviderRequestFailed):
        _driver(500).logs("lease-1", "c0ffee", LogQuery())
