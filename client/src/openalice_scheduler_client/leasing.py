"""Holding a lease for the length of a `with` block: acquire (waiting through the queue), renew in the background,
watch for a preemption notice, always release."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol, Self

from .errors import Conflict, Forbidden, InvalidRequest, NotFound, Preempting, SchedulerError, Unauthorized
from .models import Lease

logger = logging.getLogger("openalice_scheduler_client")

# Renewal answers that no retry can change: the lease is gone or no longer ours.
PERMANENT_RENEWAL_ERRORS = (NotFound, Forbidden, Unauthorized, Conflict, InvalidRequest)
MIN_RENEW_INTERVAL = 0.05
NOTICE_CHECK_SECONDS = 10.0  # how often a preemptible lease is read for a notice between renewals (by default)

OnPreemption = Callable[[Lease], None]


class LeaseApi(Protocol):
    """What holding a lease needs of a client (`LeaseApi` is one); it keeps this module below it."""

    timeout: float
    retry_deadline: float

    def acquire(
        self,
        kind: str,
        *,
        gpu: str = ...,
        ttl_seconds: int | None = ...,
        owner_id: str | None = ...,
        correlation_id: str | None = ...,
        region: str | None = ...,
        env: Mapping[str, str] | None = ...,
        idempotency_key: str | None = ...,
        queue_seconds: int | None = ...,
        priority: int | None = ...,
        preemptible: bool | None = ...,
    ) -> Lease: ...

    def get(self, lease_id: str, *, wait_ready: int | None = ...) -> Lease: ...

    def renew(self, lease_id: str, *, ttl_seconds: int | None = ..., owner_id: str | None = ...) -> Lease: ...

    def wait_ready(self, lease_id: str, timeout: float = ..., *, lease: Lease | None = ...) -> Lease: ...

    def wait_admitted(self, lease_id: str, timeout: float = ..., *, lease: Lease | None = ...) -> Lease: ...

    def release(self, lease_id: str, *, owner_id: str | None = ...) -> None: ...

    def copy(self, **overrides: Any) -> Self: ...

    def close(self) -> None: ...


class LeaseHandle:
    """What `with client.lease(...) as handle:` yields: the current lease and the renewer's state.

    `lease` is the latest Lease (replaced after every renewal or read); the common fields are also
    properties of the handle. `lease_lost` is set — and `lost` is True, `renewal_error` the cause —
    once the lease can no longer be relied on: a renewal was refused for good (404 the lease has
    ended, 403, 409, …), transient failures went on until `expires_at` passed, or its preemption
    notice ran out (`renewal_error` a `Preempting`). Code in the block should check `handle.lost` (or wait
    on `lease_lost`) before trusting the worker in long loops. `preempt_at` is set once a preemption notice
    is seen: the lease ends then.
    """

    def __init__(self, lease: Lease, on_preemption: OnPreemption | None = None) -> None:
        self._lock = threading.Lock()
        self._lease = lease
        self._on_preemption = on_preemption
        self.preempt_at: datetime | None = None
        self.lease_lost = threading.Event()
        self.renewal_error: BaseException | None = None
        self.renewals = 0

    def __repr__(self) -> str:
        return f"LeaseHandle(lease_id={self.lease_id!r}, expires_at={self.expires_at.isoformat()}, lost={self.lost})"

    @property
    def lease(self) -> Lease:
        """The most recent Lease the service returned (from acquire, the last renewal or read)."""
        with self._lock:
            return self._lease

    @property
    def lost(self) -> bool:
        """True once the lease is lost (see the class doc)."""
        return self.lease_lost.is_set()

    @property
    def lease_id(self) -> str:
        """The lease's id."""
        return self.lease.lease_id

    @property
    def endpoint(self) -> str | None:
        """The worker's endpoint URL (None when the provider gives none)."""
        return self.lease.endpoint

    @property
    def provider(self) -> str:
        """The provider that runs the worker."""
        return self.lease.provider

    @property
    def provider_token(self) -> str | None:
        """The worker's id on its provider (container id / pod id)."""
        return self.lease.provider_token

    @property
    def expires_at(self) -> datetime:
        """When the lease expires unless renewed again."""
        return self.lease.expires_at

    def _replace(self, lease: Lease) -> None:
        with self._lock:
            # A renewal may have landed meanwhile; a lease out of the queue expires by its ttl, not its queued_until.
            if lease.expires_at >= self._lease.expires_at or self._lease.is_queued:
                self._lease = lease
        self._seen(lease)

    def _renewed(self, lease: Lease) -> None:
        with self._lock:
            self._lease = lease
            self.renewals += 1
        self._seen(lease)

    def _seen(self, lease: Lease) -> None:
        """A lease the service answered with: its preemption notice, the first time one shows, is the caller's."""
        with self._lock:
            first = lease.preempt_at is not None and self.preempt_at is None
            if first:
                self.preempt_at = lease.preempt_at
        if first and self._on_preemption is not None:
            try:
                self._on_preemption(lease)
            except Exception:  # the caller's callback must not stop the renewals
                logger.exception("lease %s: the on_preemption callback raised", lease.lease_id)

    def _lose(self, error: BaseException) -> None:
        self.renewal_error = error
        self.lease_lost.set()


