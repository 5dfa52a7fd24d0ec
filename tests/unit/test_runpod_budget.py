"""RunPod within its quota: one request budget per account, in DynamoDB, shared by every invocation, sized
from RateLimit-Policy and corrected from each RateLimit answer; creates leave room for releases.

The budget's item is written optimistically (version), so it runs on moto and dynalite alike, and on the memory
store's counters (`MemoryApiBudget`); the quota is the fake RunPod's (tests/fakes/runpod.py), which answers 429 past it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from scheduler.providers.runpod.quota import (
    CREATE,
    RELEASE,
    BudgetSpent,
    LocalBudget,
    RequestBudget,
    parse_policy,
    parse_remaining,
)
from scheduler.store.api_budget import ApiBudget, QuotaWindow
from scheduler.store.memory import MemoryApiBudget
from scheduler.store.port import ApiBudgetPort
from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.tables import make_table
from tests.unit.builders import new_lease
from tests.unit.conftest import MEMORY

KEY = "budget-key"
TEN_SECONDS = '"ten";q=30;w=10'
WINDOWS = (QuotaWindow("ten", 30, 10),)
NOW_MS = 1_800_000_000_000


def keep_none(windows: Sequence[QuotaWindow]) -> int:
    return 0


def keep_six(windows: Sequence[QuotaWindow]) -> int:
    return 6


@pytest.fixture
def budget_table(backend: str, request: pytest.FixtureRequest) -> Iterator[ApiBudgetPort]:
    """The shared budget in a counters table of its own (on memory, the memory store's)."""
    if backend == MEMORY:
        yield MemoryApiBudget()
        return
    dynamodb: DynamoDBClient = request.getfixturevalue("dynamodb")
    counters = make_table(dynamodb, backend, "counters", "LeaseCountersTable")
    yield ApiBudget("unused-leases-table", dynamodb, counters_table=counters)
    dynamodb.delete_table(TableName=counters)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRunPod]:
    with start_fake_runpod(KEY, {"tpl-renderer": {"ports": ["8080/http"]}}) as fake:
        yield fake


def test_the_policy_and_the_remaining_count_are_read_as_runpod_sends_them() -> None:
    assert parse_policy('"minute";q=60;w=60, "hour";q=3000;w=3600') == (
        QuotaWindow("minute", 60, 60),
        QuotaWindow("hour", 3000, 3600),
    )
    assert parse_remaining('"minute";r=12;t=41, "hour";r=2980;t=3001') == {"minute": (12, 41.0), "hour": (2980, 3001.0)}
    assert parse_policy("garbage") == () and parse_remaining(None) == {}


def test_a_window_gives_out_its_quota_then_says_when_it_resets(budget_table: ApiBudget) -> None:
    taken = [budget_table.take("acct", WINDOWS, keep_none, NOW_MS) for _ in range(30)]

    assert taken == [0] * 30
    assert budget_table.take("acct", WINDOWS, keep_none, NOW_MS) == 10_000
    assert budget_table.take("acct", WINDOWS, keep_none, NOW_MS + 10_000) == 0  # a new window


def test_creates_leave_a_reserve_that_releases_may_spend(budget_table: ApiBudget) -> None:
    for _ in range(24):
        assert budget_table.take("acct", WINDOWS, keep_six, NOW_MS) == 0

    assert budget_table.take("acct", WINDOWS, keep_six, NOW_MS) > 0  # a create: the last 6 are kept back
    assert budget_table.take("acct", WINDOWS, keep_none, NOW_MS) == 0  # a release still goes


def test_runpods_own_count_corrects_ours_upwards_and_names_the_reset(budget_table: ApiBudget) -> None:
    budget_table.take("acct", WINDOWS, keep_none, NOW_MS)

    budget_table.observe("acct", WINDOWS, {"ten": (0, 4.0)}, NOW_MS)  # someone else spent the window

    assert budget_table.take("acct", WINDOWS, keep_none, NOW_MS) == 4_000
    assert budget_table.take("acct", WINDOWS, keep_none, NOW_MS + 4_000) == 0


def test_the_budget_is_shared_between_accounts_never(budget_table: ApiBudget) -> None:
    for _ in range(30):
        budget_table.take("one", WINDOWS, keep_none, NOW_MS)

    assert budget_table.take("other", WINDOWS, keep_none, NOW_MS) == 0


def test_a_new_environment_keeps_back_a_fifth_of_the_advertised_windows_not_of_the_documented_ones(
    budget_table: ApiBudget,
) -> None:
    seen = RequestBudget(budget_table)
    seen.observe("acct", '"ten";q=12;w=10', '"ten";r=12;t=10')  # RunPod advertised 12 per 10 s
    fresh = RequestBudget(budget_table)  # no answer seen yet: it knows RunPod's documented 60 a minute

    for _ in range(10):
        fresh.take("acct", CREATE, until=time.monotonic())  # 10 of the 12: a fifth (2) is the releases'

    with pytest.raises(BudgetSpent):
        fresh.take("acct", CREATE, until=time.monotonic())
    fresh.take("acct", RELEASE, until=time.monotonic())


