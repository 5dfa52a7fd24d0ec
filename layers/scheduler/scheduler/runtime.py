"""Factories the functions call once at init: the store and the provider registry, built from settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.config import Settings, get_settings
from scheduler.limits import LeaseLimits
from scheduler.providers.registry import ProviderRegistry
from scheduler.store import LeaseStore
from scheduler.store.retries import Backoff

if TYPE_CHECKING:  # imported where used: only the acquire function pays for powertools Idempotency
    from scheduler.idempotency import IdempotentAcquire


def lease_store(settings: Settings | None = None) -> LeaseStore:
    """A LeaseStore on the configured table, with bounded timeouts and standard retries."""
    import boto3
    from botocore.config import Config

    settings = settings or get_settings()
    client = boto3.client(
        "dynamodb",
        config=Config(
            connect_timeout=2,
            read_timeout=5,
            retries={"mode": "standard", "max_attempts": 3},
        ),
    )
    return LeaseStore(
        settings.leases_table,
        client,
        shards=settings.live_index_shards,
        retention_seconds=settings.retention_seconds,
        release_claim_seconds=settings.release_claim_seconds,
        counters_table=settings.counters_table,
        retry=Backoff(budget_seconds=settings.store_retry_seconds),
    )


def lease_limits(settings: Settings | None = None) -> LeaseLimits:
    """The provider caps and owner quota the environment sets."""
    return LeaseLimits.from_settings(settings or get_settings())


def idempotent_acquire(
    store: LeaseStore, providers: ProviderRegistry, limits: LeaseLimits, settings: Settings | None = None
) -> IdempotentAcquire:
    """Acquire behind powertools' Idempotency utility, on the idempotency table, sharing the store's client."""
    from scheduler import leases
    from scheduler.idempotency import IdempotentAcquire

    settings = settings or get_settings()
    return IdempotentAcquire(
        lambda request, lease_id: leases.acquire(request, store, providers, limits, lease_id=lease_id),
        settings.idempotency_table,
        store.client,
        settings.idempotency_ttl_seconds,
    )


def provider_registry(settings: Settings | None = None) -> ProviderRegistry:
    """The providers named by `PROVIDERS`, each timed, counted and traced; an unknown one refuses to start."""
    from scheduler.observability import InstrumentedProvider

    return ProviderRegistry(settings or get_settings(), wrap=InstrumentedProvider)