class _Renewer(threading.Thread):
    """Renews the lease every `interval` seconds until stopped; retries sooner after transient failures. A
    preemptible lease is also read every `check_every` seconds between renewals, for a preemption notice; once
    one is seen, renewals stop (none may pass it) and the lease is lost at its `preempt_at`."""

    def __init__(
        self,
        client: LeaseApi,
        handle: LeaseHandle,
        ttl_seconds: int,
        owner_id: str | None,
        interval: float,
        check_every: float | None = None,
    ) -> None:
        super().__init__(name=f"lease-renewer-{handle.lease_id[:8]}", daemon=True)
        self._client = client
        self._held = handle
        self._ttl = ttl_seconds
        self._owner = owner_id
        self._interval = interval
        self._check = min(interval, check_every) if check_every else interval
        self._stop_event = threading.Event()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to stop and wait for it (an in-flight renewal finishes first)."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        lease_id = self._held.lease_id
        renew_at = time.monotonic() + self._interval
        while self._held.preempt_at is None:
            if self._stop_event.wait(max(0.0, min(self._check, renew_at - time.monotonic()))):
                return
            if time.monotonic() < renew_at:
                self._read(lease_id)
                continue
            wait = self._renew(lease_id)
            if wait is None:
                return
            renew_at = time.monotonic() + wait
        self._await_preemption(lease_id)

    def _read(self, lease_id: str) -> None:
        try:
            self._held._replace(self._client.get(lease_id))
        except SchedulerError as error:  # the renewals judge whether the lease is lost
            logger.debug("lease %s: reading it for a notice failed (%s)", lease_id, error)

    def _renew(self, lease_id: str) -> float | None:
        """Renew once: the wait until the next renewal, or None when the lease is lost (or the renewer stopped)."""
        try:
            lease = self._client.renew(lease_id, ttl_seconds=self._ttl, owner_id=self._owner)
        except Preempting as notice:
            self._noticed(lease_id, notice)
            if self._held.preempt_at is None:  # a notice without its time: nothing to wait for
                self._held._lose(notice)
                return None
            return 0.0
        except PERMANENT_RENEWAL_ERRORS as error:
            if not self._stop_event.is_set():
                logger.error("lease %s lost: renewal refused (%s)", lease_id, error)
                self._held._lose(error)
            return None
        except Exception as error:  # noqa: BLE001 - transient or unexpected: keep trying until expiry
            if self._stop_event.is_set():
                return None
            left = (self._held.expires_at - datetime.now(UTC)).total_seconds()
            if left <= 0:
                logger.error("lease %s lost: renewals kept failing until it expired (%s)", lease_id, error)
                self._held._lose(error)
                return None
            wait = max(MIN_RENEW_INTERVAL, min(self._interval, left / 4))
            logger.warning("lease %s: renewal failed (%s); retrying in %.1f s", lease_id, error, wait)
            return wait
        self._held._renewed(lease)
        return self._interval

    def _noticed(self, lease_id: str, refusal: Preempting) -> None:
        """A renewal refused for a notice: the lease as it is now (its preempt_at) goes to the handle."""
        try:
            lease = self._client.get(lease_id)
        except SchedulerError:
            lease = Lease.from_wire({**self._held.lease.raw, "preempt_at": refusal.details.get("preempt_at")})
        if lease.preempt_at is None and refusal.preempt_at is not None:
            lease = Lease.from_wire({**lease.raw, "preempt_at": refusal.details.get("preempt_at")})
        self._held._replace(lease)

    def _await_preemption(self, lease_id: str) -> None:
        preempt_at = self._held.preempt_at
        assert preempt_at is not None  # noqa: S101 - the loop above ends only with a notice  # nosec B101
        logger.warning("lease %s has a preemption notice: it ends at %s", lease_id, preempt_at.isoformat())
        if self._stop_event.wait(max(0.0, (preempt_at - datetime.now(UTC)).total_seconds())):
            return
        self._held._lose(
            Preempting(
                f"lease {lease_id} was preempted at its notice's end, {preempt_at.isoformat()}",
                details={"preempt_at": preempt_at.isoformat()},
            )
        )


