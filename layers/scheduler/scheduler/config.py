"""Configuration, parsed once from the environment into a typed, immutable value (contract section 3).

A plain dataclass rather than a pydantic model: building a pydantic model costs ~15 ms of cold start
and every function reads its settings at init; the checks here are the few that matter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache

from scheduler.errors import ConfigurationError


class Secret(str):
    """A string that never shows itself in a repr or a log line."""

    def __repr__(self) -> str:
        return "Secret('**********')"

    def get_secret_value(self) -> str:
        """The secret itself, for the one place that sends it."""
        return str.__str__(self)


@dataclass(frozen=True)
class Settings:
    """Everything the functions read from their environment."""

    providers: tuple[str, ...] = ("local-docker",)
    leases_table: str = "openalice-scheduler-leases"
    counters_table: str = "openalice-scheduler-counters"
    idempotency_table: str = "openalice-scheduler-idempotency"
    idempotency_ttl_seconds: int = 24 * 3600
    renderer_image: str = "openalice/renderer:latest"
    anim_image: str = "openalice/anim:latest"
    docker_network: str = "bridge"
    worker_port: int = 8080
    docker_tls_secret_arn: str | None = None
    docker_api_version: str | None = None  # None: negotiate with the engine
    worker_read_check_seconds: int = 5
    sweep_interval_seconds: int = 60
    reconcile_interval_seconds: int = 300
    orphan_grace_seconds: int = 600
    pending_deadline_seconds: int = 120
    release_claim_seconds: int = 120
    retention_seconds: int = 7 * 24 * 3600
    live_index_shards: int = 1
    # How long one store call keeps retrying DynamoDB's contention answers (conflicts, throttling).
    store_retry_seconds: int = 5
    local_docker_max_leases: int | None = None
    runpod_max_leases: int | None = None
    max_leases_per_owner: int | None = None
    runpod_api_url: str = "https://api.runpod.io"
    runpod_api_key: Secret | None = None
    runpod_api_key_secret_arn: str | None = None
    runpod_renderer_template: str | None = None
    runpod_anim_template: str | None = None
    runpod_gpu_types_entry: tuple[str, ...] = ()
    runpod_gpu_types_mid: tuple[str, ...] = ()
    runpod_gpu_types_high: tuple[str, ...] = ()
    runpod_http_port: int = 8080

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Parse the environment (each field's variable is its UPPER_CASE name); a bad value names the variable."""
        values: dict[str, object] = {}
        for field in fields(cls):
            raw = environ.get(field.name.upper(), "").strip()
            if raw == "":
                continue
            try:
                values[field.name] = _parse(field.name, raw)
            except ValueError as error:
                raise ConfigurationError(f"invalid configuration: {field.name.upper()}={raw!r}: {error}") from error
        providers = values.get("providers")
        if isinstance(providers, tuple) and len(set(providers)) != len(providers):
            raise ConfigurationError(f"invalid configuration: PROVIDERS names a provider twice: {providers}")
        return cls(**values)  # type: ignore[arg-type]


_LIMITS: dict[str, tuple[int, int | None]] = {
    "idempotency_ttl_seconds": (60, None),
    "worker_port": (1, 65535),
    "runpod_http_port": (1, 65535),
    "sweep_interval_seconds": (1, None),
    "reconcile_interval_seconds": (1, None),
    "orphan_grace_seconds": (0, None),
    "pending_deadline_seconds": (1, None),
    "release_claim_seconds": (1, None),
    "retention_seconds": (60, None),
    "live_index_shards": (1, 64),
    "store_retry_seconds": (0, 25),
    "local_docker_max_leases": (0, None),
    "runpod_max_leases": (0, None),
    "max_leases_per_owner": (0, None),
    "worker_read_check_seconds": (0, None),
}
_LISTS = {"providers", "runpod_gpu_types_entry", "runpod_gpu_types_mid", "runpod_gpu_types_high"}


def _parse(name: str, raw: str) -> object:
    if name in _LISTS:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if name == "runpod_api_key":
        return Secret(raw)
    if name == "docker_api_version":
        if raw.lower() == "auto":
            return None
        parts = raw.split(".")
        if len(parts) != 2 or not all(part.isascii() and part.isdigit() for part in parts):
            raise ValueError("must be an Engine API version such as 1.44 (empty or auto: negotiate with the engine)")
        return raw
    if name in _LIMITS:
        number = int(raw)
        low, high = _LIMITS[name]
        if number < low or (high is not None and number > high):
            raise ValueError(f"must be between {low} and {high}" if high is not None else f"must be at least {low}")
        return number
    return raw


@cache
def get_settings() -> Settings:
    """The process-wide settings, parsed on first use."""
    return Settings.from_environ(os.environ)
