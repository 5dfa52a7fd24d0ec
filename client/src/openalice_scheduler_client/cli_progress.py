"""Progress on stderr while `leasectl` waits: a spinner during a call, and the lease's state while its
worker starts. Animated in place on a terminal; elsewhere silent (spinner) or one line per change."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from .cli_style import CLEAR_EOL, isatty
from .models import Lease


@contextmanager
def spinner(message: str, stream: TextIO) -> Iterator[None]:
    """Animate `message` on `stream` while the block runs, only when `stream` is a terminal."""
    if not isatty(stream):
        yield
        return
    encoding = (getattr(stream, "encoding", None) or "ascii").lower()
    frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if encoding.replace("-", "") == "utf8" else "|/-\\"
    done = threading.Event()
    started = time.monotonic()

    def spin() -> None:
        for frame in itertools.cycle(frames):
            stream.write(f"\r{frame} {message} {time.monotonic() - started:.0f}s{CLEAR_EOL}")
            stream.flush()
            if done.wait(0.1):
                return

    thread = threading.Thread(target=spin, name="leasectl-spinner", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        stream.write(f"\r{CLEAR_EOL}")
        stream.flush()


def describe_wait(lease: Lease | None, elapsed: float, *, reason: bool = True) -> str:
    """One progress line: the lease's state (a queued one's place, and with `reason` what it waits for) and the
    time waited so far."""
    if lease is None:
        return f"waiting for the worker… {elapsed:.0f}s"
    if lease.is_queued:
        state = "queued" if lease.queue_position is None else f"queued at position {lease.queue_position}"
        if reason and lease.queue_reason:
            state += f" ({lease.queue_reason})"
    elif lease.is_ready:
        state = "worker ready"
    elif lease.is_starting:
        state = f"{lease.status}, worker starting"
    else:
        state = lease.status
    return f"lease {lease.lease_id}: {state} ({elapsed:.0f}s)"


def describe_admission(lease: Lease, elapsed: float) -> str:
    """The line marking a queued lease's admission, with how long it waited in the queue when known."""
    waited = ""
    if lease.admitted_at is not None and lease.queued_at is not None:
        waited = f" after {(lease.admitted_at - lease.queued_at).total_seconds():.0f}s in the queue"
    return f"lease {lease.lease_id}: admitted{waited} ({elapsed:.0f}s)"


class WaitProgress:
    """Progress of a wait on `stream`: redrawn in place every fraction of a second on a terminal, one line
    per change of state otherwise (a queued lease's place counts as its state). Leaving the queue is marked by
    a line of its own on both."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = isatty(stream)
        self._lease: Lease | None = None
        self._started = time.monotonic()
        self._last_state: tuple[str, str, int | None] | None = None
        self._last_reason: str | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WaitProgress:
        if self._tty:
            self._thread = threading.Thread(target=self._redraw, name="leasectl-wait", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            with self._lock:
                self._draw()
                self._stream.write("\n")
                self._stream.flush()

    def update(self, lease: Lease, elapsed: float) -> None:
        """A new answer: remember it; without a terminal, print it when its state changed."""
        with self._lock:
            was_queued = self._lease is not None and self._lease.is_queued
            self._lease = lease
            if was_queued and not lease.is_queued and lease.admitted_at is not None:
                clear = "\r" + CLEAR_EOL if self._tty else ""
                self._stream.write(clear + describe_admission(lease, elapsed) + "\n")
            state = (lease.status, lease.worker_state, lease.queue_position)
            if not self._tty and state != self._last_state:
                reason = lease.queue_reason != self._last_reason
                self._stream.write(describe_wait(lease, elapsed, reason=reason) + "\n")
            self._stream.flush()
            self._last_state = state
            self._last_reason = lease.queue_reason

    def _redraw(self) -> None:
        while not self._done.wait(0.2):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        self._stream.write("\r" + describe_wait(self._lease, time.monotonic() - self._started) + CLEAR_EOL)
        self._stream.flush()
