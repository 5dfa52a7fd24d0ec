"""Time as the use cases see it: a Clock they are handed (tests pass a fixed one), and lease expiry."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """Now, in UTC."""
    return datetime.now(UTC)


def expiry_after(now: datetime, ttl_seconds: int) -> datetime:
    """`now + ttl`, rounded up to the whole second the wire carries: a lease is never shorter than asked."""
    exact = now + timedelta(seconds=ttl_seconds)
    whole = exact.replace(microsecond=0)
    return whole if whole == exact else whole + timedelta(seconds=1)
