"""Configuration, parsed once from the environment into a typed model (contract section 3)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from scheduler.errors import ConfigurationError


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _optional_int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


class Settings(BaseModel):
    """Everything the functions read from their environment."""

    model_config = ConfigDict(frozen=True)

    providers: tuple[str, ...] = ("local-docker",)
    leases_table: str = "openalice-scheduler-leases"
    counters_table: str = "openalice-scheduler-counters"
    idempotency_table: str = "openalice-scheduler-idempotency"
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=60)
    renderer_image: str = "openalice/renderer:latest"
    anim_image: str = "openalice/anim:latest"
    docker_network: str = "bridge"
    worker_port: int = Field(default=8080, ge=1, le=65535)
    docker_tls_secret_arn: str | None = None
    sweep_interval_seconds: int = Field(default=60, ge=1)
    reconcile_interval_seconds: int = Field(default=300, ge=1)
    orphan_grace_seconds: int = Field(default=600, ge=0)
    pending_deadline_seconds: int = Field(default=120, ge=1)
    release_claim_seconds: int = Field(default=120, ge=1)
    retention_seconds: int = Field(default=7 * 24 * 3600, ge=60)
    live_index_shards: int = Field(default=1, ge=1, le=64)
    local_docker_max_leases: int | None = Field(default=None, ge=0)
    runpod_max_leases: int | None = Field(default=None, ge=0)
    max_leases_per_owner: int | None = Field(default=None, ge=0)
    runpod_api_url: str = "https://api.runpod.io"
    runpod_api_key: SecretStr | None = None
    runpod_api_key_secret_arn: str | None = None
    runpod_renderer_template: str | None = None
    runpod_anim_template: str | None = None
    runpod_gpu_types_entry: tuple[str, ...] = ()
    runpod_gpu_types_mid: tuple[str, ...] = ()
    runpod_gpu_types_high: tuple[str, ...] = ()
    runpod_http_port: int = Field(default=8080, ge=1, le=65535)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Parse the environment; a bad value stops the function at init with the variable named."""
        names = {
            "leases_table": "LEASES_TABLE",
            "counters_table": "COUNTERS_TABLE",
            "idempotency_table": "IDEMPOTENCY_TABLE",
            "idempotency_ttl_seconds": "IDEMPOTENCY_TTL_SECONDS",
            "renderer_image": "RENDERER_IMAGE",
            "anim_image": "ANIM_IMAGE",
            "docker_network": "DOCKER_NETWORK",
            "worker_port": "WORKER_PORT",
            "docker_tls_secret_arn": "DOCKER_TLS_SECRET_ARN",
            "sweep_interval_seconds": "SWEEP_INTERVAL_SECONDS",
            "reconcile_interval_seconds": "RECONCILE_INTERVAL_SECONDS",
            "orphan_grace_seconds": "ORPHAN_GRACE_SECONDS",
            "pending_deadline_seconds": "PENDING_DEADLINE_SECONDS",
            "release_claim_seconds": "RELEASE_CLAIM_SECONDS",
            "retention_seconds": "RETENTION_SECONDS",
            "live_index_shards": "LIVE_INDEX_SHARDS",
            "runpod_api_url": "RUNPOD_API_URL",
            "runpod_api_key": "RUNPOD_API_KEY",
            "runpod_api_key_secret_arn": "RUNPOD_API_KEY_SECRET_ARN",
            "runpod_renderer_template": "RUNPOD_RENDERER_TEMPLATE",
            "runpod_anim_template": "RUNPOD_ANIM_TEMPLATE",
            "runpod_http_port": "RUNPOD_HTTP_PORT",
        }
        values: dict[str, object] = {field: environ[var] for field, var in names.items() if environ.get(var, "") != ""}
        try:
            if environ.get("PROVIDERS", "").strip():
                providers = _csv(environ["PROVIDERS"])
                values["providers"] = providers
                if len(set(providers)) != len(providers):
                    raise ValueError(f"PROVIDERS names a provider twice: {environ['PROVIDERS']}")
            for field, var in (
                ("local_docker_max_leases", "LOCAL_DOCKER_MAX_LEASES"),
                ("runpod_max_leases", "RUNPOD_MAX_LEASES"),
                ("max_leases_per_owner", "MAX_LEASES_PER_OWNER"),
            ):
                values[field] = _optional_int(environ.get(var))
            for gpu in ("entry", "mid", "high"):
                values[f"runpod_gpu_types_{gpu}"] = _csv(environ.get(f"RUNPOD_GPU_TYPES_{gpu.upper()}"))
            return cls.model_validate(values)
        except (ValueError, ValidationError) as error:
            raise ConfigurationError(f"invalid configuration: {error}") from error


@cache
def get_settings() -> Settings:
    """The process-wide settings, parsed on first use."""
    return Settings.from_environ(os.environ)
