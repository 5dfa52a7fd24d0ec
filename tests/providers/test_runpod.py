"""The runpod driver against a faithful fake of RunPod's REST API v2: RunPod's documented retry table, row by row."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.lifecycle import LeaseStatus
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import ProviderCapacityError, ProviderRequestFailed, ProviderUnreachable
from scheduler.providers.runpod import api as runpod_api
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from scheduler.request_models import LeaseRequest
from tests.fakes.runpod import FakeRunPod, start_fake_runpod

KEY = "test-key"
TEMPLATES = {"tpl-renderer": {"image": "openalice/renderer:gpu", "ports": ["8080/http"]}, "tpl-anim": {}}
H100, H100_PCIE, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100 80GB PCIe"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRunPod]:
    with start_fake_runpod(KEY, TEMPLATES) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeRunPod) -> FakeRunPod:
    server.reset()
    return server


class SleepRecorder:
    """Stands in for time.sleep: records each wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


def make_driver(
    fake: FakeRunPod, sleeps: SleepRecorder, *, key: str | None = KEY, renderer: str = "tpl-renderer"
) -> RunPodProvider:
    return RunPodProvider(
        api=RunPodApi(fake.url, lambda: key),
        templates={WorkerKind.RENDERER: renderer, WorkerKind.ANIM: "tpl-anim"},
        gpu_types={GpuClass.ENTRY: (A100,), GpuClass.MID: (A100,), GpuClass.HIGH: (H100, H100_PCIE)},
        http_port=8080,
        configured=key is not None,
        retry=RetryPolicy(sleep=sleeps, release_confirm_seconds=5),
    )


@pytest.fixture
def driver(fake: FakeRunPod, sleeps: SleepRecorder) -> RunPodProvider:
    return make_driver(fake, sleeps)


def new_lease(gpu: GpuClass = GpuClass.HIGH, kind: WorkerKind = WorkerKind.RENDERER) -> Lease:
    now = datetime.now(UTC).replace(microsecond=0)
    return Lease(
        lease_id=str(uuid.uuid4()),
        provider="runpod",
        kind=kind,
        gpu=gpu,
        status=LeaseStatus.PENDING,
        created_at=now,
        expires_at=now + timedelta(hours=1),
        ttl_seconds=3600,
    )


def creates(fake: FakeRunPod) -> list[dict[str, object]]:
    return [record["body"] for record in fake.requests_to("POST", "/v2/pods")]


def live_pods_named(fake: FakeRunPod, lease: Lease) -> list[str]:
    return [pod_id for pod_id, pod in fake.pods.items() if pod["name"] == f"lease-{lease.lease_id}"]


# --- create: 201 --------------------------------------------------------------------------------


