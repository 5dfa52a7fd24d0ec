"""`SchedulerClient`: the lease API over HTTP, with bounded retries and typed results and errors.

How requests are sent and retried is `transport.Transport`'s (its module doc states the policy).
`acquire` always sends an `Idempotency-Key` (a uuid4 made once per call, or the caller's own) and the
identical body on every attempt, so a retried acquire returns the lease the first attempt made instead
of making a second worker.
"""

from __future__ import annotations

import builtins
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import date
from typing import Any
from urllib.parse import quote

from .callers import Callers
from .credentials import Credential
from .errors import InvalidResponse, NotFound, SchedulerError, error_from_response
from .events_api import EventsApi
from .leasing import LeaseHandle, OnPreemption, hold
from .models import Lease
from .operations import NotReleased, OwnerRelease, WorkerLogs
from .transport import DEFAULT_URL, Transport, _Outcome
from .transport import _is_connect_failure as _is_connect_failure  # tests/client reach it through this module
from .version import __version__
from .waiting import MAX_WAIT_READY_SECONDS as MAX_WAIT_READY_SECONDS  # tests hold it to openapi.yaml here
from .waiting import wait_for

__all__ = ["DEFAULT_URL", "SchedulerClient", "__version__", "lease"]

logger = logging.getLogger("openalice_scheduler_client")
logger.addHandler(logging.NullHandler())  # a library logs only where its application configures logging


