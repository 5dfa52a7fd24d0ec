"""RunPod's API quota, paced instead of discovered by 429s: one request budget per RunPod account.

RunPod allows 60 requests a minute, 3,000 an hour and 50,000 a day per account, and says so on every
answer (`RateLimit-Policy: "minute";q=60;w=60, ...`; `RateLimit: "minute";r=<remaining>;t=<seconds to
reset>, ...`). Before each call a request is taken from the shared budget (`store/api_budget.py`: one
item per account in DynamoDB, shared by every invocation; in-process when no store is given); the
windows come from the advertised policy once seen, and each answer's `RateLimit` corrects the count.
Creates leave a fifth of each window to releases and their confirmation, so when the budget runs short
the calls that stop spending still go through; the share is of the windows the budget is kept in (a new
execution environment has not seen RunPod's policy yet, its budget item has).

A call the budget cannot serve now waits for the window to reset when that fits in what its deadline
leaves, and is held back at once (BudgetSpent, naming the wait) when it does not. Waiters wake a little
after the reset, spread at random so that a window's worth of them does not write the budget at once.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from scheduler.store.api_budget import QuotaWindow, Reserve, WindowState, corrected, take_one

# RunPod's documented quota, until an answer advertises the policy.
DOCUMENTED = (QuotaWindow("minute", 60, 60), QuotaWindow("hour", 3000, 3600), QuotaWindow("day", 50000, 86400))
CREATE, RELEASE = "create", "release"
# Readiness checks and log streams: they yield to creates and releases, leaving them half of every window.
READ = "read"
_MEMBER = re.compile(r'"([A-Za-z0-9_.-]+)"((?:[ \t]*;[ \t]*[a-z]+[ \t]*=[ \t]*[0-9]+)+)')
_PARAM = re.compile(r"([a-z]+)[ \t]*=[ \t]*([0-9]+)")
# A waiter wakes this long after the reset, plus up to _SPREAD_SECONDS at random: RunPod's reset is known
# to the second, and concurrent waiters take their requests one after another instead of all conflicting.
_AFTER_RESET_SECONDS = 0.05
_SPREAD_SECONDS = 0.5


class QuotaStore(Protocol):
    """Where the budget is kept (`ApiBudget` on the counters table, or `LocalBudget`)."""

    def take(self, key: str, windows: Sequence[QuotaWindow], reserve: Reserve, now_ms: int) -> int:
        """0 when one request was taken from every window, else milliseconds until one frees up."""

    def observe(
        self, key: str, windows: Sequence[QuotaWindow], reported: Mapping[str, tuple[int, float]], now_ms: int
    ) -> None:
        """Correct the count from the provider's own (window → remaining, seconds to reset)."""


class BudgetSpent(Exception):
    """No request left in time: `wait_seconds` until the budget frees one, `left_seconds` to wait for it."""

    def __init__(self, wait_seconds: float, left_seconds: float) -> None:
        super().__init__(
            f"RunPod's API budget is spent; a request frees up in {wait_seconds:.1f} s, and this call"
            f" may wait {max(0.0, left_seconds):.1f} s"
        )
        self.wait_seconds = wait_seconds


def parse_policy(value: str | None) -> tuple[QuotaWindow, ...]:
    """The windows of a `RateLimit-Policy` header (empty when there is none or it cannot be read)."""
    windows = []
    for name, params in _MEMBER.findall(value or ""):
        found = dict(_PARAM.findall(params))
        if "q" in found and "w" in found and int(found["w"]) > 0:
            windows.append(QuotaWindow(name, int(found["q"]), int(found["w"])))
    return tuple(windows)


def parse_remaining(value: str | None) -> dict[str, tuple[int, float]]:
    """A `RateLimit` header: window → (remaining requests, seconds to reset)."""
    reported = {}
    for name, params in _MEMBER.findall(value or ""):
        found = dict(_PARAM.findall(params))
        if "r" in found and "t" in found:
            reported[name] = (int(found["r"]), float(found["t"]))
    return reported


def reserve_of(priority: str, windows: Sequence[QuotaWindow]) -> int:
    """What a call of `priority` must leave in each window: creates leave a fifth of the smallest (for
    releases), reads half of it (a caller polling a booting pod must not starve creates or releases)."""
    smallest = min((window.quota for window in windows), default=1)
    if priority == READ:
        return max(1, smallest // 2)
    return max(1, smallest // 5) if priority == CREATE else 0


def account_key(api_key: str) -> str:
    """The budget's key: the account's API key, hashed (the key itself is never stored)."""
    return "api-quota#runpod#" + hashlib.sha256(api_key.encode()).hexdigest()[:16]


class RequestBudget:
    """Paces one process's RunPod calls against the shared budget of its account."""

    def __init__(
        self,
        store: QuotaStore,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        on_wait: Callable[[str, float], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._sleep = sleep
        self._clock = clock
        self._monotonic = monotonic
        self._on_wait = on_wait
        self.windows: tuple[QuotaWindow, ...] = DOCUMENTED

    def reserve(self, priority: str) -> int:
        """What a call of `priority` leaves in each window of this process's windows (`reserve_of`)."""
        return reserve_of(priority, self.windows)

    def take(self, key: str, priority: str, until: float) -> None:
        """Take one request by monotonic time `until`, waiting for a window to reset when that fits;
        BudgetSpent at once when it does not."""

        def reserve(windows: Sequence[QuotaWindow]) -> int:
            return reserve_of(priority, windows)

        waited = False
        while True:
            wait_ms = self._store.take(key, self.windows, reserve, int(self._clock() * 1000))
            if wait_ms == 0:
                return
            wait = wait_ms / 1000.0
            left = until - self._monotonic()
            if wait > left:
                raise BudgetSpent(wait, left)
            if not waited and self._on_wait is not None:
                self._on_wait(priority, wait)
            waited = True
            # Never past `until`: what the caller keeps after it is for the call itself.
            spread = random.uniform(0.0, _SPREAD_SECONDS)  # noqa: S311 - jitter, not crypto  # nosec B311
            self._sleep(min(wait + _AFTER_RESET_SECONDS + spread, left))

    def observe(self, key: str, policy: str | None, remaining: str | None) -> None:
        """An answer's headers: the advertised windows, and the provider's own count."""
        advertised = parse_policy(policy)
        if advertised:
            self.windows = advertised
        reported = parse_remaining(remaining)
        if reported or advertised:
            self._store.observe(key, self.windows, reported, int(self._clock() * 1000))


class LocalBudget:
    """The budget kept in this process only (no store configured: tests, tools); the same rules."""

    def __init__(self) -> None:
        self._state: dict[str, dict[str, WindowState]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, windows: Sequence[QuotaWindow], reserve: Reserve, now_ms: int) -> int:
        with self._lock:
            taken, wait = take_one(self._state.get(key, {}), windows, reserve(windows), now_ms)
            if not wait:
                self._state[key] = taken
            return wait

    def observe(
        self, key: str, windows: Sequence[QuotaWindow], reported: Mapping[str, tuple[int, float]], now_ms: int
    ) -> None:
        with self._lock:
            changed = corrected(self._state.get(key, {}), windows, reported, now_ms)
            if changed is not None:
                self._state[key] = changed
