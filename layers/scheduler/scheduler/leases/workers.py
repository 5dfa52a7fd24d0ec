"""Removing the worker behind a claimed lease, shared by release, sweep, stream handler, reconciler and reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.config import cap_variable
from scheduler.models import Lease
from scheduler.observability.log import Logger
from scheduler.providers.base import ProviderNotConfigured, failed_request
from scheduler.store import Claim, LeaseStateChanged

if TYPE_CHECKING:
    from scheduler.leases.context import Context

logger = Logger(child=True)


def remove_worker(ctx: Context, lease: Lease, held: tuple[str, ...] = ()) -> str | None:
    """Remove the lease's worker and confirm it is gone; raises ProviderRequestFailed if not. Returns why
    it counts as gone when the provider did not see it removed (an operator retired its host), else None.

    A lease that never got a token (a crash or timeout before `active`) may have a worker on any
    configured provider, found by its lease id, so every provider is asked; where the lease `held` a slot a
    provider took for it (a fleet host's), that provider looks there (`Provider.placement_token`). A lease
    recorded on a provider PROVIDERS no longer names — with a token or without one: the acquire may have made
    its worker there before it died — cannot be confirmed gone by any other provider, so its claim stays and
    the sweep retries (ProviderNotConfigured) until the provider is configured again.
    """
    providers, deadline = ctx.providers, ctx.deadline
    with failed_request():
        if lease.provider_token is not None:
            if lease.provider not in providers.names:
                raise ProviderNotConfigured(
                    lease.provider,
                    f"the worker of lease {lease.lease_id} runs on provider {lease.provider!r}, which PROVIDERS no"
                    " longer names: it cannot be removed or confirmed gone until that provider is configured again"
                    f" (with {cap_variable(lease.provider)}=0 it takes no new lease)",
                )
            return providers.get(lease.provider).release(lease.lease_id, lease.provider_token, deadline)
        # The configured providers remove what they hold of it (an acquire may have failed over to one).
        notes = [
            provider.release(lease.lease_id, provider.placement_token(held), deadline)
            for provider in providers.in_order()
        ]
        if lease.provider not in providers.names:
            raise ProviderNotConfigured(lease.provider, unconfigured_pending(lease))
        return "; ".join(note for note in notes if note) or None


def unconfigured_pending(lease: Lease) -> str:
    """Why a lease without a token, recorded on a provider PROVIDERS no longer names, cannot be ended yet."""
    return (
        f"lease {lease.lease_id} was being acquired on provider {lease.provider!r}, which PROVIDERS no longer"
        " names: a worker made for it there cannot be removed or confirmed gone until that provider is"
        f" configured again (with {cap_variable(lease.provider)}=0 it takes no new lease)"
    )


def release_claimed(ctx: Context, claim: Claim) -> Lease:
    """Remove the claimed lease's worker, then record the outcome the claim names (and, when the worker
    counts as gone on an operator's word, why, after any reason the claim recorded)."""
    note = remove_worker(ctx, claim.lease, claim.held_counters)
    previous = claim.lease.failure_reason
    reason = None if not note or note == previous else (f"{previous}; {note}" if previous else note)
    try:
        return ctx.store.finish_release(claim, ctx.clock(), reason=reason)
    except LeaseStateChanged:
        # Our claim went stale and another actor took it over; the worker is gone either way.
        logger.info("release claim was taken over", extra={"lease_id": claim.lease.lease_id})
        return ctx.store.get(claim.lease.lease_id)
