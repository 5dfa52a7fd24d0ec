"""Waiting for RunPod's request budget: a call waits for the window to reset when that fits in what its
deadline leaves, and is held back at once, naming the wait, when it does not. Waiting never lets creates
spend what is kept for releases, and concurrent waiters do not all wake at the same instant.

The budget runs on a fake clock: `sleep` moves it on.
"""

from __future__ import annotations

import time

import pytest

from scheduler.deadline import Deadline
from scheduler.models import GpuClass, WorkerKind
from scheduler.providers.base import ProviderUnreachable
from scheduler.providers.runpod.driver import CREATE_NEEDS_SECONDS, RetryPolicy, RunPodApi, RunPodProvider
from scheduler.providers.runpod.quota import CREATE, RELEASE, BudgetSpent, LocalBudget, RequestBudget, account_key
from scheduler.store.api_budget import QuotaWindow
from tests.unit.builders import new_lease

KEY = "acct"
TEN = (QuotaWindow("ten", 10, 10),)  # creates may take 8 of each window: a fifth (2) is the releases'


class FakeTime:
    """Wall and monotonic clocks that only `sleep` moves."""

    def __init__(self) -> None:
        self.wall = 1_800_000_000.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.wall - 1_799_000_000.0

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.wall += seconds


def _budget(clock: FakeTime, store: LocalBudget | None = None) -> RequestBudget:
    budget = RequestBudget(store or LocalBudget(), sleep=clock.sleep, clock=clock.time, monotonic=clock.monotonic)
    budget.windows = TEN
    return budget


def _spent(clock: FakeTime) -> RequestBudget:
    """A budget whose window was spent by releases 0.5 s ago: it resets in 9.5 s."""
    budget = _budget(clock)
    for _ in range(10):
        budget.take(KEY, RELEASE, until=clock.monotonic())
    clock.wall += 0.5
    return budget


def test_a_create_whose_request_frees_up_within_its_deadline_waits_for_it_and_is_served() -> None:
    clock = FakeTime()
    budget = _spent(clock)

    budget.take(KEY, CREATE, until=clock.monotonic() + 15.0)

    (slept,) = clock.slept
    assert 9.5 < slept <= 9.5 + 0.6  # the reset, then a little more at random


def test_a_create_whose_wait_does_not_fit_its_deadline_is_refused_at_once_naming_the_wait() -> None:
    clock = FakeTime()
    budget = _spent(clock)

    with pytest.raises(BudgetSpent, match=r"a request frees up in 9\.5 s, and this call may wait 5\.0 s") as refused:
        budget.take(KEY, CREATE, until=clock.monotonic() + 5.0)

    assert clock.slept == [] and refused.value.wait_seconds == 9.5


def test_a_wait_never_sleeps_past_the_moment_the_caller_must_have_its_request() -> None:
    clock = FakeTime()
    budget = _spent(clock)
    until = clock.monotonic() + 9.55

    budget.take(KEY, CREATE, until=until)

    assert clock.monotonic() <= until


def test_creates_that_waited_still_leave_the_releases_their_fifth_of_the_window() -> None:
    clock = FakeTime()
    budget = _spent(clock)

    for _ in range(8):
        budget.take(KEY, CREATE, until=clock.monotonic() + 15.0)  # the first waits for the reset

    with pytest.raises(BudgetSpent):
        budget.take(KEY, CREATE, until=clock.monotonic() + 5.0)  # the window's next create room is 10 s off
    budget.take(KEY, RELEASE, until=clock.monotonic())
    budget.take(KEY, RELEASE, until=clock.monotonic())


def test_concurrent_waiters_wake_spread_after_the_reset_not_at_one_instant() -> None:
    clock = FakeTime()
    shared = LocalBudget()
    spender = _budget(clock, shared)
    for _ in range(10):
        spender.take(KEY, RELEASE, until=clock.monotonic())
    first_sleeps: list[float] = []

    class Woken(Exception):
        pass

    def record(seconds: float) -> None:
        first_sleeps.append(seconds)
        raise Woken

    for _ in range(10):
        waiter = RequestBudget(shared, sleep=record, clock=clock.time, monotonic=clock.monotonic)
        waiter.windows = TEN
        with pytest.raises(Woken):
            waiter.take(KEY, CREATE, until=clock.monotonic() + 15.0)

    assert all(10.0 < seconds <= 10.6 for seconds in first_sleeps)
    assert len({round(seconds, 3) for seconds in first_sleeps}) > 1


# --- the driver: a create waits only while what is left of its deadline still fits the create -----------


def _driver(budget: RequestBudget) -> RunPodProvider:
    return RunPodProvider(
        api=RunPodApi("http://127.0.0.1:9", lambda: "runpod-key", budget=budget),
        templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-renderer"},
        gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
        http_port=8080,
        retry=RetryPolicy(),
    )


def test_a_create_does_not_wait_for_a_request_that_would_leave_it_too_little_time_to_create() -> None:
    waits: list[float] = []

    def no_sleep(seconds: float) -> None:
        waits.append(seconds)
        raise AssertionError(f"waited {seconds:.1f} s for a request the create could not use")

    budget = RequestBudget(LocalBudget(), sleep=no_sleep)
    budget.windows = TEN
    for _ in range(10):
        budget.take(account_key("runpod-key"), RELEASE, until=time.monotonic())
    lease = new_lease(provider="runpod", gpu=GpuClass.HIGH)
    # The window resets in ~10 s; the deadline is 12 s off: the request would come with 2 s to create.
    deadline = Deadline.within(10.0 + CREATE_NEEDS_SECONDS - 3.0)
    started = time.monotonic()

    with pytest.raises(ProviderUnreachable, match="frees up in"):
        _driver(budget).provision(lease, {}, deadline)

    assert waits == [] and time.monotonic() - started < 1.0