class SchedulerClient(EventsApi, Transport):
    """A client of the scheduler's lease API (openapi.yaml).

    `url` defaults to `$SCHEDULER_URL` or `http://127.0.0.1:3000`. One credential, as the service's AUTH_MODE
    expects: `secret` (`X-Internal-Secret`, default `$INTERNAL_SECRET`), `token` (`Authorization: Bearer`, default
    `$OPENALICE_SCHEDULER_TOKEN`), or `auth="iam"`: SigV4 from botocore's default credential chain (`profile`,
    `region`; the `iam` extra). Arguments beat the environment and two that disagree are a CredentialError (the
    rules: `openalice_scheduler_client.auth`). `timeout` is per HTTP attempt; `retries`,
    `backoff`, `max_backoff` and `retry_deadline` bound the retries described in the module doc.
    Pass a `requests.Session` to share connections or adapters; otherwise the client owns one and
    `close()` (or leaving `with SchedulerClient() as client:`) closes it. Methods are safe to call
    from one thread at a time per client; `lease()` gives its renewal thread its own session.
    """

    # --- the API ---------------------------------------------------------------------------------

    @property
    def callers(self) -> Callers:
        """The callers registry: `add`, `list`, `rotate`, `remove` (operators only)."""
        return Callers(self)

    def health(self) -> dict[str, Any]:
        """`GET /health`: the service's health document (no secret needed)."""
        body = self._expect(self._send("GET", "/health"), dict)
        return dict(body)

    def acquire(
        self,
        kind: str,
        *,
        gpu: str = "none",
        ttl_seconds: int | None = None,
        owner_id: str | None = None,
        correlation_id: str | None = None,
        region: str | None = None,
        env: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        max_cost_per_hour: float | None = None,
        queue_seconds: int | None = None,
        priority: int | None = None,
        preemptible: bool | None = None,
    ) -> Lease:
        """`POST /v1/lease`: a worker of `kind` (`renderer`/`anim`) and `gpu` class, leased for `ttl_seconds`.

        With `queue_seconds` (1–86400), a request that cannot be served now waits in the queue that long: the
        lease comes back `queued` (`queue_position`, `queue_reason`, `queued_until`; no worker yet), and
        `wait_ready` waits through the queue. `priority` (0–100, service default 50) orders the queue and may
        preempt `preemptible` leases of lower priority; `preemptible` lets higher priorities preempt this one.

        Every attempt of one call carries the same `Idempotency-Key` (`idempotency_key`, or a uuid4
        made for this call) and the same body, so retries never make a second worker. Raises
        InvalidRequest, QuotaExceeded, ProviderError, NoCapacity, Conflict, … (see `errors`).
        """
        body: dict[str, Any] = {"kind": kind, "gpu": gpu}
        optional = {
            "ttl_seconds": ttl_seconds,
            "owner_id": owner_id,
            "correlation_id": correlation_id,
            "region": region,
            "max_cost_per_hour": max_cost_per_hour,
            "queue_seconds": queue_seconds,
            "priority": priority,
            "preemptible": preemptible,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        if env is not None:
            body["env"] = dict(env)
        key = idempotency_key or str(uuid.uuid4())
        outcome = self._send("POST", "/v1/lease", body=body, headers={"Idempotency-Key": key})
        return self._lease(outcome)

    def get(self, lease_id: str, *, wait_ready: int | None = None) -> Lease:
        """`GET /v1/lease/{id}`: any lease within the retention period, ended ones with their final status.

        `wait_ready` (0–25 s): the service answers as soon as a starting worker is ready, or after that long.
        """
        params = None if wait_ready is None else {"wait_ready": str(wait_ready)}
        return self._lease(self._send("GET", self._lease_path(lease_id), params=params))

    def wait_ready(
        self,
        lease_id: str,
        timeout: float = 600.0,
        *,
        on_progress: Callable[[Lease, float], None] | None = None,
        lease: Lease | None = None,
    ) -> Lease:
        """Wait until the lease's worker is ready (`worker_state` `ready`) and return the lease.

        Long-polls `GET /v1/lease/{id}?wait_ready=N` (N ≤ 25 s per request; ≤ 5 s while the lease is queued) until
        then. A queued lease is waited on through the queue, whose time does not count toward `timeout` (the
        queue is bounded by its `queued_until`). `on_progress(lease, elapsed_seconds)` is called after every answer;
        `lease` is the lease as last known, if known. Raises NotAdmitted when the lease ends in the queue,
        BootFailed when it ends otherwise (the service ended it: `failure_reason` says why), ReadyTimeout when
        `timeout` seconds pass first (the lease stays live: release it, or wait again).
        """
        return wait_for(self, lease_id, timeout, on_progress=on_progress, lease=lease)

    def wait_admitted(
        self,
        lease_id: str,
        timeout: float = 600.0,
        *,
        on_progress: Callable[[Lease, float], None] | None = None,
        lease: Lease | None = None,
    ) -> Lease:
        """Wait until a queued lease is admitted and active (its worker may still be starting) and return it.

        As `wait_ready`, whose errors it raises, but done once the lease is `active`.
        """
        return wait_for(self, lease_id, timeout, ready=False, on_progress=on_progress, lease=lease)

    def queue(self, *, owner_id: str | None = None, limit: int | None = None) -> builtins.list[Lease]:
        """`GET /v1/queue`: the queued leases in admission order, each with its `queue_position` (1 = next) in
        the whole queue. A `service` caller sees its own owners' only; `owner_id` narrows to one owner; `limit`
        (1–1000, service default 100) answers the first that many."""
        params = {key: str(value) for key, value in {"owner_id": owner_id, "limit": limit}.items() if value is not None}
        body = self._expect(self._send("GET", "/v1/queue", params=params), dict)
        items = body.get("queue")
        if not isinstance(items, builtins.list):
            raise InvalidResponse("queue answer lacks `queue`", status=200, body=body)
        return [self._parse_lease(item, body) for item in items]

    def list_page(
        self,
        *,
        owner_id: str | None = None,
        kind: str | None = None,
        provider: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> tuple[builtins.list[Lease], str | None]:
        """`GET /v1/leases`: one page of live leases (`limit` is the page size, 1..1000) and the next token."""
        params = {"owner_id": owner_id, "kind": kind, "provider": provider, "limit": limit, "next_token": next_token}
        body = self._expect(
            self._send("GET", "/v1/leases", params={k: str(v) for k, v in params.items() if v is not None}), dict
        )
        items, token = body.get("leases"), body.get("next_token")
        if not isinstance(items, builtins.list) or not (token is None or isinstance(token, str)):
            raise InvalidResponse("list answer lacks `leases` or has a bad `next_token`", status=200, body=body)
        return [self._parse_lease(item, body) for item in items], token

    def iter_leases(
        self, *, owner_id: str | None = None, kind: str | None = None, provider: str | None = None, page_size: int = 100
    ) -> Iterator[Lease]:
        """Every live lease matching the filters, page after page (lazily)."""
        token: str | None = None
        while True:
            page, token = self.list_page(
                owner_id=owner_id, kind=kind, provider=provider, limit=page_size, next_token=token
            )
            yield from page
            if not token:
                return

    def list(
        self,
        *,
        owner_id: str | None = None,
        kind: str | None = None,
        provider: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[Lease]:
        """Every live lease matching the filters, following `next_token` to the end.

        `limit`, when given, caps the number of leases returned (paging stops once it is reached).
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1")
        result: builtins.list[Lease] = []
        token: str | None = None
        while True:
            page_size = 1000 if limit is None else min(1000, limit - len(result))
            page, token = self.list_page(
                owner_id=owner_id, kind=kind, provider=provider, limit=page_size, next_token=token
            )
            result.extend(page)
            if not token or (limit is not None and len(result) >= limit):
                return result if limit is None else result[:limit]

    def usage(
        self,
        *,
        owner_id: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        group_by: str | None = None,
    ) -> dict[str, Any]:
        """`GET /v1/usage`: what leases that ended on the UTC days `since`..`until` cost (both default to
        today), of one owner or all, grouped by `owner`, `kind` or `provider`:
        `{"usage": [{"owner_id", "kind"?, "provider"?, "leases", "lease_seconds", "cost_usd"}], "since", "until"}`."""
        params = {"owner_id": owner_id, "since": since, "until": until, "group_by": group_by}
        sent = {key: str(value) for key, value in params.items() if value is not None}
        body = self._expect(self._send("GET", "/v1/usage", params=sent), dict)
        if not isinstance(body.get("usage"), builtins.list):
            raise InvalidResponse("usage answer lacks `usage`", status=200, body=body)
        return dict(body)

    def renew(self, lease_id: str, *, ttl_seconds: int | None = None, owner_id: str | None = None) -> Lease:
        """`POST /v1/lease/{id}/renew`: expires_at = now + ttl_seconds (the lease's own ttl when None).

        `owner_id` is sent as `X-Lease-Owner` (required when the lease has an owner). Raises
        NotFound when the lease is unknown, released or already expired.
        """
        body: dict[str, Any] = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        outcome = self._send("POST", self._lease_path(lease_id) + "/renew", body=body, headers=_owner(owner_id))
        return self._lease(outcome)

    def release(self, lease_id: str, *, owner_id: str | None = None) -> None:
        """`DELETE /v1/lease/{id}`: end the lease and remove its worker; returns once the API answers 204.

        Retries and 404: when an earlier attempt may have reached the service (its answer was lost
        to a reset/timeout, or was a 5xx that can follow a recorded claim) and a retry then gets
        404, that 404 is most likely the earlier attempt's own success: DELETE answers 404 for every
        lease that is no longer an unexpired `active` one. The client then reads the lease: if it
        exists (released, expired, failed, or `releasing` — the service finishes a claimed release
        itself) the release counts as done; if it does not exist at all, no attempt can have
        released it and NotFound is raised. A 404 on the first attempt is always NotFound.

        A 502 `provider_error` is not retried: the release was claimed (the lease is `releasing`)
        but the worker could not be removed yet; the service's sweep retries that removal, and a
        repeated DELETE could only answer 404. It is raised as ProviderError.
        """
        path = self._lease_path(lease_id)
        outcome = self._send("DELETE", path, headers=_owner(owner_id), retry_provider_error=False, check=False)
        status = outcome.response.status_code
        if status < 400:
            return
        error = error_from_response(status, outcome.body, outcome.response.reason or "")
        if status == 404 and outcome.earlier_attempt_may_have_applied:
            try:
                lease = self.get(lease_id)
            except NotFound:
                raise error from None
            except SchedulerError as unverified:
                logger.info(
                    "release of %s: 404 after an attempt that may have succeeded; counted as released "
                    "(could not read the lease to confirm: %s)",
                    lease_id,
                    unverified,
                )
                return
            logger.info(
                "release of %s: 404 after an attempt that may have succeeded; the lease is %s",
                lease_id,
                lease.status,
            )
            return
        raise error

    def logs(
        self,
        lease_id: str,
        *,
        tail: int | None = None,
        since: str | None = None,
        timestamps: bool = False,
        owner_id: str | None = None,
    ) -> WorkerLogs:
        """`GET /v1/lease/{id}/logs`: the worker's last `tail` lines (service default 200, at most 5000)
        written at or after `since` (RFC 3339), each prefixed with its time when `timestamps`.

        Raises NotFound (unknown lease), Forbidden (another owner's), Gone (its worker was removed, as
        every ended lease's is), Conflict (pending, no worker yet), ProviderError.
        """
        params = {"tail": tail, "since": since, "timestamps": "true" if timestamps else None}
        headers = {**_owner(owner_id), "Accept": "text/plain"}
        outcome = self._send(
            "GET",
            self._lease_path(lease_id) + "/logs",
            params={key: str(value) for key, value in params.items() if value is not None},
            headers=headers,
        )
        response = outcome.response
        response.encoding = response.encoding or "utf-8"
        return WorkerLogs(
            text=response.text,
            lease_status=response.headers.get("X-Lease-Status"),
            truncated=response.headers.get("X-Logs-Truncated") == "true",
        )

    def release_all(self, owner_id: str, *, max_calls: int = 1000) -> OwnerRelease:
        """`DELETE /v1/leases?owner_id=`: release every live lease of `owner_id` (sent as `X-Lease-Owner`
        too), following `next_token` until the service says it is done (at most `max_calls` calls)."""
        result = OwnerRelease(owner_id)
        token: str | None = None
        while result.calls < max_calls:
            params = {"owner_id": owner_id, **({"next_token": token} if token else {})}
            body = self._expect(self._send("DELETE", "/v1/leases", params=params, headers=_owner(owner_id)), dict)
            result.calls += 1
            try:
                result.released += [self._parse_lease(item, body) for item in body.get("released") or []]
                refused = [NotReleased.from_wire(item) for item in body.get("not_released") or []]
            except ValueError as error:
                raise InvalidResponse(f"malformed bulk release answer: {error}", body=body) from error
            # A continuation may name a lease again: the latest word on each counts.
            again = {item.lease_id for item in refused}
            result.not_released = [item for item in result.not_released if item.lease_id not in again] + refused
            token = body.get("next_token")
            if not isinstance(token, str) or not token:
                break
        return result

    def lease(
        self,
        kind: str,
        ttl_seconds: int = 600,
        *,
        renew_every: float | None = None,
        wait_ready: bool = True,
        ready_timeout: float = 600.0,
        queue_seconds: int | None = None,
        priority: int | None = None,
        preemptible: bool | None = None,
        on_preemption: OnPreemption | None = None,
        check_every: float | None = None,
        **acquire_kwargs: Any,
    ) -> AbstractContextManager[LeaseHandle]:
        """`with client.lease(kind="renderer", ttl_seconds=600) as lease:` — acquire (waiting in the queue up to
        `queue_seconds` when nothing is free), wait until the worker is ready (unless `wait_ready=False`), keep
        renewed, release. `priority` and `preemptible` are the acquire's; `on_preemption(lease)` is called once
        when the lease gets a preemption notice (a preemptible lease is read every `check_every` s, default 10).

        See `openalice_scheduler_client.leasing.hold` for the queue, readiness, renewal, notice and release
        behaviour.
        """
        queueing = {"queue_seconds": queue_seconds, "priority": priority, "preemptible": preemptible}
        return hold(
            self,
            kind=kind,
            ttl_seconds=ttl_seconds,
            renew_every=renew_every,
            wait_ready=wait_ready,
            ready_timeout=ready_timeout,
            on_preemption=on_preemption,
            check_every=check_every,
            **{key: value for key, value in queueing.items() if value is not None},
            **acquire_kwargs,
        )

    # --- paths and answers ---------------------------------------------------------------------------

    @staticmethod
    def _lease_path(lease_id: str) -> str:
        if not lease_id:
            raise ValueError("lease_id must not be empty")
        return "/v1/lease/" + quote(lease_id, safe="")

    def _lease(self, outcome: _Outcome) -> Lease:
        body = self._expect(outcome, dict)
        return self._parse_lease(body.get("lease"), body, provider=body.get("provider"))

    @staticmethod
    def _parse_lease(item: Any, body: Any, provider: Any = None) -> Lease:
        try:
            lease = Lease.from_wire(item)
        except ValueError as error:
            raise InvalidResponse(f"malformed lease in the answer: {error}", body=body) from error
        if not lease.provider and isinstance(provider, str):
            lease = Lease.from_wire({**lease.raw, "provider": provider})
        return lease


def _owner(owner_id: str | None) -> dict[str, str]:
    return {} if owner_id is None else {"X-Lease-Owner": owner_id}


@contextmanager
def lease(
    kind: str,
    ttl_seconds: int = 600,
    *,
    url: str | None = None,
    secret: str | None = None,
    token: str | None = None,
    auth: str | Credential | None = None,
    region: str | None = None,
    profile: str | None = None,
    **options: Any,
) -> Iterator[LeaseHandle]:
    """Module-level `with lease(kind="renderer", ttl_seconds=600) as handle:` on a client of its own.

    `url` and the credential (`secret`, `token`, `auth`, `region`, `profile`) are as for `SchedulerClient`; the
    `options` are `SchedulerClient.lease`'s (`wait_ready`, `queue_seconds`, `on_preemption`, the acquire's, …).
    """
    with (
        SchedulerClient(url, secret, token=token, auth=auth, region=region, profile=profile) as client,
        client.lease(kind, ttl_seconds, **options) as handle,
    ):
        yield handle
