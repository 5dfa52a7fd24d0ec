"""Factories the functions call once at init: the store and the provider registry, built from settings."""

from __future__ import annotations

from scheduler.config import Settings, get_settings
from scheduler.providers.registry import ProviderRegistry
from scheduler.store import LeaseStore


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
    )


def provider_registry(settings: Settings | None = None) -> ProviderRegistry:
    """The providers named by `PROVIDERS`; raises ConfigurationError (refuse to start) on an unknown one."""
    return ProviderRegistry(settings or get_settings())