def test_a_call_that_cannot_get_a_request_in_time_is_held_back_not_sent() -> None:
    budget = RequestBudget(LocalBudget(), sleep=lambda _: None)
    budget.windows = WINDOWS
    for _ in range(30):
        budget.take("acct", RELEASE, until=float("inf"))

    with pytest.raises(Exception, match="budget is spent"):
        budget.take("acct", CREATE, until=0.0)


# --- 10 concurrent acquires and releases against a quota of 30 requests per 10 s ------------------


def _lease() -> Lease:
    return new_lease(provider="runpod", gpu=GpuClass.HIGH, created_at=datetime.now(UTC).replace(microsecond=0))


def _invocation(fake: FakeRunPod, shared: ApiBudget) -> RunPodProvider:
    """A driver as one Lambda environment builds it: its own process state, the account's shared budget."""
    return RunPodProvider(
        api=RunPodApi(fake.url, lambda: KEY, budget=RequestBudget(shared)),
        templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-renderer"},
        gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
        http_port=8080,
        retry=RetryPolicy(total_seconds=25, release_confirm_seconds=15),
    )


@pytest.mark.slow
@pytest.mark.moto_only("one concurrent run is enough; it waits for a real 10 s window")
@pytest.mark.dynamodb_only("concurrent optimistic writes of the shared item; one run waits for real 10 s windows")
def test_ten_concurrent_acquires_and_releases_pace_themselves_with_no_429(
    server: FakeRunPod, budget_table: ApiBudget
) -> None:
    server.reset()
    server.configure(enforce_quota=True, rate_limit_policy=TEN_SECONDS)
    drivers = [_invocation(server, budget_table) for _ in range(10)]

    def cycle(driver: RunPodProvider) -> None:
        lease = _lease()
        worker = driver.provision(lease, {})
        driver.release(lease.lease_id, worker.token)

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(cycle, drivers))

    requests = len(server.request_log)
    print(
        f"\n10 leases, quota 30 per 10 s: {requests} RunPod requests ({requests / 10:.1f} per lease), 429s: "
        f"{server.rate_limited}"
    )
    assert server.rate_limited == {"quota": 0, "forced": 0}
    assert len(server.deleted_pod_ids) == 10
    assert sum(sum(driver._api.calls.values()) for driver in drivers) == requests
    assert requests / 10 <= 3.0


@pytest.mark.slow
@pytest.mark.moto_only("one concurrent run is enough; it waits for a real 10 s window")
@pytest.mark.dynamodb_only("concurrent optimistic writes of the shared item; one run waits for real 10 s windows")
def test_more_leases_than_one_window_holds_wait_for_the_next_window_instead_of_collecting_429s(
    server: FakeRunPod, budget_table: ApiBudget
) -> None:
    server.reset()
    server.configure(enforce_quota=True, rate_limit_policy=TEN_SECONDS)
    drivers = [_invocation(server, budget_table) for _ in range(15)]  # ~45 requests: two windows' worth

    def cycle(driver: RunPodProvider) -> None:
        lease = _lease()
        worker = driver.provision(lease, {})
        driver.release(lease.lease_id, worker.token)

    with ThreadPoolExecutor(15) as pool:
        list(pool.map(cycle, drivers))

    held_back = sum(driver._api.throttled["budget"] for driver in drivers)
    print(f"\n15 leases, quota 30 per 10 s: {len(server.request_log)} requests, 429s {server.rate_limited}")
    assert server.rate_limited == {"quota": 0, "forced": 0}
    assert len(server.deleted_pod_ids) == 15 and held_back == 0


def test_every_call_counts_as_runpod_api_calls_and_a_429_as_runpod_throttled(server: FakeRunPod) -> None:
    from tests.support.metrics import RecordedMetrics

    server.reset()
    server.configure(rate_limit_next=1, rate_limit_retry_after=0)
    metrics = RecordedMetrics()
    driver = RunPodProvider(
        api=RunPodApi(server.url, lambda: KEY, budget=RequestBudget(LocalBudget()), metrics=metrics),
        templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-renderer"},
        gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
        http_port=8080,
        retry=RetryPolicy(sleep=lambda _: None),
    )
    lease = _lease()

    worker = driver.provision(lease, {})
    driver.release(lease.lease_id, worker.token)

    operations = [point["operation"] for point in metrics.of("RunpodApiCalls")]
    # create (429), a listing to adopt a pod it may have made, create again; then DELETE and one listing
    assert operations == ["create", "release", "create", "release", "release"]
    assert metrics.of("RunpodThrottled") == [{"reason": "429", "value": 1}]


def test_reads_leave_half_of_each_window_to_creates_and_creates_a_fifth_to_releases() -> None:
    from scheduler.providers.runpod.quota import CREATE, READ, RELEASE

    budget = RequestBudget(LocalBudget())  # RunPod's documented windows: 60 a minute is the smallest

    assert (budget.reserve(READ), budget.reserve(CREATE), budget.reserve(RELEASE)) == (30, 12, 0)
