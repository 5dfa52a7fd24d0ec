"""Worker readiness: a lease is `starting` until its provider says the worker serves, then `ready`.

Who asks the provider, and how often:

- a read of a starting lease (`GET /v1/lease/{id}`, with or without `?wait_ready=N`): at most once every
  `refresh_seconds` per lease however many callers poll, through a conditional claim on the lease item
  (`check_readiness`); a caller that loses the claim reads what the winner recorded;
- the sweep (every minute when deployed): one listing per provider for every starting lease
  (`Provider.readiness_of`), so a boot failure ends its lease even when nobody polls.

Once ready (`ready_at` written once, by `mark_ready`), nothing here runs for the lease again. A worker
that fails to boot (ERROR/EXITED while starting, gone) or is not ready within READY_TIMEOUT_SECONDS of
its lease's creation is ended through `claim_boot_failed` and removed: no pod keeps billing after it
failed to boot.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from aws_lambda_powertools import Logger

from scheduler.clock import Clock
from scheduler.deadline import Deadline
from scheduler.leases.workers import release_claimed
from scheduler.models import Lease
from scheduler.providers.base import ProviderRequestFailed, Readiness, ReadinessState, failed_request

if TYPE_CHECKING:
    from scheduler.leases.context import Context

logger = Logger(child=True)

MAX_WAIT_SECONDS = 25  # within API Gateway's 30 s, with the request's reserve
REFRESH_SECONDS = 2.0  # at most one provider call per starting lease this often, across callers
POLL_SECONDS = 1.0  # a waiting reader looks at the lease item this often
PROBE_TIMEOUT_SECONDS = 2.0
# BootFailure's `reason` dimension.
BOOT_ERROR = "worker_error"
BOOT_TIMEOUT = "timeout"

Probe = Callable[[str, float], bool]


def http_probe(url: str, timeout: float) -> bool:
    """GET `url`: True when it answers 2xx or 3xx within `timeout` seconds."""
    import requests  # only where a probe is configured: reads stay light at cold start

    try:
        response = requests.get(url, timeout=(min(timeout, 1.0), timeout), allow_redirects=False)
    except requests.RequestException:
        return False
    return 200 <= response.status_code < 400


class ReadinessPolicy(NamedTuple):
    """How readiness is decided: the boot deadline, how often a provider is asked, the optional HTTP probe."""

    timeout_seconds: int = 600
    refresh_seconds: float = REFRESH_SECONDS
    probe_path: str | None = None
    probe: Probe = http_probe


class Refreshed(NamedTuple):
    """A lease after a readiness refresh: `became_ready` when this call recorded it ready, `boot_failure`
    (BOOT_ERROR / BOOT_TIMEOUT) when this call ended it as a boot failure."""

    lease: Lease
    became_ready: bool = False
    boot_failure: str | None = None


@dataclass
class BootReport:
    """What one sweep pass over the starting leases did."""

    ready: list[Lease] = field(default_factory=list)
    failed: list[tuple[Lease, str]] = field(default_factory=list)  # (ended lease, BootFailure reason)
    errors: list[str] = field(default_factory=list)


def decide(
    lease: Lease, readiness: Readiness, policy: ReadinessPolicy, clock: Clock, deadline: Deadline
) -> tuple[ReadinessState, str, str | None]:
    """From what the provider said: (state to record, reason, BootFailure reason code)."""
    if readiness.state is ReadinessState.FAILED:
        return ReadinessState.FAILED, readiness.detail, BOOT_ERROR
    if readiness.state is ReadinessState.READY and _probe_passes(lease, policy, deadline):
        return ReadinessState.READY, "", None
    waited = (clock() - lease.created_at).total_seconds()
    if waited >= policy.timeout_seconds:
        last = readiness.detail or ("the ready probe did not pass" if policy.probe_path else "still starting")
        reason = (
            f"the worker was not ready within {policy.timeout_seconds} s (READY_TIMEOUT_SECONDS); last seen: {last}"
        )
        return ReadinessState.FAILED, reason, BOOT_TIMEOUT
    return ReadinessState.STARTING, readiness.detail, None


def _probe_passes(lease: Lease, policy: ReadinessPolicy, deadline: Deadline) -> bool:
    if not policy.probe_path or not lease.endpoint:
        return True  # no probe configured, or no endpoint to probe: the provider's word stands
    timeout = max(0.1, min(PROBE_TIMEOUT_SECONDS, deadline.remaining()))
    return policy.probe(lease.endpoint.rstrip("/") + policy.probe_path, timeout)


def apply(ctx: Context, lease: Lease, readiness: Readiness, policy: ReadinessPolicy) -> Refreshed:
    """Record what the provider said about a starting lease's worker: ready, a boot failure, or nothing yet."""
    assert lease.provider_token is not None  # noqa: S101 - an active lease has its worker  # nosec B101
    state, reason, code = decide(lease, readiness, policy, ctx.clock, ctx.deadline)
    if state is ReadinessState.READY:
        marked = ctx.store.mark_ready(lease.lease_id, lease.provider_token, ctx.clock(), by=ctx.caller.name)
        if marked is None:
            return Refreshed(ctx.store.get(lease.lease_id))
        logger.info("worker ready", extra={"lease_id": lease.lease_id, "provider": lease.provider})
        return Refreshed(marked, became_ready=True)
    if state is ReadinessState.FAILED:
        ended = end_boot_failure(ctx, lease, reason)
        if ended is None:
            return Refreshed(ctx.store.get(lease.lease_id))
        return Refreshed(ended, boot_failure=code)
    return Refreshed(lease)


