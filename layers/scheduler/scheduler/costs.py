"""What leases cost: rates in USD per hour, amounts in USD, and the whole micro-dollars the budget counters hold.

Pure arithmetic (no DynamoDB, no clock). A lease bills its `cost_per_hour` from its creation to its
confirmed release; the owner budgets (`scheduler/budgets.py`) count in micro-dollars so that their
counters stay whole numbers, exact under DynamoDB's ADD, and are always rounded up (never under-reserved).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal

MICROS_PER_USD = 1_000_000
SECONDS_PER_HOUR = 3600


def micros(usd: float) -> int:
    """USD as whole micro-dollars, rounded up."""
    return math.ceil(round(usd * MICROS_PER_USD, 6))


def usd(amount_micros: int) -> float:
    """Micro-dollars as USD."""
    return round(amount_micros / MICROS_PER_USD, 6)


def money(amount: float) -> str:
    """An amount or a rate of USD as people write it, in plain decimal: `0.000001`, `0.69`, `5` (never
    `1e-06`, as `:g` and `repr` print small floats)."""
    return format(Decimal(repr(float(amount))).normalize(), "f")


def spend_micros(rate_micros_per_hour: int, seconds: float) -> int:
    """What `seconds` at a rate costs, in micro-dollars, rounded up."""
    return math.ceil(rate_micros_per_hour * max(0.0, seconds) / SECONDS_PER_HOUR)


def accrued_usd(cost_per_hour: float | None, start_epoch: int, end_epoch: int) -> float | None:
    """The cost of a lease from `start_epoch` to `end_epoch` (None: the lease has no known rate)."""
    if cost_per_hour is None:
        return None
    return round(cost_per_hour * max(0, end_epoch - start_epoch) / SECONDS_PER_HOUR, 6)


def utc_day(epoch_seconds: int) -> str:
    """The UTC day of an instant, `YYYY-MM-DD` (budgets and usage count per UTC day)."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%d")
