"""RunPod's REST API v2 as this driver calls it: one request at a time, bounded in time, the account's
shared request budget taken before it and corrected from each answer, transient answers raised as such."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import requests

from scheduler import SERVICE_NAME
from scheduler.providers.base import ProviderRequestFailed, ProviderUnreachable
from scheduler.providers.runpod.quota import READ, RELEASE, BudgetSpent, RequestBudget, account_key

USER_AGENT = f"{SERVICE_NAME}/0.1 (+https://github.com/openalice; python-requests)"
_TIMEOUT = (3.05, 15.0)  # connect, read — every call has both


class RetryPolicy(NamedTuple):
    """Bounds on retrying one RunPod call: attempts, backoff with full jitter, and total time."""

    attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 5.0
    total_seconds: float = 20.0
    release_confirm_seconds: float = 10.0
    sleep: Callable[[float], None] = time.sleep

    def backoff(self, attempt: int) -> float:
        """Full-jitter exponential backoff for retry number `attempt` (0-based)."""
        ceiling = min(self.max_delay, self.base_delay * 2**attempt)
        return random.uniform(0, ceiling)  # noqa: S311 - jitter, not crypto  # nosec B311


class _Transient(Exception):
    """A 429, 5xx, timeout or connection failure: worth another try after `delay` seconds.

    `sent` is False when the request never left (the API budget had no request left for it)."""

    def __init__(self, message: str, delay: float | None = None, sent: bool = True) -> None:
        super().__init__(message)
        self.delay = delay
        self.sent = sent


# How long a call without a deadline of its own may wait for the API budget.
_BUDGET_WAIT_SECONDS = 20.0


@dataclass
class RunPodResponse:
    """One HTTP answer from RunPod."""

    status: int
    body: Any
    retry_after: float | None

    @property
    def detail(self) -> str:
        """RunPod's problem `detail` (and `errors`), or the raw body."""
        if isinstance(self.body, dict):
            errors = self.body.get("errors") or []
            detail = str(self.body.get("detail") or self.body.get("title") or "")
            return f"{detail} {'; '.join(map(str, errors))}".strip()
        return str(self.body)[:300]


class RunPodApi:
    """HTTP to RunPod REST v2: bearer auth, an explicit User-Agent, timeouts on every call."""

    def __init__(
        self,
        base_url: str,
        api_key: Callable[[], str | None],
        session: requests.Session | None = None,
        budget: RequestBudget | None = None,
        metrics: Any = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._api_key = api_key
        self._session = session or requests.Session()
        self._session.headers.update({"User-Agent": USER_AGENT, "Accept": "application/json"})
        self._budget = budget
        self._metrics = metrics
        self.calls: Counter[str] = Counter()  # requests sent, by priority (create / release)
        self.throttled: Counter[str] = Counter()  # 429s answered ("429"), calls the budget held back ("budget")
        self._count_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self._base

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        until: float | None = None,
        priority: str = RELEASE,
        wait_until: float | None = None,
    ) -> RunPodResponse:
        """One request, ending by monotonic time `until` if given; _Transient for 429/5xx/timeouts/connection errors.

        With a budget, a request is first taken from the account's shared quota (creates leave room for
        releases), waiting for a window to reset if that ends by `wait_until` (default `until`: a caller
        that needs time after the request's start says so); the answer's RateLimit corrects it.
        """
        key = self._api_key()
        if not key:
            raise ProviderUnreachable("no RunPod API key is configured")
        account = account_key(key)
        if self._budget is not None:
            latest = wait_until if wait_until is not None else until
            try:
                self._budget.take(
                    account, priority, latest if latest is not None else time.monotonic() + _BUDGET_WAIT_SECONDS
                )
            except BudgetSpent as spent:
                self._count("RunpodThrottled", self.throttled, "budget", reason="budget")
                raise _Transient(str(spent), spent.wait_seconds, sent=False) from spent
        self._count("RunpodApiCalls", self.calls, priority, operation=priority)
        try:
            response = self._session.request(
                method,
                f"{self._base}{path}",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
                timeout=_TIMEOUT if until is None else _bounded_timeout(until),
            )
        except (requests.Timeout, requests.ConnectionError) as error:
            raise _Transient(f"{method} {path}: {type(error).__name__}") from error
        try:
            parsed: Any = response.json() if response.content else None
        except ValueError:
            parsed = response.text
        retry_after = _seconds(response.headers.get("Retry-After"))
        result = RunPodResponse(response.status_code, parsed, retry_after)
        if self._budget is not None:
            self._budget.observe(account, response.headers.get("RateLimit-Policy"), response.headers.get("RateLimit"))
        if response.status_code == 429:
            self._count("RunpodThrottled", self.throttled, "429", reason="429")
        if response.status_code == 429 or response.status_code >= 500:
            raise _Transient(f"{method} {path}: HTTP {response.status_code} {result.detail}", retry_after)
        return result

    def stream(self, path: str, params: Mapping[str, str], timeout: tuple[float, float]) -> requests.Response:
        """A GET whose body is read as it arrives (Server-Sent Events); the caller closes the answer.

        It spends the account's request budget as a read: it leaves half of every window to creates and releases.
        """
        key = self._api_key()
        if not key:
            raise ProviderUnreachable("no RunPod API key is configured")
        if self._budget is not None:
            try:
                self._budget.take(account_key(key), READ, time.monotonic() + min(timeout[0], _BUDGET_WAIT_SECONDS))
            except BudgetSpent as spent:
                self._count("RunpodThrottled", self.throttled, "budget", reason="budget")
                raise ProviderRequestFailed(f"RunPod's request budget is spent for now: {spent}") from spent
        self._count("RunpodApiCalls", self.calls, "logs", operation="logs")
        try:
            return self._session.get(
                f"{self._base}{path}",
                params=dict(params),
                headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"},
                timeout=timeout,
                stream=True,
            )
        except (requests.Timeout, requests.ConnectionError) as error:
            raise ProviderUnreachable(f"GET {path}: {type(error).__name__}") from error

    def _count(self, metric: str, tally: Counter[str], key: str, **dimensions: str) -> None:
        with self._count_lock:
            tally[key] += 1
        if self._metrics is not None:
            from scheduler.observability.metrics import MetricUnit

            self._metrics.emit(metric, MetricUnit.Count, 1, **dimensions)


def _bounded_timeout(until: float) -> tuple[float, float]:
    left = max(0.05, until - time.monotonic())
    return min(_TIMEOUT[0], left), min(_TIMEOUT[1], left)


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
