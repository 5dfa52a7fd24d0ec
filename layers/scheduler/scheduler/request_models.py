"""The pydantic models of the inputs with many rules: the acquire body (`POST /v1/lease`) and the usage
query. Only the acquire and usage paths import this module (and pydantic with it); the read inputs
are plain dataclasses in `scheduler.models`.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from scheduler.errors import InvalidRequest, invalid_input
from scheduler.models import (
    DEFAULT_TTL_SECONDS,
    MAX_COST_PER_HOUR,
    MAX_ENV_ENTRIES,
    MAX_ENV_VALUE_CHARS,
    MAX_LABEL_CHARS,
    MAX_TTL_SECONDS,
    MIN_COST_PER_HOUR,
    OWNER_ID_PATTERN,
    GpuClass,
    WorkerKind,
)

_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")
Model = TypeVar("Model", bound=BaseModel)

OptionalLabel = Annotated[StrictStr | None, Field(default=None, max_length=MAX_LABEL_CHARS)]
# USD per hour: a JSON number (never a string or a boolean), from one micro-dollar up.
PricePerHour = (
    Annotated[StrictFloat, Field(ge=MIN_COST_PER_HOUR, le=MAX_COST_PER_HOUR, allow_inf_nan=False)]
    | Annotated[StrictInt, Field(ge=1, le=MAX_COST_PER_HOUR)]
)
OwnerId = Annotated[StrictStr | None, Field(default=None, max_length=MAX_LABEL_CHARS, pattern=OWNER_ID_PATTERN)]


def parse_model(model: type[Model], data: object, *, what: str) -> Model:
    """Validate `data` into `model`; InvalidRequest with one line per problem otherwise."""
    if not isinstance(data, dict):
        raise InvalidRequest(f"{what} must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = [
            {"field": ".".join(str(part) for part in issue["loc"]) or what, "problem": issue["msg"]}
            for issue in error.errors(include_url=False, include_input=False)
        ]
        raise invalid_input(what, problems) from error


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
