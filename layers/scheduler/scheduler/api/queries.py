"""Query strings of the operations routes (`openapi.yaml`): a worker's logs, releasing an owner's leases."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from scheduler.worker_logs import DEFAULT_TAIL, MAX_TAIL, LogQuery, parse_rfc3339_ns

OWNER_ID_PATTERN = r"^[!-~]([ -~]*[!-~])?$"


class LogsQuery(BaseModel):
    """Query of `GET /v1/lease/{lease_id}/logs`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tail: int = Field(default=DEFAULT_TAIL, ge=1, le=MAX_TAIL)
    since: Annotated[StrictStr | None, Field(default=None, max_length=64)] = None
    timestamps: bool = False

    @field_validator("tail", mode="before")
    @classmethod
    def _tail_is_digits(cls, value: object) -> object:
        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
            raise ValueError(f"tail must be a whole number from 1 to {MAX_TAIL}")
        return value

    @field_validator("since")
    @classmethod
    def _since_is_rfc3339(cls, value: str | None) -> str | None:
        if value is not None and parse_rfc3339_ns(value) is None:
            raise ValueError("since must be an RFC 3339 date-time, e.g. 2026-11-30T17:00:00Z")
        return value

    @field_validator("timestamps", mode="before")
    @classmethod
    def _timestamps_is_a_flag(cls, value: object) -> object:
        if isinstance(value, str) and value not in ("true", "false"):
            raise ValueError("timestamps must be true or false")
        return value

    def log_query(self) -> LogQuery:
        """The lines this query asks a provider for."""
        return LogQuery(tail=self.tail, since_ns=None if self.since is None else parse_rfc3339_ns(self.since))


class OwnerReleaseQuery(BaseModel):
    """Query of `DELETE /v1/leases`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Required here (whose leases), with the same rules as a lease's owner_id.
    owner_id: Annotated[StrictStr, Field(max_length=128, pattern=OWNER_ID_PATTERN)]
    next_token: Annotated[StrictStr | None, Field(default=None, max_length=4096)] = None
