"""The time an invocation has left, as a value the use cases pass down to every provider call.

A provider call that cannot finish before its deadline gives up instead of outliving the caller's
patience (API Gateway answers for us after 30 s, and Lambda kills the function at its timeout).
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple


class Deadline(NamedTuple):
    """A moment on the monotonic clock by which the work must be done."""

    at: float

    @classmethod
    def within(cls, seconds: float) -> Deadline:
        """`seconds` from now."""
        return cls(time.monotonic() + seconds)

    @classmethod
    def never(cls) -> Deadline:
        """No limit (tools and tests that have no caller waiting)."""
        return cls(math.inf)

    @classmethod
    def of_invocation(cls, context: Any, *, reserve_seconds: float, at_most_seconds: float | None = None) -> Deadline:
        """What the Lambda invocation has left, less `reserve_seconds` for recording the outcome and answering.

        `at_most_seconds` caps it further (an API route must answer before API Gateway's own timeout,
        whatever the function's). A context without `get_remaining_time_in_millis` counts as unlimited.
        """
        remaining = math.inf
        reader = getattr(context, "get_remaining_time_in_millis", None)
        if callable(reader):
            remaining = max(0.0, float(reader()) / 1000.0)
        if at_most_seconds is not None:
            remaining = min(remaining, at_most_seconds)
        return cls.within(max(0.0, remaining - reserve_seconds))

    def remaining(self) -> float:
        """Seconds left (0 once past)."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        """True once the deadline has passed."""
        return time.monotonic() >= self.at

    def bound(self, seconds: float) -> float:
        """`seconds`, or what is left if that is less (for a timeout on one call)."""
        return min(seconds, self.remaining())

    def sooner(self, seconds: float) -> Deadline:
        """This deadline, or `seconds` from now if that comes first."""
        return Deadline(min(self.at, time.monotonic() + seconds))


def or_never(deadline: Deadline | None) -> Deadline:
    """`deadline`, or no limit when the caller gave none."""
    return deadline if deadline is not None else Deadline.never()