def end_boot_failure(ctx: Context, lease: Lease, reason: str) -> Lease | None:
    """Claim the lease as failed (only while still starting on its worker), remove the worker, record the end.

    None when someone else changed the lease first. If the worker cannot be removed now, the lease
    stays `releasing` (with the reason) and the sweep finishes the release.
    """
    assert lease.provider_token is not None  # noqa: S101  # nosec B101
    claim = ctx.store.claim_boot_failed(
        lease.lease_id, ctx.clock(), token=lease.provider_token, reason=reason, by=ctx.caller.name
    )
    if claim is None:
        return None
    logger.warning(
        "lease failed: its worker did not boot",
        extra={"lease_id": lease.lease_id, "provider": lease.provider, "reason": reason},
    )
    try:
        return release_claimed(ctx, claim)
    except ProviderRequestFailed as error:
        logger.warning(
            "the worker that failed to boot could not be removed yet; the sweep retries", extra={"error": str(error)}
        )
        return ctx.store.get(lease.lease_id)


def refresh(ctx: Context, lease: Lease, policy: ReadinessPolicy) -> Refreshed:
    """Ask the provider about a starting lease's worker, if nobody did within `policy.refresh_seconds`."""
    if not lease.is_starting or lease.provider not in ctx.providers.names or not lease.provider_token:
        return Refreshed(lease)
    claimed = ctx.store.claim_readiness_check(lease.lease_id, ctx.clock(), policy.refresh_seconds)
    if claimed is None:
        return Refreshed(lease)  # another caller asked moments ago (or the lease changed): read its result
    try:
        with failed_request():
            readiness = ctx.providers.get(lease.provider).readiness(lease.lease_id, lease.provider_token, ctx.deadline)
    except ProviderRequestFailed as error:
        # Not knowing is not a boot failure (not even past the timeout): the next read or sweep asks again.
        logger.warning("readiness check failed", extra={"lease_id": lease.lease_id, "error": str(error)})
        return Refreshed(claimed)
    return apply(ctx, claimed, readiness, policy)


def wait_ready(
    ctx: Context,
    lease_id: str,
    seconds: float,
    policy: ReadinessPolicy,
    *,
    read: Lease | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Refreshed:
    """The lease as soon as its worker is ready (or the lease is no longer starting), else after `seconds`
    with its current state; never past the context's deadline. `read`: the lease as the caller just read it."""
    until = min(monotonic() + max(0.0, seconds), monotonic() + ctx.deadline.remaining())
    lease = read if read is not None else ctx.store.get(lease_id)
    asked_at: float | None = None
    while True:
        # Between our own provider checks, only read what others recorded (no claim write to lose).
        if asked_at is None or monotonic() - asked_at >= policy.refresh_seconds:
            asked_at = monotonic()
            result = refresh(ctx, lease, policy)
        else:
            result = Refreshed(lease)
        left = until - monotonic()
        if not result.lease.is_starting or left <= 0:
            return result
        sleep(min(POLL_SECONDS, left))
        lease = ctx.store.get(lease_id)


def check_starting_leases(ctx: Context, policy: ReadinessPolicy) -> BootReport:
    """The sweep's pass: every starting lease, one readiness listing per provider; record ready ones and end
    boot failures (ERROR/EXITED while starting, gone, or past READY_TIMEOUT_SECONDS)."""
    report = BootReport()
    by_provider: dict[str, list[Lease]] = defaultdict(list)
    for lease in ctx.store.starting_leases():
        if lease.provider in ctx.providers.names and lease.provider_token:
            by_provider[lease.provider].append(lease)
    for name, leases in by_provider.items():
        if ctx.deadline.expired:
            break
        try:
            with failed_request():
                answers = ctx.providers.get(name).readiness_of(
                    {lease.provider_token or "": lease.lease_id for lease in leases}, ctx.deadline
                )
        except ProviderRequestFailed as error:
            # Its leases stay as they are (no timeout applied without an answer); the next sweep asks again.
            report.errors.append(f"{name}: {error}")
            logger.warning("cannot ask for readiness", extra={"provider": name, "error": str(error)})
            continue
        for lease in leases:
            if ctx.deadline.expired:
                break
            said = answers.get(lease.provider_token or "", Readiness.starting())
            try:
                result = apply(ctx, lease, said, policy)
            except Exception as error:  # one lease's failure must not stop the pass; the next sweep retries
                report.errors.append(f"lease {lease.lease_id}: {error}")
                logger.exception(
                    "readiness of a lease failed; the next sweep retries", extra={"lease_id": lease.lease_id}
                )
                continue
            if result.became_ready:
                report.ready.append(result.lease)
            elif result.boot_failure is not None:
                report.failed.append((result.lease, result.boot_failure))
    return report
