"""Factories the functions call once at init: the store and the provider registry, built from settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.config import Settings, get_settings
from scheduler.deadline import Deadline
from scheduler.limits import LeaseLimits
from scheduler.providers.registry import ProviderRegistry
from scheduler.store import LeaseStore
from scheduler.store.retries import Backoff

if TYPE_CHECKING:  # imported where used: only the acquire function pays for powertools Idempotency
    from scheduler.idempotency import IdempotentAcquire
    from scheduler.liveness import ReadCheck
    from scheduler.models import Lease

# An API route must answer before API Gateway gives up on it (HTTP API: 30 s, whatever the function's
# timeout). The reserve covers what follows the provider calls (recording the outcome, answering)
# and the cold start, which API Gateway's clock counts and the function's does not.
API_GATEWAY_TIMEOUT_SECONDS = 30.0
REQUEST_RESERVE_SECONDS = 5.0
# Scheduled and stream functions keep this much of their timeout to record what they did.
BACKGROUND_RESERVE_SECONDS = 10.0


def request_deadline(context: Any) -> Deadline:
    """Until when an API request's provider calls may run."""
    return Deadline.of_invocation(
        context, reserve_seconds=REQUEST_RESERVE_SECONDS, at_most_seconds=API_GATEWAY_TIMEOUT_SECONDS
    )


def background_deadline(context: Any) -> Deadline:
    """Until when a scheduled or stream invocation's provider calls may run."""
    return Deadline.of_invocation(context, reserve_seconds=BACKGROUND_RESERVE_SECONDS)


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
        lambda request, lease_id, deadline: leases.acquire(
            request, store, providers, limits, lease_id=lease_id, deadline=deadline
        ),
        settings.idempotency_table,
        store.client,
        settings.idempotency_ttl_seconds,
    )


def provider_registry(settings: Settings | None = None) -> ProviderRegistry:
    """The providers named by `PROVIDERS`, each timed, counted and traced; an unknown one refuses to start."""
    from scheduler.observability import InstrumentedProvider

    return ProviderRegistry(settings or get_settings(), wrap=InstrumentedProvider)


def worker_read_check(
    store: LeaseStore,
    settings: Settings | None = None,
    on_end: Callable[[Lease], None] | None = None,
    providers: ProviderRegistry | None = None,
) -> ReadCheck:
    """The check GET /v1/lease/{id} runs on an active lease's worker (drivers load on first need)."""
    from scheduler.liveness import ReadCheck
    from scheduler.providers.registry import CHECKED_ON_READ

    settings = settings or get_settings()
    return ReadCheck(
        store,
        providers or provider_registry(settings),
        checked=CHECKED_ON_READ,
        interval_seconds=settings.worker_read_check_seconds,
        on_end=on_end,
    )
