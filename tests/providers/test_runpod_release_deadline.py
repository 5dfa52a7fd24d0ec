"""A RunPod release ends by its deadline (the DELETE route's, the sweep's): the DELETE, the listings around it and
every wait for the account's API budget. One that cannot finish by then fails (ProviderRequestFailed: the lease's
claim stays and the sweep retries it) instead of waiting up to 20 s for the budget on each call and outliving
API Gateway's 30 s."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from scheduler.deadline import Deadline
from scheduler.models import GpuClass, WorkerKind
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from scheduler.providers.runpod.quota import RELEASE, LocalBudget, RequestBudget, account_key
from scheduler.store.api_budget import QuotaWindow
from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.unit.builders import new_lease

KEY = "test-key"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRunPod]:
    with start_fake_runpod(KEY, {"tpl-renderer": {"ports": ["8080/http"]}}) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeRunPod) -> FakeRunPod:
    server.reset()
    return server


def never_waited(seconds: float) -> None:
    raise AssertionError(f"the release waited {seconds:.1f} s for RunPod's API budget, past its deadline")


def driver(fake: FakeRunPod, budget: RequestBudget | None = None) -> RunPodProvider:
    return RunPodProvider(
        api=RunPodApi(fake.url, lambda: KEY, budget=budget),
        templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-renderer"},
        gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
        http_port=8080,
        retry=RetryPolicy(),
    )


def a_pod(fake: FakeRunPod) -> tuple[str, str]:
    """A pod made for a lease, by a driver without a budget: (lease id, pod id)."""
    lease = new_lease(provider="runpod", gpu=GpuClass.HIGH)
    return lease.lease_id, driver(fake).provision(lease, {}).token


def spent_budget() -> RequestBudget:
    """The account's budget with every request of its window taken: the next frees up in about 10 s, which
    a call without a deadline would wait for (it may wait 20 s)."""
    budget = RequestBudget(LocalBudget(), sleep=never_waited)
    budget.windows = (QuotaWindow("ten", 10, 10),)
    for _ in range(10):
        budget.take(account_key(KEY), RELEASE, until=time.monotonic())
    return budget


def test_a_release_under_a_spent_api_budget_gives_up_by_its_deadline_without_sending_the_delete(
    fake: FakeRunPod,
) -> None:
    lease_id, pod_id = a_pod(fake)
    started = time.monotonic()

    with pytest.raises(ProviderRequestFailed, match="budget is spent"):
        driver(fake, spent_budget()).release(lease_id, pod_id, Deadline.within(2.0))

    assert time.monotonic() - started < 2.0
    assert fake.requests_to("DELETE", f"/v2/pods/{pod_id}") == [] and pod_id in fake.pods


def test_a_release_without_a_token_under_a_spent_api_budget_gives_up_by_its_deadline(fake: FakeRunPod) -> None:
    lease_id, pod_id = a_pod(fake)

    with pytest.raises(ProviderRequestFailed, match="budget is spent"):
        driver(fake, spent_budget()).release(lease_id, None, Deadline.within(2.0))

    assert pod_id in fake.pods


def test_a_release_whose_confirming_listing_outlives_its_deadline_fails_for_a_later_retry(fake: FakeRunPod) -> None:
    lease_id, pod_id = a_pod(fake)
    fake.configure(slow_lists_seconds=4.0)
    started = time.monotonic()

    with pytest.raises(ProviderRequestFailed):
        driver(fake).release(lease_id, pod_id, Deadline.within(1.5))

    assert time.monotonic() - started < 2.5  # not the 4 s listing, nor the policy's 10 s of confirmation
    assert pod_id in fake.deleted_pod_ids  # the DELETE went; its confirmation is what the sweep retries
