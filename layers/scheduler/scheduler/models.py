"""Wire shapes of the lease API (`openapi.yaml`): requests, the Lease, the list query, and their enums."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, field_serializer, field_validator

from scheduler.lifecycle import LeaseStatus, WorkerState

MAX_TTL_SECONDS = 28_800
DEFAULT_TTL_SECONDS = 3_600
MAX_ENV_ENTRIES = 64
MAX_ENV_VALUE_CHARS = 4_096
MAX_COST_PER_HOUR = 10_000.0  # USD; a ceiling above any price, refused beyond as a likely typo
_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")


class WorkerKind(StrEnum):
    RENDERER = "renderer"
    ANIM = "anim"


class GpuClass(StrEnum):
    NONE = "none"
    ENTRY = "entry"
    MID = "mid"
    HIGH = "high"


OptionalLabel = Annotated[StrictStr | None, Field(default=None, max_length=128)]
MIN_COST_PER_HOUR = 0.000001  # USD: the smallest amount the budgets count (one micro-dollar)
# USD per hour: a JSON number (never a string or a boolean), from one micro-dollar up.
PricePerHour = (
    Annotated[StrictFloat, Field(ge=MIN_COST_PER_HOUR, le=MAX_COST_PER_HOUR, allow_inf_nan=False)]
    | Annotated[StrictInt, Field(ge=1, le=MAX_COST_PER_HOUR)]
)
# Owners travel back in the X-Lease-Owner header, so they must be header-safe: printable ASCII,
# no surrounding spaces (a value no header can carry would lock its lease for good).
OwnerId = Annotated[StrictStr | None, Field(default=None, max_length=128, pattern=r"^[!-~]([ -~]*[!-~])?$")]


def is_lease_id(value: object) -> bool:
    """True for the UUIDs this service issues as lease ids (anything else cannot name a lease)."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def format_time(value: datetime) -> str:
    """RFC 3339 UTC with a `Z`, as every time on the wire is written."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LeaseRequest(BaseModel):
    """Body of `POST /v1/lease`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: WorkerKind
    gpu: GpuClass = GpuClass.NONE
    ttl_seconds: StrictInt = Field(default=DEFAULT_TTL_SECONDS, ge=1, le=MAX_TTL_SECONDS)
    owner_id: OwnerId = None
    correlation_id: OptionalLabel = None
    region: OptionalLabel = None
    max_cost_per_hour: PricePerHour | None = None
    env: dict[StrictStr, Annotated[StrictStr, Field(max_length=MAX_ENV_VALUE_CHARS, pattern=r"^[^\x00]*$")]] = Field(
        default_factory=dict, max_length=MAX_ENV_ENTRIES
    )

    @field_validator("owner_id", "correlation_id", "region", mode="before")
    @classmethod
    def _blank_is_absent(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("env")
    @classmethod
    def _env_keys_are_variable_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = sorted(key for key in env if not _ENV_KEY.fullmatch(key))
        if bad:
            # A lone surrogate would break the message itself (pydantic encodes it): escape what UTF-8 cannot carry.
            shown = ", ".join(key.encode("utf-8", "backslashreplace").decode() for key in bad[:5])
            raise ValueError(f"env keys must match [A-Z_][A-Z0-9_]*: {shown}")
        return env


class RenewRequest(BaseModel):
    """Body of `POST /v1/lease/{lease_id}/renew`; an absent ttl keeps the lease's own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttl_seconds: StrictInt | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)


class Lease(BaseModel):
    """A lease as callers see it."""

    model_config = ConfigDict(frozen=True)

    lease_id: str
    provider: str
    kind: WorkerKind
    gpu: GpuClass
    status: LeaseStatus
    endpoint: str | None = None
    created_at: datetime
    expires_at: datetime
    released_at: datetime | None = None
    provider_token: str | None = None
    owner_id: str | None = None
    correlation_id: str | None = None
    region: str | None = None
    ttl_seconds: int
    cost_per_hour: float | None = None
    failure_reason: str | None = None
    worker_state: WorkerState = WorkerState.STARTING
    ready_at: datetime | None = None
    max_cost_per_hour: float | None = None
    # What the lease cost: accrued so far while live, final once ended (rate × time from create to release).
    cost_usd: float | None = None

    @field_serializer("created_at", "expires_at", "released_at", "ready_at")
    def _rfc3339(self, value: datetime | None) -> str | None:
        return None if value is None else format_time(value)

    @property
    def is_starting(self) -> bool:
        """True while the lease is active and its worker has not been reported ready."""
        return self.status == LeaseStatus.ACTIVE and self.worker_state == WorkerState.STARTING

    def is_expired(self, now: datetime) -> bool:
        """True once the lease has run past `expires_at`."""
        return self.expires_at <= now

    def wire(self, now: datetime | None = None) -> dict[str, object]:
        """The JSON-ready shape `openapi.yaml` describes (schema Lease); a live lease's `cost_usd` is what it
        has accrued by `now` (default: the wall clock)."""
        shown = self.model_dump(mode="json")
        if self.cost_usd is None and self.cost_per_hour is not None and self.status.is_live:
            seconds = max(0.0, ((now or datetime.now(UTC)) - self.created_at).total_seconds())
            shown["cost_usd"] = round(self.cost_per_hour * int(seconds) / 3600, 6)
        return shown


MAX_WAIT_READY_SECONDS = 25  # API Gateway gives a route 30 s


class ReadQuery(BaseModel):
    """Query of `GET /v1/lease/{lease_id}`: `wait_ready` seconds to wait for a starting worker (0: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wait_ready: int = Field(default=0, ge=0, le=MAX_WAIT_READY_SECONDS)

    @field_validator("wait_ready", mode="before")
    @classmethod
    def _wait_is_digits(cls, value: object) -> object:
        if isinstance(value, str) and not (value.isascii() and value.isdigit() and len(value) <= 6):
            raise ValueError(f"wait_ready must be a whole number of seconds from 0 to {MAX_WAIT_READY_SECONDS}")
        return value


class ListFilter(BaseModel):
    """Query of `GET /v1/leases`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    owner_id: OwnerId = None
    kind: WorkerKind | None = None
    provider: Annotated[StrictStr | None, Field(default=None, max_length=64)] = None
    limit: int = Field(default=100, ge=1, le=1000)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit_is_digits(cls, value: object) -> object:
        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
            raise ValueError("limit must be a whole number from 1 to 1000")
        return value

    next_token: Annotated[StrictStr | None, Field(default=None, max_length=4096)] = None


class UsageGrouping(StrEnum):
    OWNER = "owner"
    KIND = "kind"
    PROVIDER = "provider"


_DAY = r"^\d{4}-\d{2}-\d{2}$"


class UsageQuery(BaseModel):
    """Query of `GET /v1/usage`: UTC days `since`..`until` (inclusive; default today), one owner or all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    owner_id: OwnerId = None
    since: Annotated[StrictStr | None, Field(default=None, pattern=_DAY)] = None
    until: Annotated[StrictStr | None, Field(default=None, pattern=_DAY)] = None
    group_by: UsageGrouping = UsageGrouping.OWNER

    @field_validator("since", "until")
    @classmethod
    def _a_real_day(cls, value: str | None) -> str | None:
        if value is not None:
            datetime.strptime(value, "%Y-%m-%d")  # ValueError for 2026-02-30
        return value
