"""Builders: leases arranged in a given state through the store's own methods, in-memory providers, the use
cases' context, acquire."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.callers.model import SHARED_SECRET, Caller
from scheduler.clock import Clock, utc_now
from scheduler.config import Settings
from scheduler.deadline import Deadline, or_never
from scheduler.leases.acquire import acquire as acquire_lease
from scheduler.leases.context import Context
from scheduler.leases.outcomes import lease_or_raise
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import Provider, ProvisionedWorker
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store.port import LeaseStorePort

NOW = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
"""The fixed "now" every store test starts from (the store takes `now`; nothing sleeps)."""

RETENTION_SECONDS = 7 * 24 * 3600
RELEASE_CLAIM_SECONDS = 120


def epoch(value: datetime) -> int:
    return int(value.timestamp())


def new_lease(
    *,
    owner_id: str | None = "alice",
    kind: WorkerKind = WorkerKind.RENDERER,
    gpu: GpuClass = GpuClass.NONE,
    provider: str = "local-docker",
    ttl_seconds: int = 3600,
    created_at: datetime = NOW,
    correlation_id: str | None = None,
    region: str | None = None,
) -> Lease:
    """A `pending` lease as `acquire` records it (a UUID id, expiry = created + ttl)."""
    return Lease(
        lease_id=str(uuid.uuid4()),
        provider=provider,
        kind=kind,
        gpu=gpu,
        status=LeaseStatus.PENDING,
        created_at=created_at,
        expires_at=created_at + timedelta(seconds=ttl_seconds),
        owner_id=owner_id,
        correlation_id=correlation_id,
        region=region,
        ttl_seconds=ttl_seconds,
    )


def worker_for(lease: Lease, *, cost_per_hour: float | None = 0.25) -> ProvisionedWorker:
    return ProvisionedWorker(
        token=f"ctr-{lease.lease_id[:8]}", endpoint="http://127.0.0.1:18080", cost_per_hour=cost_per_hour
    )


class Leases:
    """Puts leases into the store in the state a test starts from."""

    def __init__(self, store: LeaseStorePort) -> None:
        self.store = store

    def pending(self, **fields: Any) -> Lease:
        lease = new_lease(**fields)
        self.store.create_pending(lease)
        return lease

    def active(self, **fields: Any) -> Lease:
        lease = self.pending(**fields)
        return self.store.activate(lease.lease_id, lease.provider, worker_for(lease))

    def ending(self, ends_at: datetime, **fields: Any) -> Lease:
        """Active on a worker its provider ends by itself at `ends_at` (a Modal Sandbox's timeout)."""
        lease = self.pending(**fields)
        return self.store.activate(lease.lease_id, lease.provider, worker_for(lease)._replace(ends_at=ends_at))

    def released(self, *, at: datetime = NOW, **fields: Any) -> Lease:
        lease = self.active(**fields)
        claim = self.store.claim_release(lease.lease_id, lease.owner_id, at)
        return self.store.finish_release(claim, at)

    def expired(self, **fields: Any) -> Lease:
        """Active, then swept after its expiry: status `expired`."""
        lease = self.active(**fields)
        swept_at = lease.expires_at + timedelta(seconds=1)
        claim = self.store.claim_due(lease.lease_id, swept_at)
        assert claim is not None
        return self.store.finish_release(claim, swept_at)


def memory_provider(name: str = "local-docker", **faults: Any) -> MemoryProvider:
    """The in-memory reference driver, its workers created at NOW (the tests' clock)."""
    return MemoryProvider(name, clock=lambda: NOW, **faults)


def registry_of(*providers: Provider) -> ConfiguredProviders:
    """A registry of `providers`, in policy order."""
    return ConfiguredProviders(
        Settings(providers=tuple(provider.name for provider in providers)),
        factories={provider.name: (lambda _, chosen=provider: chosen) for provider in providers},
    )


def context(
    store: LeaseStorePort,
    providers: ConfiguredProviders | None = None,
    *,
    limits: LeaseLimits | None = None,
    clock: Clock = utc_now,
    deadline: Deadline | None = None,
    caller: Caller = SHARED_SECRET,
    **settings: Any,
) -> Context:
    """What a use case works with: `store`, `providers` (default: one in-memory local-docker), settings naming
    those providers (plus `settings`), `limits` (default: none), `clock`, `deadline` (default: no limit), acting
    for `caller` (default: the shared secret's holder, as every caller was before callers existed)."""
    chosen = providers if providers is not None else registry_of(memory_provider())
    configured = Settings(providers=chosen.names, **settings)
    return Context(store, chosen, configured, limits or LeaseLimits(), clock, or_never(deadline), caller)


def acquire(ctx: Context, request: LeaseRequest, lease_id: str | None = None) -> Lease:
    """acquire's lease, or its refusal raised: for tests about what happens after (or that it refuses)."""
    return lease_or_raise(acquire_lease(ctx, request, lease_id))
