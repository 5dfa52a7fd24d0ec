"""RunPod's per-key request quota as the fake RunPod advertises and (when asked) enforces it. Stdlib only.

The policy is written the way RunPod advertises it in `RateLimit-Policy`: one member per window, each with
its quota `q` and length in seconds `w` (`"minute";q=60;w=60, "hour";q=3000;w=3600, ...`). Windows are
fixed: each starts when the meter (re)starts and repeats every `w` seconds, so `t` in `RateLimit` is the
whole number of seconds until the window's counter resets (rounded up, so waiting `t` is always enough).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

RATE_LIMIT_POLICY: Final = '"minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400'

_MEMBER: Final = re.compile(r'"(?P<name>[A-Za-z0-9_.-]+)"(?P<params>(?:\s*;\s*[a-z]+\s*=\s*\d+)+)', re.ASCII)
_PARAM: Final = re.compile(r"([a-z]+)\s*=\s*(\d+)", re.ASCII)


@dataclass(frozen=True)
class QuotaWindow:
    """One window of the policy: at most `quota` requests per `seconds`."""

    name: str
    quota: int
    seconds: int


def parse_policy(text: str) -> tuple[QuotaWindow, ...]:
    """The windows of a `RateLimit-Policy` value; ValueError naming what is wrong."""
    windows: list[QuotaWindow] = []
    for member in (part.strip() for part in text.split(",")):
        match = _MEMBER.fullmatch(member)
        if match is None:
            raise ValueError(f'bad policy member {member!r}: want "name";q=<requests>;w=<seconds>')
        params = dict(_PARAM.findall(match.group("params")))
        if set(params) != {"q", "w"}:
            raise ValueError(f"policy member {member!r}: want exactly the parameters q and w")
        window = QuotaWindow(match.group("name"), int(params["q"]), int(params["w"]))
        if window.seconds < 1:
            raise ValueError(f"policy member {member!r}: w must be at least 1 second")
        if any(seen.name == window.name for seen in windows):
            raise ValueError(f"policy names the window {window.name!r} twice")
        windows.append(window)
    return tuple(windows)


def render_policy(windows: Sequence[QuotaWindow]) -> str:
    """The `RateLimit-Policy` header value for these windows."""
    return ", ".join(f'"{window.name}";q={window.quota};w={window.seconds}' for window in windows)


class QuotaMeter:
    """Requests counted per API key in fixed windows. Not thread-safe: the fake calls it under its lock."""

    def __init__(self, windows: Sequence[QuotaWindow], clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.windows: tuple[QuotaWindow, ...] = tuple(windows)
        self._epoch = clock()
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}  # (key, window) → (window index, count)

    def restart(self, windows: Sequence[QuotaWindow] | None = None) -> None:
        """Forget every count; windows start again now (with new windows when given)."""
        if windows is not None:
            self.windows = tuple(windows)
        self._epoch = self._clock()
        self._counts.clear()

    def _position(self, window: QuotaWindow, now: float) -> tuple[int, int]:
        """(index of the current window, whole seconds until it resets)."""
        elapsed = max(0.0, now - self._epoch)
        index = int(elapsed // window.seconds)
        reset = max(1, math.ceil(window.seconds * (index + 1) - elapsed))
        return index, reset

    def _used(self, key: str, window: QuotaWindow, now: float) -> int:
        index, _reset = self._position(window, now)
        seen_index, count = self._counts.get((key, window.name), (index, 0))
        return count if seen_index == index else 0

    def count(self, key: str) -> None:
        """One request by `key`, in every window."""
        now = self._clock()
        for window in self.windows:
            index, _reset = self._position(window, now)
            self._counts[(key, window.name)] = (index, self._used(key, window, now) + 1)

    def exhausted(self, key: str) -> list[tuple[QuotaWindow, int]]:
        """The windows `key` has used up, each with the seconds until it resets."""
        now = self._clock()
        return [
            (window, self._position(window, now)[1])
            for window in self.windows
            if self._used(key, window, now) >= window.quota
        ]

    def header(self, key: str, exhausted_for: tuple[str, int] | None = None) -> str:
        """The `RateLimit` value (remaining `r`, reset `t` per window); `exhausted_for` (window, seconds)
        shows that window as used up for that long, as a forced 429 does."""
        now = self._clock()
        parts = []
        for window in self.windows:
            remaining = max(0, window.quota - self._used(key, window, now))
            reset = self._position(window, now)[1]
            if exhausted_for is not None and window.name == exhausted_for[0]:
                remaining, reset = 0, exhausted_for[1]
            parts.append(f'"{window.name}";r={remaining};t={reset}')
        return ", ".join(parts)

    def snapshot(self, key: str) -> list[dict[str, Any]]:
        """Each window's quota, length, use, remaining requests and seconds to reset (for /_fake/state)."""
        now = self._clock()
        return [
            {
                "name": window.name,
                "quota": window.quota,
                "seconds": window.seconds,
                "used": self._used(key, window, now),
                "remaining": max(0, window.quota - self._used(key, window, now)),
                "reset": self._position(window, now)[1],
            }
            for window in self.windows
        ]