@contextmanager
def hold(
    client: LeaseApi,
    *,
    kind: str,
    ttl_seconds: int = 600,
    renew_every: float | None = None,
    wait_ready: bool = False,
    ready_timeout: float = 600.0,
    on_preemption: OnPreemption | None = None,
    check_every: float | None = None,
    **acquire_kwargs: Any,
) -> Iterator[LeaseHandle]:
    """Acquire a lease, renew it in a background thread while the block runs, release it on exit.

    A lease that comes back queued (`queue_seconds`) is waited on until it is admitted before the block runs,
    whatever `wait_ready` says (a queued lease has no worker); it is released (cancelled) if it ends in the
    queue (NotAdmitted) or the wait is interrupted. With `wait_ready`, the block runs only once the worker is
    ready (`client.wait_ready`, renewing meanwhile); if it never becomes ready (BootFailed, ReadyTimeout, or
    an interrupt) the lease is released and the error raised, so a worker that failed to boot is never left
    behind. `ready_timeout` bounds each wait outside the queue.

    Renewal runs every `renew_every` seconds (default: a third of the ttl) with the same ttl and
    owner as the acquire, on a copy of `client` (its own HTTP session). A preemptible lease is also read every
    `check_every` seconds (default 10, at most the renewal period) for a preemption notice: the first notice
    seen (by a read or a refused renewal) calls `on_preemption(lease)` once, on the renewer's thread (keep it
    short; what it raises is logged), sets `handle.preempt_at`, and stops the renewals; at `preempt_at` the
    handle is lost. On exit — normal, exception or KeyboardInterrupt — the renewer is stopped and joined,
    then the lease is released:

    - a release answered 404 (the lease already ended, e.g. it was lost) is logged, never raised;
    - when the block raised, any release failure is logged and noted on the block's exception
      (`add_note`), which propagates unchanged;
    - when the block finished normally, another release failure is raised (the worker may still
      be running until the lease expires).
    """
    owner_id = acquire_kwargs.get("owner_id")
    lease = client.acquire(kind, ttl_seconds=ttl_seconds, **acquire_kwargs)
    handle = LeaseHandle(lease, on_preemption)
    interval = max(MIN_RENEW_INTERVAL, renew_every if renew_every is not None else max(lease.ttl_seconds, 1) / 3)
    # The renewer retries a failed renewal itself (sooner, until expiry), so one renewal's own HTTP
    # retries are kept within about one period.
    renew_client = client.copy(retry_deadline=min(client.retry_deadline, max(interval, 1.0)))
    check = (check_every or NOTICE_CHECK_SECONDS) if lease.preemptible else None
    renewer = _Renewer(renew_client, handle, ttl_seconds, owner_id, interval, check)
    try:
        if lease.is_queued:  # a queued lease cannot be renewed: the renewals start once it is admitted
            handle._replace(client.wait_admitted(lease.lease_id, ready_timeout, lease=lease))
        renewer.start()
        if wait_ready:
            handle._replace(client.wait_ready(lease.lease_id, ready_timeout, lease=handle.lease))
        yield handle
    except BaseException as block_error:
        _stop(renewer, renew_client)
        try:
            _release(client, handle, owner_id)
        except Exception as release_error:  # noqa: BLE001 - must not mask the block's exception
            logger.error("lease %s: release after a failed block did not succeed: %s", handle.lease_id, release_error)
            block_error.add_note(f"(also: releasing lease {handle.lease_id} failed: {release_error})")
        raise
    else:
        _stop(renewer, renew_client)
        _release(client, handle, owner_id)


def _stop(renewer: _Renewer, renew_client: LeaseApi) -> None:
    # An in-flight renewal is given one request timeout to finish; a daemon thread still stuck
    # after that can only end in an answer it ignores (its stop flag is set).
    renewer.stop(timeout=renew_client.timeout + 1.0)
    renew_client.close()


def _release(client: LeaseApi, handle: LeaseHandle, owner_id: str | None) -> None:
    try:
        client.release(handle.lease_id, owner_id=owner_id)
    except NotFound as ended:
        level = logging.WARNING if handle.lost else logging.INFO
        logger.log(level, "lease %s had already ended when released (%s)", handle.lease_id, ended)