def test_created_pod_is_named_for_the_lease_with_template_gpu_and_env(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()

    driver.provision(lease, {"SCENE": "intro"})

    (body,) = creates(fake)
    assert body["name"] == f"lease-{lease.lease_id}"
    assert body["templateId"] == "tpl-renderer"
    assert body["gpu"] == {"id": H100, "count": 1}
    assert body["env"] == {
        "SCENE": "intro",
        "LEASE_ID": lease.lease_id,
        "LEASE_EXPIRES_AT": lease.wire()["expires_at"],
    }


def test_created_pod_gives_the_proxy_endpoint_and_its_cost(driver: RunPodProvider, fake: FakeRunPod) -> None:
    worker = driver.provision(new_lease(), {})

    assert worker.endpoint == f"https://{worker.token}-8080.proxy.runpod.net"
    assert worker.cost_per_hour == fake.pods[worker.token]["cost"] > 0


def test_requests_carry_bearer_auth_and_an_explicit_user_agent(driver: RunPodProvider, fake: FakeRunPod) -> None:
    driver.provision(new_lease(), {})
    (record,) = fake.requests_to("POST", "/v2/pods")
    assert record["authorized"]
    assert str(record["user_agent"]).startswith("openalice-scheduler/")


# --- create: 400, 403 → next candidate ------------------------------------------------------------


def test_no_capacity_on_the_first_gpu_type_tries_the_next(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(no_capacity_gpu_ids={H100})

    worker = driver.provision(new_lease(), {})

    assert [body["gpu"]["id"] for body in creates(fake)] == [H100, H100_PCIE]  # type: ignore[index]
    assert fake.pods[worker.token]["gpu"]["id"] == H100_PCIE


def test_no_capacity_on_every_gpu_type_is_a_capacity_error(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(no_capacity_gpu_ids={H100, H100_PCIE})
    lease = new_lease()

    with pytest.raises(ProviderCapacityError, match="no longer any instances"):
        driver.provision(lease, {})

    assert live_pods_named(fake, lease) == []


def test_forbidden_gpu_type_is_skipped(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(forbidden_gpu_ids={H100})
    worker = driver.provision(new_lease(), {})
    assert fake.pods[worker.token]["gpu"]["id"] == H100_PCIE


# --- create: 402, 422, 404 → stop --------------------------------------------------------------------


def test_insufficient_balance_stops_without_trying_other_gpu_types(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(insufficient_balance=True)

    with pytest.raises(ProviderRequestFailed, match="insufficient account balance"):
        driver.provision(new_lease(), {})

    assert len(creates(fake)) == 1


def test_invalid_request_is_never_retried(fake: FakeRunPod, sleeps: SleepRecorder) -> None:
    driver = make_driver(fake, sleeps, renderer="")  # templateId "" breaks RunPod's contract: 422

    with pytest.raises(ProviderRequestFailed, match="invalid"):
        driver.provision(new_lease(), {})

    assert len(creates(fake)) == 1


def test_unknown_template_is_a_provider_error(fake: FakeRunPod, sleeps: SleepRecorder) -> None:
    driver = make_driver(fake, sleeps, renderer="tpl-missing")
    with pytest.raises(ProviderRequestFailed, match="tpl-missing"):
        driver.provision(new_lease(), {})


def test_rejected_api_key_is_a_provider_error(fake: FakeRunPod, sleeps: SleepRecorder) -> None:
    driver = make_driver(fake, sleeps, key="wrong-key")
    with pytest.raises(ProviderRequestFailed, match="API key"):
        driver.provision(new_lease(), {})


# --- create: 429, 5xx, timeouts → retry ---------------------------------------------------------------


def test_rate_limit_waits_retry_after_then_creates(
    driver: RunPodProvider, fake: FakeRunPod, sleeps: SleepRecorder
) -> None:
    fake.configure(rate_limit_next_creates=1, rate_limit_retry_after=2)
    lease = new_lease()

    driver.provision(lease, {})

    assert sleeps.waits == [2.0]
    assert len(live_pods_named(fake, lease)) == 1


def test_server_error_is_retried_with_backoff(driver: RunPodProvider, fake: FakeRunPod, sleeps: SleepRecorder) -> None:
    fake.configure(fail_next_creates=2, fail_status=503)
    lease = new_lease()

    driver.provision(lease, {})

    assert len(creates(fake)) == 3
    assert len(sleeps.waits) == 2 and all(0 <= wait <= 5 for wait in sleeps.waits)
    assert len(live_pods_named(fake, lease)) == 1


def test_persistent_server_errors_give_up_within_bounds_leaving_no_pod(
    driver: RunPodProvider, fake: FakeRunPod, sleeps: SleepRecorder
) -> None:
    fake.configure(fail_next_creates=100, fail_status=500)
    lease = new_lease()

    with pytest.raises(ProviderUnreachable):
        driver.provision(lease, {})

    assert len(creates(fake)) == RetryPolicy().attempts
    assert live_pods_named(fake, lease) == []


def test_create_that_failed_but_made_the_pod_adopts_it(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(create_500_but_running=1)
    lease = new_lease()

    worker = driver.provision(lease, {})

    assert live_pods_named(fake, lease) == [worker.token]
    assert len(creates(fake)) == 1  # looked up by name instead of creating a second


def test_create_that_timed_out_but_made_the_pod_adopts_it(
    driver: RunPodProvider, fake: FakeRunPod, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runpod_api, "_TIMEOUT", (1.0, 0.3))
    fake.configure(slow_creates_seconds=0.6)
    lease = new_lease()

    worker = driver.provision(lease, {})

    assert live_pods_named(fake, lease) == [worker.token]


def test_unreachable_api_is_unreachable(sleeps: SleepRecorder) -> None:
    driver = RunPodProvider(
        api=RunPodApi("http://127.0.0.1:9", lambda: KEY),
        templates={WorkerKind.RENDERER: "tpl-renderer"},
        gpu_types={GpuClass.HIGH: (H100,)},
        http_port=8080,
        retry=RetryPolicy(sleep=sleeps),
    )
    with pytest.raises(ProviderUnreachable):
        driver.provision(new_lease(), {})


# --- release -------------------------------------------------------------------------------------


def test_release_terminates_the_pod_and_confirms(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()
    worker = driver.provision(lease, {})

    driver.release(lease.lease_id, worker.token)

    assert worker.token in fake.deleted_pod_ids
    assert fake.requests_to("GET", "/v2/pods")  # confirmed (by a listing), not assumed


def test_release_of_a_pod_already_gone_counts_as_released(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()
    worker = driver.provision(lease, {})
    fake.configure(delete_answers_404=1)

    driver.release(lease.lease_id, worker.token)

    assert live_pods_named(fake, lease) == []


def test_release_confirms_termination_from_one_listing_not_a_get_loop(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()
    worker = driver.provision(lease, {})
    fake.configure(delete_lag_reads=2)  # getPod would still say RUNNING twice; listPods leaves it out at once

    driver.release(lease.lease_id, worker.token)

    assert fake.requests_to("GET", f"/v2/pods/{worker.token}") == []
    assert len(fake.requests_to("GET", "/v2/pods")) == 1


def test_release_without_a_token_finds_the_pod_by_name(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()
    driver.provision(lease, {})

    driver.release(lease.lease_id, None)

    assert live_pods_named(fake, lease) == []


def test_release_that_cannot_reach_runpod_fails_for_a_later_retry(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()
    worker = driver.provision(lease, {})
    fake.configure(fail_next_deletes=100)

    with pytest.raises(ProviderRequestFailed):
        driver.release(lease.lease_id, worker.token)

    assert live_pods_named(fake, lease) == [worker.token]


# --- listing and availability -------------------------------------------------------------------


def test_list_managed_returns_only_pods_named_for_leases(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease()
    worker = driver.provision(lease, {})
    driver._api.call("POST", "/v2/pods", {"name": "someone-elses-pod", "templateId": "tpl-anim", "gpu": {"id": A100}})

    managed = driver.list_managed()

    assert [(item.lease_id, item.token) for item in managed] == [(lease.lease_id, worker.token)]


def test_driver_without_api_key_serves_and_lists_nothing(fake: FakeRunPod, sleeps: SleepRecorder) -> None:
    driver = make_driver(fake, sleeps, key=None)
    assert not driver.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.HIGH))
    assert driver.list_managed() == []


@pytest.mark.parametrize(("gpu", "expected"), [("none", False), ("entry", True), ("mid", True), ("high", True)])
def test_availability_follows_configured_gpu_types(driver: RunPodProvider, gpu: str, expected: bool) -> None:
    assert driver.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass(gpu))) is expected
